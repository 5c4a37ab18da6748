"""
The site proxy as a service: the engine (L{netlog.proxy.service}) over
L{SiteMode}.
"""

from __future__ import annotations

from typing import Any

from netlog.core.capture import KEEP_ALL
from netlog.log.interfaces import ILogWriter
from netlog.net.options import buildDestinations, upstreamProxyArguments
from netlog.net.reactors import IProxyReactor
from netlog.net.timeouts import MAX_CONNECTIONS_PER_UPSTREAM
from netlog.proxy.service import ProxyService
from netlog.site.mode import SiteMode


def buildProxy(config: Any, writer: ILogWriter, reactor: IProxyReactor) -> ProxyService:
    """
    The site proxy for the parsed options of C{twistd netlog-proxy}.
    """
    resolver, policy = buildDestinations(config, reactor)
    api = config.get("api-address")
    if api:
        policy.addListener(api[0], api[1])
    return ProxyService(
        SiteMode(config.sitesConfig, config["state"], keepKey=bool(config.get("no-supervise")),
                 h2=not config.get("no-h2"), keepAll=config.get("keep-bodies") == KEEP_ALL,
                 replays=config.get("replays")),
        writer,
        reactor,
        resolver,
        policy,
        list(config["listen"]),
        config.get("https-route"),
        config.get("http-route"),
        float(config["connect-timeout"]),
        float(config["idle-timeout"]),
        float(config["header-timeout"]),
        upstreamConnections=int(config.get("upstream-connections", MAX_CONNECTIONS_PER_UPSTREAM)),
        **upstreamProxyArguments(config),
    )
