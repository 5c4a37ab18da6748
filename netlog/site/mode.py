"""
The site proxy's mode: the sites of C{sites.toml} are decrypted (or read as
plain HTTP inside their CONNECT), routed to their backends, kept whole and
rewritten; allowed live hosts are relayed (blind for a CONNECT, unless
C{[live] decrypt} names the host: then decrypted and kept whole too, relayed
to the host over verified TLS); anything else is refused.
"""

from __future__ import annotations

import os
from functools import partial
from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.logger import Logger
from zope.interface import implementer

from netlog.core.capture import BodyCapture, keepAllCapture, requestCapture, responseCaptureFor
from netlog.core.records import urlAuthority
from netlog.proxy.mode import (
    BLIND, DECRYPT, OPEN, Answered, IAnswers, IMode, MintError, Refusal, Route, Routed, liveRoute,
)
from netlog.site.ca import HTTP1_ONLY, PROTOCOLS, CertificateAuthority, HandedLeaves, mintInChild
from netlog.site.config import Site, SitesConfig, normalizeHost
from netlog.site.livetls import LiveHostTLS, LiveTLS
from netlog.site.minter import MinterClient, adoptMinter, startMinter
from netlog.site.rewrite import rewriteLocation, rewriteSetCookie
from netlog.site.tls import SNITLS, HostTLS, backendTLS
from netlog.privileged import inherited, openPrivileged

#: Routes kept for reuse (one per site and public origin; cleared when full).
MAX_CACHED_ROUTES = 1024
#: The name (in the state folder, never written there) under which the
#: supervisor hands its workers the sites' certificates.
LEAVES_NAME = "handed-leaves"
#: What the site proxy answers for a host or port it doesn't serve.
FORBIDDEN = 403

_log = Logger(namespace="netlog.site")


