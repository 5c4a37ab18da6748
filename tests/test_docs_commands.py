"""
The docs' commands as a user runs them: each page that runs C{twistd} or
C{netlog} by name says first that it assumes the virtual environment's
C{bin} on C{PATH}; C{docs/standin.rst}'s example (an app of one's own, the
stand-in, curl through it) works with no DNS; C{docs/site-proxy.rst} makes
the folder it copies the sites into; C{docs/operations.rst}'s token command
for root, then its curl, make a session; the journeys of
C{docs/sessions.rst}, C{docs/rules.rst} and C{docs/replay.rst}, command by
command, print what the pages say.

What is changed, and only that, so the tests run sealed: C{twistd} runs
this source tree; ports are free ones; folders outside the test's
(C{/etc/netlog}, C{/var/lib/netlog}) are folders in it; a proxy gets
C{--listen}, C{--log} (unless the page names one), C{--state} and
C{--resolve-only} in the test's folder, and C{netlog session} the token file
in that C{--state}; what a page shows a browser doing, curl does, trusting
the CA in that C{--state}.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time
import tomllib
from typing import Any, Callable

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser.foreground import readText, startForeground, stopForeground, waitServing
from tests.browser.test_readme import literalBlocks
from tests.standin.support import tempDirectory
from tests.support import REPO, freePort, netlogArgv, sourceEnv, twistdArgv

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


def records(path: str, done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """
    The lines of the log C{path} once C{done} says they are all there.
    """
    deadline = time.monotonic() + WAIT
    while True:
        with open(path, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
        if done(lines):
            return lines
        assert time.monotonic() < deadline, lines
        time.sleep(0.05)


def ends(count: int) -> Callable[[list[dict[str, Any]]], bool]:
    """
    A log holds C{count} end lines.
    """
    return lambda lines: sum(r["type"] == "end" for r in lines) >= count


@pytest.mark.slow
class DocCommandTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = tempDirectory(self)

    def sealedTwistd(self, command: str, port: int) -> str:
        log = [] if " --log " in command else ["--log", os.path.join(self.folder, "network.jsonl")]
        return command.replace("twistd ", shlex.join(twistdArgv()) + " ", 1) + " " + shlex.join([
            "--listen", f"tcp:{port}:interface=127.0.0.1", *log, "--state", os.path.join(self.folder, "state"),
            "--resolve-only"])

    def sealedNetlog(self, command: str, apiPort: int) -> str:
        """
        A page's C{netlog session} command (its comment left out): this
        tree's netlog, the test's API port, the token in the test's state.
        """
        command = command.split(" #")[0].strip().replace("127.0.0.1:8081", f"127.0.0.1:{apiPort}")
        return command.replace("netlog ", shlex.join(netlogArgv()) + " ", 1) + " " + shlex.join([
            "--token-file", os.path.join(self.folder, "state", "api-token")])

    def startProxy(self, command: str, port: int) -> tuple[subprocess.Popen[bytes], str]:
        """
        A page's C{twistd -n} command in a terminal of its own, once a
        worker serves; and what it said on standard error.
        """
        out, err = os.path.join(self.folder, f"{port}.out"), os.path.join(self.folder, f"{port}.err")
        process = startForeground(self.sealedTwistd(command, port), self.folder, sourceEnv(), out, err,
                                  self.addCleanup, WAIT)
        waitServing(process, out, WAIT)
        return process, readText(err)

    def startApp(self, port: int) -> subprocess.Popen[bytes]:
        """
        An app of one's own, as C{docs/standin.rst} runs one: this folder
        served on C{port}, once it answers.
        """
        process = startForeground(f"exec python3 -m http.server {port} --bind 127.0.0.1", self.folder, sourceEnv(),
                                  os.devnull, None, self.addCleanup, WAIT)
        deadline = time.monotonic() + WAIT
        while run(f"curl -sf http://127.0.0.1:{port}/ >/dev/null", self.folder).returncode != 0:
            self.assertIsNone(process.poll())
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        return process

    def ran(self, script: str) -> str:
        """
        What C{script} printed; it must succeed.
        """
        done = run(script, self.folder)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

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

    def test_sessions(self) -> None:
        """
        C{docs/sessions.rst}: the stand-in with two sessions fixed at
        start, then C{netlog session} makes one (it prints the session),
        lists the three, saves its HAR (the exchange a client sent through
        its port, and no other) and deletes it (it prints the number of its
        log's last line).
        """
        text = doc("sessions.rst")
        [[proxy]] = literalBlocks(text, "Fixed at start: ``--session``")
        proxy = " ".join(proxy.split())
        [[create, listing, har, delete]] = literalBlocks(text, "From a shell")
        self.assertEqual(proxy, "twistd -n netlog-standin --api tcp:8081 --session task-1=8101 --session task-2=8102")
        apiPort, first, second = freePort(), freePort(), freePort()
        self.startProxy(proxy.replace("8081", str(apiPort)).replace("8101", str(first))
                        .replace("8102", str(second)), freePort())

        made = json.loads(self.ran(self.sealedNetlog(create, apiPort)))
        log = os.path.join(self.folder, "network.task-17.jsonl")
        api = f"http://127.0.0.1:{apiPort}/sessions/task-17"
        self.assertEqual(made, {
            "name": "task-17", "proxy": f"127.0.0.1:{made['port']}", "port": made["port"], "log": log,
            "first": 1, "last": 0, "urls": {"session": api, "network": api + "/network", "har": api + "/network.har",
                                            "exchanges": api + "/exchanges", "warc": api + "/network.warc.gz"}})
        # what a browser would do: the stand-in fails it (nothing resolves app.test), and logs it
        self.assertEqual(self.ran(f"curl -s -o /dev/null -w '%{{http_code}}' -x {made['proxy']} http://app.test/"),
                         "502")
        records(log, ends(1))

        listed = json.loads(self.ran(self.sealedNetlog(listing, apiPort)))["sessions"]
        self.assertEqual([(s["name"], s["port"]) for s in listed],
                         [("task-1", first), ("task-17", made["port"]), ("task-2", second)])
        self.ran(self.sealedNetlog(har, apiPort))
        with open(os.path.join(self.folder, "task-17.har"), encoding="utf-8") as f:
            entries = json.load(f)["log"]["entries"]
        # har.rst: netlog's own answer to a failure is the HAR's _failed.status, the response -1
        self.assertEqual([(e["request"]["url"], e["response"]["status"], e["_failed"]["status"]) for e in entries],
                         [("http://app.test/", -1, 502)])
        self.assertEqual(json.loads(self.ran(self.sealedNetlog(delete, apiPort))),
                         {"name": "task-17", "log": log, "last": 2})
        self.assertEqual(records(os.path.join(self.folder, "network.jsonl"), lambda lines: True), [])

    def test_replay(self) -> None:
        """
        C{docs/replay.rst}: the site proxy records the shop with
        C{--keep-bodies all} (first a failure, its backend not started);
        with the backend stopped, C{--replay
        record.jsonl}, and then the site's own C{replay} in C{sites.toml},
        each says at start the line the page shows, and answers the
        recorded page as it was, and a request the recording hasn't with
        C{404}, marked C{_replayed} (the recorded line) and C{_unmatched}.
        """
        text = doc("replay.rst")
        [[record]] = literalBlocks(text, "Recording")
        [[replay], site, [said]] = literalBlocks(text, "Replaying")
        self.assertEqual(record, "twistd -n netlog-proxy --sites sites.toml --log record.jsonl --keep-bodies all")
        self.assertEqual(replay, "twistd -n netlog-proxy --sites sites.toml --log replay.jsonl --replay record.jsonl")
        self.assertEqual(site[-1], 'replay = "record.jsonl"')
        appPort = freePort()
        sites = os.path.join(self.folder, "sites.toml")
        with open(sites, "w", encoding="utf-8") as f:
            f.write("\n".join(site[:-1]).replace("127.0.0.1:7770", f"127.0.0.1:{appPort}") + "\n")
        port = freePort()
        proxy, _ = self.startProxy(record, port)

        def browse(path: str) -> str:
            ca = os.path.join(self.folder, "state", "ca.pem")
            return self.ran(f"curl -s -w ' %{{http_code}}' -x 127.0.0.1:{port} --cacert {shlex.quote(ca)} "
                            f"https://shop.test{path}")

        # first a request the backend, not started yet, can't answer: a recorded failure, never replayed
        failed = browse("/")
        self.assertTrue(failed.endswith(" 502"), failed)
        app = self.startApp(appPort)
        page = browse("/")
        self.assertTrue(page.endswith(" 200") and "<h1>Directory listing for /</h1>" in page, page)
        missing = browse("/missing")
        self.assertTrue(missing.endswith(" 404"), missing)
        stopForeground(app, WAIT)
        recorded = records(os.path.join(self.folder, "record.jsonl"), ends(3))
        answered = {r["id"] for r in recorded if r["type"] == "end" and "_failed" not in r}
        opened = {r["request"]["url"]: r["id"] for r in recorded if r["type"] == "open" and r["id"] in answered}
        stopForeground(proxy, WAIT)

        path = os.path.join(self.folder, "record.jsonl")
        expected = said.replace("/srv/record.jsonl", path).replace("(41 recorded answers; skipped: 2 failed)",
                                                                   "(2 recorded answers; skipped: 1 failed)")
        for log, command, sitesToml in [
                ("replay.jsonl", replay, None),
                ("replay-site.jsonl", replay.replace(" --replay record.jsonl", "").replace("replay.jsonl", "replay-site.jsonl"),
                 "\n".join(site).replace("127.0.0.1:7770", f"127.0.0.1:{appPort}") + "\n")]:
            if sitesToml is not None:
                with open(sites, "w", encoding="utf-8") as f:
                    f.write(sitesToml)
            port = freePort()
            proxy, startup = self.startProxy(command, port)
            self.assertIn(expected + "\n", startup)
            self.assertEqual(browse("/"), page)
            answer = browse("/other")
            self.assertTrue(answer.endswith(" 404"), answer)
            replayed = records(os.path.join(self.folder, log), ends(2))
            urls = {r["id"]: r["request"]["url"] for r in replayed if r["type"] == "open"}
            marks = {urls[r["id"]]: (r.get("_replayed"), r.get("_unmatched")) for r in replayed if r["type"] == "end"}
            self.assertEqual(marks, {"https://shop.test/": (opened["https://shop.test/"], None),
                                     "https://shop.test/other": (None, True)})
            stopForeground(proxy, WAIT)

    def test_rules(self) -> None:
        """
        C{docs/rules.rst}, on a session of the stand-in: C{netlog session
        rules NAME FILE} sets its JSON and its TOML document and prints it,
        C{netlog session rules NAME} prints it; a request for C{shop.test}
        with a C{Referer} reaches the remapped app and one for C{x.ads.test}
        gets the block's body; their open lines carry the page's C{_rules};
        each bad document's line is the API's refusal, and C{--rules FILE}
        stops the proxy at start with it; the page says before its first
        command what it assumes of C{PATH}.
        """
        text = doc("rules.rst")
        asJSON, asTOML = ("\n".join(b) for b in literalBlocks(text, "Rules per session"))
        [bad] = literalBlocks(text, "Bad documents")
        [shown] = literalBlocks(text, "In the log")
        [body] = re.findall(r"one-line body \(``([^`]+)``\)", text)
        self.assertIn("``netlog session rules NAME FILE``", text)
        self.assertIn("``netlog session rules NAME``", text)
        appPort, apiPort = freePort(), freePort()
        self.startApp(appPort)
        self.startProxy(f"twistd -n --pidfile= netlog-standin --api tcp:{apiPort}", freePort())
        proxy = json.loads(self.ran(self.sealedNetlog("netlog session create task-17 --api http://127.0.0.1:8081",
                                                      apiPort)))["proxy"]

        def setRules(name: str, written: str) -> subprocess.CompletedProcess[str]:
            with open(os.path.join(self.folder, name), "w", encoding="utf-8") as f:
                f.write(written)
            return run(self.sealedNetlog(f"netlog session rules task-17 {name} --api http://127.0.0.1:8081",
                                         apiPort), self.folder)

        app = f"127.0.0.1:{appPort}"
        asJSON, asTOML = asJSON.replace("127.0.0.1:8080", app), asTOML.replace("127.0.0.1:8080", app)
        for name, written, rules in [("rules.json", asJSON, json.loads(asJSON)),
                                     ("rules.toml", asTOML, tomllib.loads(asTOML))]:
            done = setRules(name, written)
            self.assertEqual((done.returncode, json.loads(done.stdout)), (0, {"rules": rules}), done.stderr)
        self.assertEqual(json.loads(self.ran(self.sealedNetlog(
            "netlog session rules task-17 --api http://127.0.0.1:8081", apiPort))), {"rules": rules})

        page = self.ran(f"curl -s -x {proxy} -H 'Referer: http://a.test/' http://shop.test/")
        self.assertIn("<h1>Directory listing for /</h1>", page)
        blocked = self.ran(f"curl -s -w ' %{{http_code}}' -x {proxy} http://x.ads.test/")
        self.assertTrue(blocked.startswith(body) and blocked.endswith(" 403"), blocked)
        lines = records(os.path.join(self.folder, "network.task-17.jsonl"), ends(2))

        for line, rules in zip(bad, [
                {"block": ["tracker.test", "*.ads.test", "a b"]},
                {"headers": [{"match": "shop.test", "set": {"X-A": "1\r\nEvil: 1"}}]},
                {"remap": {"shop.test": "backend.test:80"}},
                {"blocks": ["tracker.test"]}], strict=True):
            done = setRules("bad.json", json.dumps(rules))
            self.assertEqual(done.returncode, 1, done.stdout)
            self.assertEqual(json.loads(done.stderr.split(": 400 ", 1)[1]), {"error": line})
        done = run(self.sealedTwistd("twistd -n --pidfile= netlog-standin --rules bad.json", freePort()), self.folder)
        self.assertEqual(done.returncode, 1, done.stdout)
        self.assertIn(f"--rules bad.json: {bad[-1]}\n", done.stderr)

        # what the page shows last, so that all above is checked whatever it shows
        _rules = [json.loads(part.replace("127.0.0.1:8080", app))
                  for part in " ".join(shown).split('"_rules": ')[1:]]
        self.assertEqual([r.get("_rules") for r in lines if r["type"] == "open"], _rules)
        note = " ".join(text.split()).find(PATH_NOTE)
        self.assertNotEqual(note, -1, "rules.rst says nothing of PATH")
        self.assertLess(note, " ".join(text.split()).find("``netlog "))
