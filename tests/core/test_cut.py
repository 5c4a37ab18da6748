"""
Which lines go back on a log cut under its writer (L{netlog.core.cut}), and
where logrotate's copy ended (L{netlog.log.cut}).
"""

from __future__ import annotations

import gzip
import os

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.cut import lineNumber, linesAfter
from netlog.log.cut import copiedUpTo, lastLineIn


def line(n: int) -> bytes:
    return b'{"n":%d,"type":"open","id":%d,"open_from":1,"time":1.0}' % (n, n)


def lines(numbers: range) -> bytes:
    return b"".join(line(n) + b"\n" for n in numbers)


class LinesAfterTests(SynchronousTestCase):
    def test_afterTheCopy(self) -> None:
        """
        The lines above the copy's last, whole, in order.
        """
        restored = linesAfter(lines(range(5, 12)), 8)
        self.assertEqual((restored.data, restored.first, restored.last, restored.lost), (lines(range(9, 12)), 9, 11, 0))

    def test_noCopy(self) -> None:
        """
        With no copy found, every whole line kept; a tail of a line where
        the kept bytes begin is left out.
        """
        recent = line(4)[20:] + b"\n" + lines(range(5, 8))
        restored = linesAfter(recent, None)
        self.assertEqual((restored.data, restored.first, restored.last), (lines(range(5, 8)), 5, 7))

    def test_copyHasAll(self) -> None:
        """
        A copy that ends at the last line: nothing goes back.
        """
        restored = linesAfter(lines(range(1, 4)), 3)
        self.assertEqual((restored.data, restored.first, restored.last, restored.lost), (b"", None, None, 0))

    def test_olderThanKept(self) -> None:
        """
        Lines of the gap older than the kept bytes are counted as lost.
        """
        restored = linesAfter(lines(range(10, 13)), 6)
        self.assertEqual((restored.first, restored.lost), (10, 3))

    @given(st.integers(1, 50), st.integers(0, 60), st.integers(0, 200))
    def test_property(self, count: int, after: int, cut: int) -> None:
        """
        Whatever the copy's end and wherever the kept bytes begin, what goes
        back is a run of whole lines that follows on from the copy when it
        can, and ends with the last line.
        """
        recent = lines(range(1, count + 1))[cut:]
        restored = linesAfter(recent, after)
        numbers = [lineNumber(x) for x in restored.data.split(b"\n")[:-1]]
        if restored.first is None:
            self.assertEqual(numbers, [])
            return
        self.assertEqual(numbers, list(range(restored.first, count + 1)))
        self.assertGreater(restored.first, after)
        self.assertEqual(restored.lost, restored.first - after - 1)


class CopyTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        self.log = os.path.join(self.folder, "network.jsonl")

    def write(self, name: str, data: bytes) -> str:
        path = os.path.join(self.folder, name)
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "wb") as f:
            f.write(data)
        return path

    def test_newestCopy(self) -> None:
        """
        logrotate's copies beside the log (numbered or dated): the one with
        the highest last line at most the writer's; compressed copies,
        netlog's segments and other logs aside.
        """
        self.write("network.jsonl", b"")
        self.write("network.jsonl.2", lines(range(1, 5)))
        newest = self.write("network.jsonl-20261206", lines(range(5, 9)))
        self.write("network.jsonl.1.gz", lines(range(1, 12)))
        self.write("network.000000000001.jsonl", lines(range(1, 12)))
        self.write("other.jsonl.1", lines(range(1, 12)))
        self.write("network.jsonl.3", lines(range(1, 30)))
        self.assertEqual(copiedUpTo(self.log, 20), (newest, 8))
        self.assertIsNone(copiedUpTo(self.log, 3))

    def test_lastLine(self) -> None:
        """
        A copy's last whole line, whatever follows it; none in a file with
        no netlog line.
        """
        path = self.write("network.jsonl.1", lines(range(1, 4)) + line(4)[:10])
        self.assertEqual(lastLineIn(path), 3)
        self.assertIsNone(lastLineIn(self.write("network.jsonl.9", b"[sites]\n")))
        self.assertIsNone(lastLineIn(os.path.join(self.folder, "missing")))
