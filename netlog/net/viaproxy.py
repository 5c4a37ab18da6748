"""
A connection through the upstream proxy (C{--upstream-proxy}): connect to
it, ask it for a tunnel with C{CONNECT host:port}, read its answer's head,
then hand the connection to the caller's protocol (TLS over it when asked),
as if it had been made to C{host:port} itself. Its refusal fails the
connection with L{UpstreamProxyRefused}, its silence or absence with
L{UpstreamProxyFailed}.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet import error
from twisted.internet.interfaces import IDelayedCall, IProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python.failure import Failure

from netlog.core.upstreamproxy import (
    UpstreamProxy,
    UpstreamProxyFailed,
    UpstreamProxyRefused,
    connectRequest,
    readConnectAnswer,
)
from netlog.net.connect import connectThen, describeFailure
from netlog.net.reactors import IProxyReactor
from netlog.net.send import sendNow


def connectVia(
    reactor: IProxyReactor,
    proxy: UpstreamProxy,
    proxyAddress: str,
    host: str,
    port: int,
    buildProtocol: Callable[[], IProtocol],
    connected: Callable[[Any], object],
    failed: Callable[[Failure], object],
    timeout: float,
    tlsCreator: Any = None,
) -> None:
    """
    A tunnel to C{host:port} (a name the upstream proxy resolves, or an
    address) through C{proxy} at C{proxyAddress}; then C{connected} with the
    caller's protocol, or C{failed} with why. C{timeout} bounds the
    connection to the proxy and, again, the wait for its answer.

    @param tlsCreator: when given, the caller's protocol speaks TLS over the
        tunnel (an upstream C{https} connection).
    """

    connectThen(
        reactor, proxyAddress, proxy.port,
        lambda: _AskTunnel(reactor, proxy, host, port, buildProtocol, connected, failed, timeout, tlsCreator),
        lambda asking: None, lambda failure: failed(proxyUnreached(proxy, failure)), timeout=timeout,
    )


def proxyUnreached(proxy: UpstreamProxy, failure: Failure) -> Failure:
    """
    Why a connection to the upstream proxy itself failed, naming it.
    """
    why, status = describeFailure(failure, f"the upstream proxy {proxy.label}")
    return Failure(UpstreamProxyFailed(proxy.label, why, status))


class _AskTunnel(Protocol):
    """
    The connection to the upstream proxy until its answer to the C{CONNECT}
    is read; then the caller's protocol takes the transport over.
    """

    transport: Any

    def __init__(self, reactor: IProxyReactor, proxy: UpstreamProxy, host: str, port: int,
                 build: Callable[[], IProtocol], connected: Callable[[Any], object],
                 failed: Callable[[Failure], object], timeout: float, tlsCreator: Any) -> None:
        self.reactor = reactor
        self.proxy = proxy
        self.host = host
        self.port = port
        self.build = build
        self._connected: Callable[[Any], object] | None = connected
        self.failed = failed
        self.timeout = timeout
        self.tlsCreator = tlsCreator
        self.buffer = b""
        self.timer: IDelayedCall | None = None

    def connectionMade(self) -> None:
        self.timer = self.reactor.callLater(self.timeout, self._timedOut)
        sendNow(self.transport, connectRequest(self.host, self.port, self.proxy.authorization))

    def _timedOut(self) -> None:
        self.timer = None
        self._fail(UpstreamProxyFailed(
            self.proxy.label, f"the upstream proxy {self.proxy.label} sent no answer to the CONNECT within "
                              f"{self.timeout:g} s", 504))
        self.transport.abortConnection()

    def _fail(self, reason: Exception) -> None:
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None
        if self._connected is not None:
            self._connected = None
            self.failed(Failure(reason))

    def dataReceived(self, data: bytes) -> None:
        if self._connected is None:
            return
        self.buffer += data
        try:
            answer = readConnectAnswer(self.buffer)
        except ValueError as e:
            self._fail(UpstreamProxyFailed(self.proxy.label, f"the upstream proxy {self.proxy.label}: {e}", 502))
            self.transport.abortConnection()
            return
        if answer is None:
            return
        self.buffer = b""
        if not answer.tunnel:
            self._fail(UpstreamProxyRefused(self.proxy.label, answer.status, answer.reason))
            self.transport.loseConnection()
            return
        if self.timer is not None and self.timer.active():
            self.timer.cancel()
        self.timer = None
        connected, self._connected = self._connected, None
        protocol = self.build()
        wire: IProtocol = protocol
        if self.tlsCreator is not None:
            inner = Factory.forProtocol(lambda: protocol)  # type: ignore[type-var]
            wire = TLSMemoryBIOFactory(self.tlsCreator, True, inner).buildProtocol(self.transport.getPeer())
        # The transport's reads and its end go to the caller's protocol from
        # now on (a TCP transport hands them to its C{protocol}).
        transport = self.transport
        transport.protocol = wire
        wire.makeConnection(transport)
        connected(protocol)
        if answer.leftover:
            wire.dataReceived(answer.leftover)

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        if self._connected is not None:
            self._fail(UpstreamProxyFailed(
                self.proxy.label, f"the upstream proxy {self.proxy.label} closed the connection before answering "
                                  f"the CONNECT", 502))
