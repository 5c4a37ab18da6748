"""
Paging through the log: whole lines after a cursor, within a byte limit, the
cursor to ask next, and a log begun again.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import OPEN, encodeLine
from netlog.core.paging import Page, page

from .logs import modelLog, reader, smallBlocks

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("open"), st.integers(0, 60)),
        st.tuples(st.just("end"), st.integers(0, 1000)),
        st.tuples(st.just("junk"), st.integers(0, 30)),
    ),
    max_size=50,
)


def _lines(count: int, pad: int = 10) -> bytes:
    return b"".join(encodeLine(n, OPEN, n, n, 0.0, {"pad": "p" * pad}) for n in range(1, count + 1))


def _numbers(result: Page) -> list[int]:
    return [json.loads(line)["n"] for line in result.lines]


def _pageAll(data: bytes, size: int, limit: int, useHint: bool) -> tuple[list[int], list[Page]]:
    """
    Page from the start to the end, as a client does, bounded in calls.
    """
    seen: list[int] = []
    pages = []
    after, hint = 0, None
    for _ in range(10_000):
        result = page(reader(data), size, after, limit, hint=hint if useHint else None)
        pages.append(result)
        if not result.lines:
            break
        seen.extend(_numbers(result))
        after, hint = result.next, result.offset
    return seen, pages


class PageTableTests(SynchronousTestCase):
    def test_all(self) -> None:
        """
        From 0 with room for all: every line, the last number as cursor.
        """
        data = _lines(5)
        result = page(reader(data), len(data))
        self.assertEqual(_numbers(result), [1, 2, 3, 4, 5])
        self.assertEqual((result.next, result.begunAgain, result.offset, result.skipped), (5, False, len(data), 0))

    def test_after(self) -> None:
        """
        Only lines with n > after.
        """
        data = _lines(5)
        self.assertEqual(_numbers(page(reader(data), len(data), 3)), [4, 5])

    def test_upToDate(self) -> None:
        """
        A cursor at the last line: no lines, the same cursor, not begun again.
        """
        data = _lines(5)
        result = page(reader(data), len(data), 5)
        self.assertEqual((result.lines, result.next, result.begunAgain), ([], 5, False))

    def test_limitAtLeastOneLine(self) -> None:
        """
        A limit smaller than a line still gives that one line.
        """
        data = _lines(5)
        result = page(reader(data), len(data), 1, limit=1)
        self.assertEqual((_numbers(result), result.next), ([2], 2))

    def test_limitCountsNewlines(self) -> None:
        """
        The limit is bytes of lines, newlines counted: exactly two lines fit
        in their size, not in one byte less.
        """
        data = _lines(5)
        two = len(encodeLine(1, OPEN, 1, 1, 0.0, {"pad": "p" * 10})) * 2
        self.assertEqual(_numbers(page(reader(data), len(data), 0, limit=two)), [1, 2])
        self.assertEqual(_numbers(page(reader(data), len(data), 0, limit=two - 1)), [1])

    def test_lineStillBeingWritten(self) -> None:
        """
        A line with no newline yet is never given, and the cursor doesn't
        pass it.
        """
        data = _lines(3)
        partial = data + encodeLine(4, OPEN, 4, 4, 0.0, {})[:-1]
        result = page(reader(partial), len(partial), 2)
        self.assertEqual((_numbers(result), result.next, result.offset), ([3], 3, len(data)))

    def test_junkSkipped(self) -> None:
        """
        Lines that aren't netlog lines are passed over and counted, and the
        offset moves past them.
        """
        data = _lines(2) + b"{not json\n" + b'{"n":3,"type":"op\n'
        more = data + encodeLine(3, OPEN, 3, 3, 0.0, {})
        result = page(reader(data), len(data), 2)
        self.assertEqual((result.lines, result.next, result.skipped, result.offset), ([], 2, 2, len(data)))
        result = page(reader(more), len(more), 2)
        self.assertEqual((_numbers(result), result.skipped), ([3], 2))

    def test_truncated(self) -> None:
        """
        A cursor past the file's last line: the log was begun again, and the
        page starts at its first line.
        """
        data = _lines(3)
        result = page(reader(data), len(data), 10)
        self.assertEqual((_numbers(result), result.next, result.begunAgain), ([1, 2, 3], 3, True))

    def test_emptiedFile(self) -> None:
        """
        An empty file with a cursor past 0 is a log begun again.
        """
        result = page(reader(b""), 0, 10)
        self.assertEqual((result.lines, result.next, result.begunAgain), ([], 0, True))

    def test_firstLineDoesNotFit(self) -> None:
        """
        A file whose first line is past the cursor plus one is another log.
        """
        data = b"".join(encodeLine(n, OPEN, n, n, 0.0, {}) for n in range(50, 53))
        result = page(reader(data), len(data), 10)
        self.assertEqual((_numbers(result), result.begunAgain), ([50, 51, 52], True))

    def test_hintTruncatedAndRewritten(self) -> None:
        """
        A hint that no longer fits (the file was rewritten under it) is
        ignored: the page is found by number.
        """
        data = _lines(10, pad=3)
        first = page(reader(data), len(data), 0, limit=100)
        other = _lines(10, pad=30)
        result = page(reader(other), len(other), first.next, hint=first.offset)
        self.assertEqual(_numbers(result), list(range(first.next + 1, 11)))

    def test_envelope(self) -> None:
        """
        The envelope is JSON with the lines as objects.
        """
        data = _lines(3)
        result = page(reader(data), len(data), 1)
        envelope = json.loads(result.envelope())
        self.assertEqual(envelope["next"], 3)
        self.assertIs(envelope["begun_again"], False)
        self.assertEqual([r["n"] for r in envelope["lines"]], [2, 3])
        self.assertEqual(envelope["lines"], result.records())

    def test_nearTheEndReadsLittle(self) -> None:
        """
        A page near the end of a big log is found by a search, reading a
        small part of the file.
        """
        data = _lines(60_000, pad=100)
        readBytes = []

        def readAt(offset: int, size: int) -> bytes:
            got = data[offset : offset + size]
            readBytes.append(len(got))
            return got

        result = page(readAt, len(data), 59_990)
        self.assertEqual(_numbers(result), list(range(59_991, 60_001)))
        self.assertGreater(len(data), 8_000_000)
        self.assertLess(sum(readBytes), 400_000)


class PageHypothesisTests(SynchronousTestCase):
    @settings(max_examples=200, deadline=None)
    @given(_ops, st.integers(1, 400), st.booleans(), st.integers(0, 60), st.integers(1, 40), st.integers(1, 40))
    def test_pagingSeesEveryLineOnce(self, ops: list, limit: int, useHint: bool, cut: int, block: int, window: int) -> None:  # type: ignore[type-arg]
        """
        Paging from 0 with each page's cursor gives every whole netlog line
        once, in order, never a cut line, each page within the limit unless
        it holds a single line.
        """
        data, _ = modelLog(ops)
        count = data.count(b'{"n":')
        if cut and data:
            data = data + encodeLine(count + 1, OPEN, 1, 1, 0.0, {})[:cut]
        # Whole lines only: what follows the last newline is not one yet.
        expected = [json.loads(t)["n"] for t in data.split(b"\n")[:-1] if t.startswith(b"{")]
        with smallBlocks(block=block, window=window):
            seen, pages = _pageAll(data, len(data), limit, useHint)
        self.assertEqual(seen, expected)
        for result in pages:
            self.assertFalse(result.begunAgain)
            if len(result.lines) > 1:
                self.assertLessEqual(sum(len(t) + 1 for t in result.lines), limit)

    @settings(max_examples=200, deadline=None)
    @given(_ops, st.integers(0, 80), st.integers(1, 400), st.integers(1, 40), st.integers(1, 40))
    def test_anyCursor(self, ops: list, after: int, limit: int, block: int, window: int) -> None:  # type: ignore[type-arg]
        """
        For any cursor: the lines right after it, or, past the last line, the
        log begun again from its start.
        """
        data, _ = modelLog(ops)
        expected = [json.loads(t)["n"] for t in data.split(b"\n") if t.startswith(b"{")]
        with smallBlocks(block=block, window=window):
            result = page(reader(data), len(data), after, limit)
        got = _numbers(result)
        last = expected[-1] if expected else 0
        if after <= last:
            self.assertFalse(result.begunAgain)
            self.assertEqual(got, [n for n in expected if n > after][: len(got)])
            self.assertEqual(bool(got), after < last)
            self.assertEqual(result.next, got[-1] if got else after)
        else:
            self.assertTrue(result.begunAgain)
            self.assertEqual(got, expected[: len(got)])
            self.assertEqual(bool(got), bool(expected))
