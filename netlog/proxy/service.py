"""
The proxy as a service: its mode, its listeners, its upstream pool, and how
it resolves and connects. Both plugins build one (see
L{netlog.site.service.buildProxy} and L{netlog.standin.service.buildProxy});
the listeners it lists are bound by the caller (twistd's privileged step, or
a supervisor that adopts them).
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Sequence, TypeVar

from twisted.application.service import Service
from twisted.internet import defer
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator, IProtocol
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory
from zope.interface import implementer

from netlog.core.http1 import RequestHead
from netlog.core.records import openRecord, requestRecord
from netlog.core.rules import NO_RULES, Rules
from netlog.log.interfaces import ILogWriter
from netlog.core.upstreamproxy import UpstreamProxy, UpstreamProxyFailed, credentialsLine
from netlog.net.connect import connectThen
from netlog.net.policy import DestinationPolicy
from netlog.net.reactors import IProxyReactor
from netlog.net.resolve import Resolver, parseAddress
from netlog.net.timeouts import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    MAX_CONNECTIONS_PER_UPSTREAM,
)
from netlog.proxy.browser import FORWARD, HTTP_ROUTE, HTTPS_ROUTE, BrowserFactory
from netlog.proxy.contracts import IBrowserConnection, IWaiter, Taken
from netlog.proxy.mode import DestinationRefused, IMode, Route
from netlog.net.viaproxy import connectVia, proxyUnreached
from netlog.core.bounded import BoundedCache
from netlog.proxy.h2upstream import H2Upstream, HTTP11Only, connectNegotiated
from netlog.proxy.upstream import Pool, ProxiedUpstreamProtocol, UpstreamProtocol, connectUpstream

_log = Logger()

#: Upstreams whose TLS client side is kept to be used again (one a site's
#: backend or a live host and port), the least recently used dropped first.
MAX_UPSTREAM_TLS = 4096

#: A plain connection's protocol (L{ProxyService.connectRaw}).
_P = TypeVar("_P", bound=IProtocol)


@implementer(IOpenSSLServerConnectionCreator)
class _RouteTLS:
    """
    The HTTPS route's TLS side, asked of the mode on first use (once its CA
    is loaded).
    """

    def __init__(self, mode: IMode) -> None:
        self.mode = mode
        self._tls: Any = None

    def serverConnectionForTLS(self, protocol: Any) -> Any:
        if self._tls is None:
            self._tls = self.mode.routeTLS()
        return self._tls.serverConnectionForTLS(protocol)


class ProxyService(Service):
    """
    A proxy: the engine over one mode.

    @ivar listeners: C{(role, description, factory)} for the caller to bind.
    """

    name = "proxy"

    def __init__(
        self,
        mode: IMode,
        writer: ILogWriter,
        reactor: IProxyReactor,
        resolver: Resolver,
        policy: DestinationPolicy,
        listen: list[str],
        httpsRoute: str | None = None,
        httpRoute: str | None = None,
        connectTimeout: float = DEFAULT_CONNECT_TIMEOUT,
        idleTimeout: float = DEFAULT_IDLE_TIMEOUT,
        headerTimeout: float = DEFAULT_HEADER_TIMEOUT,
        rules: Rules = NO_RULES,
        h2Upstream: bool = True,
        upstreamProxy: UpstreamProxy | None = None,
        upstreamProxyAuthFile: str | None = None,
        upstreamConnections: int = MAX_CONNECTIONS_PER_UPSTREAM,
    ) -> None:
        """
        @param idleTimeout: seconds an exchange, a WebSocket or a tunnel may
            pass nothing (C{--idle-timeout}).
        @param headerTimeout: seconds a browser has to send a whole request
            head once begun (C{--header-timeout}); then C{408}.
        @param rules: this listener's rules (C{--rules}, or a session's),
            replaced whole when they change; each request asks the ones set
            when it came.
        @param upstreamConnections: connections open at once to one
            upstream at most, for a route that names none of its own
            (C{--upstream-connections}).
        @param upstreamProxy: the proxy every connection to a live host goes
            through (C{--upstream-proxy}), or L{None}: they go direct.
        @param upstreamProxyAuthFile: the file its credentials came from
            (C{--upstream-proxy-auth-file}): a supervisor hands what it read
            there to its workers, which may not be able to read it.
        @param h2Upstream: a TLS connection made straight to an upstream
            offers C{h2} by ALPN, and speaks HTTP/2 when the server picks it
            (no C{--no-h2-upstream}).
        """
        self.mode = mode
        self.writer = writer
        self.reactor = reactor
        self.resolver = resolver
        self.policy = policy
        self.connectTimeout = connectTimeout
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        self.rules = rules
        self.upstreamConnections = upstreamConnections
        self.h2Upstream = h2Upstream
        self.upstreamProxy = upstreamProxy
        self._upstreamProxyAuthFile = upstreamProxyAuthFile
        self.pool = Pool(reactor)
        self.connections: set[IBrowserConnection] = set()
        self._ids = itertools.count(1)
        #: What its connection ids start with: nothing, or the worker slot
        #: of the worker it runs in (see
        #: L{netlog.supervise.worker.connectionPrefix}).
        self.connectionPrefix = ""
        self._upstreamTLS: BoundedCache[Any, Any] = BoundedCache(MAX_UPSTREAM_TLS)
        self.listeners: list[tuple[str, str, Any]] = []
        for description in listen:
            self.listeners.append(("forward", description, BrowserFactory(self, FORWARD)))
        if httpsRoute:
            self.listeners.append(
                ("https-route", httpsRoute,
                 TLSMemoryBIOFactory(_RouteTLS(mode), False, BrowserFactory(self, HTTPS_ROUTE)))  # type: ignore[arg-type]
            )
        if httpRoute:
            self.listeners.append(("http-route", httpRoute, BrowserFactory(self, HTTP_ROUTE)))

    # -- service ------------------------------------------------------------------

    @property
    def privilegedFiles(self) -> list[str]:
        """
        The files a supervised worker can't read itself (the mode's).
        """
        return list(self.mode.privilegedFiles)

    @property
    def handedData(self) -> dict[str, bytes]:
        """
        What a supervisor hands its workers once this (its copy) is
        prepared: the mode's, and the upstream proxy's credentials.
        """
        handed = dict(self.mode.handedData)
        authorization = self.upstreamProxy.authorization if self.upstreamProxy is not None else None
        if self._upstreamProxyAuthFile and authorization is not None:
            handed[self._upstreamProxyAuthFile] = credentialsLine(authorization)
        return handed

    def mint(self, host: str) -> defer.Deferred[str]:
        """
        In a supervisor: the certificate (PEM) a worker asked for (see
        L{IMode.mint}).
        """
        return self.mode.mint(host)  # type: ignore[no-any-return]

    def mintVia(self, ask: Callable[[str], defer.Deferred[str]]) -> None:
        """
        In a worker: how live hosts' certificates are asked for (see
        L{IMode.mintVia}).
        """
        self.mode.mintVia(ask)

    def privilegedStartService(self) -> None:
        self.mode.prepare()
        Service.privilegedStartService(self)

    def startService(self) -> None:
        self.mode.prepare()
        Service.startService(self)

    def stopService(self) -> Any:
        for connection in list(self.connections):
            peer = connection.rawPeer or connection.exchange
            if peer is not None:
                peer.abort()
            connection.close()
        self.pool.closeAll()
        return Service.stopService(self)

    # -- what the protocols use ------------------------------------------------------

    @property
    def logging(self) -> bool:
        return self.writer.enabled

    def nextConnectionId(self) -> str:
        return f"{self.connectionPrefix}c{next(self._ids)}"

    def openFields(self, side: Any, kind: str, started: float, head: RequestHead, url: str,
                   host: str | None, port: int | None, address: str | None = None,
                   signIn: frozenset[str] = frozenset(), rules: Sequence[dict[str, str]] = (),
                   liveDecrypted: bool = False) -> dict[str, Any]:
        """
        An open line's fields for a request (or a CONNECT) that C{side} (the
        browser's connection, or an HTTP/2 connection) carries, as this
        proxy's mode names it.

        @param liveDecrypted: it is a live host's, decrypted (C{_liveDecrypted}).
        """
        return openRecord(self.mode.name, kind, started, side.client, side.connectionId,
                          requestRecord(head, url, signIn), host, port, address, rules, liveDecrypted)

    def upstreamProxyFor(self, route: Route) -> UpstreamProxy | None:
        """
        The upstream proxy C{route}'s connections go through: a live host's,
        C{--upstream-proxy}; a site's backend, the site's own
        C{upstream_proxy} (direct when it names none), with the credentials
        of C{--upstream-proxy-auth-file} when it is C{--upstream-proxy}'s.
        """
        if route.site is None:
            return self.upstreamProxy
        via = route.upstreamProxy
        if via is not None and via == self.upstreamProxy:
            return self.upstreamProxy
        return via

    def _proxyResolves(self, route: Route) -> bool:
        """
        Whether C{route}'s host is left for its upstream proxy to resolve:
        a name that C{--resolve} doesn't name, when there is one.
        """
        if self.upstreamProxyFor(route) is None or parseAddress(route.host) is not None:
            return False
        return route.host.lower().rstrip(".") not in self.resolver.overrides

    def resolveFor(self, route: Route) -> defer.Deferred[str | None]:
        """
        The address to connect to for C{route}: for a live host, the first
        address it resolves to that the destination rules allow (a
        configured upstream is trusted). L{None} when its upstream proxy
        resolves the name (see L{_proxyResolves}): then the rules judge
        the name alone (C{localhost} is loopback).

        @raise DestinationRefused: (in the Deferred) no address is allowed.
        """
        if self._proxyResolves(route):
            why = None if route.named or route.site is not None else self.policy.checkName(route.host, route.port)
            if why is not None:
                return defer.fail(DestinationRefused(f"{route.host} may not be reached: {why}"))
            return defer.succeed(None)
        d = self.resolver.resolve(route.host)

        def pick(resolution: Any) -> str:
            if route.site is not None:
                return resolution.addresses[0]  # type: ignore[no-any-return]
            why = None
            for address in resolution.addresses:
                why = self.policy.check(address, route.port, resolution.named or route.named)
                if why is None:
                    return address  # type: ignore[no-any-return]
            raise DestinationRefused(f"{route.host} may not be reached: {why}")

        return d.addCallback(pick)

    def connectRaw(self, route: Route, address: str | None, protocolClass: Callable[[], _P]) -> defer.Deferred[_P]:
        """
        A plain connection to C{address} (as L{resolveFor} gave it) and
        C{route}'s port for C{protocolClass} (a tunnel's server side):
        through C{route}'s upstream proxy when it has one.
        """
        made: defer.Deferred[_P] = defer.Deferred()
        via = self.upstreamProxyFor(route)
        if via is None:
            assert address is not None
            connectThen(self.reactor, address, route.port, protocolClass, made.callback, made.errback,
                        timeout=self.connectTimeout)
        else:
            self._through(via, address or route.host, route.port, protocolClass, made)
        return made

    def _proxyAddress(self, via: UpstreamProxy) -> defer.Deferred[str]:
        """
        The address of C{via}, resolved as any name but not judged by the
        destination rules: the operator gave it.
        """
        def unresolved(failure: Any) -> str:
            raise UpstreamProxyFailed(via.label, f"the upstream proxy {via.label} doesn't resolve", 502)

        return self.resolver.resolve(via.host).addCallbacks(lambda resolution: resolution.addresses[0], unresolved)

    def _through(self, via: UpstreamProxy, host: str, port: int, build: Callable[[], Any],
                 made: defer.Deferred[Any], tls: Any = None) -> None:
        """
        A tunnel to C{host:port} through C{via}, into C{made}.
        """
        def connect(proxyAddress: str) -> None:
            connectVia(self.reactor, via, proxyAddress, host, port, build, made.callback, made.errback,
                       self.connectTimeout, tls)

        self._proxyAddress(via).addCallbacks(connect, made.errback)

    def _plainThrough(self, via: UpstreamProxy, route: Route, address: str | None) -> defer.Deferred[UpstreamProtocol]:
        """
        A connection to C{via} that carries C{route}'s plain requests in
        absolute-form.
        """
        made: defer.Deferred[UpstreamProtocol] = defer.Deferred()

        def connect(proxyAddress: str) -> None:
            connectThen(self.reactor, proxyAddress, via.port,
                        lambda: ProxiedUpstreamProtocol(self.reactor, route.key, via, route.host, route.port, address),
                        made.callback, lambda failure: made.errback(proxyUnreached(via, failure)),
                        timeout=self.connectTimeout)

        self._proxyAddress(via).addCallbacks(connect, made.errback)
        return made

    def takeIdle(self, route: Route) -> Taken | None:
        """
        An idle pooled connection for C{route}, as L{upstreamFor} gives one,
        or L{None}.
        """
        idle = self.pool.take(route.key, shared=not route.http1Only)
        if idle is None:
            return None
        return (idle, True, getattr(idle, "address", None) or route.host, None)

    def claim(self, route: Route, waiter: IWaiter) -> bool:
        """
        Room for a new connection for C{route} (counted now), or C{waiter}
        waits its turn: see L{Pool.claim}.
        """
        return self.pool.claim(route.key, route.connections or self.upstreamConnections, waiter)

    def upstreamFor(self, route: Route, resolved: Callable[[str], None] | None = None
                    ) -> defer.Deferred[Taken]:
        """
        A new connection for C{route}, on a slot L{claim}ed: it is counted
        until it is lost, or the slot freed when it can't be made.

        @param resolved: told the address a new connection goes to, once
            known (so a failure to connect can say where it tried).

        @return: C{(protocol, reused, address, connectedAt)}.
        """
        key = route.key
        tls = None
        if route.scheme == "https":
            tls = self._upstreamTLS.get(key)
            if tls is None:
                tls = self.mode.upstreamTLS(route)
                self._upstreamTLS.put(key, tls)
        # HTTP/2 is offered on a TLS connection made straight to the
        # upstream, for a request that may share one (not an upgrade).
        offerH2 = tls is not None and self.h2Upstream and not route.http1Only
        if offerH2:
            self.pool.negotiating(key)
        d = self.resolveFor(route)

        def connect(address: str | None) -> defer.Deferred[Taken]:
            if resolved is not None and address is not None:
                resolved(address)
            via = self.upstreamProxyFor(route)
            c: defer.Deferred[Any]
            if via is None:
                assert address is not None
                if offerH2:
                    c = connectNegotiated(self.reactor, address, route.port, tls, self.connectTimeout, key)
                else:
                    c = connectUpstream(self.reactor, address, route.port, tls and HTTP11Only(tls),
                                        self.connectTimeout, key)
            elif tls is None:
                c = self._plainThrough(via, route, address)
            else:
                c = defer.Deferred()
                self._through(via, address or route.host, route.port,
                              lambda: ProxiedUpstreamProtocol(self.reactor, key, via, route.host, route.port, address,
                                                              tunnelled=True), c, HTTP11Only(tls))
            return c.addCallback(made, address)

        def made(protocol: UpstreamProtocol | H2Upstream, address: str | None) -> Taken:
            self.pool.opened(protocol)
            now = self.reactor.seconds()
            if isinstance(protocol, H2Upstream):
                self.pool.negotiated(key, "h2")
                stream = protocol.newStream(reused=False)
                if protocol.connected:
                    self.pool.share(protocol, route.connections or self.upstreamConnections)
                return (stream, False, address, now)
            if offerH2:
                self.pool.negotiated(key, "http/1.1")
            return (protocol, False, address, now)

        def unmade(failure: Any) -> Any:
            if offerH2:
                self.pool.negotiated(key, None)
            self.pool.released(key)
            return failure

        return d.addCallback(connect).addErrback(unmade)