@implementer(IMode)
class SiteMode:
    """
    The site proxy's decisions, from its C{sites.toml}.

    @ivar ca: what serves the sites' certificates, set by L{prepare} (in
        the privileged step): netlog's CA in one process, the certificates
        minted at start in a supervised worker (see L{netlog.site.ca}), with
        live hosts' asked for on demand (see L{netlog.site.minter}).
    @ivar minter: in a supervisor whose sites decrypt live hosts, its end of
        the certificate minter (L{prepare} forks it).
    """

    name = "site"
    #: Files a supervised worker can't read itself: none (the CA's key is
    #: never handed to a worker).
    privilegedFiles: tuple[str, ...] = ()

    def __init__(self, config: SitesConfig, stateDir: str, ca: CertificateAuthority | None = None,
                 keepKey: bool = True, h2: bool = True, keepAll: bool = False,
                 replays: dict[str, IAnswers] | None = None, reactor: Any = None) -> None:
        """
        @param keepKey: this process loads the CA and holds its key
            (C{--no-supervise}, tests); otherwise the supervisor's copy has
            a child process mint every site's certificate and hands them to
            the workers, which serve from them.
        @param keepAll: keep every answer's body, binary too
            (C{--keep-bodies all}).
        @param replays: the recording each replayed site is answered from,
            by site name (L{netlog.site.replay.loadReplays}).
        @param reactor: what serves the minter's socket in a supervisor
            (the global reactor when not given).
        """
        self.replays = replays or {}
        self.keepAll = keepAll
        self.protocols = PROTOCOLS if h2 else HTTP1_ONLY
        self.config = config
        self.stateDir = stateDir
        self.ca: CertificateAuthority | HandedLeaves | None = ca
        self.keepKey = keepKey
        #: What the supervisor hands its workers: the path they open it by
        #: (see L{netlog.privileged.openPrivileged}) -> its bytes.
        self.handedData: dict[str, bytes] = {}
        self._routes: dict[tuple[Any, ...], Route] = {}
        self._liveTLS: LiveTLS | None = None
        self._reactor = reactor
        self.minter: MinterClient | None = None
        #: How a worker asks for a live host's certificate (L{mintVia}).
        self._ask: Any = None

    def siteHosts(self) -> list[str]:
        """
        Every host a site's origin names: the only names this mode decrypts
        (a CONNECT to a site's origin, or the HTTPS route's SNI).
        """
        return sorted({origin.host for site in self.config.sites for origin in site.origins})

    def prepare(self) -> None:
        if self.ca is not None:
            self.ca.protocols = self.protocols
            return
        handed = os.path.join(self.stateDir, LEAVES_NAME)
        if self.keepKey:
            ca = self.ca = CertificateAuthority.loadOrCreate(self.stateDir)
            ca.protocols = self.protocols
            # Mint the sites' certificates now, before the first handshake.
            for host in self.siteHosts():
                ca.contextFor(host)
        elif inherited(handed):
            fd = openPrivileged(handed)
            try:
                # By offset: the standby's descriptor shares its offset with
                # the serving worker's and the supervisor's.
                chunks: list[bytes] = []
                offset = 0
                while chunk := os.pread(fd, 1 << 16, offset):
                    chunks.append(chunk)
                    offset += len(chunk)
            finally:
                os.close(fd)
            leaves = self.ca = HandedLeaves(b"".join(chunks), self.protocols)
            leaves.ask = self._ask
        elif self.config.liveDecrypt:
            # Live hosts are minted on demand: by a process that outlives
            # this step and holds the key this one never loads.
            bundle, sock, pid = startMinter(self.stateDir, self.siteHosts())
            reactor = self._reactor
            if reactor is None:
                from twisted.internet import reactor
            self.minter = adoptMinter(reactor, sock, pid)
            _log.info("started the certificate minter {pid} for the live hosts [live] decrypt names", pid=pid)
            self.handedData = {handed: bundle}
            self.ca = HandedLeaves(bundle, self.protocols)
        else:
            bundle = mintInChild(self.stateDir, self.siteHosts())
            self.handedData = {handed: bundle}
            self.ca = HandedLeaves(bundle, self.protocols)

    # -- routing ----------------------------------------------------------------

    def siteRoute(self, site: Site, scheme: str, host: str, port: int) -> Route:
        """
        The route to C{site}'s backend for a request to C{scheme://host:port};
        the same object each time (its pool key is computed once).
        """
        key = (id(site), scheme, host, port)
        route = self._routes.get(key)
        if route is None:
            if len(self._routes) >= MAX_CACHED_ROUTES:
                self._routes.clear()
            backend = site.backend
            answers = self.replays.get(site.name)
            route = self._routes[key] = (Route if answers is None else partial(Answered, answers=answers))(
                backend.scheme, backend.host, backend.port, f"{scheme}://{urlAuthority(host, port, scheme)}", host,
                site, site.signInHeaders, connections=site.connections, upstreamProxy=site.upstreamProxy,
            )
        return route

    def route(self, scheme: str, host: str, port: int, tunnelled: bool) -> Routed:
        site = self.config.siteAt(scheme, host, port)
        if site is not None:
            return self.siteRoute(site, scheme, host, port)
        origin = f"{scheme}://{urlAuthority(host, port, scheme)}"
        if tunnelled:
            if self.config.decrypts(host) and port in self.config.liveConnectPorts:
                return liveRoute(scheme, host, port, True)
            return Refusal(FORBIDDEN, f"{origin} is not a site's origin"
                           + (" or a live host netlog decrypts" if self.config.liveDecrypt else ""))
        if self.config.isLive(host):
            return liveRoute(scheme, host, port)
        return Refusal(FORBIDDEN, f"{origin} is not a site's origin or an allowed live host")

    def connect(self, host: str, port: int) -> str | Refusal:
        config = self.config
        if config.tunnelsTo(host, port):
            return OPEN
        if config.isLive(host):
            if port not in config.liveConnectPorts:
                allowed = ", ".join(str(p) for p in sorted(config.liveConnectPorts))
                return Refusal(FORBIDDEN, f"CONNECT to port {port} of a live host is not allowed "
                                          f"(allowed: {allowed}; see [live] connect_ports in sites.toml)")
            return DECRYPT if config.decrypts(host) else BLIND
        return Refusal(FORBIDDEN, f"{host} is not a site or an allowed live host")

    def redirect(self, host: str, port: int) -> tuple[str, frozenset[str]] | None:
        origin = self.config.redirectFor(host, port)
        if origin is None:
            return None
        site = self.config.siteAt(origin.scheme, origin.host, origin.port)
        return (str(origin), site.signInHeaders if site is not None else frozenset())

    # -- TLS --------------------------------------------------------------------

    def serverTLS(self, host: str) -> HostTLS | LiveHostTLS | Deferred[LiveHostTLS]:
        assert self.ca is not None
        if not self.config.decrypts(host):
            return HostTLS(self.ca, host)
        leaf = self.ca.liveContext(normalizeHost(host))
        if isinstance(leaf, Deferred):
            return leaf.addCallback(LiveHostTLS)
        return LiveHostTLS(leaf)

    def mint(self, host: str) -> Deferred[str]:
        host = normalizeHost(host)
        # A worker is untrusted: it gets certificates for the names
        # [live] decrypt gives, no other.
        if not self.config.decrypts(host):
            return fail(MintError(f"{host} is not a live host [live] decrypt names"))
        if self.minter is None:
            return fail(MintError("no certificate minter runs"))
        return self.minter.mint(host)

    def mintVia(self, ask: Any) -> None:
        self._ask = ask
        if isinstance(self.ca, HandedLeaves):
            self.ca.ask = ask

    def routeTLS(self) -> SNITLS:
        assert self.ca is not None
        hosts = [o.host for s in self.config.sites for o in s.origins if o.scheme == "https"]
        return SNITLS(self.ca, self.config.hasHost, hosts[0])

    def upstreamTLS(self, route: Route) -> Any:
        if route.site is not None:
            return backendTLS(route.site.backend)
        if route.decrypted and route.scheme == "https":
            if self._liveTLS is None:
                self._liveTLS = LiveTLS(self.config.liveTrust)
            # The name the browser asked for, even when a rule remapped the
            # address: it is what the certificate must be for.
            return self._liveTLS.creatorFor(route.publicHost)
        return None

    # -- what is kept, and rewritten ---------------------------------------------

    def requestCapture(self, logging: bool) -> BodyCapture:
        return requestCapture(logging)

    def responseCapture(self, contentType: bytes | None, logging: bool) -> BodyCapture:
        if self.keepAll:
            return keepAllCapture(contentType, logging)
        return responseCaptureFor(contentType, logging)

    def rewrite(self, route: Route, name: bytes, value: bytes) -> bytes:
        backend = route.site.backend
        if name == b"set-cookie":
            return rewriteSetCookie(value, backend, route.publicHost)
        return rewriteLocation(value, backend, route.origin)
