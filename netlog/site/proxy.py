"""
The site proxy as a service: its listeners, its CA, its upstream pool, and
how it resolves and connects.

L{buildProxy} is what C{netlog.tap.proxy} hands to
L{netlog.tap.common.makeProxyService}; the listeners it lists are bound by
the caller (twistd's privileged step, or a supervisor that adopts them).
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory
from zope.interface import implementer

from netlog.core.capture import BodyCapture, responseCapture
from netlog.log.writer import LogWriter
from netlog.net.options import buildDestinations
from netlog.net.policy import DestinationPolicy
from netlog.net.resolve import Resolver
from netlog.net.timeouts import DEFAULT_CONNECT_TIMEOUT, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT
from netlog.site.browser import FORWARD, HTTP_ROUTE, HTTPS_ROUTE, BrowserFactory
from netlog.site.ca import CERT_FILE, KEY_FILE, CertificateAuthority
from netlog.site.config import SitesConfig
from netlog.site.exchange import DestinationRefused, Route
from netlog.site.tls import SNITLS, backendTLS
from netlog.site.upstream import Pool, UpstreamProtocol, connectUpstream

_log = Logger()

#: Routes kept for reuse (one per site and public host:port; cleared when full).
MAX_CACHED_ROUTES = 1024


@implementer(IOpenSSLServerConnectionCreator)
class _LazySNI:
    """
    The HTTPS route's TLS side, built on first use, once the CA is loaded.
    """

    def __init__(self, proxy: "SiteProxy") -> None:
        self.proxy = proxy
        self._tls: SNITLS | None = None

    def serverConnectionForTLS(self, protocol: Any) -> Any:
        if self._tls is None:
            config = self.proxy.config
            hosts = [o.host for s in config.sites for o in s.origins if o.scheme == "https"]
            assert self.proxy.ca is not None
            self._tls = SNITLS(self.proxy.ca, config.hasHost, hosts[0])
        return self._tls.serverConnectionForTLS(protocol)


class SiteProxy(Service):
    """
    The site proxy.

    @ivar listeners: C{(role, description, factory)} for the caller to bind.
    @ivar ca: the CA, loaded in the privileged step.
    """

    name = "site-proxy"

    def __init__(
        self,
        config: SitesConfig,
        writer: LogWriter,
        reactor: Any,
        resolver: Resolver,
        policy: DestinationPolicy,
        stateDir: str,
        listen: list[str],
        httpsRoute: str | None = None,
        httpRoute: str | None = None,
        connectTimeout: float = DEFAULT_CONNECT_TIMEOUT,
        idleTimeout: float = DEFAULT_IDLE_TIMEOUT,
        ca: CertificateAuthority | None = None,
        openKey: Any = None,
        headerTimeout: float = DEFAULT_HEADER_TIMEOUT,
    ) -> None:
        """
        @param idleTimeout: seconds an exchange, a WebSocket or a tunnel may
            pass nothing (C{--idle-timeout}).
        @param headerTimeout: seconds a browser has to send a whole request
            head once begun (C{--header-timeout}); then C{408}.
        """
        self.headerTimeout = headerTimeout
        self.config = config
        self.writer = writer
        self.reactor = reactor
        self.resolver = resolver
        self.policy = policy
        self.stateDir = stateDir
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        self.ca: CertificateAuthority | None = ca
        self.openKey = openKey
        self.pool = Pool(reactor)
        self.connections: set[Any] = set()
        self._ids = itertools.count(1)
        self._backendTLS: dict[Any, Any] = {}
        self._routes: dict[tuple[Any, ...], Route] = {}
        self.listeners: list[tuple[str, str, Any]] = []
        for description in listen:
            self.listeners.append(("forward", description, BrowserFactory(self, FORWARD)))
        if httpsRoute:
            self.listeners.append(
                ("https-route", httpsRoute,
                 TLSMemoryBIOFactory(_LazySNI(self), False, BrowserFactory(self, HTTPS_ROUTE)))  # type: ignore[arg-type]
            )
        if httpRoute:
            self.listeners.append(("http-route", httpRoute, BrowserFactory(self, HTTP_ROUTE)))

    # -- service ------------------------------------------------------------------

    @property
    def privilegedFiles(self) -> list[str]:
        """
        The files a supervised worker can't read itself: the CA key, opened
        for it by its supervisor after the privileged step.
        """
        return [os.path.join(self.stateDir, KEY_FILE)]

    def privilegedStartService(self) -> None:
        self._loadCA()
        Service.privilegedStartService(self)

    def startService(self) -> None:
        self._loadCA()
        Service.startService(self)

    def _loadCA(self) -> None:
        if self.ca is None:
            if self.openKey is not None and os.path.exists(os.path.join(self.stateDir, CERT_FILE)):
                self.ca = CertificateAuthority.loadOrCreate(self.stateDir, self.openKey)
            else:
                self.ca = CertificateAuthority.loadOrCreate(self.stateDir)
            # Mint the sites' certificates now, while the key is at hand.
            for site in self.config.sites:
                for origin in site.origins:
                    if origin.scheme == "https":
                        self.ca.contextFor(origin.host)

    def stopService(self) -> Any:
        for connection in list(self.connections):
            peer = connection.rawPeer or connection.exchange
            if peer is not None and hasattr(peer, "abort"):
                peer.abort()
            connection.close()
        self.pool.closeAll()
        return Service.stopService(self)

    # -- what the protocols use ------------------------------------------------------

    @property
    def logging(self) -> bool:
        return self.writer.enabled

    def nextConnectionId(self) -> str:
        return f"c{next(self._ids)}"

    def responseCapture(self, contentType: bytes | str | None) -> BodyCapture:
        return responseCapture(contentType, self.logging)

    def siteRoute(self, site: Any, scheme: str, host: str, port: int) -> Route:
        """
        The route to C{site}'s backend for a request to C{scheme://host:port};
        the same object each time (its pool key is computed once).
        """
        key = (id(site), scheme, host, port)
        route = self._routes.get(key)
        if route is None:
            if len(self._routes) >= MAX_CACHED_ROUTES:
                self._routes.clear()
            from netlog.site.browser import authority

            backend = site.backend
            route = self._routes[key] = Route(site, backend.scheme, backend.host, backend.port,
                                              f"{scheme}://{authority(host, port, scheme)}", host)
        return route

    def resolveFor(self, route: Route) -> defer.Deferred[str]:
        """
        The address to connect to for C{route}; a live host's address must
        pass the destination policy (a site's backend is configured, so it is
        trusted).
        """
        d = self.resolver.resolve(route.host)

        def pick(resolution: Any) -> str:
            address = resolution.addresses[0]
            if route.site is None:
                reason = self.policy.check(address, route.port, resolution.named)
                if reason is not None:
                    raise DestinationRefused(reason)
            return address

        return d.addCallback(pick)

    def connectRaw(self, address: str, port: int, protocolClass: Any) -> defer.Deferred[Any]:
        import ipaddress

        endpointClass = TCP6ClientEndpoint if ipaddress.ip_address(address).version == 6 else TCP4ClientEndpoint
        endpoint = endpointClass(self.reactor, address, port, timeout=self.connectTimeout)
        factory: Any = Factory.forProtocol(protocolClass)
        factory.noisy = False  # no "Starting factory" line per upstream connection
        return endpoint.connect(factory)  # type: ignore[no-any-return]

    def takeIdle(self, route: Route) -> tuple[UpstreamProtocol, bool, str, float | None] | None:
        """
        An idle pooled connection for C{route}, as L{upstreamFor} gives it,
        or L{None}.
        """
        idle = self.pool.take(route.key)
        if idle is None:
            return None
        return (idle, True, idle.address or route.host, None)

    def upstreamFor(self, route: Route, fresh: bool = False) -> defer.Deferred[tuple[UpstreamProtocol, bool, str, float | None]]:
        """
        A connection for C{route}: an idle one from the pool, else a new one.

        @return: C{(protocol, reused, address, connectedAt)}.
        """
        key = route.key
        if not fresh:
            idle = self.takeIdle(route)
            if idle is not None:
                return defer.succeed(idle)
        tls = None
        if route.scheme == "https" and route.backend is not None:
            tls = self._backendTLS.get(key)
            if tls is None:
                tls = self._backendTLS[key] = backendTLS(route.backend)
        d = self.resolveFor(route)

        def connect(address: str) -> Any:
            c = connectUpstream(self.reactor, address, route.port, tls, self.connectTimeout, key)
            return c.addCallback(lambda p: (p, False, address, self.reactor.seconds()))

        return d.addCallback(connect)


def buildProxy(config: Any, writer: LogWriter, reactor: Any) -> SiteProxy:
    """
    The site proxy for the parsed options of C{twistd netlog-proxy}.
    """
    from netlog.supervise.privileged import openPrivileged

    resolver, policy = buildDestinations(config, reactor)
    api = config.get("api-address")
    if api:
        policy.addListener(api[0], api[1])
    return SiteProxy(
        config.sitesConfig,
        writer,
        reactor,
        resolver,
        policy,
        config["state"],
        list(config["listen"]),
        config.get("https-route"),
        config.get("http-route"),
        float(config["connect-timeout"]),
        float(config["idle-timeout"]),
        openKey=openPrivileged,
        headerTimeout=float(config["header-timeout"]),
    )
