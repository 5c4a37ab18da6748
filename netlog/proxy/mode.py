"""
What a proxy mode decides, and the values it answers with.

The engine (L{netlog.proxy.browser}, L{netlog.proxy.exchange}) asks its mode
where each request goes, what a CONNECT becomes, what of an exchange is kept
and how an answer's fields are rewritten; the mode never touches a transport.
The site proxy's mode is L{netlog.site.mode.SiteMode}, the stand-in's
L{netlog.standin.mode.StandinMode}; C{docs/engine.rst} says how to write
another.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import Any, Hashable, Union

from zope.interface import Attribute, Interface

from netlog.core.capture import BodyCapture
from netlog.core.records import urlAuthority
from netlog.core.upstreamproxy import UpstreamProxy
from netlog.net.reactors import IProxyReactor

#: What L{IMode.connect} answers for a CONNECT to relay blind (a tunnel
#: entry, bytes each way).
BLIND = "blind"
#: What L{IMode.connect} answers for a CONNECT to open and read: a TLS
#: handshake first is decrypted, anything else read as plain HTTP.
OPEN = "open"
#: What L{IMode.connect} answers for a CONNECT to a live host to decrypt
#: (C{[live] decrypt}): opened as L{OPEN} is, its requests relayed to the
#: live host itself and their entries marked C{_liveDecrypted}.
DECRYPT = "decrypt"


@dataclass(frozen=True)
class Refusal:
    """
    netlog turns the request down itself: C{status} and why.
    """

    status: int
    reason: str


@dataclass(frozen=True)
class Route:
    """
    Where a request goes.

    @ivar scheme: C{http} or C{https} towards the upstream.
    @ivar host: the upstream's host; C{port} its port.
    @ivar origin: the public origin the browser addressed
        (C{https://shop.test}), for the rewrites.
    @ivar publicHost: the host the browser addressed.
    @ivar site: the mode's own object for a configured upstream (the site
        proxy's L{netlog.site.config.Site}); L{None} for a live host, whose
        address the destination rules judge.
    @ivar signIn: header names (lowercase) whose values are kept as
        C{<removed>}.
    @ivar named: its host is an address the rules' C{remap} gave: judged by
        the destination rules as a C{--resolve} name is.
    @ivar connections: the most connections open at once to its upstream
        (a site's C{backend_connections}); L{None} for the engine's.
    @ivar upstreamProxy: for a configured upstream, the proxy its
        connections go through (a site's C{upstream_proxy}); L{None}: direct.
        A live host's is the engine's (C{--upstream-proxy}).
    @ivar decrypted: a live host's request that came inside a CONNECT the
        mode decrypted (L{DECRYPT}): its entry is marked C{_liveDecrypted}.
    @ivar http1Only: the request needs an HTTP/1.1 connection of its own
        (an upgrade: a WebSocket), never a stream of an HTTP/2 one.
    """

    scheme: str
    host: str
    port: int
    origin: str
    publicHost: str
    site: Any = None
    signIn: frozenset[str] = field(default=frozenset())
    named: bool = False
    connections: int | None = None
    upstreamProxy: UpstreamProxy | None = None
    decrypted: bool = False
    http1Only: bool = False

    @cached_property
    def key(self) -> Hashable:
        """
        Which pooled upstream connections may carry this route's requests.
        """
        return (self.scheme, self.host, self.port, self.site)


class IAnswers(Interface):
    """
    What answers the requests a mode routes as L{Answered}: a recording
    (L{netlog.proxy.replay.Replay}).
    """

    def sourceFor(reactor: IProxyReactor, head: Any, url: str) -> Any:
        """
        The answer source (an L{netlog.proxy.contracts.IAnswerSource}) for
        the request C{head} for C{url}: it reads the request's body, then
        brings the answer.
        """


@dataclass(frozen=True)
class Answered(Route):
    """
    Routing's third outcome: the mode answers the request itself, from
    C{answers} (a recording), instead of the upstream the route names
    (which a request the recording can't answer may still go to).
    """

    answers: Any = None


Routed = Union[Route, Refusal]

#: Live hosts' routes kept for reuse (a browser asks the same few hosts over
#: and over; the least recently used go first).
MAX_LIVE_ROUTES = 1024


@lru_cache(maxsize=MAX_LIVE_ROUTES)
def liveRoute(scheme: str, host: str, port: int, decrypted: bool = False) -> Route:
    """
    The route to a live host: the host itself, judged by the destination
    rules once resolved; the same object each time (its pool key is worked
    out once).

    @param decrypted: the request came inside a CONNECT the mode decrypted.
    """
    return Route(scheme, host, port, f"{scheme}://{urlAuthority(host, port, scheme)}", host, decrypted=decrypted)


def remapRoute(route: Route, remap: tuple[str, int | None]) -> Route:
    """
    C{route} to the address (and port) the rules' C{remap} gives its host:
    a pool key of its own, and judged as a C{--resolve} name is.
    """
    address, port = remap
    return replace(route, host=address, port=route.port if port is None else port, named=True)


class MintError(Exception):
    """
    No certificate could be minted for a live host; the message says why.
    """


class DestinationRefused(Exception):
    """
    The destination rules forbid the address a live host resolved to.
    """


class IMode(Interface):
    """
    A proxy's policy over the engine: everything that differs between the
    site proxy and the stand-in. Pure decisions: no transports, no I/O.
    """

    name = Attribute("The open line's C{proxy} field: C{site} or C{standin}.")

    privilegedFiles = Attribute(
        "Files the worker can't read itself, opened for it by the supervisor."
    )

    handedData = Attribute(
        "After L{prepare} in the supervisor: what it hands each worker, by the path the "
        "worker opens it by (the site proxy's certificates)."
    )

    def prepare() -> None:
        """
        Load what the mode needs before serving (a CA): called in the
        privileged step, and again (to no effect) at start.
        """

    def route(scheme: str, host: str, port: int, tunnelled: bool) -> Routed:
        """
        Where a request for C{scheme://host:port} goes, or why not.

        @param tunnelled: the request came inside a CONNECT this mode
            opened, or on the HTTPS route, rather than in absolute form on
            the forward port.
        """

    def connect(host: str, port: int) -> str | Refusal:
        """
        What a CONNECT to C{host:port} becomes: L{OPEN}, L{DECRYPT},
        L{BLIND} or a L{Refusal}.
        """

    def redirect(host: str, port: int) -> tuple[str, frozenset[str]] | None:
        """
        For the HTTP route: the HTTPS origin C{http://host:port} is sent to,
        and the sign-in headers of its site; L{None} when it names no site.
        """

    def serverTLS(host: str) -> Any:
        """
        The TLS server side for a CONNECT to C{host} this mode decrypts, or
        (for a live host whose certificate must be minted first) a
        L{Deferred} that fires with it.
        """

    def mint(host: str) -> Any:
        """
        In a supervisor: a L{Deferred} firing with the certificate (PEM) of
        the live host C{host} a worker asked for, or failing when this mode
        doesn't decrypt that host.
        """

    def mintVia(ask: Any) -> None:
        """
        In a worker: C{ask(host)} (a L{Deferred} of a PEM certificate) is
        how a live host's certificate is got from the supervisor.
        """

    def routeTLS() -> Any:
        """
        The TLS server side of the HTTPS route listener (by SNI).
        """

    def upstreamTLS(route: Route) -> Any:
        """
        The TLS client side towards C{route}'s upstream, or L{None} for
        plain TCP.
        """

    def requestCapture(logging: bool) -> BodyCapture:
        """
        What of a request's body is kept.
        """

    def responseCapture(contentType: bytes | None, logging: bool) -> BodyCapture:
        """
        What of an answer's body is kept, by its C{Content-Type}.
        """

    def rewrite(route: Route, name: bytes, value: bytes) -> bytes:
        """
        An answer's field C{name} (lowercase: C{location},
        C{content-location} or C{set-cookie}) as the browser gets it, for a
        route to a configured upstream.
        """
