"""
The HAR 1.2 builder: log lines in, HAR entries out. Pure: no I/O of its own.

How it streams
==============

HAR entries go out in the order their exchanges started (each open line's
C{started}; the open lines come in nearly that order, since a proxy writes
one once the request has gone upstream), but an exchange's end line, which
carries its answer and bodies, comes later, after any number of other lines.
Two ways to join them:

 1. One forward pass that holds each open exchange until its end arrives and
    emits entries in order as the oldest completes. Memory is bounded by the
    exchanges opened since the oldest one still open; but a tunnel or a
    WebSocket stays open for the whole session, and everything after it
    (bodies of up to 1 MB each, since they are in the end lines) would be
    held: memory grows with the log.

 2. Two passes (chosen): the first reads the log once, parsing only each
    line's head (C{n}, C{type}, C{id}: they lead every line netlog writes, so
    a regular expression reads them without parsing the JSON, and an open
    line's C{started}, a few fields further on), and records where each open
    line and each end line lies (L{LineIndex}: machine numbers in arrays,
    about 48 bytes an exchange, and 8 more while open lines out of start
    order are put in it). The second walks the open lines in the
    order they started (L{LineIndex.startOrder}) and reads each one's end
    line at its offset. Memory is the largest entry plus the index, whatever
    stays open; the end lines are read twice, and the second read is almost
    always still in the page cache.

So this module offers L{LineIndex} (fed C{(offset, line)} pairs, or blocks
of lines, in file order), L{joinEntries} (given the index and a
C{readAt(offset, length)} function, yields entries in start order: that is
L{joinLines} over L{exchangeLines}, which an export in parallel cuts into
stretches), L{buildEntry}
(one open line and its end line, parsed, to one HAR entry) and
L{harHead}/L{harTail} (the bytes around the entries). The shell (L{netlog.har.export}) owns the file.

A line the builder can't use (not JSON, cut short, an end with no open, a
second end for an id, an open with an id that isn't its own number, or one
whose fields are of the wrong types) is left out and counted in the log's
C{_unreadable}; it never fails the export.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import json
import math
import re
from array import array
from bisect import bisect_left
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import parse_qsl, quote, unquote_plus, urljoin, urlsplit

import netlog

# Compiled, and only for speed: without it the export writes the same bytes,
# slower (see encodeEntry).
try:
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]

from netlog.core.decoding import (
    FAST_BASE64_MIN,
    REQUEST_LIMIT,
    RESPONSE_LIMIT,
    decodeBase64,
    decodeContent,
    decodeText,
    decodeWrittenBase64,
    isTextType,
    parseCodings,
    parseContentType,
)
from netlog.core.encodings import decode, getEncoding

HAR_VERSION = "1.2"
#: The C{mimeType} of an answer that named none (as Chrome and Playwright write).
UNKNOWN_MIME_TYPE = "x-unknown"

_HEAD = re.compile(rb'\{"n":(\d{1,18}),"type":"(open|end|head|message)","id":(\d{1,18})[,}]')
#: The line types that belong to an open exchange and leave it open.
_NOTES = ("head", "message")
#: An open line's top-level C{started}, matched from the comma after the
#: head: the fields before it must be top-level scalars (as netlog writes
#: them: C{open_from}, C{time}, C{proxy}, C{kind}), so that a C{started}
#: inside an object is never taken for it. Anything else is parsed.
_STARTED = re.compile(
    rb'(?:,"(?!started")[^"\\]*":(?:"[^"\\]*"|[-+.0-9eE]+|null|true|false))*'
    rb',"started":(-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)[,}]'
)
#: What a replay run's end lines say of each answer's source, carried as
#: they are (see C{docs/replay.rst}), and a rule's local answer's
#: (C{docs/rules.rst}), and the upstream proxy's refusal
#: (C{docs/operations.rst}).
_REPLAY_MARKS = ("_replayed", "_replayedCut", "_unmatched", "_forwarded", "_answeredBy", "_answerRule",
                 "_upstreamProxy")
_REPLAY_MARK_SET = frozenset(_REPLAY_MARKS)
#: Ids the index's arrays of end lines grow by at least.
_END_GROWTH = 4096
#: How far into an open line C{started} is looked for before parsing it.
_STARTED_WINDOW = 512

#: Entries are trees built here, never cyclic: no need to check.
_entryEncoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False)


# --- the index (first pass) -------------------------------------------------


class LineIndex:
    """
    Where each open line and each end line lies in the log, by byte offset,
    and when each exchange started, from one pass over its lines. Also
    counts the lines that can't be used (see the module's docstring).
    """

    def __init__(self, first: int = 0) -> None:
        #: the first exchange wanted: end and note lines of earlier ones
        #: (the index began past their open lines) are passed over, not
        #: counted as unreadable
        self.first = first
        #: offsets and lengths of open lines, in file order
        self.openOffsets = array("q")
        self.openLengths = array("q")
        #: the id of each open line, in file order
        self.openIds = array("q")
        #: when each open line's exchange started, in file order: its
        #: C{started} (else its C{time}, as its entry shows it; else the one
        #: before's, so that it keeps its place)
        self.openStarts = array("d")
        self._latestStart = -math.inf
        self._disordered = False
        # end lines by id: dense ids (the usual case: ids are line numbers)
        # in arrays indexed by id - base, the rest in a dict.
        self._base: int | None = None
        self._endOffsets = array("q")
        self._endLengths = array("q")
        self._sparse: dict[int, tuple[int, int]] = {}
        # 1 at id - base for each open's id, for ids up to the last open
        # whose id wasn't far past the one before (else openIds answers)
        self._opened = bytearray()
        #: more end lines for an id that had one (tried in turn if the first
        #: can't be read)
        self.extraEnds: dict[int, list[tuple[int, int]]] = {}
        #: head and message lines by exchange id: offset, length, offset, ...
        self.notes: dict[int, array] = {}
        self.unreadable = 0
        self.lines = 0

    def add(self, offset: int, line: bytes) -> None:
        """
        Take the next line (with its newline, if it had one) at C{offset}.
        """
        self.lines += 1
        if not line.endswith(b"\n"):
            # the last line of the file, cut short (or still being written)
            self.unreadable += 1
            return
        m = _HEAD.match(line)
        started: float | None = None
        if m is not None:
            n, isOpen, exchangeId = int(m.group(1)), m.group(2) == b"open", int(m.group(3))
            if m.group(2) in (b"head", b"message"):
                self._addNote(offset, len(line), exchangeId)
                return
            if isOpen:
                started = self._startedIn(line, 0, len(line), m.end() - 1)
        else:
            try:
                record = json.loads(line)
                n, kind, exchangeId = record["n"], record["type"], record["id"]
                if not (_isInt(n) and _isInt(exchangeId) and kind in ("open", "end", "head", "message")):
                    raise TypeError
                isOpen = kind == "open"
                if kind in _NOTES:
                    self._addNote(offset, len(line), exchangeId)
                    return
            except (ValueError, TypeError, KeyError, RecursionError):
                self.unreadable += 1
                return
            if isOpen:
                started = _startOf(record)
        self._take(offset, len(line), n, isOpen, exchangeId, started)

    @staticmethod
    def _startedIn(data: bytes | bytearray, start: int, end: int, after: int) -> float | None:
        """
        The C{started} of the open line at C{data[start:end]}, whose head
        ends at C{after}: read in place for a line as netlog writes it, else
        from the parsed line.
        """
        found = _STARTED.match(data, after, min(end, start + _STARTED_WINDOW))
        if found is not None:
            value = float(found.group(1))
            if value == value:  # not a NaN
                return value
        return _startOf(_parse(bytes(data[start:end])))

    def addLines(self, offset: int, data: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
        """
        Take every whole line in C{data[start:end]}, C{data} lying at
        C{offset} in the log: the same as L{add} for each, without copying
        the lines out. Returns where the lines taken end in C{data} (after
        the last newline); the rest is the start of a line not yet whole.
        """
        scanned, taken = scanLines(offset, data, start, end)
        self.addScanned(scanned)
        return taken

    def addScanned(self, scanned: ScannedLines) -> None:
        """
        Take the lines L{scanLines} read, in order: the same as L{add} for
        each.
        """
        takeOpen, takeEnd, addNote = self._takeOpen, self._takeEnd, self._addNote
        others = iter(scanned.others)
        # (iter: mypyc can't zip a bytearray as it is)
        for kind, offset, length, n, exchangeId, started in zip(
            iter(scanned.kinds), scanned.offsets, scanned.lengths, scanned.numbers, scanned.ids, scanned.starts
        ):
            if kind == SCANNED_END:
                takeEnd(offset, length, exchangeId)
            elif kind == SCANNED_OPEN:
                takeOpen(offset, length, n, exchangeId, started)
            elif kind == SCANNED_NOTE:
                addNote(offset, length, exchangeId)
            else:
                self.add(offset, next(others))
        self.lines += len(scanned.kinds) - len(scanned.others)

    def _take(self, offset: int, length: int, n: int, isOpen: bool, exchangeId: int, started: float | None) -> None:
        if isOpen:
            self._takeOpen(offset, length, n, exchangeId, started)
        else:
            self._takeEnd(offset, length, exchangeId)

    def _takeOpen(self, offset: int, length: int, n: int, exchangeId: int, started: float | None) -> None:
        openIds = self.openIds
        # numbers only grow in a log; an open that doesn't follow the
        # last one is a repeat or out of place
        if exchangeId != n or (openIds and exchangeId <= openIds[-1]):
            self.unreadable += 1
            return
        if self._base is None:
            self._base = exchangeId
        self.openOffsets.append(offset)
        self.openLengths.append(length)
        openIds.append(exchangeId)
        if started is None or started != started:
            # no time to place it by: it keeps its place after the one before
            started = self.openStarts[-1] if self.openStarts else -math.inf
        self.openStarts.append(started)
        if started < self._latestStart:
            self._disordered = True
        else:
            self._latestStart = started
        opened = self._opened
        gap = exchangeId - self._base - len(opened)
        if gap <= len(opened) + 65536:
            if gap:
                opened.extend(bytes(gap))
            opened.append(1)

    def _takeEnd(self, offset: int, length: int, exchangeId: int) -> None:
        base = self._base
        slot = exchangeId - base if base is not None else -1
        if 0 <= slot < len(self._opened):
            isOpen = self._opened[slot] == 1
        else:
            openIds = self.openIds
            i = bisect_left(openIds, exchangeId)
            isOpen = i < len(openIds) and openIds[i] == exchangeId
        if not isOpen:
            if exchangeId >= self.first:
                self.unreadable += 1
            return
        endOffsets = self._endOffsets
        if 0 <= slot < len(endOffsets) and endOffsets[slot] < 0 and not self._sparse:
            # the first end of an exchange in the dense arrays (L{endOf}
            # finds none): what _addEnd does, without asking
            endOffsets[slot] = offset
            self._endLengths[slot] = length
        else:
            self._addEnd(exchangeId, offset, length)

    def _isOpened(self, exchangeId: int) -> bool:
        if self._base is not None and 0 <= exchangeId - self._base < len(self._opened):
            return self._opened[exchangeId - self._base] == 1
        i = bisect_left(self.openIds, exchangeId)
        return i < len(self.openIds) and self.openIds[i] == exchangeId

    def _addNote(self, offset: int, length: int, exchangeId: int) -> None:
        """
        A head or message line: kept for its exchange, if it was opened and
        hasn't ended (netlog writes none after the end).
        """
        if not self._isOpened(exchangeId) or self.endOf(exchangeId) is not None:
            if exchangeId >= self.first:
                self.unreadable += 1
            return
        notes = self.notes.get(exchangeId)
        if notes is None:
            notes = self.notes[exchangeId] = array("q")
        notes.append(offset)
        notes.append(length)

    def _addEnd(self, exchangeId: int, offset: int, length: int) -> None:
        if self.endOf(exchangeId) is not None:
            self.extraEnds.setdefault(exchangeId, []).append((offset, length))
            return
        assert self._base is not None
        slot = exchangeId - self._base
        if 0 <= slot < len(self._endOffsets):
            self._endOffsets[slot] = offset
            self._endLengths[slot] = length
        elif len(self._endOffsets) <= slot <= 2 * len(self._endOffsets) + 65536:
            # grown by a stretch of ids at a time: none of them has an end
            grow = array("q", (-1,)) * max(slot + 1 - len(self._endOffsets), _END_GROWTH)
            self._endOffsets.extend(grow)
            self._endLengths.extend(grow)
            self._endOffsets[slot] = offset
            self._endLengths[slot] = length
        else:
            self._sparse[exchangeId] = (offset, length)

    def endOf(self, exchangeId: int) -> tuple[int, int] | None:
        """
        C{(offset, length)} of the first end line for C{exchangeId}, if any.
        """
        if self._base is not None:
            slot = exchangeId - self._base
            if 0 <= slot < len(self._endOffsets):
                offset = self._endOffsets[slot]
                if offset >= 0:
                    return offset, self._endLengths[slot]
        return self._sparse.get(exchangeId)

    def __len__(self) -> int:
        return len(self.openIds)

    def startOrder(self) -> Iterator[int]:
        """
        The positions of the open lines (indexes into L{openIds} and its
        peers) in the order their exchanges started: sorted by
        L{openStarts}, stably (a tie keeps the log's order).

        Open lines come nearly in that order, so this moves only what must
        move: a position before which every start is no later and after
        which none is earlier stays where it is, and each run of positions
        between two such is sorted on its own. Memory: what those runs hold
        (nothing when the log is in order).
        """
        starts = self.openStarts
        count = len(starts)
        if not self._disordered:
            return iter(range(count))
        return self._reordered(starts, count)

    @staticmethod
    def _reordered(starts: array, count: int) -> Iterator[int]:
        # the earliest start from each position on: a position stays when
        # its start is no later than any after it and no earlier than any
        # before it
        earliestAfter = array("d", starts)
        for i in range(count - 2, -1, -1):
            if earliestAfter[i + 1] < earliestAfter[i]:
                earliestAfter[i] = earliestAfter[i + 1]
        latest = -math.inf
        runStart = -1
        for i in range(count):
            start = starts[i]
            stays = start >= latest and start == earliestAfter[i]
            if start > latest:
                latest = start
            if stays:
                if runStart >= 0:
                    yield from sorted(range(runStart, i), key=starts.__getitem__)
                    runStart = -1
                yield i
            elif runStart < 0:
                runStart = i
        if runStart >= 0:
            yield from sorted(range(runStart, count), key=starts.__getitem__)


#: What L{scanLines} found a line to be: an open, an end, a head or message
#: line, or one whose head isn't as netlog writes it (taken by L{LineIndex.add}).
SCANNED_OPEN, SCANNED_END, SCANNED_NOTE, SCANNED_OTHER = range(4)


class ScannedLines:
    """
    The heads of a stretch of the log's lines, in order, as L{scanLines}
    read them where they lie, for L{LineIndex.addScanned}: machine numbers
    in arrays (a process reading one stretch hands them to the one that
    indexes, cheaply), each line's kind, offset, length, number, id and
    (an open line's) start, NaN for none; a line read otherwise, whole in
    C{others}.
    """

    __slots__ = ("kinds", "offsets", "lengths", "numbers", "ids", "starts", "others")

    def __init__(self) -> None:
        self.kinds = bytearray()
        self.offsets = array("q")
        self.lengths = array("q")
        self.numbers = array("q")
        self.ids = array("q")
        self.starts = array("d")
        self.others: list[bytes] = []

    def extend(self, more: ScannedLines) -> None:
        """
        Add the lines C{more} holds, read after these.
        """
        self.kinds.extend(more.kinds)
        self.offsets.extend(more.offsets)
        self.lengths.extend(more.lengths)
        self.numbers.extend(more.numbers)
        self.ids.extend(more.ids)
        self.starts.extend(more.starts)
        self.others.extend(more.others)


def scanLines(offset: int, data: bytes | bytearray, start: int = 0,
              end: int | None = None) -> tuple[ScannedLines, int]:
    """
    Read the head of every whole line in C{data[start:end]}, C{data} lying
    at C{offset} in the log (the first pass's reading, without its
    bookkeeping: see L{LineIndex.addScanned}); and where the lines read end
    in C{data} (after the last newline): the rest is the start of a line
    not yet whole.
    """
    scanned = ScannedLines()
    kinds, offsets, lengths, numbers, ids, starts = (
        scanned.kinds, scanned.offsets, scanned.lengths, scanned.numbers, scanned.ids, scanned.starts)
    stop = len(data) if end is None else end
    find = data.find
    match = _HEAD.match
    started = _STARTED.match
    nan = math.nan
    while True:
        nl = find(b"\n", start, stop)
        if nl < 0:
            break
        lineEnd = nl + 1
        m = match(data, start, lineEnd)
        offsets.append(offset + start)
        lengths.append(lineEnd - start)
        if m is None:
            # the rare line whose head isn't as netlog writes it
            kinds.append(SCANNED_OTHER)
            numbers.append(0)
            ids.append(0)
            starts.append(nan)
            scanned.others.append(bytes(data[start:lineEnd]))
        else:
            n, kind, exchangeId = m.groups()
            numbers.append(int(n))
            ids.append(int(exchangeId))
            if kind == b"end":
                kinds.append(SCANNED_END)
                starts.append(nan)
            elif kind == b"open":
                kinds.append(SCANNED_OPEN)
                s = started(data, m.end() - 1, min(lineEnd, start + _STARTED_WINDOW))
                value = float(s.group(1)) if s is not None else LineIndex._startedIn(data, start, lineEnd, m.end() - 1)
                starts.append(nan if value is None else value)
            else:
                kinds.append(SCANNED_NOTE)
                starts.append(nan)
        start = lineEnd
    return scanned, start


def _isInt(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _startOf(record: dict[str, Any] | None) -> float | None:
    """
    When a parsed open line's exchange started, as L{buildEntry} shows it
    (its C{started}, else its C{time}), or L{None}.
    """
    if record is None:
        return None
    started = _num(record.get("started"))
    if started is None:
        started = _num(record.get("time"))
    if started is None or started != started:
        return None
    return started


#: What C{json.loads} calls for its object, called directly for lines netlog wrote.
_rawDecode = json.JSONDecoder().raw_decode
_JSON_SPACE = " \t\n\r"


def _parse(line: bytes) -> dict[str, Any] | None:
    """
    A line's JSON object, or L{None}: what C{json.loads} gives, without its
    checks of the encoding and the leading space for a line that begins as
    netlog's lines do (C{{"}: UTF-8, as C{json.loads} would read it).
    """
    if line[:2] != b'{"':
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            return None
        return record if isinstance(record, dict) else None
    return _parseText(line)


#: Bytes to C{0} for a digit, else a space: a run of L{_LONG_DIGITS} in a
#: line so translated may be an integer orjson can't hold.
_DIGITS = bytes(0x30 if 0x30 <= b <= 0x39 else 0x20 for b in range(256))
#: orjson reads an integer of 19 digits or more past 64 bits as a float, where
#: C{json} keeps it whole: a line with such a run of digits anywhere is left
#: to C{json}.
_LONG_DIGITS = b"0" * 19


def _parseText(line: bytes) -> dict[str, Any] | None:
    if orjson is not None and line.translate(_DIGITS).find(_LONG_DIGITS) < 0:
        # orjson gives what json.loads gives, three times faster, for what
        # it reads; what it refuses (NaN, an infinity, lone surrogates,
        # nesting past 1024) the json module reads, or refuses, as before
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            pass
        else:
            return record if isinstance(record, dict) else None
    try:
        text = line.decode("utf-8", "surrogatepass")
        record, end = _rawDecode(text)
    except (ValueError, RecursionError):
        return None
    if end != len(text) and text[end:].strip(_JSON_SPACE):
        return None  # more after the object
    return record if isinstance(record, dict) else None


#: A string in an end line at least this long that follows L{_DATA_KEY} is
#: looked at as a body's base64 (see L{_parseEnd}); a shorter one is parsed
#: with the rest (the json module reads it faster than it is cut out).
_CUT_MIN = FAST_BASE64_MIN
#: What precedes a body's base64 in an end line.
_DATA_KEY = b'"data":"'
#: The most bodies an end line has (the request's and the answer's).
_MAX_CUTS = 2
#: What the I{i}th body's base64 is replaced with in the line parsed
#: without it: a string that only a C{\\u0000} can give.
_PLACEHOLDER = b"\\u0000%d"
_PLACEHOLDERS = tuple("\x00%d" % i for i in range(_MAX_CUTS))


class _Base64Data:
    """
    A body's C{data} from an end line, decoded where it lay in the line
    (L{_parseEnd}); L{_b64} gives it as it is.
    """

    __slots__ = ("decoded",)

    def __init__(self, decoded: bytes) -> None:
        self.decoded = decoded


def _parseEnd(line: bytes) -> dict[str, Any] | None:
    """
    An end line's JSON object, as L{_parse} gives it, but for its bodies'
    C{data} (C{request_body} and C{response}'s C{body}), which is an
    L{_Base64Data} when it is base64 as netlog writes it.

    Parsing 100 KB of base64 into a string, to decode it from the string,
    costs more than the rest of the entry: so each long string after
    L{_DATA_KEY} that is such base64 is decoded where it lies, and the line
    parsed with a placeholder in its place. Base64's characters need no
    escape, so the line parses the same with or without them; a
    placeholder found anywhere but at a body's C{data} (a damaged line, a
    key given twice), or the line not parsing, and the line is parsed
    whole, as before.
    """
    if len(line) < _CUT_MIN:
        return _parse(line)
    cuts: list[tuple[int, int, bytes]] = []
    at = 0
    while len(cuts) < _MAX_CUTS:
        found = line.find(_DATA_KEY, at)
        if found < 0:
            break
        start = found + len(_DATA_KEY)
        end = line.find(b'"', start)
        if end < 0:
            break
        at = end + 1
        if end - start >= _CUT_MIN:
            decoded = decodeWrittenBase64(line, start, end)
            if decoded is not None:
                cuts.append((start, end, decoded))
    if not cuts:
        return _parse(line)
    pieces: list[bytes] = []
    last = 0
    for i, (start, end, _) in enumerate(cuts):
        pieces += (line[last:start], _PLACEHOLDER % i)
        last = end
    pieces.append(line[last:])
    rest = b"".join(pieces)
    # the placeholders are told apart only if the line has no \u0000 of its own
    record = _parse(rest) if rest.count(b"\\u0000") == len(cuts) else None
    if record is None:
        return _parse(line)
    placed = 0
    response = record.get("response")
    for body in (record.get("request_body"), response.get("body") if isinstance(response, dict) else None):
        if isinstance(body, dict):
            data = body.get("data")
            if data in _PLACEHOLDERS[: len(cuts)]:
                body["data"] = _Base64Data(cuts[_PLACEHOLDERS.index(data)][2])
                placed += 1
    return record if placed == len(cuts) else _parse(line)


class JoinStats:
    """
    What the second pass couldn't use, added to the index's count.
    """

    def __init__(self) -> None:
        self.unreadable = 0


#: Where an exchange's lines lie: its open line's C{(offset, length)}, its
#: end lines' (none while it is open; more than one only in a damaged log,
#: tried in turn), and its head and message lines' in order.
ExchangeLines = tuple[int, int, tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]]


def exchangeLines(index: LineIndex) -> Iterator[ExchangeLines]:
    """
    Where each exchange's lines lie, in the order the exchanges started.
    """
    extraEnds = index.extraEnds
    openIds, openOffsets, openLengths = index.openIds, index.openOffsets, index.openLengths
    for i in index.startOrder():
        exchangeId = openIds[i]
        end = index.endOf(exchangeId)
        if end is None:
            ends: tuple[tuple[int, int], ...] = ()
        elif exchangeId in extraEnds:
            ends = (end, *extraEnds[exchangeId])
        else:
            ends = (end,)
        noted = index.notes.get(exchangeId)
        notes = tuple(zip(noted[0::2], noted[1::2])) if noted is not None else ()
        yield openOffsets[i], openLengths[i], ends, notes


def joinEntries(
    index: LineIndex, readAt: Callable[[int, int], bytes], stats: JoinStats | None = None
) -> Iterator[dict[str, Any]]:
    """
    The HAR entries, in the order the exchanges started.

    @param readAt: C{readAt(offset, length)} returns the log's bytes there.
    @param stats: counts the lines found unusable on the way.
    """
    return joinLines(exchangeLines(index), readAt, stats)


def joinLines(
    exchanges: Iterable[ExchangeLines], readAt: Callable[[int, int], bytes], stats: JoinStats | None = None
) -> Iterator[dict[str, Any]]:
    """
    The HAR entries of exchanges whose lines lie where L{exchangeLines} says:
    the second pass, on all of them or (an export in parallel) a stretch.

    @param readAt: C{readAt(offset, length)} returns the log's bytes there.
    @param stats: counts the lines found unusable on the way.
    """
    stats = stats if stats is not None else JoinStats()
    for opened, ended, notes in joinRecords(exchanges, readAt, stats):
        try:
            yield buildEntry(opened, ended, notes)
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError, RecursionError):
            stats.unreadable += 1 + (1 if ended is not None else 0)


def joinRecords(
    exchanges: Iterable[ExchangeLines], readAt: Callable[[int, int], bytes], stats: JoinStats
) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None, list[dict[str, Any]]]]:
    """
    Each exchange's lines parsed: its open line, its end line (L{None}
    while it is open) and its head and message lines, for a builder of
    entries (the HAR's, the WARC's) to turn into its own.
    """
    for openOffset, openLength, ends, noteLines in exchanges:
        opened = _parse(readAt(openOffset, openLength))
        if opened is None:
            stats.unreadable += 1 + len(ends)
            continue
        ended = None
        for offset, length in ends:
            if ended is None:
                ended = _parseEnd(readAt(offset, length))
                if ended is None:
                    stats.unreadable += 1
            else:
                # a second end for the same id (never written by netlog)
                stats.unreadable += 1
        notes: list[dict[str, Any]] = []
        for offset, length in noteLines:
            note = _parse(readAt(offset, length))
            if note is None:
                stats.unreadable += 1
            else:
                notes.append(note)
        yield opened, ended, notes


def entriesFromLines(lines: list[bytes], stats: JoinStats | None = None) -> tuple[list[dict[str, Any]], int]:
    """
    Every entry of a log given whole, in memory, and the count of lines that
    couldn't be used: for tests and small logs.
    """
    index = LineIndex()
    blob = bytearray()
    for line in lines:
        index.add(len(blob), line)
        blob += line
    data = bytes(blob)
    stats = stats if stats is not None else JoinStats()
    entries = list(joinEntries(index, lambda o, n: data[o : o + n], stats))
    return entries, index.unreadable + stats.unreadable


# --- the log around the entries ----------------------------------------------


def harHead() -> bytes:
    """
    The HAR's bytes before its first entry.
    """
    creator = _entryEncoder.encode({"name": "netlog", "version": netlog.__version__})
    return ('{"log":{"version":"%s","creator":%s,"entries":[' % (HAR_VERSION, creator)).encode("utf-8")


def harTail(unreadable: int) -> bytes:
    """
    The HAR's bytes after its last entry.
    """
    return ('],"_unreadable":%d}}\n' % unreadable).encode("utf-8")


def encodeEntry(entry: dict[str, Any]) -> bytes:
    """
    One entry as UTF-8 JSON (lone surrogates, which JSON can't carry to a
    strict reader, become C{?}).

    orjson writes the same bytes as the C{json} module, three to five times
    faster, for what L{buildEntry} makes, but for floats: it writes
    C{0.00001} for C{1e-05} and C{null} for an infinity, where C{json}
    writes C{1e-05} and refuses. So orjson is used only when the entry's
    floats are written alike (L{_floatsAgree}), and C{json} for the rest
    and for what orjson refuses (lone surrogates, integers past 64 bits,
    deep nesting).
    """
    if orjson is not None and _floatsAgree(entry):
        try:
            return orjson.dumps(entry)
        except TypeError:
            pass
    return _entryEncoder.encode(entry).encode("utf-8", "replace")


def _floatsAgree(entry: dict[str, Any]) -> bool:
    try:
        return _entryFloatsAgree(entry)
    except RecursionError:
        # an _id nested deeper than Python recurses: the json module
        # (which recurses in C) writes it, as it did
        return False


def _entryFloatsAgree(entry: dict[str, Any]) -> bool:
    """
    Whether orjson writes every float of an entry as C{json} does. An
    entry's floats are where L{buildEntry} puts them (C{time}, C{timings})
    and whatever the log's C{id} held (C{_id}, an integer in any line
    netlog wrote): only those are looked at.
    """
    timings = entry.get("timings")
    for value in (entry.get("time"), *timings.values()) if isinstance(timings, dict) else (entry.get("time"),):
        # what _floatAgrees says, without a call for each float in range
        if type(value) is float and not (1e-4 <= abs(value) < 1e16 or value == 0.0) and not _floatAgrees(value):
            return False
    exchangeId = entry.get("_id")
    return type(exchangeId) is int or exchangeId is None or _allFloatsAgree(exchangeId)


def _floatAgrees(value: object) -> bool:
    if type(value) is not float:
        return True
    # both write the shortest digits that read back; they differ only in
    # when they use an exponent (json: below 1e-4 and from 1e16 on)
    if 1e-4 <= abs(value) < 1e16 or value == 0.0:
        return True
    return orjson is not None and value == value and repr(value).encode() == orjson.dumps(value)


def _allFloatsAgree(value: object) -> bool:
    if isinstance(value, dict):
        return all(_allFloatsAgree(v) for v in value.values())
    if isinstance(value, list):
        return all(_allFloatsAgree(v) for v in value)
    return _floatAgrees(value)


# --- one entry -----------------------------------------------------------------


def isoTime(seconds: float) -> str:
    """
    ISO 8601 in UTC with milliseconds, as HAR writes times; a time before
    the epoch or past year 9999 (only in a damaged line) is held to them.
    """
    seconds = min(max(seconds, 0.0), _LAST_SECOND)
    whole = int(seconds // 1)
    millis = round((seconds - whole) * 1000)
    if millis >= 1000:
        whole, millis = whole + 1, millis - 1000
    second = _ISO_SECONDS.get(whole)
    if second is None:
        second = _isoSecond(whole)
    return second + _MILLIS[millis]


#: 9999-12-31T23:59:59Z: the last time ISO 8601's four-digit years hold.
_LAST_SECOND = 253402300799.0
#: Each millisecond's end of an ISO time, from C{.000Z} to C{.999Z}.
_MILLIS = [".%03dZ" % millis for millis in range(1000)]
#: The seconds last written (a log's times come in order, or nearly), by
#: seconds since the epoch; emptied when it reaches L{_ISO_SECONDS_KEPT}.
_ISO_SECONDS: dict[int, str] = {}
_ISO_SECONDS_KEPT = 1024


def _isoSecond(whole: int) -> str:
    day, second = divmod(whole, 86400)
    hour, second = divmod(second, 3600)
    minute, second = divmod(second, 60)
    written = "%sT%02d:%02d:%02d" % (_isoDay(day), hour, minute, second)
    if len(_ISO_SECONDS) >= _ISO_SECONDS_KEPT:
        _ISO_SECONDS.clear()
    _ISO_SECONDS[whole] = written
    return written


@lru_cache(maxsize=256)
def _isoDay(day: int) -> str:
    # UTC has no leap seconds in POSIX time: a day is 86,400 of them
    return datetime.fromtimestamp(day * 86400, timezone.utc).strftime("%Y-%m-%d")


def _num(v: object) -> float | None:
    t = type(v)
    if t is float:
        return v  # type: ignore[return-value]
    if t is int or (isinstance(v, (int, float)) and not isinstance(v, bool)):
        return float(v)  # type: ignore[arg-type]
    return None


def _int(v: object, default: int = -1) -> int:
    if type(v) is int or (isinstance(v, int) and not isinstance(v, bool)):
        return v  # type: ignore[return-value]
    return default


#: The log's protocol versions as Playwright's recorder writes them in a HAR
#: (the log names HTTP/2 as the wire does).
HAR_VERSIONS = {"HTTP/2": "HTTP/2.0"}


def _harVersion(version: object) -> str:
    if not isinstance(version, str):
        return "HTTP/1.1"
    return HAR_VERSIONS.get(version, version)


def asPlaywrightShowsH2(headers: list[dict[str, str]]) -> list[dict[str, str]]:
    """
    An HTTP/2 message's fields as Playwright's recorder shows them: sorted
    by name (Chromium hands them over so), and the request's cookie crumbs
    (which HTTP/2 sends as separate fields) one C{cookie} again, joined by
    C{"; "} as RFC 9113 8.2.3 joins them for HTTP/1.1.
    """
    crumbs = [h["value"] for h in headers if h["name"] == "cookie"]
    if len(crumbs) > 1:
        headers = [h for h in headers if h["name"] != "cookie"] + [{"name": "cookie", "value": "; ".join(crumbs)}]
    return sorted(headers, key=lambda h: h["name"])


def _pairs(headers: object) -> list[dict[str, str]]:
    """
    C{[name, value]} pairs as HAR's C{{name, value}}; pairs that aren't two
    strings are made strings or left out.
    """
    if not isinstance(headers, list):
        return []
    try:
        out = [{"name": n, "value": v} for n, v in headers]
    except (TypeError, ValueError):
        pass
    else:
        for h in out:
            if type(h["name"]) is not str or type(h["value"]) is not str:
                break
        else:
            return out
    out = []
    for pair in headers:
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            out.append({"name": str(pair[0]), "value": str(pair[1])})
    return out


def _header(headers: list[dict[str, str]], name: str) -> str | None:
    for h in headers:
        if h["name"].lower() == name:
            return h["value"]
    return None


def _requestCookies(headers: list[dict[str, str]]) -> list[dict[str, Any]]:
    cookies: list[dict[str, Any]] = []
    for h in headers:
        if h["name"].lower() == "cookie":
            cookies += [{"name": name, "value": value} for name, value in _cookiePairs(h["value"])]
    return cookies


#: Distinct header values whose parse is kept: a browser sends the same
#: C{Cookie} and C{Set-Cookie} values, and the same queries, over and over.
_PARSE_CACHE = 512


@lru_cache(maxsize=_PARSE_CACHE)
def _cookiePairs(header: str) -> tuple[tuple[str, str], ...]:
    """
    The C{(name, value)} pairs of a C{Cookie} value (kept as tuples: each
    entry gets dicts of its own).
    """
    pairs = []
    for piece in header.split(";"):
        piece = piece.strip()
        if not piece:
            continue
        name, eq, value = piece.partition("=")
        pairs.append((name.strip(), value.strip() if eq else ""))
    return tuple(pairs)


def responseCookie(header: str, received: float | None) -> dict[str, Any] | None:
    """
    One C{Set-Cookie} value as a HAR cookie: the value as sent, C{expires} in
    ISO 8601 (C{Max-Age} turned into an absolute time from C{received}, and
    winning over C{Expires} as RFC 6265 says).
    """
    parsed = _setCookie(header)
    if parsed is None:
        return None
    fields, expires, maxAges = parsed
    cookie = dict(fields)
    maxAge: str | None = None
    if received is not None:
        for value in maxAges:
            seconds = int(value)
            if seconds <= 0:
                maxAge = isoTime(0)
            else:
                try:
                    maxAge = isoTime(received + min(seconds, 400 * 86400 * 100))
                except (OverflowError, ValueError, OSError):
                    maxAge = None
    if maxAge is not None:
        cookie["expires"] = maxAge
    elif expires is not None:
        cookie["expires"] = expires
    cookie.setdefault("httpOnly", False)
    cookie.setdefault("secure", False)
    return cookie


@lru_cache(maxsize=_PARSE_CACHE)
def _setCookie(header: str) -> tuple[dict[str, Any], str | None, tuple[str, ...]] | None:
    """
    What a C{Set-Cookie} value says whatever its time of arrival: the
    cookie's fields up to C{expires}, in order (L{responseCookie} copies
    them), C{Expires} as ISO 8601, and the C{Max-Age} values (digits) in
    order; L{None} for a value with no C{=}.
    """
    parts = header.split(";")
    name, eq, value = parts[0].partition("=")
    if not eq:
        return None
    cookie: dict[str, Any] = {"name": name.strip(), "value": value.strip()}
    expires: str | None = None
    maxAges: list[str] = []
    for attr in parts[1:]:
        key, _, val = attr.partition("=")
        key = key.strip().lower()
        val = val.strip()
        if key == "path":
            cookie["path"] = val
        elif key == "domain":
            cookie["domain"] = val
        elif key == "expires":
            expires = _httpDate(val)
        elif key == "max-age":
            if _MAX_AGE.fullmatch(val):
                maxAges.append(val)
        elif key == "httponly":
            cookie["httpOnly"] = True
        elif key == "secure":
            cookie["secure"] = True
        elif key == "samesite":
            cookie["_sameSite"] = val
    return cookie, expires, tuple(maxAges)


_MAX_AGE = re.compile(r"-?\d+")


def _httpDate(value: str) -> str | None:
    try:
        t = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if t is None:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    t = t.astimezone(timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (t.microsecond // 1000)


def _queryString(url: str) -> list[dict[str, str]]:
    """
    The query's names and values, decoded as URLSearchParams does (C{+} a
    space, percent escapes as UTF-8).
    """
    start = url.find("?")
    if start < 0:
        return []
    end = url.find("#", start)
    query = url[start + 1 :] if end < 0 else url[start + 1 : end]
    return [{"name": name, "value": value} for name, value in _queryPairs(query)]


@lru_cache(maxsize=_PARSE_CACHE)
def _queryPairs(query: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for piece in query.split("&"):
        if not piece:
            continue
        name, _, value = piece.partition("=")
        if "%" in name or "+" in name:
            name = unquote_plus(name)
        if "%" in value or "+" in value:
            value = unquote_plus(value)
        pairs.append((name, value))
    return tuple(pairs)


def _bareHostUrl(method: str, url: str, server: dict[str, Any]) -> str:
    """
    The absolute URL of a request: as the log has it when absolute; a bare
    host (a refusal's) becomes C{https://host:port/} for a CONNECT (port 443
    when none was given), else C{http://host/}.
    """
    if "://" in url:
        return url
    authority = url.strip().strip("/") or str(server.get("host") or "")
    if not authority:
        return url
    host, port = _splitAuthority(authority)
    if port is None and _int(server.get("port"), 0) > 0 and not url.strip():
        port = server["port"]
    if method.upper() == "CONNECT":
        return "https://%s:%d/" % (host, port or 443)
    if port and port != 80:
        return "http://%s:%d/" % (host, port)
    return "http://%s/" % host


#: Characters a URI may hold as they are (RFC 3986); the rest are escaped.
_URI_SAFE = ":/?#[]@!$&'()*+,;=%~-._"
#: The host of a URL the log gave no host for.
UNKNOWN_HOST = "unknown.invalid"


def _safeUrl(url: str) -> str:
    """
    A URL the HAR schema (and any URI parser) accepts: characters a URI
    can't hold as they are (spaces, quotes, non-ASCII) percent-escaped, in
    Latin-1 when they fit (the log decodes request bytes as Latin-1, so this
    gives back the bytes sent), else UTF-8; a URL with no host gets
    C{unknown.invalid}.
    """
    if "://" not in url:
        url = "http://%s/" % UNKNOWN_HOST
    if url.isascii() and not _URI_UNSAFE.search(url):
        return url
    try:
        return quote(url, safe=_URI_SAFE, encoding="latin-1", errors="strict")
    except UnicodeEncodeError:
        return quote(url, safe=_URI_SAFE, encoding="utf-8", errors="replace")


_URI_UNSAFE = re.compile(r'[\x00-\x20"<>\\^`{|}\x7f]')


def _splitAuthority(authority: str) -> tuple[str, int | None]:
    if authority.startswith("["):
        close = authority.find("]")
        host, rest = authority[: close + 1], authority[close + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port = authority.rpartition(":") if authority.count(":") == 1 else (authority, "", "")
    return host, int(port) if port.isdigit() else None


def _serverAddress(server: dict[str, Any]) -> str | None:
    address = server.get("address")
    if not isinstance(address, str) or not address:
        return None
    return _bareAddress(address)


@lru_cache(maxsize=1024)
def _bareAddress(address: str) -> str | None:
    candidate = address.strip("[]")
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        pass
    # "1.2.3.4:80" or "[::1]:80": keep the address alone
    host, _ = _splitAuthority(address)
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


def _times(ended: dict[str, Any]) -> dict[str, Any]:
    times = ended.get("times")
    return times if isinstance(times, dict) else {}


def _timings(opened: dict[str, Any], ended: dict[str, Any] | None) -> tuple[dict[str, float], float | int]:
    """
    HAR's timings in milliseconds from the log's times, and their sum. Each
    phase runs from the previous time that happened to its own; a phase whose
    end never happened is 0 (send, wait, receive) or -1 (connect).
    """
    if ended is None:
        return dict(_NO_TIMINGS), 0
    last = _num(opened.get("started")) or _num(opened.get("time")) or 0.0
    times = ended.get("times")
    if not isinstance(times, dict):
        times = {}
    # an int until a time says otherwise (and the sum of none the int 0):
    # compiled, a float annotation would write them -1.0 and 0.0
    connect: float | int = -1
    connected = _num(times.get("connected"))
    if connected is not None:
        connect = _thousandths(max(0.0, connected - last) * 1000)
        last = max(last, connected)
    send = wait = receive = 0.0
    t = _num(times.get("sent"))
    if t is not None and t > last:
        send = _thousandths((t - last) * 1000)
        last = t
    t = _num(times.get("first_byte"))
    if t is not None and t > last:
        wait = _thousandths((t - last) * 1000)
        last = t
    t = _num(times.get("end"))
    if t is None:
        t = _num(ended.get("ended"))
    if t is not None and t > last:
        receive = _thousandths((t - last) * 1000)
    timings = {"blocked": -1, "dns": -1, "connect": connect, "send": send, "wait": wait, "receive": receive, "ssl": -1}
    total = _thousandths(max(connect, 0) + send + wait + receive)
    return timings, total


def _thousandths(value: float) -> float:
    """
    C{value} rounded to three decimals (milliseconds to the microsecond),
    as C{round(value, 3)} rounds it but for a value within a float's error
    of a tie (half a thousandth), which may round the other way. C{round}
    with digits converts to decimal and back, at ten times the cost: five
    times an entry, 4% of the export of a log of small exchanges.
    """
    scaled = value * 1000
    if -1e15 < scaled < 1e15:
        return round(scaled) / 1000
    # past what a float holds to the unit, or not finite
    return round(value, 3)


_NO_TIMINGS = {"blocked": -1, "dns": -1, "connect": -1, "send": 0, "wait": 0, "receive": 0, "ssl": -1}


def _b64(data: object) -> bytes:
    if type(data) is _Base64Data:
        return data.decoded
    if not isinstance(data, str):
        return b""
    try:
        # what base64.b64decode(data) does, without its checks in Python
        return decodeBase64(data)
    except (binascii.Error, ValueError):
        return b""


def _multipartParams(body: bytes, boundary: str, charset: str) -> list[dict[str, str]]:
    """
    The parts of a C{multipart/form-data} body: C{name}, C{value} (text; left
    out for a file that isn't text), C{fileName} and C{contentType}.
    """
    params: list[dict[str, str]] = []
    delimiter = b"--" + boundary.encode("latin-1", "replace")
    chunks = body.split(delimiter)
    for chunk in chunks[1:]:
        if chunk.startswith(b"--"):
            break
        if chunk.startswith(b"\r\n"):
            chunk = chunk[2:]
        elif chunk.startswith(b"\n"):
            chunk = chunk[1:]
        head, sep, content = chunk.partition(b"\r\n\r\n")
        if not sep:
            head, sep, content = chunk.partition(b"\n\n")
            if not sep:
                continue
        if content.endswith(b"\r\n"):
            content = content[:-2]
        elif content.endswith(b"\n"):
            content = content[:-1]
        param: dict[str, str] = {}
        contentType = None
        for rawLine in re.split(rb"\r?\n", head):
            line = rawLine.decode("utf-8", "replace")
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key == "content-disposition":
                name = re.search(r'(?:^|;)\s*name="((?:[^"\\]|\\.)*)"|(?:^|;)\s*name=([^;\s]+)', value)
                if name:
                    param["name"] = name.group(1) if name.group(1) is not None else name.group(2)
                fileName = re.search(r'filename="((?:[^"\\]|\\.)*)"|filename=([^;\s]+)', value)
                if fileName:
                    param["fileName"] = fileName.group(1) if fileName.group(1) is not None else fileName.group(2)
            elif key == "content-type":
                contentType = value.strip()
        if "name" not in param:
            continue
        if contentType is not None:
            param["contentType"] = contentType
        partType, partParams = parseContentType(contentType)
        if "fileName" not in param or not partType or isTextType(partType):
            text, lossless = decode(content, getEncoding(partParams.get("charset", charset)) or "UTF-8")
            if lossless or "fileName" not in param:
                param["value"] = text
        params.append(param)
    return params


def _postData(
    headers: list[dict[str, str]], body: dict[str, Any]
) -> dict[str, Any]:
    contentType = _header(headers, "content-type") or ""
    mediaType, params = parseContentType(contentType)
    post: dict[str, Any] = {"mimeType": contentType}
    raw = _b64(body.get("data"))
    cut = bool(body.get("_truncated"))
    if "data" not in body:
        # the stand-in keeps the size only: no text to show
        return post
    decoded = decodeContent(raw, parseCodings(_header(headers, "content-encoding")), REQUEST_LIMIT, cut)
    data = decoded.data
    if decoded.undecoded is not None:
        post["text"] = base64.b64encode(raw).decode("ascii")
        post["_undecoded"] = {"coding": decoded.undecoded[0], "reason": decoded.undecoded[1]}
        if cut:
            post["_truncated"] = True
        return post
    if mediaType in ("application/x-www-form-urlencoded", "multipart/form-data", "application/json"):
        text, lossless = decodeText(data, mediaType, {**params, "charset": params.get("charset", "utf-8")}, decoded.truncated)
    else:
        text, lossless = decodeText(data, mediaType, params, decoded.truncated)
    post["text"] = text
    if not lossless:
        post["_base64"] = base64.b64encode(data).decode("ascii")
    if mediaType == "application/x-www-form-urlencoded":
        post["params"] = [{"name": k, "value": v} for k, v in parse_qsl(text, keep_blank_values=True)]
    elif mediaType == "multipart/form-data" and params.get("boundary"):
        post["params"] = _multipartParams(data, params["boundary"], params.get("charset", "utf-8"))
    if decoded.truncated:
        post["_truncated"] = True
    return post


def _content(first: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    """
    The answer's C{content}; C{first}: each header's first value by its
    lowercased name.
    """
    contentType = first.get("content-type")
    mediaType, params = parseContentType(contentType)
    content: dict[str, Any] = {"size": _int(body.get("size"), 0), "mimeType": contentType or UNKNOWN_MIME_TYPE}
    sha = body.get("sha256")
    if "data" not in body:
        if isinstance(sha, str):
            content["_sha256"] = sha
        return content
    raw = _b64(body.get("data"))
    cut = bool(body.get("_truncated"))
    codings = parseCodings(first.get("content-encoding"))
    if codings:
        decoded = decodeContent(raw, codings, RESPONSE_LIMIT, cut)
        if decoded.undecoded is not None:
            content["text"] = base64.b64encode(raw).decode("ascii")
            content["encoding"] = "base64"
            content["_undecoded"] = {"coding": decoded.undecoded[0], "reason": decoded.undecoded[1]}
            if cut:
                content["_truncated"] = True
            return content
        data, truncated = decoded.data, decoded.truncated
    elif len(raw) > RESPONSE_LIMIT:
        # what decodeContent does with no coding to undo
        data, truncated = raw[:RESPONSE_LIMIT], True
    else:
        data, truncated = raw, cut
    if not truncated:
        content["size"] = len(data)
        if codings:
            content["compression"] = len(data) - _int(body.get("size"), len(raw))
    text: str | None = None
    lossless = True
    if not mediaType:
        # no type named: text if it reads as UTF-8, else bytes
        text, lossless = decodeText(data, mediaType, params, truncated)
    if (mediaType and not isTextType(mediaType)) or not lossless:
        # kept by the proxy, but not text: size and digest only
        if not truncated:
            content["_sha256"] = hashlib.sha256(data).hexdigest()
        elif isinstance(sha, str):
            content["_sha256"] = sha
        if truncated:
            content["_truncated"] = True
        return content
    if text is None:
        text, lossless = decodeText(data, mediaType, params, truncated)
    content["text"] = text
    if not lossless:
        content["_base64"] = base64.b64encode(data).decode("ascii")
    if truncated:
        content["_truncated"] = True
    return content


_NO_ANSWER: dict[str, Any] = {
    "status": -1,
    "statusText": "",
    "httpVersion": "",
    "cookies": [],
    "headers": [],
    "content": {"size": 0, "mimeType": UNKNOWN_MIME_TYPE},
    "redirectURL": "",
    "headersSize": -1,
    "bodySize": -1,
}


def _noAnswer() -> dict[str, Any]:
    answer = dict(_NO_ANSWER)
    answer["cookies"] = []
    answer["headers"] = []
    answer["content"] = dict(_NO_ANSWER["content"])
    return answer


def buildEntry(opened: dict[str, Any], ended: dict[str, Any] | None,
               notes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """
    One HAR entry from an exchange's open line, its end line (L{None}
    while it is still open) and its head and message lines, all parsed.
    """
    head: dict[str, Any] | None = None
    messages: list[dict[str, Any]] = []
    for note in notes or ():
        kind = note.get("type")
        if kind == "message":
            messages.append(note)
        elif kind == "head" and head is None and isinstance(note.get("response"), dict):
            head = note
    request = opened.get("request")
    request = request if isinstance(request, dict) else {}
    server = opened.get("server")
    server = server if isinstance(server, dict) else {}
    isTunnel = opened.get("kind") == "tunnel"
    method = request.get("method")
    method = method if isinstance(method, str) and method else ("CONNECT" if isTunnel else "GET")
    url = request.get("url")
    url = url if isinstance(url, str) else ""
    if isTunnel and not url:
        url = "https://%s:%d/" % (server.get("host") or "", _int(server.get("port"), 443))
    url = _safeUrl(_bareHostUrl(method, url, server))
    headers = _pairs(request.get("headers"))
    version = _harVersion(request.get("version"))
    if version == "HTTP/2.0":
        headers = asPlaywrightShowsH2(headers)

    started = _num(opened.get("started"))
    if started is None:
        started = _num(opened.get("time")) or 0.0

    harRequest: dict[str, Any] = {
        "method": method,
        "url": url,
        "httpVersion": version,
        "cookies": _requestCookies(headers),
        "headers": headers,
        "queryString": _queryString(url),
        "headersSize": _int(request.get("headers_size")),
        "bodySize": -1 if ended is None else 0,
    }
    if ended is not None:
        reqBody = ended.get("request_body")
        if isinstance(reqBody, dict):
            harRequest["bodySize"] = _int(reqBody.get("size"), 0)
            if harRequest["bodySize"] > 0 or reqBody.get("data"):
                harRequest["postData"] = _postData(headers, reqBody)

    timings, total = _timings(opened, ended)
    entry: dict[str, Any] = {
        "startedDateTime": isoTime(started),
        "time": total,
        "request": harRequest,
    }

    failed = ended.get("_failed") if ended is not None else None
    refused = ended.get("_refused") if ended is not None else None
    isFailed = isinstance(failed, dict) or bool(failed)
    isRefused = isinstance(refused, dict) or bool(refused)
    # netlog's own answer (a refusal's 403, a failure's 502 or 504, which
    # then has its status in _failed) is logged as the response the browser
    # got, but no answer came from the server: the entry has none
    selfAnswered = isRefused or (isinstance(failed, dict) and "status" in failed)
    answer = ended.get("response") if ended is not None and not selfAnswered else None
    if isinstance(answer, dict) and ended is not None:
        entry["response"] = _response(answer, url, ended)
    elif ended is None and head is not None:
        # Still open: the head the browser already has.
        entry["response"] = _response(head["response"], url, {"times": {"first_byte": head.get("first_byte")}})
    elif isTunnel and ended is not None and method == "CONNECT" and not (isFailed or isRefused):
        entry["response"] = {
            "status": 200,
            "statusText": "Connection established",
            "httpVersion": harRequest["httpVersion"],
            "cookies": [],
            "headers": [],
            "content": {"size": 0, "mimeType": UNKNOWN_MIME_TYPE},
            "redirectURL": "",
            "headersSize": -1,
            "bodySize": 0,
        }
    else:
        entry["response"] = _noAnswer()

    entry["cache"] = {}
    entry["timings"] = timings
    address = _serverAddress(server)
    if address is None and ended is not None and isinstance(ended.get("_replayedServer"), dict):
        # A replayed answer: the server the recording's came from.
        address = _serverAddress(ended["_replayedServer"])
    if address is not None:
        entry["serverIPAddress"] = address
    if isinstance(opened.get("connection"), str):
        entry["connection"] = opened["connection"]
    entry["_id"] = opened.get("id")
    rules = opened.get("_rules")
    if isinstance(rules, list):
        entry["_rules"] = [{"rule": str(r.get("rule", "")), "action": str(r.get("action", ""))}
                           for r in rules if isinstance(r, dict)]
    if opened.get("_liveDecrypted") is True:
        entry["_liveDecrypted"] = True

    if messages or url.startswith(("ws://", "wss://")) and (
            head is not None or (ended is not None and isinstance(ended.get("_websocket"), dict))):
        entry["_webSocketMessages"] = [_webSocketMessage(m) for m in messages]
    if ended is None:
        entry["_open"] = True
    else:
        if isinstance(failed, dict):
            entry["_failed"] = {"reason": str(failed.get("reason", ""))}
            if "status" in failed:
                entry["_failed"]["status"] = _int(failed["status"])
        elif failed:
            entry["_failed"] = {"reason": str(failed)}
        if isinstance(refused, dict):
            entry["_refused"] = {"reason": str(refused.get("reason", "")), "status": _int(refused.get("status"))}
        elif refused:
            entry["_refused"] = {"reason": str(refused), "status": -1}
        for mark in _REPLAY_MARKS if not _REPLAY_MARK_SET.isdisjoint(ended) else ():
            value = ended.get(mark)
            if value is not None and value is not False:
                entry[mark] = value
        ws = ended.get("_websocket")
        if isinstance(ws, dict):
            entry["_websocket"] = {
                k: _int(ws.get(k), 0) for k in ("messages_up", "messages_down", "bytes_up", "bytes_down")
            }
            if isinstance(ended.get("closed_by"), str):
                entry["_websocket"]["closed_by"] = ended["closed_by"]
            for key in ("close_up", "close_down"):
                close = ws.get(key)
                if isinstance(close, dict):
                    entry["_websocket"][key] = {"code": close.get("code") if _isInt(close.get("code")) else None,
                                                "reason": str(close.get("reason") or "")}
    if isTunnel:
        wire = ended.get("bytes") if ended is not None else None
        wire = wire if isinstance(wire, dict) else {}
        urlHost, urlPort = _hostPort(url)
        tunnel: dict[str, Any] = {
            "host": str(server.get("host") or urlHost),
            "port": _int(server.get("port"), urlPort),
            "bytes_up": _int(wire.get("up"), 0) if ended is not None else None,
            "bytes_down": _int(wire.get("down"), 0) if ended is not None else None,
        }
        if ended is not None and isinstance(ended.get("closed_by"), str):
            tunnel["closed_by"] = ended["closed_by"]
        entry["_tunnel"] = tunnel
    if ended is not None and ended.get("_unparsed"):
        wire = ended.get("bytes")
        wire = wire if isinstance(wire, dict) else {}
        entry["_unparsed"] = {"bytes_up": _int(wire.get("up"), 0), "bytes_down": _int(wire.get("down"), 0)}
    return entry


def _webSocketMessage(line: dict[str, Any]) -> dict[str, Any]:
    """
    A message line as Chrome DevTools writes a WebSocket message: C{type}
    (C{send} from the browser, C{receive} to it), C{time} (seconds since the
    epoch), C{opcode} (1 text, 2 binary) and C{data} (the text, or base64);
    netlog's own marks underscored.
    """
    opcode = _int(line.get("opcode"), 1)
    data = line.get("data")
    message: dict[str, Any] = {
        "type": "send" if line.get("direction") == "up" else "receive",
        "time": _num(line.get("time")) or 0.0,
        "opcode": opcode,
        "data": data if isinstance(data, str) else "",
    }
    size = _int(line.get("size"), -1)
    if size >= 0:
        message["_size"] = size
    if line.get("encoding") == "base64" and opcode == 1:
        # A text message whose bytes aren't text (or couldn't be inflated).
        message["_encoding"] = "base64"
    if line.get("_truncated") or not isinstance(data, str):
        message["_truncated"] = True
    if isinstance(line.get("_undecodable"), str):
        message["_undecodable"] = line["_undecodable"]
    return message


def _hostPort(url: str) -> tuple[str, int]:
    """
    The host and port a URL names (443 when it names none or can't be read).
    """
    try:
        parts = urlsplit(url)
        return parts.hostname or "", parts.port or 443
    except ValueError:
        return "", 443


def _response(answer: dict[str, Any], url: str, ended: dict[str, Any]) -> dict[str, Any]:
    headers = _pairs(answer.get("headers"))
    version = _harVersion(answer.get("version"))
    if version == "HTTP/2.0":
        headers = asPlaywrightShowsH2(headers)
    received: float | None = None
    cookies: list[dict[str, Any]] = []
    first: dict[str, str] = {}
    for h in headers:
        name = h["name"].lower()
        if name == "set-cookie":
            if not cookies:
                # when the cookies came: looked up for the first only
                received = _num(_times(ended).get("first_byte")) or _num(ended.get("ended")) or _num(ended.get("time"))
            cookie = responseCookie(h["value"], received)
            if cookie is not None:
                cookies.append(cookie)
        if name not in first:
            first[name] = h["value"]
    location = first.get("location")
    redirectURL = ""
    if location:
        try:
            redirectURL = urljoin(url, location.strip())
        except ValueError:
            redirectURL = location
    body = answer.get("body")
    body = body if isinstance(body, dict) else {}
    status = _int(answer.get("status"))
    harResponse: dict[str, Any] = {
        "status": status,
        "statusText": answer.get("reason") if isinstance(answer.get("reason"), str) else "",
        "httpVersion": version,
        "cookies": cookies,
        "headers": headers,
        "content": _content(first, body) if body else {
            "size": 0, "mimeType": first.get("content-type") or UNKNOWN_MIME_TYPE},
        "redirectURL": redirectURL,
        "headersSize": _int(answer.get("headers_size")),
        "bodySize": _int(body.get("size"), 0) if body else 0,
    }
    interim = ended.get("interim")
    if isinstance(interim, list) and interim:
        harResponse["_interim"] = [s for s in interim if _int(s, 0) > 0]
    serverVersion = answer.get("server_version")
    if isinstance(serverVersion, str):
        # The server's side, when it spoke another protocol than the
        # browser's (httpVersion).
        harResponse["_serverHttpVersion"] = _harVersion(serverVersion)
    return harResponse
