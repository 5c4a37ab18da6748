"""
C{netlog har --from/--to}: the lines of a series an export holds.
"""

from __future__ import annotations

from typing import Callable

from netlog.core.linerange import parseBound
from netlog.log.span import oldestLine, resolveRange


def exportRange(path: str, start: str | None, end: str | None, warn: Callable[[str], None]) -> tuple[int, int | None] | None:
    """
    The lines C{(first, last)} to export from the log C{path} given
    C{--from} and C{--to}; None for the whole series. Says with C{warn}
    when lines asked for are no longer kept.

    @raise ValueError: a value is neither a line number nor a time, or
        C{--from}'s line is after C{--to}'s.
    """
    if start is None and end is None:
        return None
    startBound = parseBound(start) if start is not None else None
    endBound = parseBound(end) if end is not None else None
    first, last = resolveRange(path, startBound, endBound)
    if startBound is not None and endBound is not None and startBound.line is not None \
            and endBound.line is not None and first > endBound.line:
        raise ValueError(f"--from {start} is after --to {end}")
    oldest = oldestLine(path)
    if startBound is not None and startBound.line is not None and oldest is not None and first < oldest:
        warn(f"lines {first} to {oldest - 1} are no longer kept; the export starts at line {oldest}")
    return first, last
