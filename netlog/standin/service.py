"""
The stand-in as a service: the engine (L{netlog.proxy.service}) over
L{StandinMode}, as L{netlog.tap.common.makeProxyService} wires it.
"""

from __future__ import annotations

from dataclasses import dataclass

from netlog.config import ProxyConfig
from netlog.log.interfaces import ILogWriter
from netlog.net.options import DEFAULT_LISTEN, Destinations, buildDestinations, splitDescription, upstreamProxyArguments
from netlog.net.reactors import IProxyReactor
from netlog.proxy.service import ProxyService
from netlog.standin.mode import StandinMode


def listenerAddress(description: str) -> tuple[str, int] | None:
    """
    The interface and fixed port of a C{tcp:} endpoint description, so the
    destination policy knows the proxy's own listeners before any connection
    comes (a port 0 is learnt from the connections themselves).
    """
    parts = splitDescription(description)
    if parts[0] not in ("tcp", "tcp6") or len(parts) < 2:
        return None
    host = "0.0.0.0" if parts[0] == "tcp" else "::"
    port = None
    for index, part in enumerate(parts[1:]):
        key, sep, value = part.partition("=")
        if not sep and index == 0 and part.isdigit():
            port = int(part)
        elif key == "port" and value.isdigit():
            port = int(value)
        elif key == "interface":
            host = value
    if port is None:
        return None
    return host, port


@dataclass(frozen=True, kw_only=True)
class StandinConfig:
    """
    What only the stand-in has (C{twistd netlog-standin}).

    @ivar destinations: where it may go.
    @ivar headerTimeout: seconds a browser has to send a whole request head.
    @ivar connectPorts: the ports a CONNECT may reach.
    """

    destinations: Destinations
    headerTimeout: float
    connectPorts: frozenset[int]


def buildProxy(config: ProxyConfig[StandinConfig], writer: ILogWriter, reactor: IProxyReactor) -> ProxyService:
    """
    The stand-in for C{config}: the engine over L{StandinMode}.
    """
    standin = config.plugin
    resolver, policy = buildDestinations(standin.destinations, reactor)
    listen = list(config.listen)
    for description in listen:
        address = listenerAddress(description)
        if address is not None:
            policy.addListener(*address)
    if config.apiAddress:
        # The log's API is refused like the proxy's own listeners.
        policy.addListener(*config.apiAddress)
    return ProxyService(
        StandinMode(standin.connectPorts),
        writer,
        reactor,
        resolver,
        policy,
        listen,
        connectTimeout=standin.destinations.connectTimeout,
        idleTimeout=standin.destinations.idleTimeout,
        headerTimeout=standin.headerTimeout,
        upstreamConnections=standin.destinations.upstreamConnections,
        **upstreamProxyArguments(standin.destinations),
    )
