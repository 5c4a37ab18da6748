"""
A live log cut under its writer (logrotate's C{copytruncate}): which of the
lines it wrote last go back on the file. Pure: the writer keeps its most
recent lines (L{netlog.log.writer.LogWriter}), the folder tells where the
copy ended (L{netlog.log.cut}), and this says what to write again.

logrotate copies the live file, then truncates it: the lines written
between the end of its copy and the truncation are in neither file. The
writer notices the cut at its next write (the file ends before the bytes
it counted) or within a second when idle, and writes the file again from
the line after the copy's last: the lost lines, then those written since
the cut, in order, so that the copy and the live file hold every line
once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A netlog line's number, from its fixed start.
_NUMBER = re.compile(rb'\A\{"n":([1-9][0-9]*),')


def lineNumber(line: bytes) -> int | None:
    """
    The number of a whole netlog line (without its newline); None for
    anything else (a line's tail, left where the kept bytes begin).
    """
    match = _NUMBER.match(line)
    if match is None or not line.endswith(b"}"):
        return None
    return int(match[1])


@dataclass(frozen=True)
class Restored:
    """
    What goes back on a cut file.

    @ivar data: the lines, each with its newline, in order.
    @ivar first: the first line's number (None when there is none).
    @ivar last: the last line's number (None when there is none).
    @ivar lost: how many lines after C{after} are kept nowhere (they were
        written before the oldest line the writer still held).
    """

    data: bytes
    first: int | None
    last: int | None
    lost: int


def linesAfter(recent: bytes, after: int | None) -> Restored:
    """
    The whole lines of C{recent} (the writer's most recent bytes, oldest
    first) numbered above C{after} (the copy's last line; None when no copy
    was found: every line kept goes back).
    """
    kept = []
    first = last = None
    for line in recent.split(b"\n"):
        n = lineNumber(line)
        if n is None or (after is not None and n <= after) or (last is not None and n <= last):
            continue
        if first is None:
            first = n
        last = n
        kept.append(line + b"\n")
    lost = 0
    if after is not None and first is not None and first > after + 1:
        lost = first - after - 1
    return Restored(b"".join(kept), first, last, lost)
