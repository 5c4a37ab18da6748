"""
Which lines of a log an export of part of it holds, with no I/O: C{--from}
and C{--to} read as line numbers or as times, and which lines past the last
one are still wanted.

An export of lines C{first} to C{last} holds the exchanges whose open line
is among them, each whole: their end lines (and head and message lines) come
along wherever they lie after C{last}, and the reading stops at the first
line written once every one of them had ended (its C{open_from} is past
C{last}).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

_NUMBER = re.compile(rb'\{"n":([0-9]{1,18})[,}]')


@dataclass(frozen=True)
class Bound:
    """
    One end of a range: a line number, or a time (seconds since the epoch).
    """

    line: int | None = None
    time: float | None = None


def parseBound(text: str) -> Bound:
    """
    C{--from}/C{--to}'s value: digits are a line number (C{41823}); anything
    else an ISO 8601 time (C{2026-12-05T10:00}, C{2026-12-05 10:00:00Z},
    C{2026-12-05T10:00+01:00}, C{2026-12-05}), in local time when it names
    no offset, as C{date} prints it.

    @raise ValueError: neither.
    """
    text = text.strip()
    if text.isdigit():
        return Bound(line=int(text))
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither a line number (41823) nor an ISO 8601 time (2026-12-05T10:00:00Z)"
        ) from None
    return Bound(time=when.timestamp())


def numberOf(line: bytes) -> int | None:
    """
    A line's C{n}, from its start as netlog writes it; None when it doesn't
    start so (the caller then reads the whole line).
    """
    match = _NUMBER.match(line)
    return int(match.group(1)) if match is not None else None


def pastLast(record: dict[str, Any], last: int) -> tuple[bool, bool]:
    """
    For a line past the range's last line C{last}: whether the export keeps
    it (a later line of an exchange opened in the range), and whether no
    line after it is wanted (every exchange opened in the range had ended
    when it was written).
    """
    exchangeId = record.get("id")
    keep = (
        isinstance(exchangeId, int)
        and not isinstance(exchangeId, bool)
        and exchangeId <= last
        and record.get("type") != "open"
    )
    openFrom = record.get("open_from")
    done = isinstance(openFrom, int) and not isinstance(openFrom, bool) and openFrom > last
    return keep, done
