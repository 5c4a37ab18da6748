"""
What a proxy says when it starts, over a real C{twistd}: one line each on
standard error and in twistd's log for running uncompiled (the pure build
only), where the log is, where the CA is (the site proxy), where the API
serves and which folders it made.
"""

from __future__ import annotations

import os
import re
import urllib.request

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.compiled import COMPILED_MODULES
from tests.support.build import compiledExpected
from tests.supervise.running import Twistd, waitFor
from tests.tap.test_mistakes import SITES

#: Why a pure build runs uncompiled, as it says so: none of the modules
#: compiled by a build with a C compiler is.
UNCOMPILED = (f"the {len(COMPILED_MODULES)} modules of the hot path are plain Python (installed where no C compiler "
              "or Python headers were found, or run from a source checkout; see README.rst, Start here)")
#: Seconds an API call may take.
API_TIMEOUT = 20.0


@pytest.mark.slow
class StartupLineTests(SynchronousTestCase):
    def started(self, plugin: str, args: list[str]) -> tuple[Twistd, str, str]:
        """
        Start C{twistd -n PLUGIN ARGS} and wait for its API's line; what it
        said on standard error and in its log.
        """
        folder = self.folder
        twistd = Twistd(folder, plugin, args)
        self.addCleanup(twistd.stop)
        out = os.path.join(folder, "twistd.out")

        def said() -> str:
            with open(out, encoding="utf-8", errors="replace") as f:
                return f.read()

        waitFor(lambda: "the API serves on" in said() or twistd.process.poll() is not None, "the start-up lines")
        self.assertIsNone(twistd.process.poll(), said())
        return twistd, said(), twistd.text()

    def setUp(self) -> None:
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)

    def check(self, plugin: str, extra: list[str], supervised: bool) -> None:
        log = os.path.join(self.folder, "network.jsonl")
        state = os.path.join(self.folder, "state")
        args = ["--listen", "tcp:0:interface=127.0.0.1", "--log", log, "--state", state, "--api", "tcp:0", *extra]
        if not supervised:
            args.append("--no-supervise")
        twistd, stderr, twistdLog = self.started(plugin, args)
        prefix = f"twistd {plugin}: "
        lines = [line[len(prefix):] for line in stderr.splitlines() if line.startswith(prefix)]
        api = re.fullmatch(r"the API serves on (http://127\.0\.0\.1:(\d+)/) \(its token: (.*)\)",
                           next(line for line in lines if line.startswith("the API")))
        assert api is not None, lines
        wanted = [] if compiledExpected() else [f"running uncompiled: {UNCOMPILED}"]
        wanted.append(f"the log is {log}")
        if plugin == "netlog-proxy":
            wanted.append(f"the CA is {state}/ca.pem; its SPKI hash: netlog ca --state {state} --spki-only")
        wanted += [api.group(0), f"made the folder {state}"]
        self.assertEqual(lines, wanted)
        self.assertEqual(api.group(3), os.path.join(state, "api-token"))
        # Each is in twistd's log too.
        for line in wanted:
            self.assertIn(f"] {line}\n", twistdLog)
        # And each says the truth: the API answers there, the CA is there.
        with urllib.request.urlopen(api.group(1) + "network?after=0", timeout=API_TIMEOUT) as answer:
            self.assertEqual(answer.status, 200)
        if plugin == "netlog-proxy":
            self.assertTrue(os.path.isfile(os.path.join(state, "ca.pem")))
        self.assertTrue(os.path.isfile(log))
        # The API's address is said once; netlog's own listeners and the
        # API start and stop with no "Starting factory" lines, to the end.
        twistd.stop()
        twistdLog = twistd.text()
        self.assertIn("server shut down", twistdLog.lower())
        self.assertEqual(twistdLog.count("the API serves on"), 1, twistdLog)
        self.assertEqual(twistdLog.count("running uncompiled"), 0 if compiledExpected() else 1, twistdLog)
        self.assertNotIn("Starting factory", twistdLog)
        self.assertNotIn("Stopping factory", twistdLog)
        # Nor Twisted's ports' own lines ("BrowserFactory starting on 3128",
        # "(TCP Port 3128 Closed)"): the listener's bound line says it.
        self.assertIn("listener tcp:0:interface=127.0.0.1 bound on", twistdLog)
        self.assertNotIn(" starting on ", twistdLog)
        self.assertNotIn("Port", twistdLog)

    def test_standin(self) -> None:
        """
        The stand-in, supervised: its log, its API (once), the state folder
        it made; no "Starting factory" line, nor a port's own.
        """
        self.check("netlog-standin", [], supervised=True)

    def test_siteProxy(self) -> None:
        """
        The site proxy in one process: its log, its CA, its API, the state
        folder it made (for the CA and the token).
        """
        sites = os.path.join(self.folder, "sites.toml")
        with open(sites, "w") as f:
            f.write(SITES)
        self.check("netlog-proxy", ["--sites", sites], supervised=False)


class FolderRuleTests(SynchronousTestCase):
    def test_defaultsOnly(self) -> None:
        """
        The log's folder may be made for the default log, a --log naming
        the default's folder (as a unit file does) or the default state
        folder (where a refusal of an unsafe /var/log says to put it); any
        other --log must be in a folder that exists.
        """
        from netlog.state import DEFAULT_STATE
        from netlog.tap.common import defaultLogPath
        from netlog.tap.standin import Options

        def made(*args: str) -> bool:
            options = Options()
            options.parseOptions(["--no-supervise", *args])
            return bool(options["log-folder-made"])

        self.assertTrue(made())
        self.assertTrue(made("--log", defaultLogPath("standin")))
        self.assertTrue(made("--log", os.path.join(os.path.dirname(defaultLogPath("standin")), "other.jsonl")))
        self.assertTrue(made("--log", os.path.join(DEFAULT_STATE, "standin.jsonl")))
        self.assertFalse(made("--log", os.path.join(self.mktemp(), "standin.jsonl")))
