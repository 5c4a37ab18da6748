"""
Connecting upstream with a timeout, and naming why a connection failed in
words a log reader understands.
"""

from __future__ import annotations

from typing import Any, Callable, Generic, TypeVar

from twisted.internet import defer, error
from twisted.internet.interfaces import IProtocol, IReactorTCP
from twisted.internet.protocol import ClientFactory
from twisted.python.failure import Failure

from netlog.core.upstreamproxy import UpstreamProxyFailed, UpstreamProxyRefused, upstreamProxyMark
from netlog.net.resolve import DoesNotResolve
from netlog.net.timeouts import DEFAULT_CONNECT_TIMEOUT

#: How a failure reads in the log, and the status the browser gets for it.
GATEWAY_TIMEOUT = 504
BAD_GATEWAY = 502

#: The protocol a connection is made for.
_P = TypeVar("_P", bound=IProtocol)


def connectThen(
    reactor: IReactorTCP,
    address: str,
    port: int,
    buildProtocol: Callable[[], _P],
    connected: Callable[[_P], object],
    failed: Callable[[Failure], object],
    timeout: float = DEFAULT_CONNECT_TIMEOUT,
) -> None:
    """
    Connect to C{address:port} (an IP address) within C{timeout} seconds,
    then call C{connected} with the protocol or C{failed} with why; without
    a Deferred, since a proxy makes one per connection.
    """
    factory = _OneConnection(buildProtocol, connected, failed)
    # connectTCP takes IPv6 literals as well; the endpoint classes cost more
    # per connection than a proxy wants to pay.
    reactor.connectTCP(address, port, factory, timeout=timeout)


class _OneConnection(ClientFactory, Generic[_P]):
    """
    Builds the caller's protocol for one connection and says when it is
    made or why it failed; quiet, since a proxy makes one per connection and
    "Starting factory" lines would flood its log.
    """

    noisy = False

    def __init__(
        self,
        build: Callable[[], _P],
        connected: Callable[[_P], object],
        failed: Callable[[Failure], object],
    ) -> None:
        self._build = build
        self._connected: Callable[[_P], object] | None = connected
        self._failed: Callable[[Failure], object] | None = failed

    def buildProtocol(self, addr: Any) -> _P:  # type: ignore[override]
        protocol = self._build()
        protocol.factory = self  # type: ignore[attr-defined]
        made = getattr(protocol, "connectionMade")

        def connectionMade() -> None:
            made()
            connected, self._connected, self._failed = self._connected, None, None
            if connected is not None:
                connected(protocol)

        # As the endpoints' wrapping protocol does: the connection is made
        # once the protocol has seen it.
        setattr(protocol, "connectionMade", connectionMade)
        return protocol

    def clientConnectionFailed(self, connector: Any, reason: Failure) -> None:
        failed, self._connected, self._failed = self._failed, None, None
        if failed is not None:
            failed(reason)


def describeFailure(failure: Failure, host: str = "", port: int | None = None) -> tuple[str, int]:
    """
    The reason a connection failed, in plain words, and the HTTP status the
    browser gets for it (502, or 504 for a timeout).
    """
    where = f"{host}:{port}" if host and port else host or "the server"
    if isinstance(failure.value, (UpstreamProxyRefused, UpstreamProxyFailed)):
        return str(failure.value), failure.value.status
    if failure.check(DoesNotResolve):
        return f"{host or 'the host'} doesn't resolve", BAD_GATEWAY
    if failure.check(error.TimeoutError, defer.TimeoutError, defer.CancelledError):
        return f"connecting to {where} timed out", GATEWAY_TIMEOUT
    if failure.check(error.ConnectionRefusedError):
        return f"{where} refused the connection", BAD_GATEWAY
    if failure.check(error.NoRouteError):
        return f"no route to {where}", BAD_GATEWAY
    if failure.check(error.DNSLookupError):
        return f"{host or 'the host'} doesn't resolve", BAD_GATEWAY
    if failure.check(error.ConnectionLost, error.ConnectionDone):
        return f"{where} closed or reset the connection", BAD_GATEWAY
    message = failure.getErrorMessage() or getattr(failure.type, "__name__", "error")
    return f"connecting to {where} failed: {message}", BAD_GATEWAY


def failureMarks(failure: Failure) -> dict[str, object] | None:
    """
    What an entry says of a failure besides C{_failed}: C{_upstreamProxy}
    when the upstream proxy refused the tunnel.
    """
    if isinstance(failure.value, UpstreamProxyRefused):
        return upstreamProxyMark(failure.value.proxy, failure.value.status)
    return None
