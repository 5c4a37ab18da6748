"""
C{netlog har} and C{netlog read} given a file that holds no netlog line (a
sites.toml, a HAR, random bytes, a folder) say what it looks like in one line
and exit 1, writing nothing; a log with unusable lines among good ones, or
with no line yet, is read as before.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.sniff import SNIFF_BYTES, hasLogLine, lookOf
from tests.har.support import Log
from tests.standin.support import tempDirectory
from tests.support import REPO, netlogArgv, sourceEnv

#: Seconds one command may take.
TIMEOUT = 60


class LookTests(SynchronousTestCase):
    """
    The pure reading of a file's first bytes.
    """

    def test_looks(self) -> None:
        """
        Each kind of file is named as what it is.
        """
        with open(os.path.join(REPO, "examples", "sites.toml"), "rb") as f:
            self.assertEqual(lookOf(f.read()), "TOML, a sites.toml or a rules file")
        self.assertEqual(lookOf(b'{\n  "log": {\n    "version": "1.2", "creator": {}, "entries": []}}'),
                         "a HAR, which netlog har makes from a log")
        self.assertEqual(lookOf(b'{"a": 1}\n'), "JSON of another kind")
        self.assertEqual(lookOf(bytes(range(256))), "binary data")
        self.assertEqual(lookOf(b"hello\nworld\n"), "text")

    def test_logLines(self) -> None:
        """
        One netlog line anywhere in the bytes read makes them a log's; JSON
        with no integer C{n} doesn't.
        """
        self.assertTrue(hasLogLine(b'junk\n{"n":1,"type":"open","id":1}\n'))
        self.assertFalse(hasLogLine(b'{"n":"1","type":"open"}\n{"log":{}}\n'))


class CommandTests(SynchronousTestCase):
    """
    The commands as a user runs them.
    """

    def setUp(self) -> None:
        self.folder = tempDirectory(self)

    def netlog(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*netlogArgv(), *args], capture_output=True, env=sourceEnv(),
                              timeout=TIMEOUT, cwd=self.folder, stdin=subprocess.DEVNULL)

    def refusedBoth(self, name: str, *words: str) -> None:
        """
        C{netlog har NAME -o x.har} and C{netlog read NAME --after 0} exit 1
        with one line naming C{name} and holding C{words}, print nothing on
        standard output and write no HAR.
        """
        for command, args in [("har", ["-o", "x.har"]), ("read", ["--after", "0"])]:
            done = self.netlog(command, name, *args)
            said = done.stderr.decode()
            self.assertEqual(done.returncode, 1, said)
            self.assertEqual(done.stdout, b"")
            self.assertEqual(said.count("\n"), 1, said)
            self.assertTrue(said.startswith(f"netlog {command}: {name} "), said)
            for word in words:
                self.assertIn(word, said)
            self.assertFalse(os.path.exists(os.path.join(self.folder, "x.har")))
            self.assertFalse(os.path.exists(os.path.join(self.folder, "x.har.partial")))

    def test_sitesToml(self) -> None:
        """
        The sites.toml given where the log goes.
        """
        shutil.copy(os.path.join(REPO, "examples", "sites.toml"), self.folder)
        self.refusedBoth("sites.toml", "is not a netlog log (no line in it is one netlog writes)",
                         "it looks like TOML, a sites.toml or a rules file",
                         "give the log file a proxy writes (its --log)")

    def test_har(self) -> None:
        """
        A HAR netlog made, given back to it.
        """
        log = Log()
        log.end(log.open(url="https://shop.test/"))
        with open(os.path.join(self.folder, "network.jsonl"), "wb") as f:
            f.write(log.bytes())
        done = self.netlog("har", "network.jsonl", "-o", "network.har")
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(os.path.join(self.folder, "network.har"), encoding="utf-8") as f:
            self.assertEqual(len(json.load(f)["log"]["entries"]), 1)
        self.refusedBoth("network.har", "it looks like a HAR, which netlog har makes from a log")

    def test_randomBytes(self) -> None:
        """
        Bytes that aren't text.
        """
        with open(os.path.join(self.folder, "random.bin"), "wb") as f:
            f.write(random.Random(39).randbytes(3000))
        self.refusedBoth("random.bin", "it looks like binary data")

    def test_folder(self) -> None:
        """
        A folder given as the log: the input is blamed, not C{-o}'s file.
        """
        os.mkdir(os.path.join(self.folder, "logs"))
        self.refusedBoth("logs", "logs is a folder, not a netlog log")

    def test_someLinesUnusable(self) -> None:
        """
        A log whose unusable lines come before its good ones, a few or more
        than the bytes read to tell, is exported as before: exit 0, the
        unusable lines counted.
        """
        for junk in [b"not json\n", b"x" * (2 * SNIFF_BYTES) + b"\n"]:
            log = Log()
            log.raw(junk)
            log.end(log.open(url="https://shop.test/"))
            with open(os.path.join(self.folder, "network.jsonl"), "wb") as f:
                f.write(log.bytes())
            done = self.netlog("har", "network.jsonl", "-o", "network.har")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertIn(b"1 entries; 1 lines could not be used", done.stderr)
            done = self.netlog("read", "network.jsonl", "--after", "0")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual([json.loads(line)["type"] for line in done.stdout.splitlines()], ["open", "end"])

    def test_emptyLog(self) -> None:
        """
        A log with no line yet (the proxy just started) is no mistake.
        """
        open(os.path.join(self.folder, "network.jsonl"), "wb").close()
        done = self.netlog("read", "network.jsonl", "--after", "0")
        self.assertEqual((done.returncode, done.stdout), (0, b""), done.stderr)
        done = self.netlog("har", "network.jsonl", "-o", "network.har")
        self.assertEqual(done.returncode, 0, done.stderr)
