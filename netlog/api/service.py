"""
The API listener as a service: bound in twistd's privileged step like the
proxy's listeners, served by the supervisor (so it stays up while a worker
restarts) or, with C{--no-supervise}, by the proxy's own process.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.application.internet import StreamServerEndpointService
from twisted.internet.endpoints import serverFromString
from twisted.logger import Logger
from twisted.protocols.policies import WrappingFactory
from twisted.web.server import Site

from twisted.python.threadpool import ThreadPool

from netlog.api import MAX_API_CONNECTIONS
from netlog.api.door import Door
from netlog.api.resource import HAR_EXPORTS_AT_ONCE
from netlog.api.root import makeApiRoot
from netlog.token import loadOrCreateToken
from netlog.net.reactors import IProxyReactor
from netlog.config import ApiConfig, ProxyConfig

_log = Logger()

#: The CA certificate's name in the site proxy's C{--state} folder.
CA_CERT_FILE = "ca.pem"


class CappedFactory(WrappingFactory):
    """
    Serves at most C{limit} connections at once; closes any more as soon as
    they are accepted.
    """

    #: No "Starting factory" lines: the start-up lines say where it serves.
    noisy = False

    def __init__(self, wrappedFactory: Any, limit: int) -> None:
        super().__init__(wrappedFactory)
        self.limit = limit
        self.refused = 0

    def buildProtocol(self, addr: Any) -> Any:
        if len(self.protocols) >= self.limit:
            self.refused += 1
            if self.refused == 1 or self.refused % 1000 == 0:
                _log.warn(
                    "the API holds {limit} connections already; closed {refused} more so far",
                    limit=self.limit,
                    refused=self.refused,
                )
            return None
        return WrappingFactory.buildProtocol(self, addr)


class ApiService(StreamServerEndpointService):
    """
    Serves the API; once bound, its C{address} is where it serves (the
    port, when the description said 0), for the proxies' destination policy
    and the worker.

    @ivar address: the C{(host, port)} it serves on: as its description
        says until bound, then with the port it got.
    """

    name = "api"

    def __init__(self, endpoint: Any, factory: Any, address: tuple[str, int] | None, door: Door | None = None) -> None:
        StreamServerEndpointService.__init__(self, endpoint, factory)
        self.address = address
        self._door = door
        self.port: Any = None

    def privilegedStartService(self) -> None:
        StreamServerEndpointService.privilegedStartService(self)
        waiting: Any = self._waitingForPort
        waiting.addCallback(self._bound)

    def _bound(self, port: Any) -> Any:
        self.port = port
        address = port.getHost()
        host = self.address[0] if self.address is not None else address.host
        self.address = (host, address.port)
        # Its address is said once, with the other start-up lines (netlog.tap.startup).
        login = self._door.loginURL(f"http://{address.host}:{address.port}") if self._door is not None else None
        if login is not None:
            _log.info("the live view opens once at {url} (the API's reads need its token)", url=login)
        return port


def makeApiService(config: ProxyConfig[object], api: ApiConfig, reactor: IProxyReactor,
                   sessions: Any = None) -> ApiService:
    """
    The API listener for a proxy's C{config}: C{api}, its API's options,
    and the config's C{log} and, for the site proxy, its C{state}.

    The token file is read, or made, here: in twistd's C{makeService}, as
    root, before privileges drop.

    @param sessions: the in-process proxy's
        L{netlog.session.manager.SessionManager}, if it serves sessions.

    @raise TokenError: the token file can't be made or read safely.
    """
    state = config.state if config.hasCA else None
    caPath = (lambda: os.path.join(state, CA_CERT_FILE)) if state else None
    door = Door(loadOrCreateToken(api.tokenFile), api.tokenFile, api.tokenReads)
    harPool = ThreadPool(minthreads=0, maxthreads=HAR_EXPORTS_AT_ONCE, name="netlog-har")
    reactor.callWhenRunning(harPool.start)
    reactor.addSystemEventTrigger("during", "shutdown", harPool.stop)
    root = makeApiRoot(
        reactor, reactor.getThreadPool(), config.log, caPath, harPool, api.hosts, sessions, door,
        api.sessionRate,
    )
    site = Site(root, timeout=api.idleTimeout)
    site.displayTracebacks = False
    site.noisy = False
    # A poller asks many times a second: no access log line for each.
    site.log = lambda request: None  # type: ignore[method-assign]
    endpoint = serverFromString(reactor, api.description)
    return ApiService(endpoint, CappedFactory(site, MAX_API_CONNECTIONS), config.apiAddress, door)
