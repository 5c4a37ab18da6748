"""
The records both proxies write: every field of an open line and an end line,
built in one place with one key order, so that a field added here appears in
both proxies and a reader (the HAR builder among them) can rely on the order.

Pure: no I/O, nothing of Twisted. The key orders are documented in
C{docs/log-format.rst} ("Key order").
"""

from __future__ import annotations

import base64
from typing import Any, Iterable, Sequence

from netlog.core.capture import removeSignIn
from netlog.core.logline import AsciiText
from netlog.core.http1 import REASON_PHRASES, RequestHead, serializeHead

__all__ = [
    "EXCHANGE",
    "TUNNEL",
    "OPEN_KEYS",
    "END_KEYS",
    "hostPort",
    "isWebSocket",
    "urlAuthority",
    "connectUrl",
    "originForm",
    "headerPairs",
    "requestRecord",
    "unreadRequestRecord",
    "openRecord",
    "endRecord",
    "headRecord",
    "messageRecord",
    "websocketRecord",
    "HEAD_KEYS",
    "MESSAGE_KEYS",
    "ownAnswer",
    "responseRecord",
    "REFUSED_TEXT",
    "UNANSWERED_TEXT",
    "UNREACHED_TEXT",
]

#: An open line's C{kind}: an HTTP request and its answer (a WebSocket too).
EXCHANGE = "exchange"
#: An open line's C{kind}: a CONNECT relayed blind, or an upgrade relayed blind.
TUNNEL = "tunnel"

#: The keys of an open record, in the order they are written.
OPEN_KEYS = ("proxy", "kind", "started", "client", "connection", "request", "server")
#: The keys of an end record, in the order they are written (each but
#: C{ended}, C{times} and C{bytes} only when it applies).
END_KEYS = (
    "ended", "times", "request_body", "response", "interim", "bytes", "closed_by",
    "_websocket", "_unparsed", "_refused", "_failed", "_replayed", "_replayedCut",
    "_replayedServer", "_unmatched", "_forwarded", "_upstreamProxy",
)

#: The keys of a head line (an answer's head, written while it streams).
HEAD_KEYS = ("first_byte", "response")
#: The keys of a message line, in the order they are written (each of
#: C{compressed}, C{data} and the underscored ones only when it applies).
MESSAGE_KEYS = ("direction", "opcode", "size", "compressed", "frames", "data", "encoding", "_truncated",
                "_undecodable")

#: Schemes a WebSocket's URL takes for the scheme of the request that opened it.
_WEBSOCKET_SCHEMES = {"http": "ws", "https": "wss"}


def hostPort(host: str, port: int | None) -> str:
    """
    C{host:port}, an IPv6 address in brackets (given with or without them).
    """
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


#: The ports a URL leaves out, by scheme.
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def urlAuthority(host: str, port: int, scheme: str) -> str:
    """
    The authority of a C{scheme://} URL: C{host}, or C{host:port} when the
    port isn't the scheme's default; an IPv6 address in brackets.
    """
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if ":" in host:
        host = f"[{host}]"
    return host if port == DEFAULT_PORTS.get(scheme) else f"{host}:{port}"


def connectUrl(host: str, port: int | None) -> str:
    """
    A CONNECT's URL as the log names it: C{https://host:port/}, the port
    always written.
    """
    return f"https://{hostPort(host, port)}/"


def originForm(target: bytes) -> bytes:
    """
    The path and query of a request target (C{/path?query}), as it goes to a
    server: an absolute-form target loses its scheme and authority.
    """
    start = target.find(b"://")
    if start < 0:
        return target
    rest = target[start + 3:]
    cut = len(rest)
    for mark in (b"/", b"?"):
        at = rest.find(mark)
        if 0 <= at < cut:
            cut = at
    path = rest[cut:]
    if not path:
        return b"/"
    return path if path.startswith(b"/") else b"/" + path


def headerPairs(headers: Iterable[tuple[bytes, bytes]], signIn: frozenset[str] | set[str] = frozenset()
                ) -> list[list[str]]:
    """
    Header fields as the log keeps them: C{[name, value]} strings decoded as
    Latin-1 (every byte survives), the values of C{signIn} (lowercase
    names) as C{<removed>}.
    """
    pairs = [[n.decode("latin-1"), v.decode("latin-1")] for n, v in headers]
    return removeSignIn(pairs, signIn) if signIn else pairs


def isWebSocket(head: RequestHead) -> bool:
    """
    Whether C{head} asks to become a WebSocket (C{Upgrade: websocket}).
    """
    if not head.upgrade:
        return False
    return any(n.lower() == b"upgrade" and b"websocket" in v.lower() for n, v in head.headers)


