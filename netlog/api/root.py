"""
The API's resource tree: the log's resources (L{netlog.api.resource}), the
live view's files, the CA and the sessions (L{netlog.api.sessions}) under
one root that checks C{Host}.
"""

from __future__ import annotations

from typing import Any, Callable

from netlog.api import SESSION_RATE
from netlog.api.resource import (
    VIEW_FILES,
    ApiRoot,
    ExchangeResource,
    FileResource,
    HarResource,
    NetworkResource,
    ViewResource,
)
from netlog.api.exchanges import ExchangesResource
from netlog.api.rotate import RotateResource
from netlog.api.rules import RulesResource
from netlog.api.sessions import SessionsResource, unsupportedSessions
from netlog.net.reactors import IProxyReactor
from netlog.api.warc import WarcResource


def makeApiRoot(
    reactor: IProxyReactor,
    threadpool: Any,
    logPath: str | None,
    caPath: Callable[[], str | None] | None = None,
    harThreadpool: Any = None,
    hosts: frozenset[str] = frozenset(),
    sessions: Any = None,
    door: Any = None,
    sessionRate: float = SESSION_RATE,
) -> ApiRoot:
    """
    The API's resource tree.

    @param caPath: where the CA certificate is (the site proxy); None for a
        proxy that has no CA.
    @param harThreadpool: the threads HAR exports run in (default
        C{threadpool}); a pool of its own keeps slow HAR clients from
        holding up C{/network}.
    @param hosts: names (lowercase) the API answers to besides loopback and
        its own address (C{--api-host}).
    @param sessions: the proxy's L{netlog.session.manager.SessionManager},
        or None for a proxy that serves no sessions (C{/sessions} then says
        so, and there is no C{/rules}); it holds the rules too.
    @param door: what the API lets in (a L{netlog.api.door.Door}); by
        default one with no token, which takes no changes.
    @param sessionRate: sessions C{POST /sessions} makes a second at most.
    """
    root = ApiRoot(hosts, door)
    children: dict[bytes, Any] = {
        b"network": NetworkResource(reactor, threadpool, logPath),
        b"network.har": HarResource(reactor, harThreadpool or threadpool, logPath),
        b"network.warc.gz": WarcResource(reactor, harThreadpool or threadpool, logPath),
        b"exchange": ExchangeResource(reactor, threadpool, logPath),
        b"exchanges": ExchangesResource(reactor, threadpool, logPath),
        b"rotate": RotateResource(),
    }
    for path, (fileName, contentType) in VIEW_FILES.items():
        children[path] = ViewResource(fileName, contentType)
    if caPath is not None:
        children[b"ca.pem"] = FileResource(caPath, b"application/x-pem-file", "there is no CA certificate")
    if sessions is not None:
        children[b"sessions"] = SessionsResource(
            sessions, reactor, threadpool, harThreadpool or threadpool, sessionRate
        )
        children[b"rules"] = RulesResource(sessions, None)
    else:
        children[b"sessions"] = unsupportedSessions()
    for name, child in children.items():
        root.putChild(name, child)
    return root
