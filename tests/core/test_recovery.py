"""
Start-up recovery: the last number, a cut last line, the exchanges a dead
process left open.
"""

from __future__ import annotations

from typing import Callable

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import END, OPEN, decodeLine, encodeLine
from netlog.core.recovery import recover

from .logs import modelLog, reader, smallBlocks


def _scanForward(data: bytes) -> tuple[int, list[int]]:
    """
    What recovery must find, by reading every line: the last netlog line's
    number and the ids opened and never ended.
    """
    parts = data.split(b"\n")
    whole = parts[:-1]
    if parts[-1] and decodeLine(parts[-1]) is not None:
        whole.append(parts[-1])
    last = 0
    opened: dict[int, None] = {}
    for text in whole:
        record = decodeLine(text)
        if record is None:
            continue
        last = record["n"]
        if record["type"] == OPEN:
            opened[record["id"]] = None
        else:
            opened.pop(record["id"], None)
    return last, list(opened)


def _counted(data: bytes) -> tuple[Callable[[int, int], bytes], list[int]]:
    """
    A reader of C{data} and the sizes it was asked for, in order.
    """
    seen: list[int] = []

    def readAt(offset: int, size: int) -> bytes:
        seen.append(size)
        return data[offset : offset + size]

    return readAt, seen


_ops = st.lists(
    st.one_of(
        st.tuples(st.just("open"), st.integers(0, 40)),
        st.tuples(st.just("end"), st.integers(0, 1000)),
        st.tuples(st.just("junk"), st.integers(0, 30)),
    ),
    max_size=60,
)


class RecoverTests(SynchronousTestCase):
    def test_empty(self) -> None:
        """
        An empty file: number from 1, nothing cut, nothing open.
        """
        found = recover(reader(b""), 0)
        self.assertEqual((found.lastNumber, found.cut, found.unended), (0, False, []))

    def test_cleanEnd(self) -> None:
        """
        A log that ends whole: its last number, and the ids never ended.
        """
        data, _ = modelLog([("open", 1), ("open", 1), ("end", 0), ("open", 1)])
        found = recover(reader(data), len(data))
        self.assertEqual((found.lastNumber, found.cut, found.unended), (4, False, [2, 4]))

    def test_cutLine(self) -> None:
        """
        A last line cut short isn't counted; it is reported cut.
        """
        data, _ = modelLog([("open", 1), ("open", 1)])
        data = data[:-10]
        found = recover(reader(data), len(data))
        self.assertEqual((found.lastNumber, found.cut, found.unended), (1, True, [1]))

    def test_onlyNewlineMissing(self) -> None:
        """
        A last line whole but for its newline keeps its number (the newline
        that ends the cut makes it whole), so it is never numbered twice.
        """
        data, _ = modelLog([("open", 1), ("open", 1)])
        data = data[:-1]
        found = recover(reader(data), len(data))
        self.assertEqual((found.lastNumber, found.cut, found.unended), (2, True, [1, 2]))

    def test_readsOnlyTheTail(self) -> None:
        """
        With every exchange ended long ago, recovery reads the tail of the
        log, not all of it.
        """
        ops = [("open", 100), ("end", 0)] * 5000
        data, _ = modelLog(ops)
        readAt, seen = _counted(data)
        with smallBlocks(chunk=4096):
            found = recover(readAt, len(data))
        self.assertEqual((found.lastNumber, found.unended), (10000, []))
        self.assertLess(sum(seen), 3 * 4096)
        self.assertGreater(len(data), 1_000_000)

    def test_onlyLastReadsOnlyTheTail(self) -> None:
        """
        Asked only for the last number (a session's C{first} and C{last}),
        recovery reads the tail even with an exchange open since the start.
        """
        ops = [("open", 100)] + [("open", 100), ("end", 1)] * 5000
        data, _ = modelLog(ops)
        readAt, seen = _counted(data)
        with smallBlocks(chunk=4096):
            found = recover(readAt, len(data), onlyLast=True)
        self.assertEqual(found.lastNumber, 10001)
        self.assertLess(sum(seen), 3 * 4096)

    @settings(max_examples=200, deadline=None)
    @given(_ops, st.floats(0, 1), st.integers(1, 64))
    def test_onlyLastMatchesAForwardScan(self, ops: list, cutAt: float, chunk: int) -> None:  # type: ignore[type-arg]
        """
        On any log cut at any byte, the last number alone is the one reading
        every line forward finds.
        """
        data, _ = modelLog(ops)
        data = data[: int(len(data) * cutAt)] if cutAt < 1 else data
        with smallBlocks(chunk=chunk):
            found = recover(reader(data), len(data), onlyLast=True)
        self.assertEqual(found.lastNumber, _scanForward(data)[0])

    @settings(max_examples=200, deadline=None)
    @given(_ops, st.floats(0, 1), st.integers(1, 64))
    def test_matchesAForwardScan(self, ops: list, cutAt: float, chunk: int) -> None:  # type: ignore[type-arg]
        """
        On any log cut at any byte, recovery finds what reading every line
        forward finds: the last number and the ids left open.
        """
        data, _ = modelLog(ops)
        data = data[: int(len(data) * cutAt)] if cutAt < 1 else data
        with smallBlocks(chunk=chunk):
            found = recover(reader(data), len(data))
        last, unended = _scanForward(data)
        self.assertEqual(found.lastNumber, last)
        self.assertEqual(found.unended, unended)
        self.assertEqual(found.cut, bool(data) and not data.endswith(b"\n"))

    def test_junkAtTheEnd(self) -> None:
        """
        A whole line that isn't JSON at the end is passed over.
        """
        data = encodeLine(1, OPEN, 1, 1, 0.0, {}) + encodeLine(2, END, 1, 3, 0.0, {}) + b"garbage\n"
        found = recover(reader(data), len(data))
        self.assertEqual((found.lastNumber, found.cut, found.unended), (2, False, []))

    def test_cutLineEndingInBrace(self) -> None:
        """
        A line cut by a crash just after an inner C{}} looks whole at its
        start and end; its number was given again to the next line, and it
        is not taken for an exchange of its own.
        """
        one = encodeLine(1, OPEN, 1, 1, 0.0, {})
        two = encodeLine(2, END, 1, 3, 0.0, {})
        cut = encodeLine(3, OPEN, 3, 3, 0.0, {"server": {"port": 1}})[:-2]
        again = encodeLine(3, OPEN, 3, 3, 0.0, {"server": {"port": 2}})
        data = one + two + cut + b"\n" + again
        found = recover(reader(data), len(data))
        self.assertEqual((found.lastNumber, found.unended), (3, [3]))