def requestRecord(head: RequestHead, url: str, signIn: frozenset[str] | set[str] = frozenset()
                  ) -> dict[str, Any]:
    """
    The C{request} of an open line: the request as the browser sent it. A
    WebSocket's URL is named as the browser addressed it, C{ws://} or
    C{wss://}.
    """
    if head.upgrade and isWebSocket(head):
        scheme, colon, rest = url.partition("://")
        if colon and scheme.lower() in _WEBSOCKET_SCHEMES:
            url = _WEBSOCKET_SCHEMES[scheme.lower()] + "://" + rest
    return {
        "method": head.method.decode("latin-1"),
        "url": url,
        "version": head.version.decode("latin-1"),
        "headers": headerPairs(head.headers, signIn),
        # (An HTTP/2 head is HPACK-compressed: no size to give, as HAR's -1.)
        "headers_size": len(head.raw) if head.relayed is None else -1,
    }


def responseRecord(status: int, reason: bytes, version: bytes, headers: Iterable[tuple[bytes, bytes]],
                   headersSize: int, body: dict[str, Any] | None,
                   signIn: frozenset[str] | set[str] = frozenset()) -> dict[str, Any]:
    """
    The C{response} of an end line: the answer's head as the browser got it,
    and its C{body} record as the mode keeps it (none for a WebSocket's
    C{101}).
    """
    record = {
        "status": status,
        "reason": reason.decode("latin-1"),
        "version": version.decode("latin-1"),
        "headers": headerPairs(headers, signIn),
        "headers_size": headersSize,
    }
    if body is not None:
        record["body"] = body
    return record


def unreadRequestRecord(seen: dict[str, Any], size: int) -> dict[str, Any]:
    """
    The C{request} of a request that could not be read whole: what
    L{netlog.core.http1.readRefusedRequest} could read of it (L{None} for
    each part it couldn't), and how many bytes came.
    """
    return {"method": seen["method"], "url": seen["url"], "version": seen["version"],
            "headers": [], "headers_size": size}


def openRecord(proxy: str, kind: str, started: float, client: str, connection: str,
               request: dict[str, Any], host: str | None, port: int | None,
               address: str | None = None, rules: Sequence[dict[str, str]] = (),
               liveDecrypted: bool = False) -> dict[str, Any]:
    """
    An open line's fields, in L{OPEN_KEYS} order, then C{_rules} when a
    rule acted (see L{netlog.core.rules}), then C{_liveDecrypted} for a
    live host's CONNECT netlog decrypted, or a request inside one.

    @param host: the host the request is for (an IPv6 address without
        brackets); C{port} its port; C{address} the address connected to.
    """
    if host is not None and host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    record = {
        "proxy": proxy,
        "kind": kind,
        "started": started,
        "client": client,
        "connection": connection,
        "request": request,
        "server": {"host": host, "port": port, "address": address},
    }
    if rules:
        record["_rules"] = list(rules)
    if liveDecrypted:
        record["_liveDecrypted"] = True
    return record


