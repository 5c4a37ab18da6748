"""
The network log's line format: pure functions, no I/O.

A line is one JSON object ending in C{\\n}; see C{docs/log-format.rst}.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Sequence

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


def _chunksWith(encoder: json.JSONEncoder) -> Callable[[Any], Sequence[str]] | None:
    """
    The C encoder's one-shot call, made without L{json.JSONEncoder.encode}'s
    per-call set-up (its pieces, to be joined); L{None} where this Python's
    C encoder takes other arguments or writes something else.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    basestring = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or basestring is None:
        return None

    def chunks(value: Any) -> Sequence[str]:
        return make(  # type: ignore[no-any-return]
            {}, encoder.default, basestring, None, ":", ",", False, False, False
        )(value, 0)

    probe = {"a": [1, 2.5, None, True, "\u00e9\n\udcff"], "b": {"c": -0.0}}
    try:
        if "".join(chunks(probe)) != encoder.encode(probe):
            return None
    except Exception:
        return None
    return chunks


_chunks = _chunksWith(_encoder)
#: The fixed fields, written first; a field of C{fields} by one of these names
#: is left out.
_FIXED = frozenset({"n", "type", "id", "open_from", "time"})


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
    """
    record: dict[str, Any] = {
        "n": n,
        "type": kind,
        "id": exchangeId,
        "open_from": openFrom,
        "time": round(now, 6),
    }
    if _FIXED.isdisjoint(fields):
        record.update(fields)
    else:
        for key, value in fields.items():
            if key not in record:
                record[key] = value
    if _chunks is not None:
        # Joined once: the C encoder's pieces are usually one already, and
        # then nothing is copied here.
        text = "".join(_chunks(record))
    else:
        text = _encode(record)
    del record
    # A lone surrogate (from bytes decoded with surrogateescape) can't be
    # UTF-8; written as its JSON escape (it only occurs inside strings) the
    # line stays valid UTF-8 JSON and reads back to the same string.
    return text.encode("utf-8", "backslashreplace")


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
