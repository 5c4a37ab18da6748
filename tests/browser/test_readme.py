"""
The README's site-proxy commands, run as written: C{twistd -n netlog-proxy}
in the foreground, then C{netlog ca} and the headless Chromium command, which
must load the page through netlog, print it and exit.

What is changed, and only that, so the test runs sealed on any machine:
C{.venv/bin/twistd} and C{.venv/bin/netlog} run this source tree;
C{examples/sites.toml} is copied with its backends pointed at a test origin;
the ports (3128, 8081) are free ones; the proxy is given a log, a state
folder (C{netlog ca} the same one) and C{--resolve-only} in the test's
folder, so nothing is written elsewhere and no name is looked up.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser.foreground import readText, startForeground, waitServing
from tests.client.support import startOrigin
from tests.standin.support import tempDirectory
from tests.support import REPO, freePort, netlogArgv, sourceEnv, twistdArgv

#: Seconds the proxy has to say it serves, and Chromium to load and print the page.
WAIT = 60.0
#: The README's section with the commands.
SECTION = "The site proxy with a browser"


def literalBlocks(text: str, section: str) -> list[list[str]]:
    """
    The literal blocks (after C{::}) of a section of a reStructuredText
    file, each a list of commands (backslash-continued lines joined).
    """
    start = text.index(section + "\n")
    end = re.search(r"\n[^\n]+\n-{3,}\n", text[start + len(section) + 1 :])
    body = text[start : start + len(section) + 1 + (end.start() if end else len(text))]
    blocks: list[list[str]] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].rstrip().endswith("::"):
            i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith("    ")):
                block.append(lines[i][4:])
                i += 1
            commands, current = [], ""
            for line in block:
                if not line.strip():
                    continue
                current += line.rstrip().removesuffix("\\") + (" " if line.rstrip().endswith("\\") else "")
                if not line.rstrip().endswith("\\"):
                    commands.append(current.strip())
                    current = ""
            blocks.append(commands)
        else:
            i += 1
    return blocks


@pytest.mark.slow
class ReadmeSiteProxyTests(SynchronousTestCase):
    def test_siteProxyAndChromium(self) -> None:
        """
        The README's C{twistd -n netlog-proxy} runs in the foreground and
        says where its log and CA are; its Chromium command prints the
        site's page and exits 0; the log holds the page's exchange, ended
        with the site's answer.
        """
        with open(os.path.join(REPO, "README.rst"), encoding="utf-8") as f:
            blocks = literalBlocks(f.read(), SECTION)
        [proxyCommand], clientCommands = blocks[0], blocks[1]
        self.assertTrue(proxyCommand.startswith(".venv/bin/twistd -n netlog-proxy "), proxyCommand)
        self.assertTrue(any(c.startswith("chromium --headless") for c in clientCommands), clientCommands)

        # short: Chromium's socket path in TMPDIR must fit
        folder = tempDirectory(self)
        originPort, _ = startOrigin(self.addCleanup)
        with open(os.path.join(REPO, "examples", "sites.toml"), encoding="utf-8") as f:
            sites = re.sub(r"127\.0\.0\.1:\d+", f"127.0.0.1:{originPort}", f.read())
        sitesPath = os.path.join(folder, "sites.toml")
        with open(sitesPath, "w", encoding="utf-8") as f:
            f.write(sites)
        port = freePort()
        log = os.path.join(folder, "network.jsonl")
        state = os.path.join(folder, "state")

        def sealed(command: str) -> str:
            command = command.replace(".venv/bin/twistd", shlex.join(twistdArgv()))
            command = command.replace(".venv/bin/netlog ca", shlex.join([*netlogArgv(), "ca", "--state", state]))
            command = command.replace("examples/sites.toml", shlex.quote(sitesPath))
            command = command.replace("tcp:8081", "tcp:0").replace("127.0.0.1:3128", f"127.0.0.1:{port}")
            return command

        proxy = sealed(proxyCommand) + " " + shlex.join([
            "--listen", f"tcp:{port}:interface=127.0.0.1", "--log", log, "--state", state, "--resolve-only"])
        said = os.path.join(folder, "proxy.out")
        errors = os.path.join(folder, "proxy.err")
        env = sourceEnv({"TMPDIR": folder})
        process = startForeground(proxy, folder, env, said, errors, self.addCleanup, WAIT)
        waitServing(process, said, WAIT)

        def output(path: str = said) -> str:
            return readText(path)

        # -n: twistd's log on standard output, where things are on standard error too
        self.assertIn(f"twistd netlog-proxy: the log is {log}\n", output(errors))
        self.assertIn(f"twistd netlog-proxy: the CA is {state}/ca.pem;", output(errors))
        self.assertIn(f"] the log is {log}\n", output())

        script = "set -e\n" + "\n".join(sealed(c) for c in clientCommands) + "\n"
        browsed = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True,
                                 timeout=WAIT, stdin=subprocess.DEVNULL)
        self.assertEqual(browsed.returncode, 0, browsed.stderr[-4000:])
        self.assertIn(b"you asked for /", browsed.stdout)

        deadline = time.monotonic() + WAIT
        while True:
            with open(log, encoding="utf-8") as f:
                records = [json.loads(line) for line in f]
            opened = {r["id"]: r for r in records if r["type"] == "open"
                      and r["request"]["url"] == "https://shop.test/"}
            ended = [r for r in records if r["type"] == "end" and r["id"] in opened]
            if ended:
                break
            self.assertLess(time.monotonic(), deadline, records)
            time.sleep(0.05)
        self.assertEqual(ended[0]["response"]["status"], 200)
        self.assertFalse(os.path.exists(os.path.join(REPO, "twistd.pid")))
