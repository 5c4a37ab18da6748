"""
What a proxy started again must know of the log it appends to: pure logic over
a function that reads the file at an offset.

It reads backwards from the end only as far as the last whole line's
C{open_from} says exchanges may still be open, so start-up costs the tail of a
large log, not all of it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from netlog.core.logline import END, OPEN, decodeLine

#: How much of the file is read at a time, going backwards.
CHUNK = 1 << 20

#: The longest cut tail that is read whole to see whether only its newline
#: is missing (a longer one is left as a cut line).
MAX_WHOLE_TAIL = 64 << 20

ReadAt = Callable[[int, int], bytes]


@dataclass
class Recovered:
    """
    What the log holds at start-up.

    @ivar lastNumber: the C{n} of the last usable whole line, 0 for none.
    @ivar cut: the file does not end with a newline (a line was cut short);
        the writer ends it with a newline before its first line.
    @ivar unended: ids opened and never ended, in order.
    """

    lastNumber: int = 0
    cut: bool = False
    unended: list[int] = field(default_factory=list)


def linesBackwards(readAt: ReadAt, size: int, first: int | None = None):  # type: ignore[no-untyped-def]
    """
    Yield the file's whole lines, last first, each without its newline.

    @param first: bytes to read first; each read after doubles, up to
        L{CHUNK}. (A caller that wants only the last line or two reads little.)
    """
    end = size
    want = CHUNK if first is None else min(first, CHUNK)
    pieces: list[bytes] = []
    while end > 0:
        start = max(0, end - want)
        block = readAt(start, end - start)
        end = start
        want = min(want * 2, CHUNK)
        idx = block.rfind(b"\n")
        if idx < 0:
            # Inside one long line: keep it until its start is found.
            pieces.append(block)
            continue
        parts = block[idx + 1 :]
        rest = parts + b"".join(reversed(pieces))
        pieces = []
        if rest:
            yield rest
        lines = block[:idx].split(b"\n")
        # lines[0] may be the tail of a line that starts in an earlier block.
        pieces.append(lines[0])
        for line in reversed(lines[1:]):
            if line:
                yield line
    rest = b"".join(reversed(pieces))
    if rest:
        yield rest


def recover(readAt: ReadAt, size: int, onlyLast: bool = False) -> Recovered:
    """
    Find the last line's number, whether the file ends cut, and which exchanges
    are still open.

    @param onlyLast: find only the last line's number (and the cut): read
        the log's tail, not back as far as its oldest open exchange.
    """
    result = Recovered()
    if size == 0:
        return result
    result.cut = readAt(size - 1, 1) != b"\n"
    # A cut last line is not a whole line: skip everything after the last
    # newline.
    wholeSize = size
    if result.cut:
        tail = b""
        pos = size
        while pos > 0:
            start = max(0, pos - CHUNK)
            tail = readAt(start, pos - start)
            idx = tail.rfind(b"\n")
            if idx >= 0:
                wholeSize = start + idx + 1
                break
            pos = start
        else:
            wholeSize = 0
        # A line written whole but for its newline (a write cut just before
        # it) is a line: it keeps its number, and the newline that ends the
        # cut makes it whole.
        if size - wholeSize <= MAX_WHOLE_TAIL:
            tailRecord = decodeLine(readAt(wholeSize, size - wholeSize))
            if tailRecord is not None:
                wholeSize = size
    stopBelow: int | None = None
    ended: set[int] = set()
    unended: list[int] = []
    previous: int | None = None
    for line in linesBackwards(readAt, wholeSize):
        if result.lastNumber == 0:
            record = decodeLine(line)
            if record is None:
                continue
            parsed = _fields(record)
            if parsed is None:
                continue
            result.lastNumber = parsed[0]
            if onlyLast:
                return result
            openFrom = record.get("open_from")
            stopBelow = openFrom if isinstance(openFrom, int) and not isinstance(openFrom, bool) else 1
        else:
            parsed = _quickFields(line)
            if parsed is None:
                continue
        n, kind, exchangeId = parsed
        if previous is not None and n >= previous:
            # Numbers only grow through a log; a line that doesn't fit is a
            # cut line whose number the next process gave again.
            continue
        previous = n
        assert stopBelow is not None
        if n < stopBelow:
            break
        if kind == END:
            ended.add(exchangeId)
        elif kind == OPEN and exchangeId not in ended:
            unended.append(exchangeId)
    unended.reverse()
    result.unended = unended
    return result


#: The start of every line netlog writes (L{netlog.core.logline.encodeLine}).
#: Any type: every line takes a number (a head or message line too), while
#: only open and end lines say which exchanges are open.
_PREFIX = re.compile(rb'\{"n":([1-9][0-9]*),"type":"([a-z_]{1,16})","id":([1-9][0-9]*),')


def _fields(record: dict) -> tuple[int, str, int] | None:  # type: ignore[type-arg]
    exchangeId = record.get("id")
    kind = record.get("type")
    if not isinstance(exchangeId, int) or isinstance(exchangeId, bool) or not isinstance(kind, str):
        return None
    return record["n"], kind, exchangeId


def _quickFields(line: bytes) -> tuple[int, str, int] | None:
    """
    A line's C{n}, C{type} and C{id}, read from its fixed start when it has
    netlog's shape (an object closed at its end), else by parsing it all.

    The quick read trusts a line that isn't whole JSON only in one case, a
    line cut by a crash that happens to end in C{}}; such a line always has
    the number of the line after it, and L{recover} drops it for that.
    """
    match = _PREFIX.match(line)
    if match is not None and line.endswith(b"}"):
        return int(match[1]), match[2].decode("ascii"), int(match[3])
    record = decodeLine(line)
    if record is None:
        return None
    return _fields(record)
