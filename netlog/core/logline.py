"""
The network log's line format: pure functions, no I/O.

A line is one JSON object ending in C{\\n}; see C{docs/log-format.rst}.
"""

from __future__ import annotations

import json
import secrets
from math import isfinite
from typing import Any, Callable, Sequence, Union

import orjson

__all__ = [
    "END",
    "HEAD",
    "MESSAGE",
    "MAX_SPLICED",
    "OPEN",
    "AsciiText",
    "Buffer",
    "decodeLine",
    "parseJSON",
    "encodeLine",
    "encodePieces",
    "encodeRecord",
]

OPEN = "open"
END = "end"
#: A line with an answer's head, for an answer still streaming.
HEAD = "head"
#: A line per WebSocket message.
MESSAGE = "message"

#: The reason written for the exchanges a dead process left open.
REASON_RESTARTED = "the proxy restarted"
#: The reason written for the exchanges still open at a clean stop.
REASON_STOPPED = "the proxy stopped"
#: The reason written for an exchange whose end line could not be kept while
#: the log could not be written (written once it can be again).
REASON_LOG_FAILED = "the log could not be written"

#: What a line's pieces may be: anything C{os.writev} takes.
Buffer = Union[bytes, bytearray, memoryview]
#: The most L{AsciiText} values spliced into one line; past it the line is
#: built whole (a line's pieces must fit one C{writev} with room to spare).
MAX_SPLICED = 4


class AsciiText:
    """
    A string value of a line given as bytes that JSON writes as they are:
    base64 (ASCII letters, digits, C{+}, C{/}, C{=}), which needs no escape.

    L{encodePieces} splices the bytes into the line's pieces instead of
    copying them into one C{str} and again into UTF-8, so a 10 MB body kept
    as 13.3 MB of base64 is held once while its line is written, not three
    times.  Whoever makes one promises the bytes are of that alphabet: they
    are written unchecked.

    @ivar buffer: the bytes (a C{bytes}, C{bytearray} or byte C{memoryview}).
    """

    __slots__ = ("buffer",)

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer

    def __len__(self) -> int:
        return len(self.buffer)

    def __str__(self) -> str:
        return bytes(self.buffer).decode("ascii")

    def __repr__(self) -> str:
        return f"AsciiText({len(self)} bytes)"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, AsciiText):
            return bytes(self.buffer) == bytes(other.buffer)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _plainDefault(value: Any) -> Any:
    """
    Write an L{AsciiText} as the string it is (when it isn't spliced).
    """
    if isinstance(value, AsciiText):
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_encoder = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_plainDefault
)

_Chunks = Callable[[Any, Callable[[Any], Any]], Sequence[str]]


def _chunksWith(encoder: json.JSONEncoder) -> _Chunks | None:
    """
    The C encoder's one-shot call, made without L{json.JSONEncoder.encode}'s
    per-call set-up (its pieces, to be joined), with the C{default} hook
    given per call; L{None} where this Python's C encoder takes other
    arguments or writes something else.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    basestring = getattr(json.encoder, "c_encode_basestring", None)
    if make is None or basestring is None:
        return None

    def chunks(value: Any, default: Callable[[Any], Any]) -> Sequence[str]:
        return make(  # type: ignore[no-any-return]
            {}, default, basestring, None, ":", ",", False, False, False
        )(value, 0)

    # The lone surrogate is made with chr(): mypyc takes none in a literal.
    probe = {"a": [1, 2.5, None, True, "\u00e9\n" + chr(0xDCFF)], "b": {"c": -0.0}}
    try:
        if "".join(chunks(probe, encoder.default)) != encoder.encode(probe):
            return None
    except Exception:
        return None
    return chunks


_chunks = _chunksWith(_encoder)
#: What stands for a spliced value while the line is encoded: ASCII letters
#: and digits (JSON writes them as they are), with a per-process part no
#: field's text can be made to guess; a line where one turns up anyway is
#: built whole instead.
_TOKEN = "netlogSplice" + secrets.token_hex(8) + "n"
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
    then C{fields}.  L{AsciiText} values are written as the strings they are.
    """
    pieces = encodePieces(n, kind, exchangeId, openFrom, now, fields)
    if len(pieces) == 1 and isinstance(pieces[0], bytes):
        return pieces[0]
    return b"".join(pieces)


