"""
What the engine's parts ask of each other, declared once so that none of
them imports another to name it: the service that owns the listeners and the
pool (L{IEngine}), the browser's connection as an exchange or a tunnel sees it
(L{IBrowserSide}), and the exchange as its upstream connection feeds it
(L{IAnswerSink}). The arrows then run one way: service, browser, exchange and
tunnel, upstream.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from twisted.internet import defer
from twisted.python.failure import Failure

from netlog.log.writer import LogWriter
from netlog.net.policy import DestinationPolicy
from netlog.net.relay import Gate
from netlog.proxy.mode import IMode, Route


class IEngine(Protocol):
    """
    The proxy service, as its connections use it.
    """

    reactor: Any
    mode: IMode
    writer: LogWriter
    policy: DestinationPolicy
    idleTimeout: float
    headerTimeout: float
    connections: set[Any]
    pool: Any

    @property
    def logging(self) -> bool: ...

    def nextConnectionId(self) -> str: ...

    def takeIdle(self, route: Route) -> Any: ...

    def upstreamFor(self, route: Route, fresh: bool = False,
                    resolved: Callable[[str], None] | None = None) -> defer.Deferred[Any]: ...

    def resolveFor(self, route: Route) -> defer.Deferred[str]: ...

    def connectRaw(self, address: str, port: int, protocolClass: Any) -> defer.Deferred[Any]: ...


class IBrowserSide(Protocol):
    """
    The browser's connection, as an exchange or a tunnel on it uses it.
    """

    transport: Any
    gate: Gate
    client: str
    connectionId: str
    gone: bool
    rawPeer: Any

    def exchangeReady(self, exchange: Any) -> None: ...

    def exchangeDone(self, exchange: Any, close: bool) -> None: ...

    def discardRestOfRequest(self, exchange: Any) -> None: ...

    def enterRaw(self, peer: Any) -> bytes: ...

    def refuseExchange(self, exchange: Any, status: int, reason: str) -> None: ...

    def failBeforeAnswer(self, exchange: Any, status: int, reason: str) -> None: ...

    def failAfterOpen(self, exchange: Any, status: int, reason: str, refused: bool = False) -> None: ...

    def refuse(self, head: Any, url: str, at: float, status: int, reason: str,
               server: tuple[str, int], kind: str = ...) -> None: ...

    def answer(self, status: int, text: str, headers: list[tuple[bytes, bytes]] = ...,
               close: bool = True) -> tuple[dict[str, Any], int]: ...

    def close(self) -> None: ...

    def touch(self, now: float) -> None: ...

    def wakeBy(self, when: float) -> None: ...


class IAnswerSink(Protocol):
    """
    The exchange an upstream connection carries.
    """

    def serverBytes(self, upstream: Any, data: bytes) -> None: ...

    def serverLost(self, upstream: Any, reason: Failure) -> None: ...
