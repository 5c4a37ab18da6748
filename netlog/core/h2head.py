"""
An HTTP/2 request's fields, read and checked (RFC 9113 8.1-8.3), and
translated for an HTTP/1.1 upstream; and the other way, a request's fields
as they go to an HTTP/2 upstream and its answer's head as the exchange
reads it: pure, no I/O, so every rule is tested with tables of fields in and
heads out.

The HTTP/2 connection itself (frames, HPACK, flow control) is the C{h2}
library's; this module only says what a decoded header block means for
netlog: a L{RequestHead} whose C{headers} are the fields as the browser sent
them (lowercase names, pseudo-fields first, in order) for the log, and whose
C{relayed} are the same request in HTTP/1.1 form for the backend.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from http import HTTPStatus

from netlog.core.http1 import MAX_FIELDS, MAX_HEAD, HeadFields, Headers, RequestHead, ResponseHead, _splitHostPort
from netlog.core.records import originForm

#: The pseudo-fields a request may carry (C{:protocol} only with extended
#: CONNECT, which netlog doesn't offer).
REQUEST_PSEUDO = frozenset({b":method", b":scheme", b":authority", b":path"})
#: Fields that are about one connection and so malformed in HTTP/2
#: (RFC 9113 8.2.2); C{te} is allowed only as C{trailers}.
CONNECTION_SPECIFIC = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding",
                                 b"upgrade"})
#: The most bytes a request's fields may take, counted as HPACK's list size
#: counts them (name, value and 32 each): the same budget as an HTTP/1.1
#: head. It is advertised as C{SETTINGS_MAX_HEADER_LIST_SIZE}.
MAX_HEADER_LIST_SIZE = MAX_HEAD

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9a-z]+\Z")
_BAD_VALUE = re.compile(rb"[\x00\r\n]|\A[ \t]|[ \t]\Z")


@dataclass(frozen=True, slots=True)
class Malformed:
    """
    A request RFC 9113 makes malformed: refused on its stream
    (C{PROTOCOL_ERROR}), logged as refused with C{reason}.
    """

    reason: str
    method: str | None = None
    path: str | None = None
    authority: str | None = None


def readRequest(fields: Headers, defaultAuthority: str = "") -> RequestHead | Malformed:
    """
    Read a request's decoded header block.

    @param fields: C{(name, value)} pairs as decoded, in order.
    @param defaultAuthority: the authority a request without C{:authority}
        or C{host} is for (a decrypted CONNECT's target).
    @return: the request's head (C{version} C{HTTP/2}, C{raw} empty: HPACK
        leaves no size worth keeping), or why it is malformed.
    """
    pseudo: dict[bytes, bytes] = {}
    regular = False
    host: bytes | None = None
    size = 0
    relayed: Headers = []
    cookies: list[bytes] = []
    if len(fields) > MAX_FIELDS + len(REQUEST_PSEUDO):
        return Malformed(f"more than {MAX_FIELDS} header fields")
    for name, value in fields:
        size += len(name) + len(value) + 32
        if name[:1] == b":":
            if regular:
                return _malformed(pseudo, f"the pseudo-header {_text(name)} comes after a regular field")
            if name not in REQUEST_PSEUDO:
                return _malformed(pseudo, f"{_text(name)} is not a request pseudo-header")
            if name in pseudo:
                return _malformed(pseudo, f"the pseudo-header {_text(name)} is repeated")
            pseudo[name] = value
            continue
        regular = True
        if not _TOKEN.match(name):
            return _malformed(pseudo, f"the field name {_text(name)!r} is not a lowercase token")
        if name in CONNECTION_SPECIFIC:
            return _malformed(pseudo, f"the connection-specific field {_text(name)} is not allowed in HTTP/2")
        if name == b"te" and value.strip().lower() != b"trailers":
            return _malformed(pseudo, "te may only say trailers in HTTP/2")
        if _BAD_VALUE.search(value):
            return _malformed(pseudo, f"the value of {_text(name)} has a forbidden character or edge space")
        if name == b"host":
            host = value
        if name == b"cookie":
            # Cookie crumbs are one field again for HTTP/1.1 (RFC 9113 8.2.3).
            cookies.append(value)
            continue
        relayed.append((name, value))
    if size > MAX_HEADER_LIST_SIZE:
        return _malformed(pseudo, f"the header fields take more than {MAX_HEADER_LIST_SIZE} bytes")
    method = pseudo.get(b":method")
    if not method:
        return _malformed(pseudo, "the request has no :method")
    if method == b"CONNECT":
        return _malformed(pseudo, "CONNECT is not offered over HTTP/2 (no extended CONNECT)")
    path = pseudo.get(b":path")
    if not pseudo.get(b":scheme") or not path:
        return _malformed(pseudo, "the request lacks :scheme or :path")
    if pseudo[b":scheme"] not in (b"https", b"http"):
        return _malformed(pseudo, f"the scheme {_text(pseudo[b':scheme'])} is not http or https")
    if path != b"*" and path[:1] != b"/" or _BAD_VALUE.search(path) or b" " in path:
        return _malformed(pseudo, "the :path is not an absolute path")
    authority = pseudo.get(b":authority")
    if authority is not None and host is not None and authority != host:
        return _malformed(pseudo, "the :authority and host fields disagree")
    named = authority if authority is not None else host
    if named is None:
        named = defaultAuthority.encode("latin-1")
    split = _splitHostPort(named) if named else None
    if not named or split is None or b"@" in named:
        return _malformed(pseudo, "the request names no valid authority")
    hostName, port = split
    head = [(b"host", named)] + relayed
    if cookies:
        head.append((b"cookie", b"; ".join(cookies)))
    return RequestHead(method, path, b"HTTP/2", list(fields), b"", None, hostName, port, False, head)


def withChunkedBody(head: RequestHead) -> RequestHead:
    """
    C{head} with C{Transfer-Encoding: chunked} in its relayed fields: a body
    whose length the browser didn't give goes up in chunks.
    """
    assert head.relayed is not None
    return replace(head, relayed=head.relayed + [(b"transfer-encoding", b"chunked")])


def contentLength(head: RequestHead) -> int | None | Malformed:
    """
    The length C{content-length} gives, L{None} without one.
    """
    values = [value for name, value in head.headers if name == b"content-length"]
    if not values:
        return None
    if len(set(values)) > 1 or not values[0].isdigit() or len(values[0]) > 18:
        return Malformed("the content-length is not one number")
    return int(values[0])


def _malformed(pseudo: dict[bytes, bytes], reason: str) -> Malformed:
    def text(name: bytes) -> str | None:
        value = pseudo.get(name)
        return None if value is None else value.decode("latin-1")

    return Malformed(reason, text(b":method"), text(b":path"), text(b":authority"))


def _text(value: bytes) -> str:
    return value.decode("latin-1")


def upstreamRequest(head: RequestHead, fields: HeadFields, drop: frozenset[bytes] | set[bytes],
                    extra: Headers, scheme: bytes = b"https") -> Headers:
    """
    A request's header block as it goes to an HTTP/2 upstream: the
    pseudo-fields first (C{:authority} from C{Host}), then C{fields} less
    C{drop}, plus C{extra}, names lowercased, without the fields that are
    about one HTTP/1.1 connection (RFC 9113 8.2.2: C{te} goes only as
    C{trailers}).

    @param head: the request's head (its method and target).
    @param fields: its fields, read once (an HTTP/2 browser's as relayed).
    """
    authority = fields.first(b"host")
    if authority is None:
        authority = (head.host or "").encode("idna") if head.port is None else (
            b"%s:%d" % ((head.host or "").encode("idna"), head.port))
    target = head.target if head.url is None else originForm(head.target)
    if head.method == b"OPTIONS" and target == b"*":
        path = b"*"
    else:
        path = target
    block: Headers = [(b":method", head.method), (b":scheme", scheme), (b":authority", authority),
                      (b":path", path)]
    for (name, value), lower in zip(fields.headers, fields.lowered):
        if lower == b"te":
            if value.strip().lower() == b"trailers":
                block.append((lower, b"trailers"))
            continue
        if lower in drop or lower in CONNECTION_SPECIFIC or lower == b"host":
            continue
        block.append((lower, value))
    for name, value in extra:
        lower = name.lower()
        if lower not in CONNECTION_SPECIFIC and lower != b"te":
            block.append((lower, value))
    return block


#: The usual reason phrase of each status, for an HTTP/1.1 browser.
_PHRASES = {status.value: status.phrase.encode("latin-1") for status in HTTPStatus}
#: Answers that have no body whatever their fields say (RFC 9110 6.4.1).
_BODILESS = frozenset({204, 304})


def readAnswer(fields: Headers, method: bytes) -> tuple[ResponseHead, bool] | str:
    """
    An HTTP/2 answer's decoded header block, as the exchange reads an
    answer: a L{ResponseHead} (C{version} C{HTTP/2}, the reason phrase the
    status's usual one, for a browser on HTTP/1.1), and whether its body is
    framed in chunks for an HTTP/1.1 browser (no C{content-length}: the head
    then says C{transfer-encoding: chunked}, which an HTTP/2 browser's
    stream drops again).

    @param method: the request's method (a C{HEAD}'s answer has no body).
    @return: the head and whether it is chunked, or why it can't be read.
    """
    status: bytes | None = None
    headers: Headers = []
    for name, value in fields:
        if name[:1] == b":":
            if name != b":status" or status is not None or headers:
                return f"the answer's pseudo-header {_text(name)} is not allowed"
            status = value
            continue
        if name in CONNECTION_SPECIFIC:
            continue
        headers.append((name, value))
    if status is None or len(status) != 3 or not status.isdigit():
        return "the answer has no valid :status"
    code = int(status)
    interim = 100 <= code < 200
    reason = _PHRASES.get(code, b"")
    chunked = (not interim and code not in _BODILESS and method != b"HEAD"
               and not any(name == b"content-length" for name, _ in headers))
    if chunked:
        headers.append((b"transfer-encoding", b"chunked"))
    return ResponseHead(code, reason, b"HTTP/2", headers, b"", interim), chunked


def chunk(data: bytes) -> bytes:
    """
    C{data} as one HTTP/1.1 chunk.
    """
    return b"%x\r\n%s\r\n" % (len(data), data)


def lastChunk(trailers: Headers) -> bytes:
    """
    The end of a chunked body with its C{trailers}.
    """
    return b"0\r\n" + b"".join(name + b": " + value + b"\r\n" for name, value in trailers) + b"\r\n"
