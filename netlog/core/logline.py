"""
The network log's line format: pure functions, no I/O.

A line is one JSON object ending in C{\\n}; see C{docs/log-format.rst}.
"""

from __future__ import annotations

import json
from typing import Any

OPEN = "open"
END = "end"

#: The reason written for the exchanges a dead process left open.
REASON_RESTARTED = "the proxy restarted"
#: The reason written for the exchanges still open at a clean stop.
REASON_STOPPED = "the proxy stopped"
#: The reason written for an exchange whose end line could not be kept while
#: the log could not be written (written once it can be again).
REASON_LOG_FAILED = "the log could not be written"

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encodeLine(
    n: int, kind: str, exchangeId: int, openFrom: int, now: float, fields: dict[str, Any]
) -> bytes:
    """
    Make one whole line: the fixed fields first, then C{fields}.
    """
    record: dict[str, Any] = {
        "n": n,
        "type": kind,
        "id": exchangeId,
        "open_from": openFrom,
        "time": round(now, 6),
    }
    for key, value in fields.items():
        if key not in record:
            record[key] = value
    # A lone surrogate (from bytes decoded with surrogateescape) can't be
    # UTF-8; written as its JSON escape (it only occurs inside strings) the
    # line stays valid UTF-8 JSON and reads back to the same string.
    return _encoder.encode(record).encode("utf-8", "backslashreplace") + b"\n"


def decodeLine(line: bytes) -> dict[str, Any] | None:
    """
    Read one line (with or without its newline); L{None} if it isn't a line
    netlog can use (not JSON, not an object, no integer C{n}).
    """
    try:
        record = json.loads(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    n = record.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return None
    return record
