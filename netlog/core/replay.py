"""
Replay's pure part: what a recording holds for each request it can answer,
how a request is matched to it, and the answer handed on as events.

A recording is a netlog log (kept with C{--keep-bodies all}) or a HAR.
Loading it makes a L{ReplayIndex}: per request key (the method and the URL:
scheme, host, port, path and the query as a multiset, less the ignored
parameters) and body digest (the request body's SHA-256, after the ignored
JSON or form fields are dropped), the recorded entries in recorded order,
each with only where its lines lie in the file (never its bodies). The
k-th identical request gets the k-th recorded answer, and the last repeats
after that. Recorded failures, refusals, answers that couldn't be read as
HTTP and answers whose body wasn't kept are never served: they are
counted as skipped, by why, when the index is built if what it reads says
so, else when the answer is first read back (L{ReplayIndex.match}: the
next recorded answer is served instead).

No I/O here: the shell (L{netlog.proxy.replay}) indexes the file and reads
the lines back by offset.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from email.utils import formatdate, parsedate_to_datetime
from http import HTTPStatus
from typing import Any, Callable, Hashable, Iterable, Iterator
from urllib.parse import parse_qsl, urlencode, urlsplit

from netlog.core.har import ExchangeLines
from netlog.core.http1 import HOP_BY_HOP, Body, EndOfMessage, ResponseHead
from netlog.core.logline import parseJSON

__all__ = [
    "MatchRules",
    "NotServed",
    "Recorded",
    "RecordedAnswer",
    "RecordedMessage",
    "ReplayIndex",
    "answerFromHar",
    "answerFromLog",
    "bodyKey",
    "answerEvents",
    "CONTINUE_HEAD",
    "handshake",
    "messageFrames",
    "serverFrame",
    "webSocketPlan",
    "recordedFromHar",
    "recordedFromLog",
    "recordedResponse",
    "refreshed",
    "replayMarks",
    "requestKey",
    "unmatchedAnswer",
]

#: Ports a URL without one means, by scheme (a WebSocket's as its scheme's).
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
#: A WebSocket's URL is matched as the HTTP request that opened it.
_MATCHED_SCHEMES = {"ws": "http", "wss": "https"}
#: The fields a replayed answer never carries: the hop-by-hop ones, and the
#: recorded framing (the answer is framed again by its body's length).
DROPPED_FIELDS = HOP_BY_HOP | {b"content-length"}
#: Statuses whose answer has no body whatever its fields say.
_BODILESS = frozenset({204, 304})
#: What a multipart body's own boundary is replaced with before matching.
MULTIPART_BOUNDARY = b"netlog-replay-boundary"
#: The body digest of a recorded request whose body the recording didn't
#: keep (Playwright's HAR has no C{postData} for a multipart upload): it
#: matches a request with any body, when none matches exactly.
UNKNOWN_BODY = "unknown"
#: The methods whose request, recorded without C{postData} in a HAR, is
#: taken to have had a body the HAR didn't keep.
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
#: The status of the answer to a request the recording has no answer for.
UNMATCHED_STATUS = 404

# Why a recorded entry isn't served (the keys of L{ReplayIndex.skipped}).
SKIP_FAILED = "failed"
SKIP_REFUSED = "refused"
SKIP_UNANSWERED = "unanswered"
SKIP_UNPARSED = "unparsed"
SKIP_BODY_NOT_KEPT = "body not kept"
SKIP_WEBSOCKET = "websocket"
SKIP_UNREADABLE = "unreadable"


@dataclass(frozen=True)
class MatchRules:
    """
    What of a request is left out of matching.

    @ivar ignoreParams: query parameters dropped (cache-busters: C{t}, C{_}).
    @ivar ignoreFields: JSON fields (at any depth) and form fields dropped
        from a request body.
    """

    ignoreParams: frozenset[str] = frozenset()
    ignoreFields: frozenset[str] = frozenset()


#: A URL as browsers send them (ASCII, no whitespace, no user info, no
#: bracketed host, a port of digits if any), split at once; any other is
#: split by L{urlsplit}, which this agrees with wherever it matches.
_PLAIN_URL = re.compile(
    r"([A-Za-z][A-Za-z0-9+.-]*)://([^/?#@\[\]:%\s]*)(?::([0-9]*))?(/[^?#\s]*)?(?:\?([^#\s]*))?(?:#\S*)?")
#: The highest port a URL may name: past it the port is taken as unnamed.
_MAX_PORT = 65535


def _urlParts(url: str) -> tuple[str, str, int | None, str, str]:
    """
    A URL's scheme (lowercase), host (lowercase), port (L{None} when it
    names none or an impossible one), path and query, as L{urlsplit} reads
    them; a plain URL (L{_PLAIN_URL}) without calling it, which costs ten
    times as much.
    """
    plain = _PLAIN_URL.fullmatch(url) if url.isascii() else None
    if plain is not None:
        scheme, host, portText, path, query = plain.groups()
        port = int(portText) if portText else None
        return (scheme.lower(), host.lower(), port if port is None or port <= _MAX_PORT else None,
                path or "", query or "")
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port, parts.path, parts.query


def _queryPairs(query: str) -> list[tuple[str, str]]:
    """
    A query's fields as L{parse_qsl} reads them (blank values kept), split
    at once when nothing in it is escaped.
    """
    if "%" in query or "+" in query:
        return parse_qsl(query, keep_blank_values=True)
    pairs = []
    for field_ in query.split("&"):
        if field_:
            name, _, value = field_.partition("=")
            pairs.append((name, value))
    return pairs


def requestKey(method: str, url: str, rules: MatchRules) -> Hashable:
    """
    What two requests must share to match: the method, the scheme, host
    and port (the default one when the URL names none), the path, and the
    query as a multiset (its order ignored), less C{rules.ignoreParams}.
    """
    scheme, host, port, path, query = _urlParts(url)
    if port is None:
        port = DEFAULT_PORTS.get(scheme, 0)
    ignored = rules.ignoreParams
    pairs = tuple(sorted(pair for pair in _queryPairs(query) if pair[0] not in ignored)) if query else ()
    return (method.upper(), _MATCHED_SCHEMES.get(scheme, scheme), host, port, path or "/", pairs)


def _mediaType(contentType: str | None) -> str:
    return (contentType or "").split(";", 1)[0].strip().lower()


def _withoutFields(value: Any, names: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: _withoutFields(v, names) for k, v in value.items() if k not in names}
    if isinstance(value, list):
        return [_withoutFields(v, names) for v in value]
    return value


def _param(contentType: Any, wanted: str) -> str | None:
    """
    The value of a C{Content-Type}'s parameter C{wanted} (C{charset},
    C{boundary}), if it names one.
    """
    for param in str(contentType or "").split(";")[1:]:
        name, _, value = param.partition("=")
        if name.strip().lower() == wanted:
            return value.strip().strip('"') or None
    return None


def _boundary(contentType: str | None) -> bytes | None:
    if _mediaType(contentType) != "multipart/form-data":
        return None
    boundary = _param(contentType, "boundary")
    return boundary.encode("latin-1") if boundary else None


def bodyKey(body: bytes, contentType: str | None, rules: MatchRules) -> str | None:
    """
    The digest a request's body is matched by: L{None} for no body, else
    the SHA-256 of its exact bytes, or, with C{rules.ignoreFields}, of a
    JSON body less those fields (at any depth; keys sorted) or a form body
    less those fields. A multipart body's boundary (which a browser draws
    at random) is read as L{MULTIPART_BOUNDARY}.
    """
    if not body:
        return None
    boundary = _boundary(contentType)
    if boundary:
        # Browsers choose a multipart body's boundary at random, each time.
        body = body.replace(b"--" + boundary, b"--" + MULTIPART_BOUNDARY)
    if rules.ignoreFields:
        media = _mediaType(contentType)
        if media == "application/json" or media.endswith("+json"):
            try:
                parsed = json.loads(body)
            except (ValueError, RecursionError):
                pass
            else:
                body = json.dumps(_withoutFields(parsed, rules.ignoreFields), sort_keys=True,
                                  separators=(",", ":")).encode()
        elif media == "application/x-www-form-urlencoded":
            pairs = parse_qsl(body.decode("latin-1"), keep_blank_values=True)
            body = urlencode([(k, v) for k, v in pairs if k not in rules.ignoreFields]).encode("latin-1")
    return hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class Recorded:
    """
    One recorded request the recording can answer.

    @ivar mark: the recorded line (the open line's C{n}) or HAR entry
        (its index) the answer comes from, as C{_replayed} names it.
    @ivar where: where its lines lie in the file, for the loader that
        reads its answer back.
    """

    key: Hashable
    body: str | None
    mark: int
    where: Any


@dataclass
class ReplayIndex:
    """
    The recorded requests by key and body digest, each key's in recorded
    order, and how many of each request have been answered.
    """

    entries: dict[tuple[Hashable, str | None], list[Recorded]] = field(default_factory=dict)
    served: dict[tuple[Hashable, str | None], int] = field(default_factory=dict)
    #: Recorded entries not served, by why (see the C{SKIP_} names).
    skipped: dict[str, int] = field(default_factory=dict)

    def add(self, recorded: Recorded) -> None:
        self.entries.setdefault((recorded.key, recorded.body), []).append(recorded)

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1

    def __len__(self) -> int:
        return sum(len(v) for v in self.entries.values())

    def match(self, key: Hashable, body: str | None,
              answerOf: Callable[[Recorded], RecordedAnswer]) -> tuple[Recorded, RecordedAnswer] | None:
        """
        The recorded answer for the next request with this key and body:
        the k-th of them gets the k-th recorded, the last once they run out.

        An entry is indexed before its answer is read (L{recordedFromLog}
        reads only what matching needs), so an answer found unservable when
        C{answerOf} reads it (it raises L{NotServed}) is taken out of the
        index, counted as skipped, and the next recorded answer for the
        request is served in its place, as if it had never been indexed.

        @param answerOf: reads a recorded entry's answer back.
        """
        for both in ((key, body), (key, UNKNOWN_BODY)):
            recorded = self.entries.get(both)
            while recorded:
                k = self.served.get(both, 0)
                at = min(k, len(recorded) - 1)
                try:
                    answer = answerOf(recorded[at])
                except NotServed as e:
                    del recorded[at]
                    self.skip(e.why)
                    continue
                self.served[both] = k + 1
                return recorded[at], answer
            if recorded is not None:
                del self.entries[both]
        return None

    def firstServable(self, answerOf: Callable[[Recorded], RecordedAnswer]) -> bool:
        """
        Whether the index serves anything: its entries' answers are read,
        in recorded order, until one can be served (those that can't are
        taken out and counted as skipped); usually only the first is read.
        """
        for both in list(self.entries):
            recorded = self.entries[both]
            while recorded:
                try:
                    answerOf(recorded[0])
                except NotServed as e:
                    del recorded[0]
                    self.skip(e.why)
                    continue
                return True
            del self.entries[both]
        return False


class NotServed(Exception):
    """
    A recorded answer that is never served (a failure, a refusal, one whose
    body wasn't kept...), found when it is read back.

    @ivar why: one of the C{SKIP_} names.
    """

    def __init__(self, why: str) -> None:
        Exception.__init__(self, why)
        self.why = why


@dataclass(frozen=True)
class RecordedMessage:
    """
    A recorded WebSocket message: from the browser (C{up}) or the server,
    its opcode (text or binary), its data as kept, and for one that came in
    more than one frame, each frame's payload length (when they add up to
    the data: not for a message cut or compressed when recorded).
    """

    up: bool
    opcode: int
    data: bytes
    frames: tuple[int, ...] = ()


@dataclass(frozen=True)
class RecordedAnswer:
    """
    A recorded answer, read back: its status, reason, fields in order (as
    the browser got them), body, whether the body was cut at the
    recording's limit, how long the recording waited for it (from the
    request's end to the answer's first byte), and for a WebSocket its
    messages both ways, in order.
    """

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes
    cut: bool
    wait: float
    messages: tuple[RecordedMessage, ...] = ()
    #: The recorded body's whole size and the recorded head's, for a body
    #: the recording cut (whose replayed entry keeps them:
    #: L{recordedResponse}).
    size: int | None = None
    headersSize: int | None = None
    #: The server the recorded answer came from: its address (a netlog
    #: open line's C{server.address}, a HAR's C{serverIPAddress}) and port.
    address: str | None = None
    port: int | None = None


# -- netlog logs ---------------------------------------------------------------------


def _headerValue(headers: Any, name: str) -> str | None:
    if isinstance(headers, list):
        for pair in headers:
            if isinstance(pair, (list, tuple)) and len(pair) == 2 and str(pair[0]).lower() == name:
                return str(pair[1])
    return None


def _skipReason(end: dict[str, Any]) -> str | None:
    if end.get("_failed"):
        return SKIP_FAILED
    if end.get("_refused"):
        return SKIP_REFUSED
    if end.get("_unparsed"):
        return SKIP_UNPARSED
    response = end.get("response")
    if not isinstance(response, dict) or not isinstance(response.get("status"), int):
        return SKIP_UNANSWERED
    if response["status"] == 101 and not isinstance(end.get("_websocket"), dict):
        # An upgrade to something else than a WebSocket: nothing to replay.
        return SKIP_WEBSOCKET
    body = response.get("body")
    if isinstance(body, dict) and body.get("size") and not isinstance(body.get("data"), str):
        return SKIP_BODY_NOT_KEPT
    return None


#: A top-level scalar field of a line, as netlog writes the ones before
#: an open line's C{request} and an end line's C{times} (see
#: C{docs/log-format.rst}, "Key order"): a string with no escape in it, a
#: number, C{null}, C{true} or C{false}.
_SCALAR_FIELD = rb'(?:,"[^"\\]*":(?:"[^"\\]*"|[-+.0-9eE]+|null|true|false))'
#: An open line up to its request's method and URL, when they need no
#: unescaping: its C{n}, its scalar fields (C{kind} among them) and the two
#: strings. Any other open line is parsed whole.
_OPEN_REQUEST = re.compile(
    rb'\{"n":([0-9]{1,18}),"type":"open","id":[0-9]{1,18}(' + _SCALAR_FIELD + rb'*)'
    rb',"request":\{"method":"([^"\\]*)","url":"([^"\\]*)",')
#: An end line up to the key after its C{times} (flat: names and numbers):
#: C{request_body} when the request had a body, which comes right after.
_END_TIMES = re.compile(rb'\{"n":[0-9]{1,18},"type":"end","id":[0-9]{1,18}' + _SCALAR_FIELD
                        + rb'*,"times":\{[^{}"]*(?:"[a-z_]*"[^{}"]*)*\},"([a-z_]+)":')
#: Bytes of an end line read to find what follows its C{times}.
END_HEAD_SIZE = 512
_KIND_EXCHANGE = b',"kind":"exchange",'


def _openedRequest(line: bytes) -> tuple[int, bool, str, str] | None:
    """
    An open line's C{n}, whether it is an exchange's, and its request's
    method and URL, read without parsing the line; L{None} when the line
    isn't as netlog writes it (it is then parsed).
    """
    found = _OPEN_REQUEST.match(line)
    if found is None:
        return None
    n, scalars, method, url = found.groups()
    try:
        return (int(n), _KIND_EXCHANGE in scalars + b",", method.decode("ascii"), url.decode("utf-8"))
    except UnicodeDecodeError:
        return None


def _requestBody(end: dict[str, Any]) -> bytes:
    requestBody = end.get("request_body")
    if isinstance(requestBody, dict) and isinstance(requestBody.get("data"), str):
        return base64.b64decode(requestBody["data"])
    return b""


def recordedFromLog(exchanges: Iterable[ExchangeLines], readAt: Callable[[int, int], bytes],
                    rules: MatchRules, index: ReplayIndex) -> None:
    """
    Add to C{index} each exchange of a netlog log (where its lines lie, as
    L{netlog.core.har.exchangeLines} gives them) that may be replayed.

    Only what matching needs is read: from the open line, the request's
    method and URL; from the end line's first L{END_HEAD_SIZE} bytes,
    whether the request had a body (only then is the end line read whole,
    for the body, and the open line parsed, for its type). Whether the
    answer can be served (not a failure, a refusal, a body not kept...)
    is found when it is first read back (L{answerFromLog}, through
    L{ReplayIndex.match}); an exchange the open line or the line index
    already tells is a refusal or unanswered is skipped here.
    """
    for openOffset, openLength, ends, notes in exchanges:
        try:
            openLine = readAt(openOffset, openLength)
            scanned = _openedRequest(openLine)
            opened: Any = None
            if scanned is None:
                opened = parseJSON(openLine)
                request = opened["request"]
                scanned = (int(opened["n"]), opened.get("kind") == "exchange", str(request["method"]),
                           str(request["url"]))
            mark, isExchange, method, url = scanned
            if not isExchange or not ends:
                index.skip(SKIP_UNANSWERED if isExchange else SKIP_REFUSED)
                continue
            endOffset, endLength = ends[0]
            endHead = _END_TIMES.match(readAt(endOffset, min(endLength, END_HEAD_SIZE)))
            body = b""
            if endHead is None or endHead.group(1) == b"request_body":
                end = parseJSON(readAt(endOffset, endLength))
                why = _skipReason(end)
                if why is not None:
                    index.skip(why)
                    continue
                body = _requestBody(end)
            contentType = None
            if body:
                opened = opened if opened is not None else parseJSON(openLine)
                contentType = _headerValue(opened["request"].get("headers"), "content-type")
            index.add(Recorded(requestKey(method, url, rules), bodyKey(body, contentType, rules), mark,
                               (openOffset, openLength, endOffset, endLength, notes)))
        except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
            index.skip(SKIP_UNREADABLE)


def _pairs(headers: Any) -> list[tuple[bytes, bytes]]:
    out = []
    for pair in headers or []:
        if isinstance(pair, dict):
            name, value = pair.get("name"), pair.get("value")
        else:
            name, value = pair
        out.append((str(name).encode("latin-1"), str(value).encode("latin-1")))
    return out


def answerFromLog(openLine: bytes, endLine: bytes, noteLines: Iterable[bytes] = ()) -> RecordedAnswer:
    """
    The answer a netlog log's exchange recorded, from its open and end
    lines, and for a WebSocket its message lines (C{noteLines}: its head
    and message lines, in order).

    @raise NotServed: the exchange's answer is never served (a failure, a
        refusal, a body not kept: see L{_skipReason}), or its lines can't
        be read.
    """
    try:
        return _answerFromLog(openLine, endLine, noteLines)
    except (ValueError, KeyError, TypeError, RecursionError, binascii.Error):
        raise NotServed(SKIP_UNREADABLE) from None


def _answerFromLog(openLine: bytes, endLine: bytes, noteLines: Iterable[bytes]) -> RecordedAnswer:
    opened = parseJSON(openLine)
    end = parseJSON(endLine)
    why = _skipReason(end)
    if why is not None:
        raise NotServed(why)
    response = end["response"]
    body = response.get("body") or {}
    data = body.get("data")
    times = end.get("times") or {}
    sent, first = times.get("sent"), times.get("first_byte")
    start = sent if isinstance(sent, (int, float)) else opened.get("started")
    wait = first - start if isinstance(first, (int, float)) and isinstance(start, (int, float)) else 0.0
    messages = []
    for line in noteLines:
        note = json.loads(line)
        if note.get("type") == "message" and note.get("opcode") in (OP_TEXT, OP_BINARY):
            kept = note.get("data") or ""
            payload = base64.b64decode(kept) if note.get("encoding") == "base64" else kept.encode("utf-8")
            messages.append(RecordedMessage(note.get("direction") == "up", note["opcode"], payload,
                                            _recordedFrames(note.get("frames"), payload)))
    server = opened.get("server") or {}
    address, port = server.get("address"), server.get("port")
    return RecordedAnswer(int(response["status"]), str(response.get("reason") or "").encode("latin-1"),
                          _pairs(response.get("headers")), base64.b64decode(data) if data else b"",
                          bool(body.get("_truncated")), max(wait, 0.0), tuple(messages),
                          _intOrNone(body.get("size")), _intOrNone(response.get("headers_size")),
                          address if isinstance(address, str) and address else None, _intOrNone(port))


def _recordedFrames(frames: Any, payload: bytes) -> tuple[int, ...]:
    """
    A message line's C{frames} when they can be sent again as they came:
    lengths that add up to the kept data (a message cut when recorded, or
    compressed on the wire, is sent in one frame).
    """
    if (not isinstance(frames, list) or len(frames) < 2
            or not all(isinstance(f, int) and not isinstance(f, bool) and f >= 0 for f in frames)
            or sum(frames) != len(payload)):
        return ()
    return tuple(frames)


def _intOrNone(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- HARs ------------------------------------------------------------------------------


def recordedFromHar(har: dict[str, Any], rules: MatchRules, index: ReplayIndex) -> None:
    """
    Add to C{index} each entry of a HAR (netlog's, Chrome's, Playwright's,
    mitmproxy's) that can be replayed; C{where} is the entry's index.
    """
    for i, entry in enumerate(har.get("log", {}).get("entries") or []):
        try:
            request, response = entry["request"], entry.get("response") or {}
            if entry.get("_failed"):
                index.skip(SKIP_FAILED)
                continue
            if entry.get("_refused"):
                index.skip(SKIP_REFUSED)
                continue
            status = response.get("status")
            if not isinstance(status, int) or status <= 0:
                index.skip(SKIP_UNANSWERED)
                continue
            if status == 101 and not isinstance(entry.get("_webSocketMessages"), list):
                index.skip(SKIP_WEBSOCKET)
                continue
            content = response.get("content") or {}
            size = content.get("size")
            # (Playwright writes size -1, and no text, for a redirect's body.)
            if isinstance(size, int) and size > 0 and not isinstance(content.get("text"), str):
                index.skip(SKIP_BODY_NOT_KEPT)
                continue
            post = request.get("postData")
            method = str(request["method"])
            if post is None and method.upper() in _BODY_METHODS:
                digest: str | None = UNKNOWN_BODY
            else:
                text = (post or {}).get("text")
                body = text.encode("utf-8") if isinstance(text, str) else b""
                digest = bodyKey(body, (post or {}).get("mimeType"), rules)
            index.add(Recorded(requestKey(method, str(request["url"]), rules), digest, i, i))
        except (ValueError, KeyError, TypeError, AttributeError):
            index.skip(SKIP_UNREADABLE)


#: Fields a HAR's answer drops when its body was recorded decoded: the
#: body's coding is no longer the one they name.
_DECODED_DROPPED = frozenset({b"content-encoding"})


def _encodeText(text: str, mimeType: Any) -> bytes:
    """
    A HAR's decoded C{text} as the bytes its charset makes (a Latin-1 page
    back to Latin-1); UTF-8 when none is named or it can't say it.
    """
    charset = _param(mimeType, "charset")
    if charset:
        try:
            return text.encode(charset)
        except (LookupError, UnicodeEncodeError):
            pass
    return text.encode("utf-8")


def answerFromHar(entry: dict[str, Any]) -> RecordedAnswer:
    """
    The answer a HAR entry recorded; C{content.text} as text (encoded in
    the charset its C{mimeType} names, else UTF-8) or, with C{encoding:
    base64}, as base64. HAR bodies are decoded, so C{Content-Encoding} is
    dropped.

    @raise NotServed: the entry can't be read.
    """
    try:
        return _answerFromHar(entry)
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error):
        raise NotServed(SKIP_UNREADABLE) from None


def _answerFromHar(entry: dict[str, Any]) -> RecordedAnswer:
    response = entry["response"]
    content = response.get("content") or {}
    text = content.get("text") or ""
    if content.get("encoding") == "base64":
        body = base64.b64decode(text)
    else:
        body = _encodeText(text, content.get("mimeType"))
    headers = [(n, v) for n, v in _pairs(response.get("headers"))
               if n.lower() not in _DECODED_DROPPED and not n.startswith(b":")]
    timings = entry.get("timings") or {}
    wait = timings.get("wait")
    messages = []
    for message in entry.get("_webSocketMessages") or []:
        opcode, data = message.get("opcode"), message.get("data") or ""
        if opcode in (OP_TEXT, OP_BINARY):
            binary = opcode == OP_BINARY or message.get("_encoding") == "base64"
            messages.append(RecordedMessage(message.get("type") == "send", opcode,
                                            base64.b64decode(data) if binary else data.encode("utf-8")))
    address = entry.get("serverIPAddress")
    return RecordedAnswer(int(response["status"]), str(response.get("statusText") or "").encode("latin-1"),
                          headers, body, bool(content.get("_truncated")),
                          wait / 1000.0 if isinstance(wait, (int, float)) and wait > 0 else 0.0, tuple(messages),
                          _intOrNone(content.get("size")), _intOrNone(response.get("headersSize")),
                          address if isinstance(address, str) and address else None)


# -- the answer as events ---------------------------------------------------------------


def _head(status: int, reason: bytes, fields: list[tuple[bytes, bytes]], interim: bool = False) -> ResponseHead:
    """
    A head from its parts, C{raw} its HTTP/1.1 form (what a browser's side
    that relays a server's framing sends).
    """
    raw = b"\r\n".join([b"HTTP/1.1 %d %s" % (status, reason)] + [name + b": " + value for name, value in fields])
    return ResponseHead(status, reason, b"HTTP/1.1", fields, raw + b"\r\n\r\n", interim)


def answerEvents(answer: RecordedAnswer, method: bytes) -> list[ResponseHead | Body | EndOfMessage]:
    """
    C{answer} as the events an answer source hands the exchange: its head
    (the recorded reason, or the status's own; the recorded fields in order
    less the hop-by-hop ones), its body byte for byte, and its end. Their
    framing is the body's own: a recorded C{Transfer-Encoding: chunked}
    stays (the body in one chunk), a recorded C{Content-Length} becomes the
    body's length in its place, and an answer with neither goes chunked. A
    C{HEAD}'s answer and a C{204} or C{304} keep their recorded
    C{Content-Length} and carry no body.
    """
    reason = answer.reason
    if not reason:
        try:
            reason = HTTPStatus(answer.status).phrase.encode("latin-1")
        except ValueError:
            reason = b"Recorded"
    bodiless = method == b"HEAD" or answer.status in _BODILESS or answer.status < 200
    fields: list[tuple[bytes, bytes]] = []
    length = (b"Content-Length", b"%d" % len(answer.body))
    placed = bodiless
    chunked = False
    for name, value in answer.headers:
        lower = name.lower()
        if lower in DROPPED_FIELDS:
            if bodiless and lower == b"content-length":
                fields.append((name, value))
            elif not placed and lower == b"transfer-encoding" and value.strip().lower() == b"chunked":
                fields.append((name, value))
                placed = chunked = True
            elif not placed and lower in (b"content-length", b"transfer-encoding"):
                fields.append(length)
                placed = True
            continue
        if name.startswith(b":"):
            continue
        fields.append((name, value))
    if not placed:
        # No framing field recorded (an HTTP/2 answer's, or one framed by
        # the connection's close): chunked, which adds no field an HTTP/2
        # browser sees.
        fields.append((b"Transfer-Encoding", b"chunked"))
        chunked = True
    events: list[ResponseHead | Body | EndOfMessage] = [_head(answer.status, reason, fields)]
    if bodiless:
        events.append(EndOfMessage())
        return events
    body = answer.body
    if chunked:
        if body:
            events.append(Body(body, b"%x\r\n%s\r\n" % (len(body), body)))
        events.append(EndOfMessage([], b"0\r\n\r\n"))
        return events
    if body:
        events.append(Body(body, body))
    events.append(EndOfMessage())
    return events


#: What a request that says C{Expect: 100-continue} is told before its
#: body, when nothing but the answer's source waits for it (RFC 9110,
#: 10.1.1).
CONTINUE_HEAD = _head(100, b"Continue", [], interim=True)


#: Fields whose date C{--replay-refresh} moves by the time since the answer
#: was recorded (C{Date} to now); C{Set-Cookie}'s C{Expires} attribute too.
_DATED_FIELDS = frozenset({b"date", b"expires", b"last-modified"})
_COOKIE_EXPIRES = re.compile(rb"(;\s*expires\s*=\s*)([^;]*)", re.I)


def _when(value: bytes) -> float | None:
    """
    The time an HTTP date names, or L{None} when it names none.
    """
    try:
        when = parsedate_to_datetime(value.decode("latin-1").strip())
    except (TypeError, ValueError, IndexError):
        return None
    return when.timestamp() if when.tzinfo is not None else None


def _shifted(value: bytes, shift: float) -> bytes | None:
    when = _when(value)
    return formatdate(when + shift, usegmt=True).encode("latin-1") if when is not None else None


def refreshed(answer: RecordedAnswer, now: float) -> RecordedAnswer:
    """
    C{answer} as if it were answered C{now} (C{--replay-refresh}): its
    C{Date} becomes now, and C{Expires}, C{Last-Modified} and each cookie's
    C{Expires} move by as much, so a recorded cookie or cache lifetime
    hasn't run out. An answer with no readable C{Date} is left as it was.
    """
    recordedAt = next((_when(value) for name, value in answer.headers if name.lower() == b"date"), None)
    if recordedAt is None:
        return answer
    shift = now - recordedAt
    headers = []
    for name, value in answer.headers:
        lower = name.lower()
        if lower in _DATED_FIELDS:
            value = _shifted(value, shift) or value
        elif lower == b"set-cookie":
            value = _COOKIE_EXPIRES.sub(lambda m: m.group(1) + (_shifted(m.group(2), shift) or m.group(2)), value)
        headers.append((name, value))
    return replace(answer, headers=headers)


# -- WebSockets -------------------------------------------------------------------------

#: RFC 6455's GUID, for C{Sec-WebSocket-Accept}.
_WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONTINUATION = 0
OP_TEXT = 1
OP_BINARY = 2
OP_CLOSE = 8
#: The fields of a recorded C{101} a replay sets itself: the accept key is
#: the new request's, and no extension is agreed (the recorded messages are
#: kept inflated, and are sent as they are).
_HANDSHAKE_FIELDS = frozenset({b"sec-websocket-accept", b"sec-websocket-extensions", b"upgrade", b"connection"})


def handshake(answer: RecordedAnswer, key: bytes) -> ResponseHead:
    """
    A recorded WebSocket's C{101} for a request whose C{Sec-WebSocket-Key}
    is C{key}: the recorded fields (less hop-by-hop, accept and extension
    fields), then C{Upgrade}, C{Connection} and the accept for C{key}.
    """
    accept = base64.b64encode(hashlib.sha1(key.strip() + _WS_GUID).digest())
    fields = [(name, value) for name, value in answer.headers
              if name.lower() not in _HANDSHAKE_FIELDS | DROPPED_FIELDS and not name.startswith(b":")]
    fields += [(b"Upgrade", b"websocket"), (b"Connection", b"Upgrade"), (b"Sec-WebSocket-Accept", accept)]
    return _head(101, answer.reason or b"Switching Protocols", fields)


def serverFrame(opcode: int, payload: bytes, fin: bool = True) -> bytes:
    """
    One unmasked frame from the server (RFC 6455, 5.2), final unless
    C{fin} is false.
    """
    size = len(payload)
    first = (0x80 if fin else 0) | opcode
    if size < 126:
        head = bytes((first, size))
    elif size < 1 << 16:
        head = bytes((first, 126)) + size.to_bytes(2, "big")
    else:
        head = bytes((first, 127)) + size.to_bytes(8, "big")
    return head + payload


def messageFrames(message: RecordedMessage) -> bytes:
    """
    A recorded server message as the frames it came in, when the recording
    kept their lengths (L{RecordedMessage.frames}); else as one frame.
    """
    frames = message.frames
    if not frames:
        return serverFrame(message.opcode, message.data)
    out = []
    at = 0
    last = len(frames) - 1
    for i, length in enumerate(frames):
        out.append(serverFrame(message.opcode if i == 0 else OP_CONTINUATION, message.data[at:at + length],
                               fin=i == last))
        at += length
    return b"".join(out)


def webSocketPlan(messages: Iterable[RecordedMessage]) -> list[bytes]:
    """
    The server's recorded messages as frames, by how many of the browser's
    came before them: the k-th item is sent once the browser has sent k
    messages (the 0th right after the handshake).
    """
    plan = [b""]
    for message in messages:
        if message.up:
            plan.append(b"")
        else:
            plan[-1] += messageFrames(message)
    return plan


def replayMarks(recorded: Recorded, answer: RecordedAnswer) -> dict[str, Any]:
    """
    What a replayed exchange's end line says of its answer: C{_replayed}
    (the recorded line or entry), C{_replayedCut} for a body the recording
    cut, and C{_replayedServer}, the server the recorded answer came from
    (its address and port), so that the replay's HAR entry has the
    recording's C{serverIPAddress}.
    """
    marks: dict[str, Any] = {"_replayed": recorded.mark}
    if answer.cut:
        marks["_replayedCut"] = True
    if answer.address is not None:
        marks["_replayedServer"] = {"address": answer.address, "port": answer.port}
    return marks


def recordedResponse(response: dict[str, Any], answer: RecordedAnswer) -> dict[str, Any]:
    """
    A replayed answer's end-line C{response} (as L{netlog.core.records}
    builds it) made the recorded one where the browser was sent it framed
    otherwise: for a body the recording cut, the recorded headers (the
    recorded C{Content-Length} among them, where the browser got the kept
    body's length), head size, and body size, the body marked
    C{_truncated} as in the recording. The kept bytes are the replay's:
    the recording's, byte for byte. Any other answer is left as it is.
    """
    if not answer.cut:
        return response
    out = dict(response)
    out["headers"] = [[name.decode("latin-1"), value.decode("latin-1")] for name, value in answer.headers]
    if answer.headersSize is not None:
        out["headers_size"] = answer.headersSize
    body = out.get("body")
    if isinstance(body, dict) and answer.size is not None:
        kept: dict[str, Any] = {}
        for key, value in body.items():
            if key != "_truncated":
                kept[key] = answer.size if key == "size" else value
            if key == "data":
                kept["_truncated"] = True
        out["body"] = kept
    return out


def unmatchedAnswer(method: str, url: str) -> RecordedAnswer:
    """
    The answer to a request the recording has none for: a C{404} whose
    JSON body says so.
    """
    body = json.dumps({"error": f"no recording for {method} {url}"}).encode() + b"\n"
    return RecordedAnswer(UNMATCHED_STATUS, b"Not Found",
                          [(b"Content-Type", b"application/json"), (b"Cache-Control", b"no-store")],
                          body, False, 0.0)


def iterRecorded(index: ReplayIndex) -> Iterator[Recorded]:
    """
    Every recorded entry the index serves from.
    """
    for recorded in index.entries.values():
        yield from recorded
