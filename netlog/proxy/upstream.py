"""
Connections to backends and live hosts: the upstream protocol, an answer
source that frames requests as HTTP/1.1 and reads answers into events, the
request kept to be sent again, and the pool that keeps idle keep-alive
connections for reuse.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Hashable, Protocol as TypingProtocol

from twisted.internet import defer, error
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint, wrapClientTLS
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from netlog.core.http1 import (
    Body,
    EndOfMessage,
    Event,
    HeadFields,
    Incomplete,
    RequestHead,
    ResponseHead,
    ResponseReader,
    Unparsable,
)
from netlog.core.records import originForm
from netlog.core.upstreamproxy import UpstreamProxy, absoluteTarget, upstreamProxyMark
from netlog.net.connect import connectThen
from netlog.net.gate import Gate
from netlog.net.reactors import IProxyReactor
from netlog.net.send import noDelay, sendNow
from netlog.proxy.contracts import IAnswerSink, IAnswerSource, IWaiter

_log = Logger()

#: Idle connections kept per upstream (address, port, TLS name) at least:
#: as many as a burst of browsers (sessions running side by side, 6
#: connections each) had open to one site at once, so the next burst finds
#: them; more when the upstream's cap allowed more open (all that were
#: counted are kept).
MAX_IDLE_PER_UPSTREAM = 64
#: Seconds an idle upstream connection is kept before it is closed.
IDLE_UPSTREAM_TIMEOUT = 30.0


#: A request whose head and body together are at most this many bytes is
#: kept as it was sent, to be sent again on a new connection when a reused
#: one turns out closed (or handed on by a source with no answer).
MAX_RETRY_BYTES = 64 * 1024
#: The methods sent again on a new connection when a reused one turns out
#: closed, and only without a body: a proxy must not retry a request that
#: isn't idempotent (RFC 9112, 9.3.1), and the retry is kept to the plainly
#: safe ones.
RETRIED_METHODS = frozenset({b"GET", b"HEAD", b"OPTIONS", b"TRACE"})


class SentRequest:
    """
    A request as it was handed to an answer source, while it is at most
    L{MAX_RETRY_BYTES}: its head's parts and its body's events, to hand to
    another source (L{IResendable}).

    @ivar size: the bytes kept so far.
    @ivar ended: the request has been handed whole.
    @ivar hadBody: a piece of body was handed.
    """

    __slots__ = ("head", "fields", "drop", "extra", "events", "size", "ended", "hadBody")

    def __init__(self, head: RequestHead, fields: HeadFields, drop: frozenset[bytes] | set[bytes],
                 extra: list[tuple[bytes, bytes]]) -> None:
        self.head = head
        self.fields = fields
        self.drop = drop
        self.extra = extra
        self.events: list[Body | EndOfMessage] = []
        self.size = len(head.raw)
        self.ended = False
        self.hadBody = False

    def keep(self, event: Body | EndOfMessage) -> bool:
        """
        Keep C{event}; C{False} once the request is too big to keep.
        """
        if isinstance(event, Body):
            self.hadBody = True
        else:
            self.ended = True
        self.size += len(event.raw)
        self.events.append(event)
        return self.size <= MAX_RETRY_BYTES

    def sendTo(self, source: IAnswerSource) -> int:
        sent = source.sendHead(self.head, self.fields, self.drop, self.extra)
        for event in self.events:
            sent += source.requestData(event) if isinstance(event, Body) else source.requestEnded(event)
        return sent


@implementer(IAnswerSource)
class UpstreamProtocol(Protocol):
    """
    One connection to a backend or a live host, carrying one exchange at a
    time: the answer source of an exchange routed upstream. It frames the
    request as HTTP/1.1, reads the answer's bytes (its L{reader}) and hands
    the exchange their events, or the bytes raw once the exchange says so
    (a WebSocket, an answer that isn't HTTP).

    @ivar reader: reads the answers.
    @ivar exchange: the L{IAnswerSink} answered now, or L{None} while idle.
    @ivar raw: the connection relays bytes raw, not read as HTTP.
    @ivar gate: pauses the reading of answers (the browser's backpressure).
    @ivar connected: the connection is up.
    @ivar pool: the pool holding it while idle.
    @ivar idleSince: when it went idle in the pool.
    @ivar address: the address connected to.
    @ivar heads: the requests sent on it so far.
    @ivar sent: the current request as sent, while small enough to send
        again (L{SentRequest}); L{None} once not.
    @ivar answered: bytes of an answer to the current request have come.
    @ivar counted: the pool that counts it among its upstream's open
        connections, until it is lost.
    """

    transport: Any
    #: Done with and reusable, the connection goes back to the pool.
    pooled = True

    def __init__(self, reactor: IProxyReactor, key: Hashable) -> None:
        self.reactor = reactor
        self.key = key
        self.reader = ResponseReader()
        self.exchange: IAnswerSink | None = None
        self.raw = False
        self.gate: Gate | None = None
        self.connected = False
        self.pool: Pool | None = None
        self.lostReason: Failure | None = None
        self.idleSince = 0.0
        self.address: str | None = None
        self.heads = 0
        self.sent: SentRequest | None = None
        self.answered = False
        self.counted: Pool | None = None

    def connectionMade(self) -> None:
        self.connected = True
        noDelay(self.transport)
        # Asked once: a pooled connection is taken for every request.
        self.address = getattr(self.transport.getPeer(), "host", None)
        self.gate = Gate(self.transport)

    def dataReceived(self, data: bytes) -> None:
        exchange = self.exchange
        if exchange is None:
            # An idle connection must be silent; anything else means it
            # can't be reused.
            self.transport.abortConnection()
            return
        self.answered = True
        exchange.answerArrived(self, len(data))
        try:
            if self.raw:
                exchange.answerRaw(self, data)
                return
            for event in self.reader.feed(data):
                # The answer's usual events are handed on here, without
                # L{_emit}'s call (this runs for every read of every answer).
                kind = type(event)
                if kind is Body:
                    exchange.answerData(self, event)  # type: ignore[arg-type]
                elif kind is EndOfMessage:
                    exchange.answerEnd(self, event)  # type: ignore[arg-type]
                else:
                    self._emit(exchange, event)
                if self.exchange is not exchange:
                    return
                if self.raw:
                    leftover = self.reader.leftover()
                    if leftover:
                        exchange.answerRaw(self, leftover)
                    return
        finally:
            exchange.answerSettled(self)

    def _emit(self, exchange: IAnswerSink, event: Event) -> None:
        if isinstance(event, Body):
            exchange.answerData(self, event)
        elif isinstance(event, ResponseHead):
            self.sent = None
            if event.interim:
                exchange.answerInterim(self, event)
            else:
                exchange.answerHead(self, event)
        elif isinstance(event, EndOfMessage):
            exchange.answerEnd(self, event)
        elif isinstance(event, Unparsable):
            self.sent = None
            exchange.answerUnparsable(self, event.raw)
        elif isinstance(event, Incomplete):
            exchange.answerFailed(self, self.lostReason or Failure(error.ConnectionLost(event.reason)), event.raw)

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        self.connected = False
        self.lostReason = reason
        if self.pool is not None:
            self.pool.forget(self)
        counted, self.counted = self.counted, None
        if counted is not None:
            counted.released(self.key)
        exchange, self.exchange = self.exchange, None
        if exchange is None:
            return
        if not self.raw:
            for event in self.reader.feedEOF():
                self._emit(exchange, event)
                if isinstance(event, Incomplete):
                    return
        exchange.answerFailed(self, reason, again=self._again())

    def _again(self) -> SentRequest | None:
        """
        The request, when it may be sent again on a new connection: this one
        was reused and closed before any answer came to a request sent
        whole, bodiless, with a safe method.
        """
        sent = self.sent
        if (sent is None or self.heads < 2 or self.answered or self.raw or not sent.ended or sent.hadBody
                or sent.head.method not in RETRIED_METHODS):
            return None
        return sent

    @property
    def idle(self) -> bool:
        return self.reader.idle

    @property
    def reusable(self) -> bool:
        return bool(self.connected and not self.raw and self.reader.idle)

    # -- the answer source (IAnswerSource) ----------------------------------------

    def sendHead(self, head: RequestHead, fields: HeadFields, drop: frozenset[bytes] | set[bytes],
                 extra: list[tuple[bytes, bytes]]) -> int:
        """
        Frame the head as HTTP/1.1, its target in origin-form (C{/path?query}).
        """
        self.heads += 1
        self.answered = False
        self.sent = SentRequest(head, fields, drop, extra)
        data = fields.serialize(b" ".join((head.method, self.target(head), b"HTTP/1.1")), drop,
                                self.upstreamFields(extra))
        self.reader.expectResponseTo(head.method)
        sendNow(self.transport, data)
        return len(data)

    def target(self, head: RequestHead) -> bytes:
        """
        The request's target as it goes: origin-form (C{/path?query}).
        """
        return head.target if head.url is None else originForm(head.target)

    def upstreamFields(self, extra: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        """
        The fields netlog adds to the request's own: the engine's C{extra}.
        """
        return extra

    def requestData(self, body: Body) -> int:
        """
        The body goes as the browser's side framed it.
        """
        sent = self.sent
        if sent is not None and not sent.keep(body):
            self.sent = None
        sendNow(self.transport, body.raw)
        return len(body.raw)

    def requestEnded(self, end: EndOfMessage) -> int:
        sent = self.sent
        if sent is not None and not sent.keep(end):
            self.sent = None
        if end.raw:
            sendNow(self.transport, end.raw)
        return len(end.raw)

    def sendRaw(self, data: bytes) -> None:
        sendNow(self.transport, data)

    def attachRequestProducer(self, producer: Any) -> None:
        self.transport.registerProducer(producer, True)

    def detachRequestProducer(self) -> None:
        try:
            self.transport.unregisterProducer()
        except Exception:
            pass

    def close(self, gently: bool) -> None:
        self.sent = None
        if gently:
            self.transport.loseConnection()
        else:
            self.transport.abortConnection()


class ProxiedUpstreamProtocol(UpstreamProtocol):
    """
    A connection to a live host through the upstream proxy: either to the
    proxy itself, carrying plain requests in absolute-form with netlog's
    C{Proxy-Authorization} (never the browser's, never logged), or, when
    C{tunnelled}, over a tunnel the proxy opened (then as any other).

    @ivar proxy: the upstream proxy.
    @ivar host: the live host; C{port} its port.
    @ivar target: the address connected to, when netlog resolved the host
        (C{--resolve} named it); L{None} when the proxy did.
    """

    def __init__(self, reactor: IProxyReactor, key: Hashable, proxy: UpstreamProxy, host: str, port: int,
                 address: str | None, tunnelled: bool = False) -> None:
        UpstreamProtocol.__init__(self, reactor, key)
        self.proxy = proxy
        self.host = host
        self.port = port
        self.targetAddress = address
        self.tunnelled = tunnelled

    def connectionMade(self) -> None:
        UpstreamProtocol.connectionMade(self)
        # The peer is the proxy; the entry's address is the server's.
        self.address = self.targetAddress

    def target(self, head: RequestHead) -> bytes:
        if self.tunnelled:
            return UpstreamProtocol.target(self, head)
        return absoluteTarget(self.targetAddress or self.host, self.port, head.target)

    def upstreamFields(self, extra: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
        if self.tunnelled or self.proxy.authorization is None:
            return extra
        return extra + [(b"Proxy-Authorization", self.proxy.authorization)]

    def _emit(self, exchange: IAnswerSink, event: Event) -> None:
        if (not self.tunnelled and isinstance(event, ResponseHead) and event.status == 407
                and not event.interim):
            # Only a proxy answers 407: the upstream proxy refused netlog's
            # credentials, and the entry says so.
            exchange.answerMarks(self, upstreamProxyMark(self.proxy.label, event.status))
        UpstreamProtocol._emit(self, exchange, event)


def connectUpstream(
    reactor: IProxyReactor, address: str, port: int, tlsCreator: Any, timeout: float, key: Hashable
) -> defer.Deferred[UpstreamProtocol]:
    """
    Open a new connection to C{address:port} (TLS over it when C{tlsCreator}).
    A plain one is made without an endpoint, so its bytes reach the
    protocol with no wrapper between (see L{connectThen}).
    """
    if tlsCreator is None:
        made: defer.Deferred[UpstreamProtocol] = defer.Deferred()
        connectThen(reactor, address, port, lambda: UpstreamProtocol(reactor, key),
                    made.callback, made.errback, timeout=timeout)  # type: ignore[arg-type]
        return made
    ip = ipaddress.ip_address(address)
    endpointClass = TCP6ClientEndpoint if ip.version == 6 else TCP4ClientEndpoint
    endpoint: Any = endpointClass(reactor, address, port, timeout=timeout)
    if tlsCreator is not None:
        endpoint = wrapClientTLS(tlsCreator, endpoint)
    factory: Any = Factory.forProtocol(lambda: UpstreamProtocol(reactor, key))  # type: ignore[arg-type]
    factory.noisy = False  # no "Starting factory" line per upstream connection
    return endpoint.connect(factory)  # type: ignore[no-any-return]


class ISharedConnection(TypingProtocol):
    """
    A connection that carries many exchanges at once (an HTTP/2 upstream,
    L{netlog.proxy.h2upstream.H2Upstream}), as the pool shares it.
    """

    key: Hashable
    pool: Any
    idleSince: float

    @property
    def room(self) -> int:
        """
        How many more exchanges it may carry now.
        """

    @property
    def busy(self) -> bool:
        """
        Whether it carries an exchange now.
        """

    def newStream(self) -> IAnswerSource:
        """
        An answer source for one more exchange.
        """

    def close(self, gently: bool = True) -> None: ...


class Pool:
    """
    Idle keep-alive connections to upstreams, by key, and how many are open
    to each: at most a cap, the exchanges beyond it waiting in the order
    they came for one to be handed on or closed. One timer sweeps out those
    idle too long (no timer per connection).

    An upstream that spoke HTTP/2 is remembered: its connections are
    shared (each exchange a stream of one while it has room), and an
    exchange for it waits for a stream rather than opening a connection
    while one is being made or has room.
    """

    def __init__(self, reactor: IProxyReactor, maxIdle: int = MAX_IDLE_PER_UPSTREAM,
                 idleTimeout: float = IDLE_UPSTREAM_TIMEOUT) -> None:
        self.reactor = reactor
        self.maxIdle = maxIdle
        self.idleTimeout = idleTimeout
        self._idle: dict[Hashable, list[UpstreamProtocol]] = {}
        self._sweep: Any = None
        #: Connections counted per key: connecting, carrying an exchange or idle.
        self._open: dict[Hashable, int] = {}
        #: Those waiting for a connection per key, in the order they came
        #: (a dict: the first is the oldest, and one leaving is removed at once).
        self._waiting: dict[Hashable, dict[IWaiter, None]] = {}
        #: The shared connections per key (see L{share}).
        self._shared: dict[Hashable, list[ISharedConnection]] = {}
        #: The keys whose upstream spoke HTTP/2 last, and those whose
        #: upstream spoke HTTP/1.1 to an offer of both.
        self._h2: set[Hashable] = set()
        self._http11: set[Hashable] = set()
        #: The TLS handshakes offering HTTP/2 under way, per key.
        self._negotiating: dict[Hashable, int] = {}
        #: The cap of each key whose exchanges wait for a stream.
        self._caps: dict[Hashable, int] = {}

    def take(self, key: Hashable, shared: bool = True) -> IAnswerSource | None:
        """
        A stream of a shared connection for C{key} with room (unless not
        C{shared}: an exchange that must have a connection of its own), or
        an idle connection, the most recently used first.
        """
        if shared:
            for connection in self._shared.get(key, ()):
                if connection.room:
                    return connection.newStream()
        idle = self._idle.get(key)
        while idle:
            protocol = idle.pop()
            protocol.pool = None
            if protocol.reusable:
                return protocol
        return None

    def put(self, source: IAnswerSource) -> None:
        """
        Hand C{source} to the exchange waiting longest for its upstream,
        else keep it for reuse; close it when it can't be reused or too
        many are kept (or isn't an upstream connection at all: a recording
        or a rule's answer, given back when its exchange ended as it was
        found).
        """
        if not isinstance(source, UpstreamProtocol):
            source.close(False)
            return
        protocol = source
        if self._waiting and protocol.reusable:
            waiter = self._next(protocol.key)
            if waiter is not None:
                waiter.handed(protocol)
                return
        idle = self._idle.setdefault(protocol.key, [])
        # Those counted are within the upstream's cap: each may be kept.
        if not protocol.reusable or len(idle) >= max(self.maxIdle, self._open.get(protocol.key, 0)):
            protocol.transport.loseConnection()
            return
        protocol.pool = self
        protocol.idleSince = self.reactor.seconds()
        idle.append(protocol)
        if self._sweep is None:
            self._sweep = self.reactor.callLater(self.idleTimeout, self._sweepOut)

    def claim(self, key: Hashable, cap: int, waiter: IWaiter) -> bool:
        """
        Room for a new connection to C{key}'s upstream, with at most C{cap}
        open: counted now, C{True}. Else C{waiter} waits its turn, C{False}.
        An upstream that spoke HTTP/2 (or whose first handshake offering it
        is under way, as a browser waits for its first connection's ALPN)
        gets a new connection only when none is being made and no shared
        one has room (one that went away doesn't count); while one has
        room, C{waiter} is handed a stream of it at once (C{False}).
        """
        count = self._open.get(key, 0)
        if (key in self._h2 or key in self._negotiating and key not in self._http11) and waiter.sharedStreams:
            self._caps[key] = cap
            shared = self._shared.get(key, [])
            for connection in shared:
                if connection.room:
                    # (A request sent again after its stream was refused.)
                    waiter.handed(connection.newStream())
                    return False
            if key in self._negotiating:
                # A connection is being made: its streams will do.
                self._waiting.setdefault(key, {})[waiter] = None
                return False
        if count < cap:
            self._open[key] = count + 1
            return True
        self._waiting.setdefault(key, {})[waiter] = None
        return False

    def cancel(self, key: Hashable, waiter: IWaiter) -> None:
        """
        C{waiter} waits no more (its exchange ended: the browser left, a
        timeout).
        """
        waiting = self._waiting.get(key)
        if waiting is not None and waiter in waiting:
            del waiting[waiter]
            if not waiting:
                del self._waiting[key]

    def share(self, connection: ISharedConnection, cap: int) -> None:
        """
        C{connection} (counted) carries many exchanges: new ones for its
        upstream take streams of it while it has room, the waiting first.
        """
        connection.pool = self
        self._shared.setdefault(connection.key, []).append(connection)
        self._caps[connection.key] = cap
        self._h2.add(connection.key)
        self._http11.discard(connection.key)
        self.offer(connection)

    def offer(self, connection: ISharedConnection) -> None:
        """
        C{connection} may have room: streams of it go to the exchanges
        waiting for its upstream (those that may share one), and when it
        carries nothing the sweep will close it in time.
        """
        waiting = self._waiting.get(connection.key)
        if waiting:
            for waiter in list(waiting):
                if not connection.room:
                    break
                if waiter.sharedStreams:
                    self.cancel(connection.key, waiter)
                    waiter.handed(connection.newStream())
        if not connection.busy and self._sweep is None:
            self._sweep = self.reactor.callLater(self.idleTimeout, self._sweepOut)

    def unshare(self, connection: ISharedConnection) -> None:
        """
        C{connection} takes no new exchange (the server went away, it is
        lost): the next exchange for its upstream opens a new one, when the
        cap allows.
        """
        connection.pool = None
        shared = self._shared.get(connection.key)
        if shared and connection in shared:
            shared.remove(connection)
            if not shared:
                del self._shared[connection.key]
        self._wakeWaiting(connection.key)

    def negotiating(self, key: Hashable) -> None:
        """
        A TLS handshake offering HTTP/2 to C{key}'s upstream began: its
        exchanges wait for it (see L{claim}).
        """
        self._negotiating[key] = self._negotiating.get(key, 0) + 1

    def negotiated(self, key: Hashable, spoke: str | None) -> None:
        """
        That handshake is over: C{spoke} C{h2} (the connection is shared
        next), C{http/1.1} (the exchanges waiting may open connections
        again, as many as the cap allows), or L{None}: it failed.
        """
        left = self._negotiating.get(key, 0) - 1
        if left > 0:
            self._negotiating[key] = left
        else:
            self._negotiating.pop(key, None)
        if spoke == "h2":
            self._h2.add(key)
            self._http11.discard(key)
        elif spoke is not None:
            self._http11.add(key)
            self._h2.discard(key)
            self._wakeWaiting(key)

    def _wakeWaiting(self, key: Hashable) -> None:
        """
        Open the way for an exchange waiting for a stream to C{key}'s
        upstream when none can come: no shared connection with room, none
        being made, and the cap allows one more.
        """
        cap = self._caps.get(key)
        waiting = self._waiting.get(key)
        if cap is None or not waiting:
            return
        shared = self._shared.get(key, [])
        if key in self._h2 and (any(c.room for c in shared) or key in self._negotiating):
            return
        # For an upstream that speaks HTTP/2 one new connection is enough
        # (the others wait for its streams); else as many as the cap allows.
        shares = key in self._h2
        while waiting and self._open.get(key, 0) < cap:
            waiter = self._next(key)
            if waiter is not None:
                self._open[key] = self._open.get(key, 0) + 1
                waiter.slotFree()
            if shares:
                break

    def opened(self, protocol: UpstreamProtocol | ISharedConnection) -> None:
        """
        C{protocol} was connected on a slot L{claim}ed: counted until it is
        lost.
        """
        if protocol.connected:  # type: ignore[union-attr]
            protocol.counted = self  # type: ignore[union-attr]
        else:
            self.released(protocol.key)

    def released(self, key: Hashable) -> None:
        """
        A connection counted for C{key} is lost, or none could be made: the
        slot goes to the exchange waiting longest, or is free.
        """
        waiter = self._next(key)
        if waiter is not None:
            waiter.slotFree()
            return
        count = self._open[key] - 1
        if count:
            self._open[key] = count
        else:
            del self._open[key]

    def openTo(self, key: Hashable) -> int:
        """
        The connections counted for C{key}.
        """
        return self._open.get(key, 0)

    def waitingFor(self, key: Hashable) -> int:
        """
        The exchanges waiting for a connection to C{key}'s upstream.
        """
        return len(self._waiting.get(key, ()))

    def _next(self, key: Hashable) -> IWaiter | None:
        waiting = self._waiting.get(key)
        if not waiting:
            return None
        waiter = next(iter(waiting))
        del waiting[waiter]
        if not waiting:
            del self._waiting[key]
        return waiter

    def forget(self, protocol: UpstreamProtocol) -> None:
        idle = self._idle.get(protocol.key)
        if idle and protocol in idle:
            idle.remove(protocol)
        protocol.pool = None

    def _sweepOut(self) -> None:
        self._sweep = None
        now = self.reactor.seconds()
        oldest: float | None = None
        for key, idle in list(self._idle.items()):
            for protocol in list(idle):
                if now - protocol.idleSince >= self.idleTimeout:
                    self.forget(protocol)
                    protocol.transport.loseConnection()
                elif oldest is None or protocol.idleSince < oldest:
                    oldest = protocol.idleSince
            if not idle:
                del self._idle[key]
        for shared in list(self._shared.values()):
            for connection in list(shared):
                if connection.busy:
                    continue
                if now - connection.idleSince >= self.idleTimeout:
                    self.unshare(connection)
                    connection.close()
                elif oldest is None or connection.idleSince < oldest:
                    oldest = connection.idleSince
        if oldest is not None:
            self._sweep = self.reactor.callLater(max(oldest + self.idleTimeout - now, 0.0), self._sweepOut)

    def closeAll(self) -> None:
        if self._sweep is not None and self._sweep.active():
            self._sweep.cancel()
        self._sweep = None
        for idle in list(self._idle.values()):
            for protocol in list(idle):
                self.forget(protocol)
                protocol.transport.loseConnection()
        self._idle.clear()
        self._waiting.clear()
        for shared in list(self._shared.values()):
            for connection in list(shared):
                self.unshare(connection)
                connection.close(gently=False)