def endRecord(
    ended: float,
    connected: float | None = None,
    sent: float | None = None,
    firstByte: float | None = None,
    *,
    up: int,
    down: int,
    requestBody: dict[str, Any] | None = None,
    response: dict[str, Any] | None = None,
    interim: list[int] | None = None,
    closedBy: str | None = None,
    websocket: dict[str, Any] | None = None,
    unparsed: bool = False,
    refused: tuple[str, int] | None = None,
    failed: str | None = None,
    failedStatus: int | None = None,
    marks: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """
    An end line's fields, in L{END_KEYS} order.

    @param marks: what the answer's source says of it (C{_replayed},
        C{_unmatched}, C{_forwarded}: see L{netlog.core.replay}), last.

    @param refused: C{(reason, status)} when netlog turned the request down.
    @param failed: why the exchange failed; C{failedStatus} the status
        netlog answered the browser with itself, if it did.
    """
    fields: dict[str, Any] = {
        "ended": ended,
        "times": {"connected": connected, "sent": sent, "first_byte": firstByte, "end": ended},
    }
    if requestBody is not None:
        fields["request_body"] = requestBody
    if response is not None:
        fields["response"] = response
    if interim:
        fields["interim"] = list(interim)
    fields["bytes"] = {"up": up, "down": down}
    if closedBy is not None:
        fields["closed_by"] = closedBy
    if websocket is not None:
        fields["_websocket"] = websocket
    if unparsed:
        fields["_unparsed"] = True
    if refused is not None:
        fields["_refused"] = {"reason": refused[0], "status": refused[1]}
    if failed:
        fields["_failed"] = {"reason": failed} if failedStatus is None else {"reason": failed, "status": failedStatus}
    if marks:
        fields.update(marks)
    return fields


def headRecord(firstByte: float | None, response: dict[str, Any]) -> dict[str, Any]:
    """
    A head line's fields: the answer's head as the browser got it (a
    L{responseRecord} without C{body}), for an answer still streaming.
    """
    return {"first_byte": firstByte, "response": response}


def websocketRecord(messagesUp: int, messagesDown: int, bytesUp: int, bytesDown: int,
                    closeUp: tuple[int | None, str] | None = None,
                    closeDown: tuple[int | None, str] | None = None) -> dict[str, Any]:
    """
    An end line's C{_websocket}: the messages and bytes each way, and each
    side's close frame (its code and reason) when it sent one.
    """
    record: dict[str, Any] = {
        "messages_up": messagesUp,
        "messages_down": messagesDown,
        "bytes_up": bytesUp,
        "bytes_down": bytesDown,
    }
    if closeUp is not None:
        record["close_up"] = {"code": closeUp[0], "reason": closeUp[1]}
    if closeDown is not None:
        record["close_down"] = {"code": closeDown[0], "reason": closeDown[1]}
    return record


def messageRecord(direction: str, opcode: int, size: int, data: bytes | None, truncated: bool,
                  compressed: int | None = None, undecodable: str | None = None,
                  frames: Sequence[int] | None = None) -> dict[str, Any]:
    """
    A message line's fields, in L{MESSAGE_KEYS} order.

    @param direction: C{"up"} (browser to server) or C{"down"}.
    @param data: the kept bytes, or L{None} when the WebSocket's budget for
        kept data was spent: a text message's are written as text (cut to a
        whole character), anything else (binary, bytes that aren't UTF-8,
        compressed bytes that couldn't be inflated) as base64 with
        C{"encoding": "base64"}.
    @param undecodable: why the data is the compressed bytes as they came.
    @param frames: for a message that came in more than one frame, each
        frame's payload length on the wire (what a replay needs to send it
        in the same frames).
    """
    fields: dict[str, Any] = {"direction": direction, "opcode": opcode, "size": size}
    if compressed is not None:
        fields["compressed"] = compressed
    if frames:
        fields["frames"] = list(frames)
    if data is not None:
        text: str | None = None
        if opcode == 1 and undecodable is None:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as e:
                # Cut inside a character by the cap: keep the whole ones.
                if truncated and e.start >= len(data) - 3:
                    try:
                        text = data[:e.start].decode("utf-8")
                    except UnicodeDecodeError:
                        text = None
        if text is not None:
            fields["data"] = text
        else:
            fields["data"] = AsciiText(base64.b64encode(data))
            fields["encoding"] = "base64"
    if truncated:
        fields["_truncated"] = True
    if undecodable is not None:
        fields["_undecodable"] = undecodable
    return fields


#: What an answer of netlog's own says before its reason, by what happened.
REFUSED_TEXT = "netlog refused this request: {}.\n"
UNREACHED_TEXT = "netlog could not reach the server: {}.\n"
UNANSWERED_TEXT = "netlog got no answer: {}.\n"


def ownAnswerH2(status: int, text: str, headers: Iterable[tuple[bytes, bytes]] = (),
                body: dict[str, Any] | None = None) -> tuple[list[tuple[bytes, bytes]], bytes, dict[str, Any]]:
    """
    What L{ownAnswer} says, as an HTTP/2 stream carries it: its fields
    (C{:status} first, lowercase names), its body, and its C{response}
    record (C{headers_size} -1: HPACK leaves no size).
    """
    data = text.encode("utf-8")
    fields = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", b"%d" % len(data))]
    fields += [(name.lower(), value) for name, value in headers]
    record = responseRecord(status, b"", b"HTTP/2", fields, -1,
                            body if body is not None else {"size": len(data)})
    return [(b":status", b"%d" % status)] + fields, data, record


def ownAnswer(status: int, text: str, headers: Iterable[tuple[bytes, bytes]] = (), close: bool = True,
              body: dict[str, Any] | None = None) -> tuple[bytes, dict[str, Any]]:
    """
    An answer netlog gives the browser itself (a refusal, a failure, the
    HTTP route's redirect): its bytes, and its C{response} record as the
    browser gets it.

    @param text: the plain-text body.
    @param body: the body's record as the mode keeps it; C{{"size": n}}
        when not given.
    """
    data = text.encode("utf-8")
    reason = REASON_PHRASES.get(status, b"Error")
    fields = [(b"Content-Type", b"text/plain; charset=utf-8"), (b"Content-Length", b"%d" % len(data))]
    fields += list(headers)
    if close:
        fields.append((b"Connection", b"close"))
    head = serializeHead(b"HTTP/1.1 %d %s" % (status, reason), fields)
    record = responseRecord(status, reason, b"HTTP/1.1", fields, len(head),
                            body if body is not None else {"size": len(data)})
    return head + data, record
