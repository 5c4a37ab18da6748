"""
The site proxy as a service: the engine (L{netlog.proxy.service}) over
L{SiteMode}.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from netlog.config import ProxyConfig
from netlog.core.capture import KEEP_ALL
from netlog.log.interfaces import ILogWriter
from netlog.net.options import Destinations, buildDestinations, upstreamProxyArguments
from netlog.net.reactors import IProxyReactor
from netlog.proxy.service import ProxyService
from netlog.site.config import SitesConfig
from netlog.site.mode import SiteMode
from netlog.site.replay import Replay


@dataclass(frozen=True, kw_only=True)
class SiteProxyConfig:
    """
    What only the site proxy has (C{twistd netlog-proxy}).

    @ivar destinations: where it may go.
    @ivar headerTimeout: seconds a browser has to send a whole request head.
    @ivar sites: the sites and live hosts (C{--sites}).
    @ivar httpsRoute: the HTTPS route's endpoint description, if any.
    @ivar httpRoute: the plain HTTP route's endpoint description, if any.
    @ivar keepBodies: what of answers' bodies the log keeps (C{text} or
        C{all}).
    @ivar replays: the recording each replayed site is answered from, by
        site name.
    @ivar h2: ALPN offers the browser h2 (no C{--no-h2}).
    @ivar h2Upstream: ALPN offers C{https://} backends h2 (no
        C{--no-h2-upstream}).
    """

    destinations: Destinations
    headerTimeout: float
    sites: SitesConfig
    httpsRoute: str | None
    httpRoute: str | None
    keepBodies: str
    replays: Mapping[str, Replay]
    h2: bool
    h2Upstream: bool = True


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
