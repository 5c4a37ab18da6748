"""
Where an export writes: C{-o FILE} is there whole or not at all, and C{-o}
naming a device or a named pipe writes into it rather than replacing it
with a file (C{netlog har LOG -o /dev/null} as root once replaced the
machine's C{/dev/null}).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import threading
from typing import Callable

from twisted.trial.unittest import SynchronousTestCase

from netlog.wholefile import writeWhole
from tests.har.support import Log
from tests.standin.support import tempDirectory
from tests.support import netlogArgv, sourceEnv

#: Seconds one command may take.
TIMEOUT = 60


class WriteWholeTests(SynchronousTestCase):
    """
    L{writeWhole} on its own.
    """

    def setUp(self) -> None:
        self.folder = tempDirectory(self)
        self.path = os.path.join(self.folder, "out.har")

    def test_replacedWhole(self) -> None:
        """
        A regular file is written beside the old one and takes its place
        only when the block ends; nothing is left beside it.
        """
        with open(self.path, "wb") as f:
            f.write(b"old")
        with writeWhole(self.path) as out:
            out.write(b"new")
            with open(self.path, "rb") as f:
                self.assertEqual(f.read(), b"old")
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), b"new")
        self.assertEqual(os.listdir(self.folder), ["out.har"])

    def test_failedLeavesTheOld(self) -> None:
        """
        A block that raises leaves the old file as it was and no partial one.
        """
        with open(self.path, "wb") as f:
            f.write(b"old")
        with self.assertRaises(OSError):
            with writeWhole(self.path, ".part") as out:
                out.write(b"half")
                raise OSError(28, "No space left on device")
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), b"old")
        self.assertEqual(os.listdir(self.folder), ["out.har"])

    def test_namedPipe(self) -> None:
        """
        A named pipe is written into, and is still a named pipe after.
        """
        os.mkfifo(self.path)
        got = _readPipe(self, self.path)
        with writeWhole(self.path) as out:
            out.write(b"through the pipe")
        self.assertEqual(got(), b"through the pipe")
        self.assertTrue(stat.S_ISFIFO(os.stat(self.path).st_mode))
        self.assertEqual(os.listdir(self.folder), ["out.har"])

    def test_characterDevice(self) -> None:
        """
        C{/dev/null} stays the device.
        """
        with writeWhole(os.devnull) as out:
            out.write(b"nothing")
        self.assertTrue(stat.S_ISCHR(os.stat(os.devnull).st_mode))
        self.assertFalse(os.path.exists(os.devnull + ".partial"))


class CommandTests(SynchronousTestCase):
    """
    C{netlog har} and C{netlog warc} writing into a named pipe, as a user
    runs them.
    """

    def setUp(self) -> None:
        self.folder = tempDirectory(self)
        log = Log()
        log.end(log.open(url="https://shop.test/"))
        self.log = os.path.join(self.folder, "network.jsonl")
        with open(self.log, "wb") as f:
            f.write(log.bytes())

    def exportInto(self, command: str) -> bytes:
        pipe = os.path.join(self.folder, "out." + command)
        os.mkfifo(pipe)
        got = _readPipe(self, pipe)
        done = subprocess.run([*netlogArgv(), command, self.log, "-o", pipe], capture_output=True,
                              env=sourceEnv(), timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertTrue(stat.S_ISFIFO(os.stat(pipe).st_mode))
        self.assertFalse(os.path.exists(pipe + ".partial"))
        return got()

    def test_har(self) -> None:
        """
        The HAR comes out of the pipe whole.
        """
        har = json.loads(self.exportInto("har"))
        self.assertEqual([e["request"]["url"] for e in har["log"]["entries"]], ["https://shop.test/"])

    def test_warc(self) -> None:
        """
        So does the WARC (not gzipped: the name ends in C{.warc}).
        """
        warc = self.exportInto("warc")
        self.assertTrue(warc.startswith(b"WARC/"), warc[:20])
        self.assertIn(b"https://shop.test/", warc)


def _readPipe(testCase: SynchronousTestCase, path: str) -> Callable[[], bytes]:
    """
    Read the named pipe at C{path} whole in a thread; the function returned
    gives what was read once the writer closed it.
    """
    got: list[bytes] = []

    def read() -> None:
        with open(path, "rb") as f:
            got.append(f.read())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def result() -> bytes:
        reader.join(TIMEOUT)
        testCase.assertFalse(reader.is_alive(), "nothing closed the pipe")
        return got[0]

    testCase.addCleanup(_unblock, path, reader)
    return result


def _unblock(path: str, reader: threading.Thread) -> None:
    """
    A reader still waiting for a writer (the test failed first) is let go.
    """
    if reader.is_alive():
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            return
        os.close(fd)
