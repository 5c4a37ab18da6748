"""
The site proxy as a service: the engine (L{netlog.proxy.service}) over
L{SiteMode}.
"""

from __future__ import annotations

from netlog.config import ProxyConfig, SiteProxyConfig
from netlog.core.capture import KEEP_ALL
from netlog.log.interfaces import ILogWriter
from netlog.net.options import buildDestinations, upstreamProxyArguments
from netlog.net.reactors import IProxyReactor
from netlog.proxy.service import ProxyService
from netlog.site.mode import SiteMode


def buildProxy(config: ProxyConfig[SiteProxyConfig], writer: ILogWriter, reactor: IProxyReactor) -> ProxyService:
    """
    The site proxy for C{config} (C{twistd netlog-proxy}'s).
    """
    site = config.plugin
    resolver, policy = buildDestinations(site.destinations, reactor)
    if config.apiAddress:
        policy.addListener(*config.apiAddress)
    return ProxyService(
        SiteMode(site.sites, config.state, keepKey=not config.supervised,
                 h2=site.h2, keepAll=site.keepBodies == KEEP_ALL,
                 replays=dict(site.replays), reactor=reactor),
        writer,
        reactor,
        resolver,
        policy,
        list(config.listen),
        site.httpsRoute,
        site.httpRoute,
        site.destinations.connectTimeout,
        site.destinations.idleTimeout,
        site.headerTimeout,
        h2Upstream=site.h2Upstream,
        upstreamConnections=site.destinations.upstreamConnections,
        **upstreamProxyArguments(site.destinations),
    )
