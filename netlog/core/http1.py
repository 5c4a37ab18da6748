"""
A strict, incremental HTTP/1.1 message reader with no I/O (RFC 9112).

Both proxies feed the bytes of a connection to a L{RequestReader} (browser
side) or a L{ResponseReader} (server side) and get events back: a head, body
pieces, the end of a message.  Each event carries C{raw}, the exact bytes it
was read from, so that the concatenation of the C{raw} of every event is the
byte stream that was consumed: a proxy may relay those bytes as they came.

Requests are read strictly: anything that could be framed two ways, or that
isn't HTTP/1.1 as RFC 9112 writes it, becomes L{Refused} with the status to
answer, and nothing after it on the connection is read.  Responses are read
leniently enough to relay real servers; what can't be read at all becomes
L{Unparsable}, and the proxy relays the rest of the connection raw.

See C{docs/http1.rst} for what is refused and with which status.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Iterable, Union

__all__ = [
    "MAX_REQUEST_LINE",
    "MAX_HEAD",
    "MAX_FIELDS",
    "MAX_RESPONSE_HEAD",
    "MAX_RESPONSE_FIELDS",
    "MAX_CHUNK_LINE",
    "RequestHead",
    "ResponseHead",
    "Body",
    "EndOfMessage",
    "Refused",
    "Unparsable",
    "Incomplete",
    "Event",
    "RequestReader",
    "ResponseReader",
    "hopByHop",
    "serializeHead",
    "keepAlive",
    "headerValues",
    "commaValues",
    "readRefusedRequest",
    "REASON_PHRASES",
]

#: The longest request line read (bytes, without its CRLF); longer is 414.
MAX_REQUEST_LINE = 8 * 1024
#: The largest request head read (request line, fields and the empty line); larger is 431.
MAX_HEAD = 64 * 1024
#: The most header fields a request head may have; more is 431.
MAX_FIELDS = 100
#: The largest response head read; larger is L{Unparsable}.
MAX_RESPONSE_HEAD = 1024 * 1024
#: The most header fields a response head may have; more is L{Unparsable}.
MAX_RESPONSE_FIELDS = 1000
#: The longest chunk line (size and extensions, without CRLF).
MAX_CHUNK_LINE = 4096
#: The largest body length accepted (Content-Length or one chunk): 2**63 - 1.
MAX_LENGTH = (1 << 63) - 1

Headers = list[tuple[bytes, bytes]]


# The events a reader makes for every message (the heads, body pieces and
# ends) are plain dataclasses, never changed once made: a frozen one's
# __init__ sets each field through object.__setattr__, three times the cost
# (about 2 us per exchange uncompiled).
@dataclass(slots=True)
class RequestHead:
    """
    A request's head as sent.

    @ivar headers: C{(name, value)} pairs, names and values as sent (values
        without surrounding whitespace), in order.
    @ivar raw: the exact bytes of the head, request line to the empty line.
    @ivar url: the absolute URL for an absolute-form request (as sent), else
        L{None}.
    @ivar host: the host the request is for, lowercased, an IPv6 address
        without its brackets: from the absolute URL, the CONNECT target, or
        the C{Host} field; L{None} when none.
    @ivar port: the port from the same place; when none is named, the
        default of the URL's scheme (or of the reader's C{scheme} for an
        origin-form request).
    @ivar upgrade: the request asks to switch protocols (C{Upgrade}).
    @ivar relayed: the fields as they go to an HTTP/1.1 upstream, when they
        differ from C{headers} (an HTTP/2 request's: C{host} from
        C{:authority}, no pseudo-fields); L{None} when C{headers} go as
        they are.
    """

    method: bytes
    target: bytes
    version: bytes
    headers: Headers
    raw: bytes
    url: str | None = None
    host: str | None = None
    port: int | None = None
    upgrade: bool = False
    relayed: Headers | None = None

    @property
    def isConnect(self) -> bool:
        return self.method == b"CONNECT"


@dataclass(slots=True)
class ResponseHead:
    """
    A response's head as received; C{interim} for a 1xx other than 101.

    @ivar eofFramed: the body runs until the server closes the connection
        (so the connection can't be reused).
    """

    status: int
    reason: bytes
    version: bytes
    headers: Headers
    raw: bytes
    interim: bool = False
    eofFramed: bool = False


@dataclass(slots=True)
class Body:
    """
    A piece of a body: C{data} with the transfer coding undone, C{raw} as on
    the wire (chunk framing included).
    """

    data: bytes
    raw: bytes


@dataclass(slots=True)
class EndOfMessage:
    """
    The end of a message: its trailer fields, and the raw bytes not yet
    given in another event (the last chunk, trailers and final CRLF).
    """

    trailers: Headers = field(default_factory=list)
    raw: bytes = b""


@dataclass(frozen=True, slots=True)
class Refused:
    """
    A request that must not be forwarded: answer C{status} and close.

    C{raw} holds the bytes received and not given in an earlier event: when
    the refusal came at a head, the refused request from its first byte, so
    the proxy can log what it was (see L{readRefusedRequest}). What it
    holds depends on how much had arrived, so it takes no part in equality.
    """

    status: int
    reason: str
    raw: bytes = field(default=b"", compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class Unparsable:
    """
    A response that can't be read as HTTP.  C{raw} holds the bytes received
    and not yet given in another event; relay them, then everything that
    follows (see L{ResponseReader.leftover}) as it comes.
    """

    reason: str
    raw: bytes = b""


@dataclass(frozen=True, slots=True)
class Incomplete:
    """
    The connection ended in the middle of a message.  C{raw} holds the
    bytes received and not yet given in another event (chunk framing, a
    trailer section cut short), for a proxy that relays as it came.
    """

    reason: str
    raw: bytes = b""


Event = Union[RequestHead, ResponseHead, Body, EndOfMessage, Refused, Unparsable, Incomplete]


_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")
_VERSION = re.compile(rb"HTTP/[0-9]\.[0-9]\Z")
_BAD_HEAD_BYTE = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_BAD_TARGET_BYTE = re.compile(rb"[\x00-\x20\x7f]")
_ABSOLUTE = re.compile(rb"([A-Za-z][A-Za-z0-9+\-.]*)://([^/?#]*)([^#]*)\Z")
_HOSTPORT = re.compile(
    rb"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9\-._~%!$&'()*+,;=]+)(?::([0-9]*))?\Z"
)
_DIGITS = re.compile(rb"[0-9]+\Z")
_CHUNK_EXT = re.compile(
    rb"(?:[ \t]*;[ \t]*[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
    rb"(?:[ \t]*=[ \t]*(?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+|\"(?:[\t !#-\[\]-~\x80-\xff]|\\[\t -~\x80-\xff])*\"))?)*\Z"
)
_HEX = re.compile(rb"[0-9A-Fa-f]+")
# A whole head as almost every browser and server sends it, read with one
# match: the readers try it first and read anything it doesn't match (or
# matches only in part) byte by byte, as the exact refusals need. Each accepts
# less than the byte-by-byte reading, never more: token names with the colon
# straight after, no control character but HTAB in a value, no obs-fold.
_FIELD_LINES = rb"((?:[!#$%&'*+\-.^_`|~0-9A-Za-z]+:[^\x00-\x08\x0a-\x1f\x7f]*\r\n)*)\r\n"
_WHOLE_REQUEST_HEAD = re.compile(
    rb"([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([^\x00-\x20\x7f]+) (HTTP/1\.[01])\r\n" + _FIELD_LINES
)
_WHOLE_RESPONSE_HEAD = re.compile(
    rb"(HTTP/1\.[0-9]) ([1-9][0-9][0-9])(?: ([^\x00-\x08\x0a-\x1f\x7f]*))?\r\n" + _FIELD_LINES
)
#: A field line of a head L{_WHOLE_REQUEST_HEAD} or L{_WHOLE_RESPONSE_HEAD}
#: matched: its name and its value without the whitespace around it. The
#: value is taken greedily up to its last byte that isn't whitespace (a
#: lazy C{[^\r]*?} tried the rest of the line at every byte: 8.5 µs for a
#: browser's request head against 1.5).
_FIELD = re.compile(rb"([^:]+):[ \t]*((?:[^\r]*[^\r \t])?)[ \t]*\r\n")
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
#: The fields a reader looks up to frame a message, indexed as heads are read.
_FRAMING_FIELDS = frozenset({b"host", b"content-length", b"transfer-encoding", b"upgrade", b"connection"})
#: Fields a C{Connection} header may not name: dropping them on the way up
#: would let the rest of the body be read upstream as another request.
_UNDROPPABLE = frozenset({b"host", b"content-length", b"transfer-encoding"})
_KNOWN_CODINGS = {b"chunked", b"gzip", b"x-gzip", b"deflate", b"compress", b"x-compress"}

#: Reason phrases for the answers the proxies make themselves.
REASON_PHRASES = {
    200: b"OK", 308: b"Permanent Redirect", 400: b"Bad Request", 403: b"Forbidden",
    404: b"Not Found", 407: b"Proxy Authentication Required", 408: b"Request Timeout", 414: b"URI Too Long",
    431: b"Request Header Fields Too Large", 501: b"Not Implemented", 502: b"Bad Gateway",
    503: b"Service Unavailable", 504: b"Gateway Timeout", 505: b"HTTP Version Not Supported",
}

#: Hop-by-hop fields (RFC 9110 7.6.1, plus the old Proxy-Connection and Keep-Alive).
HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"proxy-connection",
        b"keep-alive",
        b"te",
        b"transfer-encoding",
        b"upgrade",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"trailer",
    }
)


class _Stop(Exception):
    """
    Raised inside a reader to end parsing with an event (a refusal).
    """

    def __init__(self, event: Event) -> None:
        self.event = event


def headerValues(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    """
    The values of every field called C{name} (lowercase), in order.
    """
    return [v for (n, v) in headers if n.lower() == name]


def commaValues(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> list[bytes]:
    """
    The lowercased, stripped, non-empty elements of the comma lists of every
    field called C{name} (lowercase).
    """
    out = []
    for value in headerValues(headers, name):
        for element in value.split(b","):
            element = element.strip(b" \t")
            if element:
                out.append(element.lower())
    return out


def hopByHop(headers: Iterable[tuple[bytes, bytes]]) -> set[bytes]:
    """
    The lowercased names of the fields that concern only this connection
    (RFC 9110 7.6.1): the fixed list and every name C{Connection} lists.

    A proxy that relays a chunked body as it came must send its own
    C{Transfer-Encoding: chunked} again.
    """
    headers = list(headers)
    return set(HOP_BY_HOP) | (set(commaValues(headers, b"connection")) - _UNDROPPABLE)


#: What a proxy that relays a body with its framing as it came drops of a
#: head that names nothing in C{Connection}: the hop-by-hop fields but
#: C{Transfer-Encoding}, which frames what follows.
RELAY_DROP = HOP_BY_HOP - {b"transfer-encoding"}


class HeadFields:
    """
    One pass over a head's fields: what relaying it needs, each name
    lowercased once (what L{hopByHop}, L{keepAlive} and L{serializeHead}
    say, without reading the fields again for each).

    @ivar lowered: the names, lowercased, in order.
    @ivar relayDrop: the lowercased names a relay doesn't forward: the
        hop-by-hop fields (as L{hopByHop} says) but C{Transfer-Encoding}.
    @ivar keepAlive: what L{keepAlive} says for the head's version.
    """

    __slots__ = ("headers", "lowered", "relayDrop", "keepAlive")

    def __init__(self, version: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.headers = headers
        lowered = [name.lower() for name, _ in headers]
        self.lowered = lowered
        tokens: list[bytes] = []
        if b"connection" in lowered:
            tokens = commaValues(headers, b"connection")
        self.relayDrop: frozenset[bytes] | set[bytes] = (
            hopByHop(headers) - {b"transfer-encoding"} if tokens else RELAY_DROP
        )
        if b"close" in tokens:
            self.keepAlive = False
        else:
            self.keepAlive = version == b"HTTP/1.1" or (version == b"HTTP/1.0" and b"keep-alive" in tokens)

    def has(self, name: bytes) -> bool:
        return name in self.lowered

    def first(self, name: bytes) -> bytes | None:
        """
        The value of the first field called C{name} (lowercase), if any.
        """
        lowered = self.lowered
        # (Looked for first: a ValueError from index costs more than the
        # search, and most names asked for are absent.)
        if name in lowered:
            return self.headers[lowered.index(name)][1]
        return None

    def serialize(self, startLine: bytes, drop: frozenset[bytes] | set[bytes],
                  extra: list[tuple[bytes, bytes]]) -> bytes:
        """
        What L{serializeHead}C{(startLine, headers, drop=drop, extra=extra)}
        builds.
        """
        parts = [startLine, b"\r\n"]
        for (name, value), n in zip(self.headers, self.lowered):
            if n not in drop:
                parts += (name, b": ", value, b"\r\n")
        for name, value in extra:
            parts += (name, b": ", value, b"\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)


def serializeHead(
    startLine: bytes,
    headers: Iterable[tuple[bytes, bytes]],
    drop: Iterable[bytes] = (),
    extra: Iterable[tuple[bytes, bytes]] = (),
) -> bytes:
    """
    Build a head: C{startLine} (without CRLF), the fields of C{headers} whose
    lowercased names aren't in C{drop}, then C{extra}, then the empty line.

    For an upstream request: C{serializeHead(b"GET /x HTTP/1.1", head.headers,
    drop=hopByHop(head.headers))}.
    """
    dropped = set(drop)
    parts = [startLine, b"\r\n"]
    for name, value in headers:
        if dropped and name.lower() in dropped:
            continue
        parts += (name, b": ", value, b"\r\n")
    for name, value in extra:
        parts += (name, b": ", value, b"\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)


def keepAlive(version: bytes, headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """
    Whether the connection stays open after this message: HTTP/1.1 unless
    C{Connection: close}, HTTP/1.0 only with C{Connection: keep-alive}.
    """
    tokens = commaValues(headers, b"connection")
    if b"close" in tokens:
        return False
    if version == b"HTTP/1.1":
        return True
    return version == b"HTTP/1.0" and b"keep-alive" in tokens


#: How many C{host[:port]} values L{_parseHostPort} remembers (a browser asks
#: the same few hosts over and over; the cache starts afresh when full), and
#: the longest it remembers.
_HOST_CACHE_SIZE = 512
_HOST_CACHE_LONGEST = 300
_hostCache: dict[bytes, tuple[str, int | None] | None] = {}


def _parseHostPort(value: bytes) -> tuple[str, int | None] | None:
    """
    Split C{host[:port]}; L{None} when it isn't one.
    """
    try:
        return _hostCache[value]
    except KeyError:
        pass
    parsed = _splitHostPort(value)
    if len(value) <= _HOST_CACHE_LONGEST:
        if len(_hostCache) >= _HOST_CACHE_SIZE:
            _hostCache.clear()
        _hostCache[value] = parsed
    return parsed


def _splitHostPort(value: bytes) -> tuple[str, int | None] | None:
    match = _HOSTPORT.match(value)
    if match is None:
        return None
    host, port = match.group(1), match.group(2)
    if host[:1] == b"[":
        host = host[1:-1]
    if port:
        if len(port) > 5 or int(port) > 65535:
            return None
        return host.decode("ascii").lower(), int(port)
    return host.decode("ascii").lower(), None


# States of a reader.
_HEAD = 0
_LENGTH = 1
_CHUNK_LINE = 2
_CHUNK_DATA = 3
_CHUNK_CRLF = 4
_TRAILERS = 5
_EOF_BODY = 6
_PAUSED = 7
_DEAD = 8


class _Reader:
    """
    What the request and response readers share: the buffer, body framing,
    chunked decoding.
    """

    _strict = True
    _discardWhenDead = False
    _index: dict[bytes, list[bytes]]
    _maxHead: int
    _maxFields: int

    def __init__(self) -> None:
        self._buf = b""
        self._state = _HEAD
        self._remaining = 0
        self._pendingRaw = b""
        self._scanned = 0
        self._after = _HEAD
        self._index = {}

    # What the subclasses provide.

    def _readHead(self, buf: bytes, start: int) -> tuple[list[Event], int]:
        """
        Try to read a head from C{buf} at C{start}; return events and where
        reading stopped (C{start} and no events when more bytes are
        needed).  Sets the state.
        """
        raise NotImplementedError()

    def _bad(self, status: int, reason: str) -> _Stop:
        raise NotImplementedError()

    # The public interface.

    @property
    def paused(self) -> bool:
        """
        Whether the reader has stopped after a CONNECT, an Upgrade or a 101:
        the bytes that follow are the caller's (see L{leftover}).
        """
        return self._state == _PAUSED

    @property
    def idle(self) -> bool:
        """
        Whether the reader is between messages with nothing buffered.
        """
        return self._state == _HEAD and not self._buf

    def leftover(self) -> bytes:
        """
        Take the bytes received and not read (after a pause, a refusal or an
        unparsable response); they are no longer buffered.
        """
        data, self._buf = self._buf, b""
        self._scanned = 0
        return data

    def _takeRest(self) -> bytes:
        """
        Take the raw bytes not given in an event: framing read but not yet
        given, then what is buffered.
        """
        rest = self._pendingRaw + self._buf
        self._pendingRaw = self._buf = b""
        return rest

    def feed(self, data: bytes) -> list[Event]:
        """
        Read C{data}, the next bytes of the connection.
        """
        if self._state >= _PAUSED:
            if data and not (self._state == _DEAD and self._discardWhenDead):
                self._buf += data
            return []
        buf = self._buf + data if self._buf else bytes(data)
        events: list[Event] = []
        self._cur = buf
        self._mark = 0
        try:
            self._buf = self._run(buf, events)
        except _Stop as stop:
            self._state = _DEAD
            # The bytes not yet given: for the proxy to relay as they came (an
            # unparsable answer) or to log what it refused (a request).
            rest = self._pendingRaw + self._cur[self._mark :]
            if isinstance(stop.event, Unparsable):
                events.append(Unparsable(stop.event.reason, rest))
            elif isinstance(stop.event, Refused):
                events.append(Refused(stop.event.status, stop.event.reason, rest.lstrip(b"\r\n")))
            else:
                events.append(stop.event)
            self._buf = self._pendingRaw = b""
        self._cur = b""
        return events

    def _run(self, buf: bytes, events: list[Event]) -> bytes:
        """
        Read what C{buf} holds; return the bytes left unread.

        C{self._mark} is where the raw bytes not yet given in an event start;
        C{self._cur} is C{buf}.
        """
        pos = 0
        end = len(buf)
        data: list[bytes] = []  # decoded chunk data not yet given
        lastDataEnd = 0
        try:
            while pos < end:
                state = self._state
                if state == _HEAD:
                    headEvents, used = self._readHead(buf, pos)
                    if used == pos:
                        break
                    events += headEvents
                    pos = self._mark = used
                elif state == _LENGTH:
                    take = min(self._remaining, end - pos)
                    piece = buf if take == end else buf[pos : pos + take]
                    pos += take
                    self._remaining -= take
                    events.append(Body(piece, piece))
                    self._mark = pos
                    if self._remaining == 0:
                        events.append(EndOfMessage([], b""))
                        self._endMessage()
                elif state == _EOF_BODY:
                    piece = buf[pos:] if pos else buf
                    events.append(Body(piece, piece))
                    pos = self._mark = end
                elif state == _CHUNK_LINE:
                    lf = buf.find(b"\n", pos, pos + MAX_CHUNK_LINE + 2)
                    if lf < 0:
                        if end - pos > MAX_CHUNK_LINE + 1:
                            raise self._bad(400, "chunk line too long")
                        break
                    if lf == pos or buf[lf - 1] != 13:
                        raise self._bad(400, "bare LF in a chunk line")
                    if lf - 1 - pos > MAX_CHUNK_LINE:
                        raise self._bad(400, "chunk line too long")
                    size = self._chunkSize(buf[pos : lf - 1])
                    if size == 0:
                        if data:
                            events.append(self._bodyEvent(data, buf, lastDataEnd))
                            data = []
                        self._state = _TRAILERS
                    else:
                        self._remaining = size
                        self._state = _CHUNK_DATA
                    pos = lf + 1
                elif state == _CHUNK_DATA:
                    take = min(self._remaining, end - pos)
                    data.append(buf if take == end else buf[pos : pos + take])
                    pos += take
                    lastDataEnd = pos
                    self._remaining -= take
                    if self._remaining == 0:
                        self._state = _CHUNK_CRLF
                elif state == _CHUNK_CRLF:
                    if buf[pos] != 13 or (end - pos >= 2 and buf[pos + 1] != 10):
                        raise self._bad(400, "chunk data not followed by CRLF")
                    if end - pos < 2:
                        break
                    pos += 2
                    self._state = _CHUNK_LINE
                elif state == _TRAILERS:
                    done = self._readTrailers(buf, pos)
                    if done is None:
                        break
                    trailers, pos = done
                    raw = buf[self._mark : pos]
                    if self._pendingRaw:
                        raw = self._pendingRaw + raw
                        self._pendingRaw = b""
                    events.append(EndOfMessage(trailers, raw))
                    self._mark = pos
                    self._endMessage()
                else:
                    break
        except _Stop:
            # Give the body read before the fault, as a cut stream would have.
            if data:
                events.append(self._bodyEvent(data, self._cur, lastDataEnd))
            raise
        if data:
            events.append(self._bodyEvent(data, buf, pos))
        if self._mark < pos:
            self._pendingRaw += buf[self._mark : pos]
            self._mark = pos
        return buf[pos:] if pos else buf

    _cur = b""
    _mark = 0

    def _bodyEvent(self, data: list[bytes], buf: bytes, upTo: int) -> Body:
        """
        The decoded C{data} as one event, its raw bytes up to C{upTo}.
        """
        raw = buf[self._mark : upTo]
        self._mark = upTo
        if self._pendingRaw:
            raw = self._pendingRaw + raw
            self._pendingRaw = b""
        return Body(data[0] if len(data) == 1 else b"".join(data), raw)

    def _chunkSize(self, line: bytes) -> int:
        match = _HEX.match(line)
        if match is None:
            raise self._bad(400, "chunk size is not hexadecimal")
        digits = match.group()
        rest = line[match.end() :]
        if rest and _CHUNK_EXT.match(rest) is None:
            if self._strict or b"\r" in rest:
                raise self._bad(400, "malformed chunk extension")
        elif rest[:1] in (b" ", b"\t") and self._strict:
            # Whitespace between the size and the extension: the grammar's
            # BWS, which a sender must not send; h11 (and servers behind
            # us) refuse it, so a request's is refused.
            raise self._bad(400, "whitespace after a chunk size (send the extension's ';' right after it)")
        size = int(digits, 16)
        if size > MAX_LENGTH:
            raise self._bad(400, "chunk size too large")
        return size

    def _readTrailers(self, buf: bytes, pos: int) -> tuple[Headers, int] | None:
        """
        Read the trailer section starting at C{pos}; L{None} if incomplete.
        """
        if buf.startswith(b"\r\n", pos):
            return [], pos + 2
        if buf[pos : pos + 1] == b"\r" and len(buf) == pos + 1:
            return None
        # Scan only what is new since the last feed (C{_scanned} is relative
        # to the section's start, which stays at the buffer's start).
        stop = buf.find(b"\r\n\r\n", pos + max(0, self._scanned - 3))
        limit = stop + 2 if stop >= 0 else len(buf)
        self._checkBareLF(buf, pos + self._scanned, limit, pos)
        self._scanned = limit - pos
        if stop < 0:
            if len(buf) - pos > self._maxHead:
                raise self._bad(431, "trailer section too large")
            return None
        if stop + 4 - pos > self._maxHead:
            raise self._bad(431, "trailer section too large")
        section = buf[pos:stop]
        self._checkBytes(section)
        lines = section.split(b"\r\n")
        if len(lines) > self._maxFields:
            raise self._bad(431, "too many trailer fields")
        return self._parseFields(lines), stop + 4

    def _skipEmptyLines(self, buf: bytes, start: int) -> int | None:
        """
        Empty lines before a head are ignored (RFC 9112 2.2): where reading
        goes on when C{start} begins with some (or with a lone CR that may be
        the first of one), L{None} when a head begins there.
        """
        if buf.startswith(b"\r\n", start):
            at = start
            while buf.startswith(b"\r\n", at):
                at += 2
            return at
        if len(buf) - start == 1 and buf[start] == 13:
            return start
        return None

    def _headEnd(self, buf: bytes, start: int, status: int, tooLarge: str) -> int:
        """
        Where the head that begins at C{start} ends (its empty line), or -1
        while it isn't whole. Scans only what came since the last call,
        refuses bare LFs on the way, and a head over the limit with
        C{status}.
        """
        endAt = buf.find(b"\r\n\r\n", start + max(0, self._scanned - 3))
        limit = endAt + 2 if endAt >= 0 else len(buf)
        self._checkBareLF(buf, start + self._scanned, limit, start)
        self._scanned = limit - start
        size = len(buf) - start if endAt < 0 else endAt + 4 - start
        if size > self._maxHead:
            raise self._bad(status, tooLarge)
        return endAt

    def _checkBareLF(self, buf: bytes, start: int, limit: int, floor: int) -> None:
        """
        Refuse an LF between C{start} and C{limit} without a CR before it
        (at or after C{floor}, where the head or section begins).
        """
        if buf.count(b"\n", start, limit) == buf.count(b"\r\n", max(floor, start - 1), limit):
            return
        lf = buf.find(b"\n", start, limit)
        while lf >= 0:
            if lf == floor or buf[lf - 1] != 13:
                raise self._bad(400, "bare LF in the head")
            lf = buf.find(b"\n", lf + 1, limit)

    def _checkBytes(self, head: bytes) -> None:
        match = _BAD_HEAD_BYTE.search(head)
        if match is not None:
            if match.group() == b"\x00":
                raise self._bad(400, "NUL in the head")
            raise self._bad(400, "control character in the head")
        if head.count(b"\r") != head.count(b"\n"):
            raise self._bad(400, "bare CR in the head")

    def _parseFields(self, lines: list[bytes]) -> Headers:
        headers: Headers = []
        token = _TOKEN.match
        index: dict[bytes, list[bytes]] = {}
        self._index = index
        for line in lines:
            colon = line.find(b":")
            if colon > 0 and token(line, 0, colon):
                name = line[:colon]
                value = line[colon + 1 :].strip(b" \t")
                headers.append((name, value))
                lowered = name.lower()
                if lowered in _FRAMING_FIELDS:
                    index.setdefault(lowered, []).append(value)
                continue
            if line[:1] in (b" ", b"\t"):
                if self._strict or not headers:
                    raise self._bad(400, "obsolete line folding (obs-fold)")
                name, value = headers[-1]
                headers[-1] = (name, (value + b" " + line.strip(b" \t")).strip(b" "))
                if name.lower() in _FRAMING_FIELDS:
                    index[name.lower()][-1] = headers[-1][1]
                continue
            if colon < 0:
                raise self._bad(400, "header line without a colon")
            if colon == 0:
                raise self._bad(400, "header line with an empty name")
            name = line[:colon]
            if name[-1:] in (b" ", b"\t"):
                if self._strict:
                    raise self._bad(400, "whitespace before a header's colon")
                name = name.rstrip(b" \t")
                value = line[colon + 1 :].strip(b" \t")
                headers.append((name, value))
                if name.lower() in _FRAMING_FIELDS:
                    index.setdefault(name.lower(), []).append(value)
                continue
            raise self._bad(400, "invalid header name")
        return headers

    def _indexFields(self, fields: Headers) -> None:
        """
        Index the fields that frame a message (as L{_parseFields} does), for
        a head read in one match.
        """
        index: dict[bytes, list[bytes]] = {}
        self._index = index
        for name, value in fields:
            lowered = name.lower()
            if lowered in _FRAMING_FIELDS:
                index.setdefault(lowered, []).append(value)

    def _endMessage(self) -> None:
        self._state = self._after
        self._after = _HEAD
        self._scanned = 0

    def _contentLength(self, headers: Headers) -> int | None:
        """
        The one Content-Length of a message, L{None} when there is none.

        A request must say its length once: repeated values, even identical
        ones (C{5, 5}, or two fields), are refused, since a server behind us
        may read them otherwise (RFC 9110, 8.6 lets a recipient refuse
        them). An answer's identical repeated values are read as one, as
        browsers read them.
        """
        values = self._index.get(b"content-length", ())
        if not values:
            return None
        if len(values) == 1:
            # The usual case, one field of digits, read without splitting.
            value = values[0]
            if value.isdigit() and len(value) <= 19:
                length = int(value)
                if length > MAX_LENGTH:
                    raise self._bad(400, "Content-Length too large")
                return length
        lengths = []
        for value in values:
            for element in value.split(b","):
                element = element.strip(b" \t")
                if not _DIGITS.match(element):
                    raise self._bad(400, "malformed Content-Length")
                if len(element) > 19 or int(element) > MAX_LENGTH:
                    raise self._bad(400, "Content-Length too large")
                lengths.append(int(element))
        if len(set(lengths)) != 1:
            raise self._bad(400, "differing Content-Length values")
        if len(lengths) > 1 and self._strict:
            raise self._bad(400, "repeated Content-Length (send it once)")
        return lengths[0]

    def _transferCodings(self, headers: Headers) -> list[bytes] | None:
        values = self._index.get(b"transfer-encoding", ())
        if not values:
            return None
        codings = []
        for value in values:
            for element in value.split(b","):
                element = element.strip(b" \t").lower()
                if element:
                    codings.append(element)
                elif self._strict:
                    # RFC 9110 5.6.1 lets a list hold empty elements, but a
                    # server behind us may read "chunked," otherwise: a
                    # request's framing is taken only as plain as it comes.
                    raise self._bad(400, "empty element in Transfer-Encoding")
        return codings


class RequestReader(_Reader):
    """
    Reads the requests a browser sends on one connection.  After a
    L{Refused} it reads nothing more, and drops what it is fed.

    @param forwardProxy: the connection is to a forward proxy port, where
        every request but CONNECT must have an absolute-form target.
    @param scheme: the scheme of the connection (C{"https"} inside a
        decrypted tunnel), used for the default port of origin-form requests.
    """

    def __init__(
        self,
        *,
        forwardProxy: bool,
        maxLineBytes: int = MAX_REQUEST_LINE,
        maxHeadBytes: int = MAX_HEAD,
        maxFields: int = MAX_FIELDS,
        scheme: str = "http",
    ) -> None:
        super().__init__()
        self.forwardProxy = forwardProxy
        self._maxLine = maxLineBytes
        self._maxHead = maxHeadBytes
        self._maxFields = maxFields
        self._scheme = scheme
        self._line: tuple[bytes, bytes, bytes] | None = None

    _discardWhenDead = True

    def _bad(self, status: int, reason: str) -> _Stop:
        return _Stop(Refused(status, reason))

    def resume(self) -> list[Event]:
        """
        Read on after an Upgrade the server declined: the buffered bytes are
        the next request.
        """
        if self._state != _PAUSED:
            return []
        self._state = _HEAD
        data, self._buf = self._buf, b""
        return self.feed(data)

    def feedEOF(self) -> list[Event]:
        """
        The browser closed its end (or half-closed it).
        """
        state = self._state
        if state >= _PAUSED:
            return []
        self._state = _DEAD
        if state == _HEAD and not self._buf:
            return []
        return [Incomplete("the connection closed in the middle of a request", self._takeRest())]

    def _readHead(self, buf: bytes, start: int) -> tuple[list[Event], int]:
        if self._line is None:
            whole = _WHOLE_REQUEST_HEAD.match(buf, start)
            if (
                whole is not None
                and whole.end(3) - start <= self._maxLine
                and whole.end() - start <= self._maxHead
            ):
                fields = _FIELD.findall(buf, whole.start(4), whole.end(4))
                if len(fields) <= self._maxFields:
                    self._indexFields(fields)
                    method, target, version = whole.group(1, 2, 3)
                    return self._requestEvents(
                        self._makeHead(method, target, version, fields, whole.group()), whole.end()
                    )
        skipped = self._skipEmptyLines(buf, start)
        if skipped is not None:
            return [], skipped
        size = len(buf) - start
        if self._line is None:
            lf = buf.find(b"\n", start, start + self._maxLine + 2)
            if lf < 0:
                if size > self._maxLine + 1:
                    raise self._bad(414, "request line too long")
                return [], start
            if lf == start or buf[lf - 1] != 13:
                raise self._bad(400, "bare LF after the request line")
            if lf - 1 - start > self._maxLine:
                raise self._bad(414, "request line too long")
            self._line = self._requestLine(buf[start : lf - 1])
            self._scanned = lf + 1 - start
        endAt = self._headEnd(buf, start, 431, "request head too large")
        if endAt < 0:
            return [], start
        used = endAt + 4
        head = buf[start:used]
        self._checkBytes(head)
        lines = buf[start:endAt].split(b"\r\n")
        if len(lines) - 1 > self._maxFields:
            raise self._bad(431, "too many header fields")
        headers = self._parseFields(lines[1:])
        method, target, version = self._line
        self._line = None
        self._scanned = 0
        return self._requestEvents(self._makeHead(method, target, version, headers, head), used)

    def _requestEvents(self, event: RequestHead, used: int) -> tuple[list[Event], int]:
        """
        The events of a request head read whole, and where reading goes on.
        """
        events: list[Event] = [event]
        if event.isConnect:
            events.append(EndOfMessage([], b""))
            self._state = _PAUSED
            return events, used
        self._framing(event, events)
        return events, used

    def _requestLine(self, line: bytes) -> tuple[bytes, bytes, bytes]:
        parts = line.split(b" ")
        if len(parts) == 3 and all(parts):
            method, target, version = parts
            if not _TOKEN.match(method):
                raise self._bad(400, "invalid method")
            if _BAD_TARGET_BYTE.search(target):
                raise self._bad(400, "invalid request target")
            if not _VERSION.match(version):
                raise self._bad(400, "malformed HTTP version")
            if method == b"PRI" and target == b"*" and version == b"HTTP/2.0":
                raise self._bad(505, "HTTP/2 connection preface; only HTTP/1.1 is served")
            if version != b"HTTP/1.1" and version != b"HTTP/1.0":
                raise self._bad(505, "HTTP version not supported: " + version.decode("ascii"))
            return method, target, version
        if len(parts) == 2 and all(parts) and _TOKEN.match(parts[0]):
            raise self._bad(505, "HTTP/0.9 request (no version); only HTTP/1.1 is served")
        raise self._bad(400, "request line is not method, target and version separated by single spaces")

    def _makeHead(
        self, method: bytes, target: bytes, version: bytes, headers: Headers, raw: bytes
    ) -> RequestHead:
        hosts = self._index.get(b"host", ())
        if len(hosts) > 1:
            raise self._bad(400, "more than one Host field")
        hostField: tuple[str, int | None] | None = None
        if hosts:
            hostField = _parseHostPort(hosts[0])
            if hostField is None:
                raise self._bad(400, "malformed Host field")
        url = None
        host: str | None = None
        port: int | None = None
        if method == b"CONNECT":
            parsed = _parseHostPort(target)
            if parsed is None or parsed[1] is None:
                raise self._bad(400, "CONNECT target is not host:port")
            host, port = parsed
            if port == 0:
                raise self._bad(400, "CONNECT to port 0")
        elif target[:1] == b"/" or target == b"*":
            if target == b"*":
                if self.forwardProxy:
                    raise self._bad(400, "asterisk-form target sent to a forward proxy")
                if method != b"OPTIONS":
                    raise self._bad(400, "asterisk-form target with a method other than OPTIONS")
            else:
                if b"#" in target:
                    raise self._bad(400, "request target with a fragment")
                if self.forwardProxy:
                    raise self._bad(400, "origin-form target sent to a forward proxy; use an absolute URL")
            # Both forms name their host only in the Host field.
            if hostField is None and version == b"HTTP/1.1":
                raise self._bad(400, "HTTP/1.1 request without a Host field")
            if hostField is not None:
                host, port = hostField
                if port is None:
                    port = _DEFAULT_PORTS.get(self._scheme)
        else:
            match = _ABSOLUTE.match(target)
            if match is None:
                raise self._bad(400, "request target is not a URL")
            scheme = match.group(1).decode("ascii").lower()
            if scheme not in ("http", "https"):
                raise self._bad(400, "URL scheme is not http or https")
            authority, rest = match.group(2), match.group(3)
            if b"@" in authority:
                raise self._bad(400, "URL with user information")
            parsed = _parseHostPort(authority)
            if parsed is None:
                raise self._bad(400, "URL with a malformed host")
            host, port = parsed
            if port is None:
                port = _DEFAULT_PORTS[scheme]
            if rest[:1] not in (b"", b"/", b"?"):
                raise self._bad(400, "request target is not a URL")
            if hostField is None and version == b"HTTP/1.1":
                raise self._bad(400, "HTTP/1.1 request without a Host field")
            if hostField is not None:
                fieldPort = hostField[1] if hostField[1] is not None else _DEFAULT_PORTS[scheme]
                if hostField[0] != host or fieldPort != port:
                    raise self._bad(400, "Host field disagrees with the URL")
            path = rest if rest[:1] == b"/" else b"/" + rest
            url = scheme + "://" + authority.decode("latin-1") + path.decode("latin-1")
        upgrade = any(v.strip(b" \t,") for v in self._index.get(b"upgrade", ()))
        return RequestHead(method, target, version, headers, raw, url, host, port, upgrade)

    def _framing(self, head: RequestHead, events: list[Event]) -> None:
        for value in self._index.get(b"connection", ()):
            for element in value.split(b","):
                if element.strip(b" \t").lower() in _UNDROPPABLE:
                    raise self._bad(400, "Connection names a field that frames the message")
        codings = self._transferCodings(head.headers)
        after = _PAUSED if head.upgrade else _HEAD
        if codings is not None:
            if b"content-length" in self._index:
                raise self._bad(400, "both Content-Length and Transfer-Encoding")
            if head.version == b"HTTP/1.0":
                raise self._bad(400, "Transfer-Encoding in an HTTP/1.0 request")
            if not codings:
                raise self._bad(400, "empty Transfer-Encoding")
            for coding in codings:
                if coding not in _KNOWN_CODINGS:
                    if not _TOKEN.match(coding):
                        raise self._bad(400, "malformed Transfer-Encoding")
                    raise self._bad(501, "unknown transfer coding: " + coding.decode("latin-1"))
            if codings[-1] != b"chunked" or codings.count(b"chunked") > 1:
                raise self._bad(400, "chunked is not the final transfer coding, once")
            if len(codings) > 1:
                raise self._bad(501, "transfer codings other than chunked are not supported")
            self._state = _CHUNK_LINE
            self._after = after
            return
        length = self._contentLength(head.headers)
        if length:
            self._state = _LENGTH
            self._remaining = length
            self._after = after
            return
        events.append(EndOfMessage([], b""))
        self._state = after


class ResponseReader(_Reader):
    """
    Reads the responses a server sends on one connection.  Call
    L{expectResponseTo} with each request's method as it goes up, so that
    answers to HEAD and CONNECT are framed right.
    """

    _strict = False

    def __init__(
        self, *, maxHeadBytes: int = MAX_RESPONSE_HEAD, maxFields: int = MAX_RESPONSE_FIELDS
    ) -> None:
        super().__init__()
        self._maxHead = maxHeadBytes
        self._maxFields = maxFields
        self._methods: deque[bytes] = deque()

    def _bad(self, status: int, reason: str) -> _Stop:
        return _Stop(Unparsable(reason))

    def expectResponseTo(self, method: bytes) -> None:
        """
        A request with C{method} went up; the next unanswered response is its.
        """
        self._methods.append(method)

    def feedEOF(self) -> list[Event]:
        """
        The server closed its end: ends a body read to EOF; a head cut short
        is L{Unparsable} (with its bytes), a body cut short L{Incomplete}.
        """
        state = self._state
        if state >= _PAUSED:
            return []
        self._state = _DEAD
        if state == _EOF_BODY:
            raw, self._pendingRaw = self._pendingRaw, b""
            return [EndOfMessage([], raw)]
        if state == _HEAD:
            if not self._buf:
                return []
            # A head cut short can't be read: relay what came.
            raw, self._buf = self._buf, b""
            return [Unparsable("the connection closed in the middle of a response head", raw)]
        return [Incomplete("the connection closed in the middle of a response", self._takeRest())]

    def _readHead(self, buf: bytes, start: int) -> tuple[list[Event], int]:
        if not self._scanned:
            whole = _WHOLE_RESPONSE_HEAD.match(buf, start)
            if whole is not None and whole.end() - start <= self._maxHead:
                fields = _FIELD.findall(buf, whole.start(4), whole.end(4))
                if len(fields) <= self._maxFields:
                    self._indexFields(fields)
                    version, status, reason = whole.group(1, 2, 3)
                    return self._responseEvents(
                        int(status), reason or b"", version, fields, whole.group(), whole.end()
                    )
        skipped = self._skipEmptyLines(buf, start)
        if skipped is not None:
            return [], skipped
        if not buf.startswith(b"HTTP/"[: len(buf) - start], start):
            raise self._bad(0, "not an HTTP response")
        endAt = self._headEnd(buf, start, 0, "response head too large")
        if endAt < 0:
            return [], start
        used = endAt + 4
        head = buf[start:used]
        self._scanned = 0
        if b"\x00" in head:
            raise self._bad(0, "NUL in the response head")
        if head.count(b"\r") != head.count(b"\n"):
            raise self._bad(0, "bare CR in the response head")
        lines = buf[start:endAt].split(b"\r\n")
        if len(lines) - 1 > self._maxFields:
            raise self._bad(0, "too many header fields")
        statusLine = lines[0]
        parts = statusLine.split(b" ", 2)
        version = parts[0]
        if not _VERSION.match(version) or not version.startswith(b"HTTP/1."):
            raise self._bad(0, "malformed status line")
        if len(parts) < 2 or len(parts[1]) != 3 or not parts[1].isdigit():
            raise self._bad(0, "malformed status code")
        status = int(parts[1])
        if status < 100:
            raise self._bad(0, "malformed status code")
        reason = parts[2] if len(parts) > 2 else b""
        headers = self._parseFields(lines[1:])
        return self._responseEvents(status, reason, version, headers, head, used)

    def _responseEvents(
        self, status: int, reason: bytes, version: bytes, headers: Headers, head: bytes, used: int
    ) -> tuple[list[Event], int]:
        """
        The events of a response head read whole, and where reading goes on.
        """
        method = self._methods[0] if self._methods else b"GET"
        events: list[Event] = []
        if 100 <= status < 200 and status != 101:
            events.append(ResponseHead(status, reason, version, headers, head, True))
            return events, used
        if self._methods:
            self._methods.popleft()
        if status == 101 or (method == b"CONNECT" and 200 <= status < 300):
            events.append(ResponseHead(status, reason, version, headers, head))
            events.append(EndOfMessage([], b""))
            self._state = _PAUSED
            return events, used
        if method == b"HEAD" or status in (204, 304):
            events.append(ResponseHead(status, reason, version, headers, head))
            events.append(EndOfMessage([], b""))
            return events, used
        codings = self._transferCodings(headers)
        if codings:
            if codings[-1] == b"chunked":
                events.append(ResponseHead(status, reason, version, headers, head))
                self._state = _CHUNK_LINE
                return events, used
            events.append(ResponseHead(status, reason, version, headers, head, eofFramed=True))
            self._state = _EOF_BODY
            return events, used
        length = self._contentLength(headers)
        if length is None:
            events.append(ResponseHead(status, reason, version, headers, head, eofFramed=True))
            self._state = _EOF_BODY
            return events, used
        events.append(ResponseHead(status, reason, version, headers, head))
        if length:
            self._state = _LENGTH
            self._remaining = length
        else:
            events.append(EndOfMessage([], b""))
        return events, used


def _splitAuthority(hostPort: str, default: int | None) -> tuple[str, int | None]:
    if hostPort.startswith("["):
        bare, _, rest = hostPort[1:].partition("]")
        portText = rest[1:] if rest.startswith(":") else ""
    else:
        bare, _, portText = hostPort.partition(":")
    try:
        return bare, int(portText) if portText else default
    except ValueError:
        return bare, default


def readRefusedRequest(raw: bytes, scheme: str, hostAuthority: str = "") -> dict[str, Any]:
    """
    What can be read of a request the strict reader refused, or whose head
    never came whole: its request line's method, target and version, and its
    host, for the log entry of the refusal. Nothing here is trusted: every
    part is L{None} when it can't be read.

    @param raw: the request's bytes from its first one (L{Refused.raw}, or
        the reader's C{leftover()} after a timeout).
    @param scheme: the scheme of an origin-form target (C{https} once
        decrypted or on an HTTPS listener).
    @param hostAuthority: the authority when the request names none (a
        decrypted CONNECT's); a C{Host} field is read first.
    @return: C{method}, C{url}, C{version}, C{host}, C{port}, and C{kind}
        (C{"tunnel"} for a CONNECT, else C{"exchange"}).
    """
    lines = raw[: MAX_REQUEST_LINE * 2].split(b"\n")
    parts = lines[0].rstrip(b"\r")[:MAX_REQUEST_LINE].split(b" ")

    def text(i: int) -> str | None:
        return parts[i].decode("latin-1") if len(parts) > i and parts[i] else None

    method, target, version = text(0), text(1), text(2)
    hostField = None
    for line in lines[1:]:
        name, colon, value = line.rstrip(b"\r").partition(b":")
        if colon and name.strip().lower() == b"host":
            hostField = value.strip().decode("latin-1")
            break
    host: str | None = None
    port: int | None = None
    url = target
    if method == "CONNECT" and target:
        host, port = _splitAuthority(target, 443)
        url = f"https://{target}/"
    elif target and "://" in target:
        targetScheme, rest = target.split("://", 1)
        hostPort = rest.split("/", 1)[0].split("?", 1)[0]
        host, port = _splitAuthority(hostPort, _DEFAULT_PORTS.get(targetScheme.lower()))
    elif target is not None:
        named = hostField or hostAuthority
        if named:
            host, port = _splitAuthority(named, _DEFAULT_PORTS.get(scheme))
            url = f"{scheme}://{named}{target}"
    return {"method": method, "url": url, "version": version, "host": host, "port": port,
            "kind": "tunnel" if method == "CONNECT" else "exchange"}
