"""
The docs' commands as a user runs them: each page that runs C{twistd} or
C{netlog} by name says first that it assumes the virtual environment's
C{bin} on C{PATH}; C{docs/standin.rst}'s example (an app of one's own, the
stand-in, curl through it) works with no DNS; C{docs/site-proxy.rst} makes
the folder it copies the sites into; C{docs/operations.rst}'s token command
for root, then its curl, make a session.

What is changed, and only that, so the tests run sealed: C{twistd} runs
this source tree; ports are free ones; folders outside the test's
(C{/etc/netlog}, C{/var/lib/netlog}) are folders in it; the stand-in gets
C{--listen}, C{--log}, C{--state} and C{--resolve-only} in the test's folder.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser.foreground import startForeground, waitServing
from tests.browser.test_readme import literalBlocks
from tests.standin.support import tempDirectory
from tests.support import REPO, freePort, sourceEnv, twistdArgv

#: What each page that runs netlog's commands by name says first.
PATH_NOTE = ("The commands on this page run ``twistd`` and ``netlog`` by name: they assume the ``bin`` "
             "folder of the virtual environment netlog is installed in is on ``PATH``")
#: A line of a literal block that runs C{twistd} or C{netlog} by name.
COMMAND = re.compile(r"^ +(?:\$ )?(?:[A-Z_]+=\S+ )*(?:twistd|netlog) ", re.MULTILINE)
#: Seconds a proxy has to serve, and a command to run.
WAIT = 60.0


def doc(name: str) -> str:
    with open(os.path.join(REPO, "docs", name), encoding="utf-8") as f:
        return f.read()


def run(script: str, cwd: str) -> subprocess.CompletedProcess[str]:
    """
    C{script} in bash, stopping at the first command that fails.
    """
    return subprocess.run(["bash", "-c", "set -e\n" + script], cwd=cwd, env=sourceEnv(), capture_output=True,
                          text=True, timeout=WAIT, stdin=subprocess.DEVNULL)


class PathNoteTests(SynchronousTestCase):
    def test_eachPageWithCommands(self) -> None:
        """
        Every page of C{docs/} that runs C{twistd} or C{netlog} by name
        says, before the first such command, what it assumes of C{PATH}.
        """
        pages = []
        for name in sorted(os.listdir(os.path.join(REPO, "docs"))):
            if not name.endswith(".rst"):
                continue
            text = doc(name)
            first = COMMAND.search(text)
            if first is None:
                continue
            pages.append(name)
            note = " ".join(text.split()).find(PATH_NOTE)
            self.assertNotEqual(note, -1, name)
            self.assertLess(note, len(" ".join(text[: first.start()].split())), name)
        self.assertIn("standin.rst", pages)
        self.assertIn("sessions.rst", pages)


@pytest.mark.slow
class DocCommandTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = tempDirectory(self)

    def sealedTwistd(self, command: str, port: int) -> str:
        return command.replace("twistd ", shlex.join(twistdArgv()) + " ", 1) + " " + shlex.join([
            "--listen", f"tcp:{port}:interface=127.0.0.1", "--log", os.path.join(self.folder, "network.jsonl"),
            "--state", os.path.join(self.folder, "state"), "--resolve-only"])

    def test_standinExample(self) -> None:
        """
        C{docs/standin.rst}'s first commands: the app and the stand-in in
        one terminal, the two curls in another: both print the app's page,
        and the log holds a plain-HTTP exchange and a tunnel to it, with
        no name looked up (example.com would need DNS).
        """
        [app, standin], curls = literalBlocks(doc("standin.rst"), "The stand-in")[:2]
        self.assertEqual(app, "python3 -m http.server 8000 --bind 127.0.0.1 &")
        self.assertTrue(standin.startswith("twistd -n netlog-standin --resolve app.test=127.0.0.1 "), standin)
        appPort, proxyPort = freePort(), freePort()
        out = os.path.join(self.folder, "terminal.out")
        process = startForeground(app.replace("8000", str(appPort)) + "\n" + self.sealedTwistd(
            standin.replace("8000", str(appPort)), proxyPort), self.folder, sourceEnv(), out, None,
            self.addCleanup, WAIT)
        waitServing(process, out, WAIT)
        done = run("\n".join(c.replace("8000", str(appPort)).replace("3128", str(proxyPort)) for c in curls),
                   self.folder)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stdout.count("<h1>Directory listing for /</h1>"), 2, done.stdout)
        with open(os.path.join(self.folder, "network.jsonl"), encoding="utf-8") as f:
            opened = [r for r in map(json.loads, f) if r["type"] == "open"]
        self.assertEqual([(r["kind"], r["request"]["method"]) for r in opened],
                         [("exchange", "GET"), ("tunnel", "CONNECT")])

    def test_siteProxyFolder(self) -> None:
        """
        C{docs/site-proxy.rst}'s step 1, run from the clone, makes the
        folder it copies the sites into.
        """
        text = doc("site-proxy.rst")
        [copy] = [line.strip() for line in text.splitlines() if "cp examples/sites.toml" in line]
        self.assertEqual(copy, "mkdir -p /etc/netlog && cp examples/sites.toml /etc/netlog/sites.toml")
        etc = os.path.join(self.folder, "etc")
        done = run(copy.replace("/etc", etc), REPO)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(etc, "netlog", "sites.toml"), "rb") as f, \
                open(os.path.join(REPO, "examples", "sites.toml"), "rb") as g:
            self.assertEqual(f.read(), g.read())

    def test_operationsToken(self) -> None:
        """
        C{docs/operations.rst}'s token, read as root (no sudo, as in a
        container) and as a user with sudo, both shown; the root one,
        then the curl, make the session.
        """
        blocks = literalBlocks(doc("operations.rst"), "Who can do what")
        [commands] = [b for b in blocks if any("api-token)" in c for c in b)]
        asRoot, withSudo, curl = commands
        self.assertEqual(asRoot.split("#")[0].strip(), "$ TOKEN=$(cat /var/lib/netlog/api-token)")
        self.assertEqual(withSudo.split("#")[0].strip(), "$ TOKEN=$(sudo cat /var/lib/netlog/api-token)")
        apiPort, proxyPort = freePort(), freePort()
        out = os.path.join(self.folder, "twistd.out")
        process = startForeground(self.sealedTwistd(f"twistd -n --pidfile= netlog-standin --api tcp:{apiPort}",
                                                    proxyPort), self.folder, sourceEnv(), out, None,
                                  self.addCleanup, WAIT)
        waitServing(process, out, WAIT)
        script = "\n".join(c.removeprefix("$ ").replace("/var/lib/netlog", os.path.join(self.folder, "state"))
                           .replace("127.0.0.1:8081", f"127.0.0.1:{apiPort}") for c in (asRoot, curl))
        done = run(script, self.folder)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout)["name"], "task-17")
