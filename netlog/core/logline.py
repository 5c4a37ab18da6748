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
_encode = _encoder.encode
#: The fixed fields, written first; a field of C{fields} by one of these names
#: is left out.
_FIXED = frozenset({"n", "type", "id", "open_from", "time"})
#: The kinds, already as JSON.
_KINDS = {OPEN: '"open"', END: '"end"'}


def encodeLine(
    n: int, kind: str, exchangeId: int, openFrom: int, now: float, fields: dict[str, Any]
) -> bytes:
    """
    Make one whole line: the fixed fields first, then C{fields}.
    """
    return encodeRecord(n, kind, exchangeId, openFrom, now, fields) + b"\n"


def encodeRecord(
    n: int, kind: str, exchangeId: int, openFrom: int, now: float, fields: dict[str, Any]
) -> bytes:
    """
    Make one line without its newline (the writer adds it in the same
    C{writev}, so a big line isn't copied once more): the fixed fields first,
    then C{fields}.

    The fixed fields are formatted here, the rest encoded once; the result is
    the same as encoding the whole record with the JSON encoder.
    """
    if not _FIXED.isdisjoint(fields):
        fields = {key: value for key, value in fields.items() if key not in _FIXED}
    body = _encode(fields)
    when = round(now, 6)
    if type(when) is float:
        if when != when or when in (_INF, -_INF):
            raise ValueError(f"Out of range float values are not JSON compliant: {when!r}")
        time = float.__repr__(when)
    else:
        time = _encode(when)
    if type(n) is int and type(exchangeId) is int and type(openFrom) is int:
        head = '{"n":%d,"type":%s,"id":%d,"open_from":%d,"time":%s' % (
            n, _KINDS.get(kind) or _encode(kind), exchangeId, openFrom, time
        )
    else:
        head = '{"n":%s,"type":%s,"id":%s,"open_from":%s,"time":%s' % (
            _encode(n), _encode(kind), _encode(exchangeId), _encode(openFrom), time
        )
    # A lone surrogate (from bytes decoded with surrogateescape) can't be
    # UTF-8; written as its JSON escape (it only occurs inside strings) the
    # line stays valid UTF-8 JSON and reads back to the same string.
    if body == "{}":
        return (head + "}").encode("utf-8", "backslashreplace")
    return (head + "," + body[1:]).encode("utf-8", "backslashreplace")


_INF = float("inf")


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
