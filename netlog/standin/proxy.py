"""
The stand-in: a forward proxy that decrypts nothing and logs every connection.

A browser connection is read with the strict L{RequestReader} before anything
is connected. A CONNECT becomes a blind L{Relay} (the tunnel is one entry); a
plain-HTTP request in absolute form is relayed upstream as it came (the head
rewritten to origin form without its hop-by-hop fields, the body's bytes as
they came), its answer relayed back the same way, and is one entry of its own.
Both sides keep their connections alive between requests. An C{Upgrade} the
origin accepts with C{101} becomes a tunnel entry.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

from twisted.internet import defer, error
from twisted.internet.protocol import Protocol, ServerFactory
from twisted.logger import Logger
from twisted.python.failure import Failure

from netlog.core.http1 import (
    Body,
    EndOfMessage,
    Event,
    Incomplete,
    Refused,
    RequestHead,
    RequestReader,
    ResponseHead,
    ResponseReader,
    Unparsable,
    HOP_BY_HOP,
    commaValues,
    hopByHop,
    readRefusedRequest,
)
from netlog.core.logline import REASON_STOPPED
from netlog.core.records import (
    EXCHANGE,
    REFUSED_TEXT,
    TUNNEL,
    UNANSWERED_TEXT,
    UNREACHED_TEXT,
    connectUrl,
    endRecord,
    hostPort,
    openRecord,
    originForm,
    ownAnswer,
    requestRecord,
    responseRecord,
    unreadRequestRecord,
)
from netlog.log.writer import LogWriter
from netlog.net.connect import connectThen, describeFailure
from netlog.net.policy import DestinationPolicy
from netlog.net.relay import (
    CLIENT,
    PROXY,
    TUNNEL_ANSWER,
    Gate,
    Relay,
    RelayResult,
    isReset,
    tunnelAnswerFields,
)
from netlog.net.resolve import DoesNotResolve, Resolution, Resolver
from netlog.net.send import noDelay, sendNow
from netlog.net.timeouts import DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT

_log = Logger()

PROXY_NAME = "standin"

#: Ports a CONNECT may reach unless C{--connect-ports} says otherwise: HTTPS,
#: and HTTP, since browsers open a C{ws://} WebSocket through a proxy with a
#: CONNECT to its port (80 unless the URL names another).
DEFAULT_CONNECT_PORTS = frozenset({80, 443})

#: Why the browser's connection is paused.
CONNECTING = "connecting"
ANSWER = "answer"

FORBIDDEN = 403
REQUEST_TIMEOUT = 408



@dataclass(frozen=True)
class Settings:
    """
    The stand-in's limits and timeouts (each an option of the tap).
    """

    connectPorts: frozenset[int] = DEFAULT_CONNECT_PORTS
    connectTimeout: float = DEFAULT_CONNECT_TIMEOUT
    idleTimeout: float = DEFAULT_IDLE_TIMEOUT
    headerTimeout: float = DEFAULT_HEADER_TIMEOUT


def _text(value: bytes) -> str:
    return value.decode("latin-1")


def _bare(host: str) -> str:
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


class _Fields:
    """
    One pass over a head's fields: what relaying it needs, each name
    lowercased once.

    @ivar drop: the lowercased names not to forward (as L{hopByHop} says).
    @ivar keepAlive: what L{keepAlive} says for the head's version.
    """

    __slots__ = ("headers", "lowered", "drop", "keepAlive")

    def __init__(self, version: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.headers = headers
        lowered = [name.lower() for name, _ in headers]
        self.lowered = lowered
        tokens: list[bytes] = []
        if b"connection" in lowered:
            tokens = commaValues(headers, b"connection")
        # What Connection lists is hopByHop's to decide (it never names the
        # fields that frame the message).
        self.drop: frozenset[bytes] | set[bytes] = hopByHop(headers) if tokens else HOP_BY_HOP
        if b"close" in tokens:
            self.keepAlive = False
        else:
            self.keepAlive = version == b"HTTP/1.1" or (
                version == b"HTTP/1.0" and b"keep-alive" in tokens
            )

    def has(self, name: bytes) -> bool:
        return name in self.lowered

    def values(self, name: bytes) -> list[bytes]:
        """
        The values of the fields called C{name} (lowercase), in order.
        """
        return [v for (_, v), n in zip(self.headers, self.lowered) if n == name]

    def kept(self) -> list[tuple[bytes, bytes]]:
        """
        The fields that go on, as they came.
        """
        drop = self.drop
        return [field for field, n in zip(self.headers, self.lowered) if n not in drop]

    def serialize(self, startLine: bytes, extra: list[tuple[bytes, bytes]]) -> bytes:
        """
        What L{serializeHead}C{(startLine, headers, drop=self.drop,
        extra=extra)} builds.
        """
        drop = self.drop
        parts = [startLine, b"\r\n"]
        for (name, value), n in zip(self.headers, self.lowered):
            if n not in drop:
                parts += (name, b": ", value, b"\r\n")
        for name, value in extra:
            parts += (name, b": ", value, b"\r\n")
        parts.append(b"\r\n")
        return b"".join(parts)


class StandinFactory(ServerFactory):
    """
    Builds a L{BrowserConnection} for each browser connection.
    """

    def __init__(
        self,
        writer: LogWriter,
        reactor: Any,
        resolver: Resolver,
        policy: DestinationPolicy,
        settings: Settings = Settings(),
    ) -> None:
        self.writer = writer
        self.reactor = reactor
        self.resolver = resolver
        self.policy = policy
        self.settings = settings
        self._ids = itertools.count(1)
        self.connections: set[BrowserConnection] = set()

    def nextConnectionId(self) -> str:
        return f"c{next(self._ids)}"

    def buildProtocol(self, addr: Any) -> BrowserConnection:
        return BrowserConnection(self)


class Upstream(Protocol):
    """
    A connection to an origin for plain HTTP (reused while both sides keep it
    alive), or the server side of a tunnel.
    """

    transport: Any

    def __init__(self, owner: BrowserConnection, host: str, port: int, address: str) -> None:
        self.owner: BrowserConnection | None = owner
        self.host = host
        self.port = port
        self.address = address
        self.reader = ResponseReader()
        self.gate: Gate | None = None
        self.relay: Relay | None = None
        self.gone = False

    def connectionMade(self) -> None:
        noDelay(self.transport)
        self.gate = Gate(self.transport)

    def dataReceived(self, data: bytes) -> None:
        if self.relay is not None:
            self.relay.fromServer(data)
        elif self.owner is not None:
            self.owner.serverData(self, data)

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        self.gone = True
        if self.relay is not None:
            if self.relay.result is None:
                self.relay.serverLost(reason)
            else:
                self.relay.otherLost()
        elif self.owner is not None:
            self.owner.serverLost(self, reason)


class Exchange:
    """
    One plain-HTTP request on a browser connection and its answer: what its
    log lines need.
    """

    def __init__(self, head: RequestHead, started: float) -> None:
        self.head = head
        self.started = started
        self.id = 0
        self.openFields: dict[str, Any] | None = None
        self.upstream: Upstream | None = None
        self.connected: float | None = None
        self.sent: float | None = None
        self.firstByte: float | None = None
        self.up = 0
        self.down = 0
        self.requestBody = 0
        self.hasBody = False
        self.requestDone = False
        self.response: ResponseHead | None = None
        self.responseHeadersSize = 0
        self.responseHeaders: list[tuple[bytes, bytes]] = []
        self.responseBody = 0
        self.interim: list[int] = []
        self.ended = False
        self.opened = False
        #: Whether the browser's request lets its connection stay open.
        self.requestKeepAlive = False
        #: Whether the answer lets the upstream connection be reused.
        self.upstreamKeepAlive = False


class BrowserConnection(Protocol):
    """
    One browser connection to the stand-in.
    """

    transport: Any

    def __init__(self, factory: StandinFactory) -> None:
        self.factory = factory
        self.reactor = factory.reactor
        self.writer = factory.writer
        self.settings = factory.settings
        self.reader = RequestReader(forwardProxy=True)
        self.queue: deque[Event] = deque()
        self.exchange: Exchange | None = None
        self.upstream: Upstream | None = None
        self.relay: Relay | None = None
        self.closing = False
        self.gone = False
        self.connecting = False
        self.headStarted: float | None = None
        self.lastActivity = 0.0
        self._timer: Any = None
        self.gate: Gate
        #: Writes held until the bytes read in this turn are dealt with (see
        #: L{_batch}), or L{None} outside one.
        self._out: list[tuple[Any, bytes]] | None = None

    # -- the browser's side ----------------------------------------------------

    def connectionMade(self) -> None:
        self.factory.connections.add(self)
        self.connectionId = self.factory.nextConnectionId()
        peer = self.transport.getPeer()
        self.client = hostPort(getattr(peer, "host", "?"), getattr(peer, "port", 0))
        here = self.transport.getHost()
        self.factory.policy.addListener(getattr(here, "host", ""), getattr(here, "port", 0))
        noDelay(self.transport)
        self.gate = Gate(self.transport)
        self.lastActivity = self.reactor.seconds()
        self._arm()

    def dataReceived(self, data: bytes) -> None:
        if self.relay is not None:
            self.relay.fromClient(data)
            return
        if self.closing:
            return
        now = self.reactor.seconds()
        self.lastActivity = now
        if self.headStarted is None and self.exchange is None and self.reader.idle:
            self.headStarted = now
            self._arm()
        opened = self._batch()
        try:
            self.queue.extend(self.reader.feed(data))
            self._process()
        finally:
            if opened:
                self._flush(end=True)

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        self.gone = True
        self.factory.connections.discard(self)
        self._disarm()
        if self.relay is not None:
            if self.relay.result is None:
                self.relay.clientLost(reason)
            else:
                self.relay.otherLost()
            return
        exchange = self.exchange
        if exchange is not None and not exchange.ended:
            why = (
                "the client reset the connection"
                if isReset(reason)
                else "the client closed the connection before the answer was whole"
            )
            self._endExchange(exchange, failure=why)
        self._dropUpstream()

    # -- reading requests --------------------------------------------------------

    def _process(self) -> None:
        while self.queue and not self.closing and self.relay is None:
            if self.connecting:
                # Wait for the connection (reading is paused meanwhile).
                return
            if self.exchange is not None and self.exchange.requestDone:
                # A request pipelined behind one still being answered: read
                # nothing more from the browser until the answer is whole.
                self.gate.hold(ANSWER)
                return
            event = self.queue.popleft()
            if isinstance(event, RequestHead):
                self._request(event)
            elif isinstance(event, Body):
                self._requestBody(event)
            elif isinstance(event, EndOfMessage):
                self._requestEnd(event)
            elif isinstance(event, Refused):
                self._refusedByReader(event)
            elif isinstance(event, Incomplete):
                pass

    def _request(self, head: RequestHead) -> None:
        started = self.headStarted if self.headStarted is not None else self.reactor.seconds()
        self.headStarted = None
        exchange = Exchange(head, started)
        self.exchange = exchange
        host = head.host or ""
        port = head.port or 0
        if head.isConnect:
            exchange.openFields = self._openFields(exchange, TUNNEL, connectUrl(host, port))
        else:
            assert head.url is not None
            exchange.openFields = self._openFields(exchange, EXCHANGE, head.url)
        for later in self.queue:
            # The rest of this message is already read and malformed: turn
            # it down before connecting anywhere.
            if isinstance(later, (RequestHead, EndOfMessage)):
                break
            if isinstance(later, Refused):
                self._refuse(exchange, later.status, later.reason)
                return
        if head.isConnect:
            if port not in self.settings.connectPorts:
                allowed = ", ".join(str(p) for p in sorted(self.settings.connectPorts))
                self._refuse(
                    exchange,
                    FORBIDDEN,
                    f"CONNECT to port {port} is not allowed (allowed: {allowed}; see --connect-ports)",
                )
                return
        else:
            assert head.url is not None
            if not head.url.lower().startswith("http://"):
                self._refuse(
                    exchange, 400, "an https:// URL must be requested through CONNECT, not as plain HTTP"
                )
                return
            upstream = self.upstream
            if upstream is not None and not upstream.gone and (upstream.host, upstream.port) == (host, port):
                exchange.upstream = upstream
                exchange.openFields["server"]["address"] = upstream.address
                self._sendHead(exchange)
                return
            self._dropUpstream()
        self.connecting = True
        self.gate.hold(CONNECTING)
        resolver = self.factory.resolver
        try:
            resolution = resolver.resolveNow(_bare(host))
        except DoesNotResolve:
            self._connectFailed(Failure(), exchange, host, port)
            return
        if resolution is None:
            d = resolver.resolve(_bare(host))
            d.addCallback(self._resolved, exchange, host, port)
            d.addErrback(self._connectFailed, exchange, host, port)
            return
        # Known without asking (most names the proxy is told): no Deferred.
        try:
            self._resolved(resolution, exchange, host, port)
        except Exception:
            self._connectFailed(Failure(), exchange, host, port)

    def _openFields(self, exchange: Exchange, kind: str, url: str) -> dict[str, Any]:
        head = exchange.head
        return openRecord(PROXY_NAME, kind, exchange.started, self.client, self.connectionId,
                          requestRecord(head, url), head.host or "", head.port)

    def _resolved(self, resolution: Resolution, exchange: Exchange, host: str, port: int) -> Any:
        if self.gone or exchange is not self.exchange:
            return None
        policy = self.factory.policy
        address = None
        why = None
        for candidate in resolution.addresses:
            why = policy.check(candidate, port, named=resolution.named)
            if why is None:
                address = candidate
                break
        if address is None:
            self.connecting = False
            self._refuse(exchange, FORBIDDEN, f"{_bare(host)} may not be reached: {why}")
            return None
        assert exchange.openFields is not None
        exchange.openFields["server"]["address"] = address
        upstream = Upstream(self, host, port, address)

        def connected(_: object) -> None:
            opened = self._batch()
            try:
                self._connected(exchange, upstream)
            except Exception:
                self._connectFailed(Failure(), exchange, host, port)
            finally:
                if opened:
                    self._flush(end=True)

        connectThen(
            self.reactor, address, port, lambda: upstream,  # type: ignore[arg-type, return-value]
            connected,
            lambda failure: self._connectFailed(failure, exchange, host, port),
            timeout=self.settings.connectTimeout,
        )
        return None

    def _connectFailed(self, failure: Failure, exchange: Exchange, host: str, port: int) -> None:
        self.connecting = False
        if self.gone or exchange is not self.exchange:
            return
        if not failure.check(DoesNotResolve, error.ConnectError, defer.CancelledError):
            _log.failure("Connecting to {host}:{port} failed unexpectedly", failure, host=host, port=port)
        reason, status = describeFailure(failure, _bare(host), port)
        self._fail(exchange, status, reason)

    def _connected(self, exchange: Exchange, upstream: Upstream) -> None:
        self.connecting = False
        exchange.connected = self.reactor.seconds()
        if self.gone or exchange is not self.exchange:
            upstream.owner = None
            upstream.transport.loseConnection()
            return
        self.gate.release(CONNECTING)
        if exchange.head.isConnect:
            self._openTunnel(exchange, upstream)
            return
        self.upstream = upstream
        exchange.upstream = upstream
        self.transport.registerProducer(upstream.gate, True)
        upstream.transport.registerProducer(self.gate, True)
        self._sendHead(exchange)
        self._process()

    # -- tunnels ----------------------------------------------------------------

    def _openTunnel(self, exchange: Exchange, upstream: Upstream) -> None:
        responseFields = tunnelAnswerFields()
        relay = self._relay(exchange, lambda result: self._tunnelEnded(exchange, result, responseFields))
        self.relay = relay
        upstream.relay = relay
        upstream.owner = None
        exchange.sent = exchange.connected
        self.queue.clear()
        self._disarm()
        self.gate.release(ANSWER)
        self._open(exchange)
        self._write(self.transport, TUNNEL_ANSWER)
        self._flush()
        relay.start(upstream.transport, pending=self.reader.leftover(), serverGate=upstream.gate)

    def _tunnelEnded(
        self, exchange: Exchange, result: RelayResult, response: dict[str, Any] | None
    ) -> None:
        exchange.ended = True
        self.writer.end(exchange.id, endRecord(
            result.ended, exchange.connected, exchange.sent, exchange.firstByte or result.firstByte,
            up=result.up, down=result.down,
            requestBody={"size": exchange.requestBody} if exchange.hasBody else None,
            response=response, interim=exchange.interim, closedBy=result.closedBy,
            failed=result.failure,
        ))

    def _open(self, exchange: Exchange) -> None:
        assert exchange.openFields is not None
        if not exchange.opened:
            exchange.opened = True
            exchange.id = self.writer.open(exchange.openFields)

    # -- plain HTTP: the request going up -----------------------------------------

    def _sendHead(self, exchange: Exchange) -> None:
        head = exchange.head
        upstream = exchange.upstream
        assert upstream is not None
        fields = _Fields(head.version, head.headers)
        exchange.requestKeepAlive = fields.keepAlive
        extra: list[tuple[bytes, bytes]] = []
        if fields.has(b"transfer-encoding") and commaValues(head.headers, b"transfer-encoding"):
            extra.append((b"Transfer-Encoding", b"chunked"))
            exchange.hasBody = True
        elif fields.has(b"content-length") and any(
            v.strip() not in (b"0",) for v in fields.values(b"content-length")
        ):
            exchange.hasBody = True
        if head.upgrade:
            extra.append((b"Connection", b"Upgrade"))
            for name, value in head.headers:
                if name.lower() == b"upgrade":
                    extra.append((name, value))
        line = head.method + b" " + originForm(head.target) + b" " + head.version
        data = fields.serialize(line, extra)
        upstream.reader.expectResponseTo(head.method)
        exchange.up += len(data)
        if not head.upgrade:
            # An Upgrade is logged once its answer says whether it became a
            # tunnel.
            self._open(exchange)
        self._write(upstream.transport, data)
        self.lastActivity = self.reactor.seconds()
        self._arm()

    def _requestBody(self, event: Body) -> None:
        exchange = self.exchange
        if exchange is None or exchange.upstream is None:
            return
        exchange.requestBody += len(event.data)
        exchange.hasBody = True
        exchange.up += len(event.raw)
        self._write(exchange.upstream.transport, event.raw)

    def _requestEnd(self, event: EndOfMessage) -> None:
        exchange = self.exchange
        if exchange is None or exchange.upstream is None:
            return
        if event.raw:
            exchange.up += len(event.raw)
            self._write(exchange.upstream.transport, event.raw)
        exchange.requestDone = True
        exchange.sent = self.reactor.seconds()
        if exchange.head.upgrade and not exchange.ended:
            # What follows an Upgrade isn't read until the answer says what
            # it is; don't let it pile up meanwhile.
            self.gate.hold(ANSWER)
        if exchange.ended:
            # The answer came whole before the request did.
            self._afterExchange(exchange)

    # -- plain HTTP: the answer coming down -----------------------------------------

    def serverData(self, upstream: Upstream, data: bytes) -> None:
        exchange = self.exchange
        self.lastActivity = self.reactor.seconds()
        if exchange is None or exchange.upstream is not upstream or exchange.ended:
            # Bytes from an idle keep-alive connection: it can't be reused.
            upstream.owner = None
            upstream.transport.loseConnection()
            if upstream is self.upstream:
                self.upstream = None
            return
        if exchange.firstByte is None:
            exchange.firstByte = self.lastActivity
        opened = self._batch()
        try:
            for event in upstream.reader.feed(data):
                if self.relay is not None or exchange.ended:
                    break
                self._responseEvent(exchange, upstream, event)
        finally:
            if opened:
                self._flush(end=True)

    def _responseEvent(self, exchange: Exchange, upstream: Upstream, event: Event) -> None:
        if isinstance(event, ResponseHead):
            self._responseHead(exchange, upstream, event)
        elif isinstance(event, Body):
            exchange.responseBody += len(event.data)
            exchange.down += len(event.raw)
            self._write(self.transport, event.raw)
        elif isinstance(event, EndOfMessage):
            if event.raw:
                exchange.down += len(event.raw)
                self._write(self.transport, event.raw)
            self._endExchange(exchange)
            self._afterExchange(exchange)
        elif isinstance(event, Unparsable):
            self._unparsable(exchange, upstream, event)
        elif isinstance(event, Incomplete):
            if event.raw and not self.gone:
                # What the server sent of the message's framing before it
                # closed (a last chunk, a trailer section begun): the browser
                # gets every byte, as it came.
                exchange.down += len(event.raw)
                self._write(self.transport, event.raw)
            self._serverCut(exchange, event.reason)

    def _responseHead(self, exchange: Exchange, upstream: Upstream, head: ResponseHead) -> None:
        fields = _Fields(head.version, head.headers)
        extra: list[tuple[bytes, bytes]] = []
        if fields.has(b"transfer-encoding"):
            codings = commaValues(head.headers, b"transfer-encoding")
            if codings:
                # The body is relayed with its framing as it came.
                extra.append((b"Transfer-Encoding", b", ".join(codings)))
        startLine = head.version + b" %d " % head.status + head.reason
        if head.interim:
            data = fields.serialize(startLine, [])
            exchange.interim.append(head.status)
            exchange.down += len(data)
            self._write(self.transport, data)
            return
        exchange.upstreamKeepAlive = fields.keepAlive
        upgraded = head.status == 101 and exchange.head.upgrade
        if upgraded:
            extra = [(b"Connection", b"Upgrade")] + [
                (n, v) for n, v in head.headers if n.lower() == b"upgrade"
            ]
        elif not self._clientMayStay(exchange, head):
            extra.append((b"Connection", b"close"))
        data = fields.serialize(startLine, extra)
        exchange.response = head
        exchange.responseHeaders = fields.kept() + extra
        exchange.responseHeadersSize = len(data)
        exchange.down += len(data)
        self._write(self.transport, data)
        if upgraded:
            self._upgradeToTunnel(exchange, upstream)
        elif exchange.head.upgrade:
            # Declined: the bytes after the request are the next request.
            self.queue.extend(self.reader.resume())
            self._open(exchange)

    def _clientMayStay(self, exchange: Exchange, head: ResponseHead) -> bool:
        request = exchange.head
        return request.version == b"HTTP/1.1" and exchange.requestKeepAlive and not head.eofFramed

    def _upgradeToTunnel(self, exchange: Exchange, upstream: Upstream) -> None:
        assert exchange.openFields is not None
        exchange.openFields["kind"] = TUNNEL
        self._stopParsing(upstream)
        response = self._responseLogFields(exchange)
        relay = self._relay(exchange, lambda result: self._tunnelEnded(exchange, result, response))
        relay.firstByte = exchange.firstByte
        self._relayRest(relay, upstream, b"")

    def _relay(self, exchange: Exchange, onEnd: Callable[[RelayResult], None]) -> Relay:
        """
        A relay for the browser's connection, ending with C{onEnd}, that
        writes C{exchange}'s open line if it isn't written yet and counts on
        from the bytes the exchange has counted.
        """
        return Relay(
            self.reactor,
            self.transport,
            self.gate,
            onEnd=onEnd,
            onOpen=lambda: self._open(exchange),
            idleTimeout=self.settings.idleTimeout,
            up=exchange.up,
            down=exchange.down,
        )

    def _stopParsing(self, upstream: Upstream) -> None:
        """
        Both connections become a blind relay: no more timers or producers
        of the HTTP shell.
        """
        self._flush()
        self._disarm()
        self.transport.unregisterProducer()
        upstream.transport.unregisterProducer()
        self.gate.release(ANSWER)

    def _relayRest(self, relay: Relay, upstream: Upstream, pendingDown: bytes) -> None:
        """
        Hand both connections to C{relay}, with every byte read from either
        and not yet relayed.
        """
        self.relay = relay
        upstream.relay = relay
        upstream.owner = None
        self.upstream = None
        pendingUp = b"".join(
            e.raw for e in self.queue if isinstance(e, (Body, EndOfMessage))
        ) + self.reader.leftover()
        self.queue.clear()
        relay.start(
            upstream.transport,
            pending=pendingUp,
            serverGate=upstream.gate,
            pendingDown=pendingDown + upstream.reader.leftover(),
        )

    def _unparsable(self, exchange: Exchange, upstream: Upstream, event: Unparsable) -> None:
        """
        An answer that can't be read as HTTP is relayed as it came, and the
        rest of both connections with it.
        """
        assert exchange.openFields is not None
        self._stopParsing(upstream)
        self._open(exchange)

        def ended(result: RelayResult) -> None:
            exchange.ended = True
            self.writer.end(exchange.id, self._exchangeEndFields(
                exchange, result.failure, unparsed=True, ended=result.ended, bytesUpDown=(result.up, result.down)))

        self._relayRest(self._relay(exchange, ended), upstream, event.raw)

    def serverLost(self, upstream: Upstream, reason: Failure) -> None:
        if upstream is self.upstream:
            self.upstream = None
        exchange = self.exchange
        if exchange is None or exchange.upstream is not upstream or exchange.ended:
            return
        for event in upstream.reader.feedEOF():
            if exchange.ended or self.relay is not None:
                return
            self._responseEvent(exchange, upstream, event)
        if exchange.ended or self.relay is not None:
            return
        if isReset(reason):
            why = "the server reset the connection"
        else:
            why = "the server closed the connection"
        if exchange.response is None:
            why += " before answering"
        else:
            why += " in the middle of the answer"
        self._serverCut(exchange, why)

    def _serverCut(self, exchange: Exchange, why: str) -> None:
        if exchange.response is None:
            self._fail(exchange, 502, why)
        else:
            self._endExchange(exchange, failure=why)
            self._close()

    # -- ending exchanges ----------------------------------------------------------

    def _responseLogFields(self, exchange: Exchange) -> dict[str, Any] | None:
        head = exchange.response
        if head is None:
            return None
        return responseRecord(head.status, head.reason, head.version, exchange.responseHeaders,
                              exchange.responseHeadersSize, {"size": exchange.responseBody})

    def _exchangeEndFields(
        self,
        exchange: Exchange,
        failure: str | None = None,
        *,
        answer: dict[str, Any] | None = None,
        answerSize: int = 0,
        status: int | None = None,
        refused: tuple[str, int] | None = None,
        closedBy: str | None = None,
        unparsed: bool = False,
        ended: float | None = None,
        bytesUpDown: tuple[int, int] | None = None,
    ) -> dict[str, Any]:
        """
        An exchange's end record. C{answer} is an answer netlog gave the
        browser itself (of C{answerSize} bytes), in place of the server's.
        """
        now = self.reactor.seconds() if ended is None else ended
        if answer is not None:
            up, down = max(exchange.up, len(exchange.head.raw)), answerSize
        elif bytesUpDown is not None:
            up, down = bytesUpDown
        else:
            up, down = exchange.up, exchange.down
        return endRecord(
            now, exchange.connected, exchange.sent, exchange.firstByte, up=up, down=down,
            requestBody={"size": exchange.requestBody} if exchange.hasBody else None,
            response=answer if answer is not None else None if unparsed else self._responseLogFields(exchange),
            interim=exchange.interim, closedBy=closedBy, unparsed=unparsed, refused=refused,
            failed=failure, failedStatus=status,
        )

    def _endExchange(
        self, exchange: Exchange, failure: str | None = None, closedBy: str = CLIENT
    ) -> None:
        if exchange.ended:
            return
        exchange.ended = True
        fields = self._exchangeEndFields(exchange, failure, closedBy=closedBy if exchange.head.isConnect else None)
        if not exchange.opened and exchange.openFields is not None:
            # An Upgrade whose answer never came whole, or a request the
            # browser gave up on before it went up: both lines now.
            exchange.opened = True
            exchange.id = self.writer.refuse(exchange.openFields, fields)
            return
        self.writer.end(exchange.id, fields)

    def _afterExchange(self, exchange: Exchange) -> None:
        """
        The answer is whole: reuse or drop the upstream, keep or close the
        browser's connection, then read the next request.
        """
        if not exchange.requestDone:
            # The answer came before the whole request: neither connection
            # can be used again.
            self._dropUpstream()
            self._close()
            return
        head = exchange.response
        upstream = exchange.upstream
        if head is None or upstream is None:
            return
        if head.eofFramed or not exchange.upstreamKeepAlive or not upstream.reader.idle:
            self._dropUpstream()
        if not self._clientMayStay(exchange, head):
            self._close()
            return
        self.exchange = None
        self.lastActivity = self.reactor.seconds()
        self._arm()
        self.gate.release(ANSWER)
        self._process()

    def _refuse(self, exchange: Exchange, status: int, reason: str) -> None:
        """
        Turn a request down before it goes anywhere: answer, log, close.
        """
        answer, response = ownAnswer(status, REFUSED_TEXT.format(reason))
        assert exchange.openFields is not None
        exchange.ended = True
        self.writer.refuse(exchange.openFields, endRecord(
            self.reactor.seconds(), up=len(exchange.head.raw), down=len(answer), response=response,
            refused=(reason, status),
        ))
        self._write(self.transport, answer)
        self._close()

    def _fail(self, exchange: Exchange, status: int, reason: str) -> None:
        """
        The request could not be served (no such host, refused, timed out,
        cut): answer 502 or 504 with the reason, log it, close.
        """
        answer, response = ownAnswer(status, (UNANSWERED_TEXT if exchange.opened else UNREACHED_TEXT).format(reason))
        assert exchange.openFields is not None
        # netlog answered the browser itself: the status it got, as
        # C{_refused} has it (the HAR reads it from here).
        fields = self._exchangeEndFields(exchange, reason, answer=response, answerSize=len(answer), status=status,
                                         closedBy=PROXY if exchange.head.isConnect else None)
        exchange.ended = True
        if exchange.opened:
            self.writer.end(exchange.id, fields)
        else:
            exchange.opened = True
            exchange.id = self.writer.refuse(exchange.openFields, fields)
        if not self.gone:
            self._write(self.transport, answer)
        self._dropUpstream()
        self._close()

    def _refusedByReader(self, event: Refused) -> None:
        """
        The reader refused a message: nothing after it is read.
        """
        exchange = self.exchange
        if exchange is not None and not exchange.ended and exchange.upstream is not None:
            # A malformed body after a head that went up: cut both.
            why = f"the request was malformed: {event.reason}"
            if exchange.response is None:
                exchange.ended = True
                answer, response = ownAnswer(event.status, REFUSED_TEXT.format(why))
                fields = self._exchangeEndFields(exchange, answer=response, answerSize=len(answer),
                                                 refused=(event.reason, event.status))
                if exchange.opened:
                    self.writer.end(exchange.id, fields)
                else:
                    exchange.opened = True
                    exchange.id = self.writer.refuse(exchange.openFields or {}, fields)
                self._write(self.transport, answer)
            else:
                self._endExchange(exchange, failure=why)
            self._dropUpstream()
            self._close()
            return
        started = self.headStarted if self.headStarted is not None else self.reactor.seconds()
        self._refuseUnread(event.raw, started, event.status, event.reason)

    def _refuseUnread(self, buffered: bytes, started: float, status: int, reason: str) -> None:
        """
        Turn down a request that could not be read whole (malformed, or its
        head not whole in time): answer, log what could be read of it, close.
        """
        seen = readRefusedRequest(buffered, "http")
        answer, response = ownAnswer(status, REFUSED_TEXT.format(reason))
        self.writer.refuse(
            openRecord(PROXY_NAME, seen["kind"], started, self.client, self.connectionId,
                       unreadRequestRecord(seen, len(buffered)), seen["host"], seen["port"]),
            endRecord(self.reactor.seconds(), up=len(buffered), down=len(answer), response=response,
                      refused=(reason, status)),
        )
        self._write(self.transport, answer)
        self._close()

    # -- writing -------------------------------------------------------------------

    def _batch(self) -> bool:
        """
        Hold writes until L{_flush}: the bytes read in one turn (a head and
        its body, say) go out in one send each way, after the log lines they
        make are written. Returns whether this call began the batch (a
        nested call leaves it to the outer one).
        """
        if self._out is not None:
            return False
        self._out = []
        return True

    def _write(self, transport: Any, data: bytes) -> None:
        if self._out is not None:
            self._out.append((transport, data))
        else:
            sendNow(transport, data)

    def _flush(self, end: bool = False) -> None:
        """
        Send what the batch holds, in order, joining what goes to the same
        transport; C{end} ends the batch. Outside a batch there is nothing to
        send, and none is begun.
        """
        out = self._out
        self._out = None if end or out is None else []
        if not out:
            return
        if len(out) == 1:
            sendNow(*out[0])
            return
        transport, parts = out[0][0], [out[0][1]]
        for nextTransport, data in out[1:]:
            if nextTransport is not transport:
                sendNow(transport, b"".join(parts))
                transport, parts = nextTransport, []
            parts.append(data)
        sendNow(transport, b"".join(parts))

    # -- closing and timers ----------------------------------------------------------

    def _close(self) -> None:
        self._flush()
        self.closing = True
        self.queue.clear()
        self._disarm()
        self.gate.release(ANSWER)
        self.gate.release(CONNECTING)
        if not self.gone:
            self.transport.loseConnection()

    def _dropUpstream(self) -> None:
        upstream = self.upstream
        self.upstream = None
        if upstream is None:
            return
        self._flush()
        upstream.owner = None
        if not self.gone:
            try:
                self.transport.unregisterProducer()
            except Exception:
                pass
        if not upstream.gone:
            upstream.transport.unregisterProducer()
            upstream.transport.loseConnection()

    def _arm(self) -> None:
        """
        Watch the connection: a head begun must be whole within the header
        timeout; a connection or exchange silent for the idle timeout ends.
        """
        if self.exchange is None and self.headStarted is not None:
            deadline = self.headStarted + self.settings.headerTimeout
        else:
            deadline = self.lastActivity + self.settings.idleTimeout
        timer = self._timer
        if timer is None or not timer.active():
            self._timer = self.reactor.callLater(
                max(0.0, deadline - self.reactor.seconds()), self._check
            )
        elif timer.getTime() > deadline:
            # Sooner than it was set for (a head begun): move it. A timer
            # that fires early only looks again (see L{_check}).
            timer.reset(max(0.0, deadline - self.reactor.seconds()))

    def _disarm(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    def _check(self) -> None:
        self._timer = None
        if self.gone or self.closing or self.relay is not None:
            return
        now = self.reactor.seconds()
        exchange = self.exchange
        if exchange is None and self.headStarted is not None:
            if now - self.headStarted >= self.settings.headerTimeout:
                reason = (
                    f"the request head did not arrive whole within "
                    f"{self.settings.headerTimeout:g} seconds (see --header-timeout)"
                )
                self._refuseUnread(self.reader.leftover(), self.headStarted, REQUEST_TIMEOUT, reason)
                return
        elif now - self.lastActivity >= self.settings.idleTimeout:
            if exchange is None:
                self._close()
                self._dropUpstream()
                return
            if not exchange.ended:
                reason = f"the server sent nothing for {self.settings.idleTimeout:g} seconds (see --idle-timeout)"
                if exchange.response is None:
                    self._fail(exchange, 504, reason)
                else:
                    self._endExchange(exchange, failure=reason)
                    self._dropUpstream()
                    self._close()
                return
        self._arm()

    def stop(self) -> None:
        """
        The proxy is stopping: end what is open as stopped (a tunnel closed by
        the proxy, an exchange with what it got so far), then cut the
        connection.
        """
        if self.relay is not None:
            self.relay.abort(REASON_STOPPED)
            return
        exchange = self.exchange
        if exchange is not None and not exchange.ended:
            self._endExchange(exchange, failure=REASON_STOPPED, closedBy=PROXY)
        self._dropUpstream()
        if not self.gone:
            self.transport.abortConnection()


__all__ = [
    "StandinFactory",
    "BrowserConnection",
    "Settings",
]