def encodePieces(
    n: int, kind: str, exchangeId: int, openFrom: int, now: float, fields: dict[str, Any]
) -> list[Buffer]:
    """
    Make one line without its newline, as pieces to be written in order in
    one C{writev}: their bytes together are exactly L{encodeRecord}'s.

    The text around each L{AsciiText} value is encoded as usual; the value's
    own bytes are a piece of their own, never copied.  A line with none is
    one piece.
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
    spliced: list[AsciiText] = []

    def splice(value: Any) -> Any:
        # (Called only for what JSON has no type for.)
        if isinstance(value, AsciiText) and len(spliced) < MAX_SPLICED:
            spliced.append(value)
            return f"{_TOKEN}{len(spliced) - 1}"
        return _plainDefault(value)

    line = _dumps(record, splice)
    if not spliced:
        return [line]
    tokens = [f'"{_TOKEN}{i}"'.encode("ascii") for i in range(len(spliced))]
    if any(line.count(token) != 1 for token in tokens):
        # A field's text is one of the stand-ins (or orjson gave up after
        # splicing and the json module spliced again, numbering on): build
        # the line whole.
        return [_dumps(record, _plainDefault)]
    pieces: list[Buffer] = []
    start = 0
    for token, value in zip(tokens, spliced):
        at = line.index(token, start)
        # The quotes stay with the text around the value.
        pieces.append(line[start:at + 1])
        if len(value.buffer):
            pieces.append(value.buffer)
        start = at + len(token) - 1
    pieces.append(line[start:])
    return pieces


def _dumps(record: dict[str, Any], default: Callable[[Any], Any]) -> bytes:
    """
    A record as UTF-8 JSON, compact, keys in order.

    orjson writes it over ten times faster than the C{json} module (an
    open line's fields: 0.5 µs against 7.4 µs), and calls C{default} only
    for what JSON has no type for; what it refuses, the C{json} module
    writes as it always did: a lone surrogate (from bytes read with
    C{surrogateescape}) as its escape, an integer past 64 bits, a key that
    isn't a string. Numbers read back the same either way; orjson writes
    C{0.00001} where C{json} writes C{1e-05}. It writes C{null} for a NaN or
    an infinity, silently, where C{json} refuses them (JSON has no word for
    them): a line orjson wrote with a C{null} in it is looked through for
    one, at any depth, and a record with one is left to C{json}, which
    refuses it as it always did.
    """
    try:
        line = orjson.dumps(record, default=default)
    except orjson.JSONEncodeError:
        return _utf8(_encodeText(record, default))
    if b"null" in line and not _onlyUnconnected(record, line) and _notFinite(_floats(record)):
        return _utf8(_encodeText(record, default))
    return line


def _onlyUnconnected(record: dict[str, Any], line: bytes) -> bool:
    """
    Whether the line's one C{null} is its C{times.connected} of L{None} (an
    end line's, for a request on a reused connection: most end lines): then
    no float was written as C{null}, and the record needn't be walked.
    """
    times = record.get("times")
    return type(times) is dict and times.get("connected", 0) is None and line.count(b"null") == 1


def _floats(value: Any) -> list[float]:
    """
    The floats a value (a record, or what JSON read) holds, at any depth:
    walked with a list of containers still to look into, one call for the
    whole value (a line's record is walked on every line with a C{null}).
    """
    found: list[float] = []
    kind = type(value)
    if kind is float:
        return [value]
    if kind is not dict and kind is not list and kind is not tuple:
        return found
    todo = [value]
    while todo:
        container = todo.pop()
        for inner in (container.values() if type(container) is dict else container):
            kind = type(inner)
            if kind is float:
                found.append(inner)
            elif kind is dict or kind is list or kind is tuple:
                todo.append(inner)
    return found


def _notFinite(floats: list[float]) -> bool:
    # A sum past the largest float is infinite too: such a record is left
    # to the C{json} module as well, which writes it as it always did.
    return bool(floats) and not isfinite(sum(floats))


def _pastInt64(floats: list[float]) -> bool:
    return bool(floats) and not -_INT64_REACH < max(floats, key=abs) < _INT64_REACH


def _encodeText(record: dict[str, Any], default: Callable[[Any], Any]) -> str:
    if _chunks is not None:
        # Joined once: the C encoder's pieces are usually one already, and
        # then nothing is copied here.
        return "".join(_chunks(record, default))
    return json.JSONEncoder(
        ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=default
    ).encode(record)


def _utf8(text: str) -> bytes:
    # A lone surrogate (from bytes decoded with surrogateescape) can't be
    # UTF-8; written as its JSON escape (it only occurs inside strings) the
    # line stays valid UTF-8 JSON and reads back to the same string.
    return text.encode("utf-8", "backslashreplace")


#: Maps every digit to C{0} and every other byte to C{.}: a line so mapped
#: holds L{_DIGIT_RUN} only where the line has that many digits in a row.
_DIGITS_ONLY = bytes(0x30 if 0x30 <= i <= 0x39 else 0x2E for i in range(256))
#: The fewest digits of an integer orjson can't hold: below -2**63 takes
#: 19, at or above 2**64 takes 20.
_DIGIT_RUN = b"0" * 19
#: The largest line checked for a run of digits before it is read; a longer
#: line's values are looked through once read instead, which costs by the
#: value, not by the byte (a long line is mostly a body's text).
_SCAN_BELOW = 2048
#: Floats at least this far from 0 may be an integer orjson read as a float
#: (every integer it reads as one is outside -2**63 .. 2**64-1).
_INT64_REACH = 2.0**63


def parseJSON(line: bytes) -> Any:
    """
    A line's JSON, exactly what C{json.loads} reads: orjson's reading,
    several times as fast, else the C{json} module's.

    orjson refuses some of what C{json} reads (a lone surrogate, C{NaN},
    C{1e400}, UTF-16), and reads an integer outside -2**63 .. 2**64-1 as a
    float, silently: a line that may hold one (a run of 19 digits, or a
    float that far from 0 once read) is read by C{json}, which keeps every
    integer whole.  Everything else (floats, escapes, a repeated key: the
    last wins) reads the same by both.

    @raise ValueError: it is not JSON.
    """
    short = len(line) < _SCAN_BELOW
    if short and _DIGIT_RUN in line.translate(_DIGITS_ONLY):
        return json.loads(line)
    try:
        value = orjson.loads(line)
    except ValueError:
        return json.loads(line)
    if not short and _pastInt64(_floats(value)):
        return json.loads(line)
    return value


def decodeLine(line: bytes) -> dict[str, Any] | None:
    """
    Read one line (with or without its newline); L{None} if it isn't a line
    netlog can use (not JSON, not an object, no integer C{n}).
    """
    try:
        record = parseJSON(line)
    except ValueError:
        return None
    if not isinstance(record, dict):
        return None
    n = record.get("n")
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return None
    return record
