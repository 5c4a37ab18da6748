"""
C{netlog}'s dispatch: a subcommand's arguments read as with every
subcommand's parser, and only its own module loaded.
"""

from __future__ import annotations

import os
import subprocess
import sys

from twisted.trial.unittest import SynchronousTestCase

from netlog.cli import _COMMANDS, _subcommand, makeParser
from tests.support import sourceEnv

#: Valid command lines, one or more per subcommand.
ARGVS = [
    ["read", "network.jsonl", "--after", "3", "--limit", "100", "--json"],
    ["har", "network.jsonl", "-o", "out.har", "-j", "2"],
    ["ca", "--state", "state", "--spki-only"],
    ["view", "network.jsonl", "--listen", "tcp:0:interface=127.0.0.1"],
    ["session", "create", "task-1", "--api", "http://127.0.0.1:8081"],
    ["session", "har", "task-1", "-o", "x.har"],
    ["mcp", "--api", "http://127.0.0.1:8081"],
    ["rotate", "--api", "http://127.0.0.1:8081"],
    ["warc", "network.jsonl", "-o", "x.warc.gz"],
    ["wacz", "network.jsonl", "-o", "x.wacz"],
]


class DispatchTests(SynchronousTestCase):
    def test_everySubcommandTried(self) -> None:
        """
        The table above names every subcommand.
        """
        self.assertEqual({argv[0] for argv in ARGVS}, set(_COMMANDS))

    def test_sameArguments(self) -> None:
        """
        The parser of one subcommand reads its command line as the parser of
        all of them does.
        """
        everything = makeParser()
        for argv in ARGVS:
            self.assertEqual(vars(makeParser(_subcommand(argv)).parse_args(argv)), vars(everything.parse_args(argv)),
                             argv)

    def test_subcommand(self) -> None:
        """
        The subcommand is the first word that isn't an option; none when
        that word names no subcommand, or there is none.
        """
        self.assertEqual(_subcommand(["read", "har"]), "read")
        self.assertEqual(_subcommand(["--version"]), None)
        self.assertEqual(_subcommand(["bogus", "read"]), None)
        self.assertEqual(_subcommand([]), None)

    def test_onlyItsModules(self) -> None:
        """
        C{netlog read LOG} prints the log's lines having loaded neither the
        reactor nor the WARC and WACZ writers' dependencies: it starts in a
        fraction of the time.
        """
        folder = self.mktemp()
        os.makedirs(folder)
        log = os.path.join(folder, "network.jsonl")
        with open(log, "w") as f:
            f.write('{"n":1,"type":"open","id":1}\n')
        script = ("import sys\nfrom netlog.cli import main\ncode = main(['read', sys.argv[1]])\n"
                  "loaded = sorted(m for m in ('twisted.internet.reactor', 'twisted.internet.tcp', 'OpenSSL',"
                  " 'cdxj_indexer', 'warcio', 'netlog.log.writer') if m in sys.modules)\n"
                  "print('loaded', loaded, code)\n")
        done = subprocess.run([sys.executable, "-c", script, log], capture_output=True, text=True, env=sourceEnv(),
                              timeout=60)
        self.assertEqual((done.stdout, done.stderr), ('{"n":1,"type":"open","id":1}\nloaded [] 0\n', ""))
