"""
Paging through the network log: pure logic over a function that reads the
file at an offset, like L{netlog.core.recovery}.

A page is the whole lines with C{n > after}, in order, at most C{limit} bytes
of them but always at least one, never a line that has no newline yet. Lines
that are not netlog lines (a line cut short by a crash, ended by the next
start) are skipped and counted, and the page's C{offset} moves past them so
that no reader stalls on them.

The start of a page is found by a binary search over byte offsets, since
C{n} grows through the file: a page near the end of a 1 GB log reads a few
dozen small blocks, not the file.

A log is I{begun again} when it was replaced or truncated since the cursor
was handed out. By numbers alone: the file's last line has C{n < after}, or
the first line after the cursor is not C{after + 1}. The shell adds the
file's identity and the offset it reached (see L{page}'s C{hint}).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from netlog.core.logline import decodeLine
from netlog.core.recovery import linesBackwards

#: The bytes of lines a page holds when the caller names no limit.
DEFAULT_LIMIT = 1 << 20
#: How much is read at a time while searching or scanning.
BLOCK = 1 << 16
#: How much a search step reads first (it reads more while a line is longer).
PROBE = 1 << 12
#: Below this many bytes between the search's bounds, scan forward instead.
SCAN_WINDOW = 1 << 14

ReadAt = Callable[[int, int], bytes]


@dataclass
class Page:
    """
    One page of the log.

    @ivar lines: each line's JSON text (UTF-8 bytes, without its newline), in
        order. Raw text, not parsed objects, so a server can send them on
        without decoding and encoding them again; L{records} parses them.
    @ivar next: the cursor to ask for next: the C{n} of the last line in
        C{lines}, or the C{after} asked for (0 when begun again) when there
        is none.
    @ivar begunAgain: the log was replaced or truncated since the cursor;
        C{lines} then start from the new log's first line.
    @ivar offset: the byte offset just past the last line this page consumed
        (returned or skipped): where the next page starts in this file.
    @ivar skipped: lines passed over because they are not netlog lines.
    @ivar removedUpTo: when the lines after the cursor are no longer kept
        (removed by retention, or cut by an outside rotation) but the
        numbering goes on: the first line kept less one, and C{lines} start
        there. Served as C{"removed_up_to"}. None otherwise.
    """

    lines: list[bytes] = field(default_factory=list)
    next: int = 0
    begunAgain: bool = False
    offset: int = 0
    skipped: int = 0
    removedUpTo: int | None = None

    def records(self) -> list[dict]:  # type: ignore[type-arg]
        """
        The lines parsed.
        """
        out = []
        for line in self.lines:
            record = decodeLine(line)
            assert record is not None
            out.append(record)
        return out

    def envelope(self) -> bytes:
        """
        The page as the JSON the HTTP API and C{netlog read --json} serve:
        C{{"lines": [...], "next": N, "begun_again": false}}, built without
        decoding the lines again.
        """
        return (
            b'{"lines":['
            + b",".join(self.lines)
            + b'],"next":'
            + str(self.next).encode("ascii")
            + b',"begun_again":'
            + (b"true" if self.begunAgain else b"false")
            + (b"" if self.removedUpTo is None else b',"removed_up_to":' + str(self.removedUpTo).encode("ascii"))
            + b"}"
        )


class _Lines:
    """
    Whole lines of a file read forward from an offset, in blocks that start
    at C{first} bytes and double while a line doesn't fit in one.
    """

    def __init__(self, readAt: ReadAt, size: int, offset: int, first: int = BLOCK) -> None:
        self._readAt = readAt
        self._size = size
        self._pos = offset
        self._want = first
        self._buffer = b""
        self._at = 0
        self._bufferStart = offset

    def next(self) -> tuple[int, int, bytes] | None:
        """
        The next whole line as (start, end past its newline, text without the
        newline); L{None} at the end of the whole lines.
        """
        while True:
            idx = self._buffer.find(b"\n", self._at)
            if idx >= 0:
                start = self._bufferStart + self._at
                line = self._buffer[self._at : idx]
                self._at = idx + 1
                return start, self._bufferStart + idx + 1, line
            if self._pos >= self._size:
                return None
            if self._at:
                self._bufferStart += self._at
                self._buffer = self._buffer[self._at :]
                self._at = 0
            elif self._buffer:
                self._want *= 2
            block = self._readAt(self._pos, min(self._want, self._size - self._pos))
            if not block:
                # The file shrank under us: what is left isn't whole.
                self._size = self._pos
                return None
            self._pos += len(block)
            self._buffer += block


def _lineStartAtOrAfter(readAt: ReadAt, size: int, offset: int) -> int:
    """
    The first offset at or after C{offset} where a line starts (C{size} when
    none does).
    """
    if offset == 0:
        return 0
    pos = offset - 1
    want = PROBE
    while pos < size:
        block = readAt(pos, min(want, size - pos))
        if not block:
            return size
        idx = block.find(b"\n")
        if idx >= 0:
            return pos + idx + 1
        pos += len(block)
        want = min(want * 2, BLOCK)
    return size


def _firstRecord(readAt: ReadAt, size: int, offset: int) -> tuple[int, int, int] | None:
    """
    The first netlog line starting at or after the line start C{offset}:
    (its start, its end, its C{n}); L{None} when there is none.
    """
    lines = _Lines(readAt, size, offset, PROBE)
    while True:
        got = lines.next()
        if got is None:
            return None
        start, end, text = got
        record = decodeLine(text)
        if record is not None:
            return start, end, record["n"]


def findStart(readAt: ReadAt, size: int, after: int) -> int:
    """
    A line start at or before the first netlog line with C{n > after}, and
    past every line with C{n <= after} but a window's worth.

    A binary search over offsets: C{n} grows through the file, and lines that
    aren't netlog lines are passed over to the next one that is.
    """
    lo, hi = 0, size
    if after <= 0:
        return 0
    while hi - lo > SCAN_WINDOW:
        mid = (lo + hi) // 2
        start = _lineStartAtOrAfter(readAt, size, mid)
        found = _firstRecord(readAt, size, start) if start < hi else None
        if found is None or found[0] >= hi:
            hi = mid
        elif found[2] <= after:
            lo = found[1]
        else:
            hi = mid
    return lo


def _wholeSize(readAt: ReadAt, size: int) -> int:
    """
    The offset just past the file's last newline (0 when it has none).
    """
    pos = size
    while pos > 0:
        start = max(0, pos - BLOCK)
        idx = readAt(start, pos - start).rfind(b"\n")
        if idx >= 0:
            return start + idx + 1
        pos = start
    return 0


def _lastRecordBefore(readAt: ReadAt, end: int) -> int | None:
    """
    The C{n} of the last netlog line that ends at or before the line start
    C{end}, reading backwards; L{None} when there is none.
    """
    for text in linesBackwards(readAt, end, PROBE):
        record = decodeLine(text)
        if record is not None:
            return int(record["n"])
    return None


def lastNumber(readAt: ReadAt, size: int) -> int | None:
    """
    The C{n} of the file's last whole netlog line; L{None} when it has none.
    """
    return _lastRecordBefore(readAt, _wholeSize(readAt, size))


def page(
    readAt: ReadAt,
    size: int,
    after: int = 0,
    limit: int = DEFAULT_LIMIT,
    hint: int | None = None,
) -> Page:
    """
    Read one page of the log.

    @param readAt: reads up to C{size} bytes at an offset (fewer at the end).
    @param size: the file's size now.
    @param after: the cursor: lines with C{n > after} are wanted.
    @param limit: at most this many bytes of lines (each line's newline
        counted), but always at least one line when there is one.
    @param hint: where the caller's last page of this same file ended
        (L{Page.offset}) for this cursor; used when it still fits, so
        following a log costs only the new lines.
    """
    after = max(0, after)
    size = _wholeSize(readAt, size)
    if after == 0:
        return _fromStart(readAt, size, limit, begunAgain=False)
    if hint is not None and 0 < hint <= size and _hintFits(readAt, hint, after):
        start = hint
    else:
        last = _lastRecordBefore(readAt, size)
        if last is None or last < after:
            return _fromStart(readAt, size, limit, begunAgain=True)
        start = findStart(readAt, size, after)
    result = _collect(readAt, size, start, after, limit)
    if result is None:
        return _fromStart(readAt, size, limit, begunAgain=True)
    return result


def _fromStart(readAt: ReadAt, size: int, limit: int, begunAgain: bool) -> Page:
    result = _collect(readAt, size, 0, 0, limit)
    assert result is not None
    result.begunAgain = begunAgain
    return result


def _collect(readAt: ReadAt, size: int, start: int, after: int, limit: int) -> Page | None:
    """
    Gather the lines with C{n > after} from the line start C{start}.

    @return: the page, or L{None} when the first line past the cursor isn't
        C{after + 1}: its numbers don't fit, it is another log.
    """
    result = Page(next=after, offset=start)
    lines = _Lines(readAt, size, start)
    used = 0
    # Lines before a start past 0 had n <= after (the search and the hint
    # only move past such lines).
    earlier = start > 0
    while True:
        got = lines.next()
        if got is None:
            break
        _, lineEnd, text = got
        record = decodeLine(text)
        if record is None or (result.lines and record["n"] <= result.next):
            # Not a netlog line, or out of order (not one log): pass over it.
            result.skipped += 1
            result.offset = lineEnd
            continue
        n = record["n"]
        if n <= after:
            earlier = True
            result.offset = lineEnd
            continue
        if not result.lines and after > 0 and n != after + 1 and not earlier:
            # The file's first line is past the cursor: another log.
            return None
        if result.lines and used + len(text) + 1 > limit:
            break
        result.lines.append(text)
        used += len(text) + 1
        result.next = n
        result.offset = lineEnd
    return result


def _hintFits(readAt: ReadAt, hint: int, after: int) -> bool:
    """
    Whether C{hint} is a line start whose nearest netlog line before it is
    numbered C{after}.
    """
    if readAt(hint - 1, 1) != b"\n":
        return False
    return _lastRecordBefore(readAt, hint) == after
