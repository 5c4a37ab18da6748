"""
Every option of both plugins and of C{netlog} (each subcommand), fed a table
of bad values: one line on standard error, nothing on standard output, exit
status 1, no traceback, and (for the plugins) nothing started: no twistd log,
no log file, no folder made. The tables must name every option there is, so
an option added without bad values to try fails here.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.cli import makeParser
from tests.support import netlogArgv, sourceEnv, twistdArgv
from tests.tap.test_mistakes import SITES

#: Seconds one refusal may take (a Python start, on a busy machine).
WAIT = 20.0
#: Refusals run at once.
AT_ONCE = 3


#: Numbers of seconds no option takes.
NOT_SECONDS = ["x", "-1", "nan", "inf", ""]
#: Endpoint descriptions no listener takes: a bare port and host:port among them.
NOT_ENDPOINTS = ["3199", "127.0.0.1:3199", "localhost:3199", ":3199", "[::1]:3199", "tcp:notaport",
                 "tcp:99999", "tcp:0:interface=eth0", "tcp:0:bogus=1", "nonsense", ""]

#: Bad C{[live]} tables of a C{sites.toml}, each its own file
#: (C{{badLive0}}, ...): the keys of a decrypted live host.
BAD_LIVE = ['[live]\ndecrypt = "*"\n', '[live]\ndecrypt = ["https://x.test/"]\n',
            '[live]\ndecrypt = ["*"]\nca_file = "missing.pem"\n', '[live]\ndecrypt = ["*"]\nca_file = "bad.toml"\n',
            '[live]\ndecrypt = ["*"]\nverify = "no"\n']

#: option -> bad values, for both plugins: C{{folder}}, C{{sites}} and
#: C{{badSites}} name a fresh folder, a good sites file and a bad one. A
#: value that is a tuple is C{(value, other arguments that go with it)}.
PLUGIN_OPTIONS: dict[str, list[Any]] = {
    "listen": NOT_ENDPOINTS,
    "api": ["8090", "127.0.0.1:8090", "localhost:8090", "http://127.0.0.1:8090", "unix:/tmp/x",
            "tcp:", "tcp:x", "ssl:0", ""],
    "https-route": ["443", "127.0.0.1:443", "tcp:x", "tcp:0:interface=eth0", ""],
    "http-route": ["80", "127.0.0.1:80", "tcp:x", "tcp:0:interface=eth0", ""],
    "session": ["8101", "127.0.0.1:8101", "tcp:8101", "a/b=1", "a=99999", "a=x", "=", "",
                ("a=0", ["--no-log"])],
    "log": ["{folder}/missing/network.jsonl", "{folder}"],
    "state": ["{folder}/missing/state", "{sites}"],
    "api-token-file": [("{folder}/missing/api-token", ["--api", "tcp:0"])],
    "api-session-rate": ["x", "0", "-1", "nan", "inf"],
    "api-idle-timeout": NOT_SECONDS + ["0"],
    "connect-timeout": NOT_SECONDS + ["0"],
    "idle-timeout": NOT_SECONDS + ["0"],
    "header-timeout": NOT_SECONDS + ["0"],
    "upstream-connections": ["x", "0", "-1", "1.5", "", "1e3"],
    "grace": NOT_SECONDS,
    "hang-timeout": NOT_SECONDS,
    "give-up-after": ["x", "0", "-1", "1.5", ""],
    "workers": ["0", "x", "-1", "1.5", "", ("2", ["--no-supervise"])],
    "api-host": ["a b", "host:80", "", ("netlog.test", [])],
    "resolve": ["x", "a=notanaddress", "=127.0.0.1", "a=", ""],
    "allow": ["x", "10.0.0.0/99", ""],
    "connect-ports": ["x", "0", "70000", "", "443,"],
    "upstream-proxy": ["127.0.0.1:3128", "3128", "https://127.0.0.1:3128", "socks5://127.0.0.1:1080",
                       "http://127.0.0.1", "http://127.0.0.1:", "http://127.0.0.1:0", "http://127.0.0.1:99999",
                       "http://user:pw@127.0.0.1:3128", "http://127.0.0.1:3128/path", "http://::1:3128",
                       "http://[::1]", "http://", ""],
    "upstream-proxy-auth-file": [(path, ["--upstream-proxy", "http://127.0.0.1:3128"])
                                 for path in ("{folder}/missing", "{folder}", "{sites}", "/dev/null")]
                                + ["{sites}"],
    "sites": ["{folder}/missing.toml", "{folder}", "{badSites}",
              *[f"{{folder}}/badLive{i}.toml" for i in range(len(BAD_LIVE))]],
    "rules": ["{folder}/missing.toml", "{folder}", "{badSites}", "{sites}", ""],
    "keep-bodies": ["x", "ALL", ""],
    "replay": ["{folder}/missing.jsonl", "{folder}", "{badSites}", ""],
    "replay-unmatched": ["x", "403", ""],
    "replay-pace": ["x", "fast", ""],
    "replay-ignore-param": [""],
    "replay-ignore-field": [""],
    "rotate-size": ["x", "0", "-1MiB", "1 parsec", ""],
    "rotate-every": ["x", "0", "1y", ""],
    "keep-segments": ["x", "0", "-1", "1.5", ""],
    "keep-for": ["x", "0", "1y", ""],
    "session-retention": ["x", "0", "1y", ""],
}
#: Flags: given a value, and given where they make no sense.
FLAG_MISUSES: dict[str, list[list[str]]] = {
    "no-log": [["--no-log=1"]],
    "api-token-reads": [["--api-token-reads=1"], ["--api-token-reads"]],
    "no-supervise": [["--no-supervise=1"]],
    "no-standby": [["--no-standby=1"]],
    "refuse-private": [["--refuse-private=1"]],
    "resolve-only": [["--resolve-only=1"]],
    "no-h2": [["--no-h2=1"]],
    "no-h2-upstream": [["--no-h2-upstream=1"]],
    "replay-refresh": [["--replay-refresh=1"]],
    "help": [["--help=1"]],
    "version": [["--version=1"]],
}


def pluginOptions(plugin: str) -> tuple[set[str], set[str]]:
    """
    The options (taking a value) and the flags of a plugin.
    """
    from netlog.tap.proxy import Options as ProxyOptions
    from netlog.tap.standin import Options as StandinOptions

    options = (ProxyOptions if plugin == "netlog-proxy" else StandinOptions)()
    names = set(options.longOpt)
    return {n[:-1] for n in names if n.endswith("=")}, {n for n in names if not n.endswith("=")}


def cliOptions() -> set[tuple[str, str]]:
    """
    Every (subcommand, option) of C{netlog}: C{("session create", "--port")},
    positional arguments by their metavar.
    """
    found = set()

    def walk(parser: argparse.ArgumentParser, path: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    walk(sub, f"{path} {name}".strip())
            elif isinstance(action, argparse._HelpAction):
                continue
            elif action.option_strings:
                found.add((path, max(action.option_strings, key=len)))
            else:
                found.add((path, str(action.metavar or action.dest)))

    walk(makeParser(), "")
    return found


#: (subcommand, option) -> argument lists to run C{netlog} with, each wrong.
#: An API that can't be reached is http://127.0.0.1:1.
NOWHERE = "http://127.0.0.1:1"
CLI_CASES: dict[tuple[str, str], list[list[str]]] = {
    ("", "--version"): [["--version=1"]],
    ("read", "LOG"): [["read", "{folder}/missing.jsonl"], ["read", "{folder}"], ["read", "{sites}"]],
    ("read", "--after"): [["read", "{log}", "--after", v] for v in ("x", "-1", "")],
    ("read", "--limit"): [["read", "{log}", "--limit", v] for v in ("x", "0", "-5")],
    ("read", "--follow"): [["read", "{log}", "--follow=1"]],
    ("read", "--json"): [["read", "{log}", "--json=1"]],
    ("har", "LOG"): [["har", "{folder}/missing.jsonl"], ["har", "{folder}"], ["har", "{sites}", "-o", "{folder}/x.har"]],
    ("har", "--output"): [["har", "{log}", "-o", "{folder}/missing/network.har"], ["har", "{log}", "-o", "{folder}"]],
    ("har", "--jobs"): [["har", "{log}", "-j", v] for v in ("x", "")],
    ("har", "--progress"): [["har", "{log}", "--progress", "sometimes"]],
    ("har", "--from"): [["har", "{log}", "--from", v] for v in ("noon", "-3", "")],
    ("har", "--to"): [["har", "{log}", "--to", v] for v in ("x", "")] + [["har", "{log}", "--from", "9", "--to", "5"]],
    ("warc", "LOG"): [["warc", "{folder}/missing.jsonl", "-o", "{folder}/x.warc"], ["warc", "{folder}", "-o", "{folder}/x.warc"],
                     ["warc", "{sites}", "-o", "{folder}/x.warc"]],
    ("warc", "--output"): [["warc", "{log}", "-o", "{folder}/missing/x.warc"], ["warc", "{log}", "-o", "{folder}"],
                        ["warc", "{log}"]],
    ("warc", "--jobs"): [["warc", "{log}", "-o", "{folder}/x.warc", "-j", v] for v in ("x", "")],
    ("wacz", "LOG"): [["wacz", "{folder}/missing.jsonl", "-o", "{folder}/x.wacz"], ["wacz", "{folder}", "-o", "{folder}/x.wacz"],
                     ["wacz", "{sites}", "-o", "{folder}/x.wacz"]],
    ("wacz", "--output"): [["wacz", "{log}", "-o", "{folder}/missing/x.wacz"], ["wacz", "{log}", "-o", "{folder}"],
                        ["wacz", "{log}"]],
    ("wacz", "--jobs"): [["wacz", "{log}", "-o", "{folder}/x.wacz", "-j", v] for v in ("x", "")],
    ("har", "--redact"): [["har", "{log}", "--redact", v] for v in ("nosuch", "{folder}/missing.toml", "")],
    ("har", "--redact-key"): [["har", "{log}", "--redact-key", "k"], ["har", "{log}", "--redact", "secrets", "--redact-key", ""]],
    ("ca", "--state"): [["ca", "--state", "{folder}/missing/state"], ["ca", "--state", "{log}"]],
    ("ca", "--spki-only"): [["ca", "--state", "{folder}/missing/state", "--spki-only"], ["ca", "--spki-only=1"]],
    ("view", "LOG"): [["view", "{folder}/missing.jsonl"]],
    ("view", "--listen"): [["view", "{log}", "--listen", v] for v in ("8082", "127.0.0.1:8082", "tcp:x", "")],
    ("view", "--api-host"): [["view", "{log}", "--api-host", v] for v in ("a b", "host:80")],
}
for _action in ("create", "list", "har", "rules", "delete"):
    _name = [] if _action in ("create", "list") else ["task-1"]
    CLI_CASES[(f"session {_action}", "--api")] = [
        ["session", _action, *_name, "--api", v] for v in ("8081", "tcp:8081", "ftp://x", "", "http://", NOWHERE)
    ]
    CLI_CASES[(f"session {_action}", "--token")] = [["session", _action, *_name, "--api", NOWHERE, "--token", "x"]]
    CLI_CASES[(f"session {_action}", "--token-file")] = [
        ["session", _action, *_name, "--api", NOWHERE, "--token-file", "{folder}/missing/token"]]
    CLI_CASES[(f"session {_action}", "--timeout")] = [
        ["session", _action, *_name, "--api", NOWHERE, "--timeout", v] for v in NOT_SECONDS + ["0"]]
CLI_CASES[("mcp", "--api")] = [["mcp", "--api", v] for v in ("8081", "tcp:8081", "ftp://x", "", "http://", NOWHERE)]
CLI_CASES[("mcp", "--token")] = [["mcp", "--api", NOWHERE, "--token", "x"]]
CLI_CASES[("mcp", "--token-file")] = [["mcp", "--api", NOWHERE, "--token-file", "{folder}/missing/token"]]
CLI_CASES[("mcp", "--timeout")] = [["mcp", "--api", NOWHERE, "--timeout", v] for v in NOT_SECONDS + ["0"]]
CLI_CASES[("mcp", "--http")] = [["mcp", "--api", NOWHERE, "--http", v] for v in ("x", "0.0.0.0:8999", "127.0.0.1:0", "")]
CLI_CASES[("rotate", "--api")] = [["rotate", "--api", v] for v in ("8081", "tcp:8081", "ftp://x", "", "http://", NOWHERE)]
CLI_CASES[("rotate", "--token")] = [["rotate", "--api", NOWHERE, "--token", "x"]]
CLI_CASES[("rotate", "--token-file")] = [["rotate", "--api", NOWHERE, "--token-file", "{folder}/missing/token"]]
CLI_CASES[("rotate", "--timeout")] = [["rotate", "--api", NOWHERE, "--timeout", v] for v in NOT_SECONDS + ["0"]]
CLI_CASES[("session create", "name")] = [["session", "create", "a/b", "--api", NOWHERE]]
CLI_CASES[("session create", "--port")] = [
    ["session", "create", "--api", NOWHERE, "--port", v] for v in ("x", "")]
CLI_CASES[("session har", "name")] = [["session", "har", "--api", NOWHERE]]
CLI_CASES[("session har", "--output")] = [
    ["session", "har", "task-1", "--api", NOWHERE, "-o", "{folder}/missing/x.har"]]
CLI_CASES[("session har", "--redact")] = [
    ["session", "har", "task-1", "--api", NOWHERE, "--redact", v] for v in ("nosuch", "{folder}/missing.toml", "",
                                                                           "{badSites}")]
CLI_CASES[("session har", "--redact-key")] = [
    ["session", "har", "task-1", "--api", NOWHERE, "--redact-key", "k"],
    ["session", "har", "task-1", "--api", NOWHERE, "--redact", "secrets", "--redact-key", ""]]
CLI_CASES[("session har", "--from")] = [["session", "har", "task-1", "--api", NOWHERE, "--from", v] for v in ("x", "")]
CLI_CASES[("session delete", "name")] = [["session", "delete", "--api", NOWHERE]]
CLI_CASES[("session rules", "name")] = [["session", "rules", "--api", NOWHERE]]
CLI_CASES[("session rules", "file")] = [
    ["session", "rules", "task-1", v, "--api", NOWHERE] for v in ("{folder}/missing.toml", "{folder}", "{log}")]


@pytest.mark.slow
class BadValueTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        self.sites = os.path.join(self.folder, "sites.toml")
        with open(self.sites, "w") as f:
            f.write(SITES)
        self.badSites = os.path.join(self.folder, "bad.toml")
        with open(self.badSites, "w") as f:
            f.write("[[site]\nname = ")
        for i, text in enumerate(BAD_LIVE):
            with open(os.path.join(self.folder, f"badLive{i}.toml"), "w") as f:
                f.write(text)
        self.log = os.path.join(self.folder, "network.jsonl")
        with open(self.log, "w") as f:
            f.write('{"n":1,"type":"open","id":1}\n')

    def fill(self, value: str) -> str:
        return value.format(folder=self.folder, sites=self.sites, badSites=self.badSites, log=self.log)

    def refusals(self, runs: list[tuple[str, list[str], str]]) -> None:
        """
        Run each C{(what, argv, prefix)}; each must print one line starting
        with C{prefix} on stderr, nothing on stdout, and exit with 1.
        """
        def one(run: tuple[str, list[str], str]) -> str | None:
            what, argv, prefix = run
            # In a session of its own: one that starts after all (a value
            # taken) is ended with whatever it started, by its group.
            process = subprocess.Popen(argv, env=sourceEnv(), cwd=self.folder, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
            try:
                out, raw = process.communicate(timeout=WAIT)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate()
                return f"{what}: still running after {WAIT} s (the value was taken)"
            err = raw.decode("utf-8", "replace")
            lines = err.splitlines()
            if process.returncode != 1 or out or len(lines) != 1 or not lines[0].startswith(prefix):
                return f"{what}: exit {process.returncode}, stdout {out[:200]!r}, stderr:\n{err[:2000]}"
            return None

        with ThreadPoolExecutor(AT_ONCE) as pool:
            failures = [f for f in pool.map(one, runs) if f is not None]
        self.assertEqual(failures, [])

    def pluginRuns(self, plugin: str) -> list[tuple[str, list[str], str]]:
        options, flags = pluginOptions(plugin)
        self.assertEqual(options - set(PLUGIN_OPTIONS), set(), "options with no bad values to try")
        self.assertEqual(flags - set(FLAG_MISUSES), set(), "flags with no misuse to try")
        twistdLog = os.path.join(self.folder, "twistd.log")
        base = [*twistdArgv(), "-n", "--pidfile=", "--logfile", twistdLog, plugin]
        runs = []
        for option in sorted(options):
            for value in PLUGIN_OPTIONS[option]:
                value, extra = value if isinstance(value, tuple) else (value, [])
                args = [f"--{option}", self.fill(value), *extra]
                runs.append((f"{plugin} {args}", args))
        runs += [(f"{plugin} {args}", args) for flag in sorted(flags) for args in FLAG_MISUSES[flag]]
        full = []
        for what, args in runs:
            argv = [*base]
            if "--log" not in args:
                argv += ["--log", self.log]
            if plugin == "netlog-proxy":
                if "--sites" not in args:
                    argv += ["--sites", self.sites]
                if "--state" not in args:
                    argv += ["--state", os.path.join(self.folder, "state")]
            full.append((what, argv + args, f"twistd {plugin}: "))
        return full

    def assertNothingMade(self) -> None:
        made = sorted(os.listdir(self.folder))
        self.assertEqual(made, sorted(["bad.toml", "network.jsonl", "sites.toml",
                                       *[f"badLive{i}.toml" for i in range(len(BAD_LIVE))]]))

    def test_standin(self) -> None:
        """
        C{twistd netlog-standin}: every option's bad values and every flag's
        misuse, one line each, exit 1, nothing made.
        """
        self.refusals(self.pluginRuns("netlog-standin"))
        self.assertNothingMade()

    def test_siteProxy(self) -> None:
        """
        C{twistd netlog-proxy}: the same.
        """
        self.refusals(self.pluginRuns("netlog-proxy"))
        self.assertNothingMade()

    def test_netlog(self) -> None:
        """
        C{netlog} and each subcommand: every option's bad values, one line
        each (C{netlog ...: ...}), exit 1, nothing made.
        """
        self.assertEqual(cliOptions() - set(CLI_CASES), set(), "options with no bad values to try")
        runs = [
            (f"netlog {args}", [*netlogArgv(), *[self.fill(a) for a in args]], "netlog")
            for key in sorted(CLI_CASES) for args in CLI_CASES[key]
        ]
        self.refusals(runs)
        self.assertNothingMade()
