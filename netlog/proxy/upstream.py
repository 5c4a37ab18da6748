"""
Connections to backends and live hosts: the upstream protocol that reads
answers, and the pool that keeps idle keep-alive connections for reuse.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Hashable

from twisted.internet import defer, error
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint, wrapClientTLS
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from netlog.core.http1 import ResponseReader
from netlog.net.connect import connectThen
from netlog.net.gate import Gate
from netlog.net.reactors import IProxyReactor
from netlog.net.send import noDelay, sendNow
from netlog.proxy.contracts import IAnswerSink, IAnswerSource

_log = Logger()

#: Idle connections kept per upstream (address, port, TLS name): as many as
#: a burst of browsers (sessions running side by side, 6 connections each)
#: had open to one site at once, so the next burst finds them.
MAX_IDLE_PER_UPSTREAM = 64
#: Seconds an idle upstream connection is kept before it is closed.
IDLE_UPSTREAM_TIMEOUT = 30.0


@implementer(IAnswerSource)
class UpstreamProtocol(Protocol):
    """
    One connection to a backend or a live host, carrying one exchange at a
    time: the answer source of an exchange routed upstream. Its bytes go to
    the exchange, read as answers, or raw once the exchange says so (a
    WebSocket, an answer that isn't HTTP).

    @ivar firstByteAt: when the current exchange's first answer byte came.
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
        exchange.serverBytes(self, data)

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        self.connected = False
        self.lostReason = reason
        if self.pool is not None:
            self.pool.forget(self)
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.serverLost(self, reason)

    @property
    def reusable(self) -> bool:
        return bool(self.connected and not self.raw and self.reader.idle)

    # -- the answer source (IAnswerSource) ----------------------------------------

    def send(self, data: bytes) -> None:
        sendNow(self.transport, data)

    def requestData(self, data: bytes) -> None:
        """
        The server reads the body from the bytes L{send} sent.
        """

    def requestEnded(self) -> None:
        """
        The server answers as it reads: nothing to do.
        """

    def attachRequestProducer(self, producer: Any) -> None:
        self.transport.registerProducer(producer, True)

    def detachRequestProducer(self) -> None:
        try:
            self.transport.unregisterProducer()
        except Exception:
            pass

    def close(self, gently: bool) -> None:
        if gently:
            self.transport.loseConnection()
        else:
            self.transport.abortConnection()


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


class Pool:
    """
    Idle keep-alive connections to upstreams, by key. One timer sweeps out
    those idle too long (no timer per connection).
    """

    def __init__(self, reactor: IProxyReactor, maxIdle: int = MAX_IDLE_PER_UPSTREAM,
                 idleTimeout: float = IDLE_UPSTREAM_TIMEOUT) -> None:
        self.reactor = reactor
        self.maxIdle = maxIdle
        self.idleTimeout = idleTimeout
        self._idle: dict[Hashable, list[UpstreamProtocol]] = {}
        self._sweep: Any = None

    def take(self, key: Hashable) -> UpstreamProtocol | None:
        """
        An idle connection for C{key}, the most recently used first.
        """
        idle = self._idle.get(key)
        while idle:
            protocol = idle.pop()
            protocol.pool = None
            if protocol.reusable:
                return protocol
        return None

    def put(self, protocol: UpstreamProtocol) -> None:
        """
        Keep C{protocol} for reuse, or close it when it can't be reused or
        too many are kept.
        """
        idle = self._idle.setdefault(protocol.key, [])
        if not protocol.reusable or len(idle) >= self.maxIdle:
            protocol.transport.loseConnection()
            return
        protocol.pool = self
        protocol.idleSince = self.reactor.seconds()
        idle.append(protocol)
        if self._sweep is None:
            self._sweep = self.reactor.callLater(self.idleTimeout, self._sweepOut)

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
