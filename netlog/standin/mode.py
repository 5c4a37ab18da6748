"""
The stand-in's mode: a forward proxy that decrypts nothing. Every host is a
live host, judged by the destination rules once resolved; a CONNECT is a blind
tunnel to the ports C{--connect-ports} allows; an exchange keeps its request
line, headers and status, and only the sizes of its bodies.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import fail
from zope.interface import implementer

from netlog.core.capture import BodyCapture, SizeOnly
from netlog.proxy.mode import BLIND, IMode, MintError, Refusal, Route, Routed, liveRoute

#: Ports a CONNECT may reach unless C{--connect-ports} says otherwise: HTTPS,
#: and HTTP, since browsers open a C{ws://} WebSocket through a proxy with a
#: CONNECT to its port (80 unless the URL names another).
DEFAULT_CONNECT_PORTS = frozenset({80, 443})
#: What the stand-in answers for a CONNECT to a port it doesn't allow.
FORBIDDEN = 403


@implementer(IMode)
class StandinMode:
    """
    The stand-in's decisions.

    @ivar connectPorts: the ports a CONNECT may reach.
    """

    name = "standin"
    privilegedFiles: tuple[str, ...] = ()
    handedData: dict[str, bytes] = {}

    def __init__(self, connectPorts: frozenset[int] = DEFAULT_CONNECT_PORTS) -> None:
        self.connectPorts = connectPorts

    def prepare(self) -> None:
        """
        Nothing to load: the stand-in has no CA.
        """

    def route(self, scheme: str, host: str, port: int, tunnelled: bool) -> Routed:
        return liveRoute(scheme, host, port)

    def connect(self, host: str, port: int) -> str | Refusal:
        if port in self.connectPorts:
            return BLIND
        allowed = ", ".join(str(p) for p in sorted(self.connectPorts))
        return Refusal(FORBIDDEN, f"CONNECT to port {port} is not allowed (allowed: {allowed}; see --connect-ports)")

    def redirect(self, host: str, port: int) -> None:
        return None

    def serverTLS(self, host: str) -> Any:
        raise NotImplementedError("the stand-in decrypts nothing")

    def mint(self, host: str) -> Any:
        return fail(MintError("the stand-in decrypts nothing"))

    def mintVia(self, ask: Any) -> None:
        pass

    def routeTLS(self) -> Any:
        raise NotImplementedError("the stand-in has no HTTPS route")

    def upstreamTLS(self, route: Route) -> None:
        return None

    def requestCapture(self, logging: bool) -> BodyCapture:
        return SizeOnly()

    def responseCapture(self, contentType: bytes | None, logging: bool) -> BodyCapture:
        return SizeOnly()

    def rewrite(self, route: Route, name: bytes, value: bytes) -> bytes:
        return value
