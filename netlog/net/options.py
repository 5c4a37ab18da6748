"""
The command-line options for where a proxy may go, shared by both proxies'
taps: mix L{DestinationOptions} into a C{usage.Options}, call
L{DestinationOptions.checkDestinations} from C{postOptions}, and build with
L{buildDestinations}.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, cast

from twisted.python import usage

from netlog.core.upstreamproxy import UpstreamProxy, parseCredentials, parseUpstreamProxy
from netlog.net.policy import DestinationPolicy, IPNetwork, parseAllowOption
from netlog.net.reactors import IProxyReactor
from netlog.net.resolve import Resolver, parseResolveOption
from netlog.net.timeouts import DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDLE_TIMEOUT, MAX_CONNECTIONS_PER_UPSTREAM


def _seconds(name: str, orZero: bool = False) -> Any:
    """
    An option's coercion to a finite number of seconds, above 0 (or 0 too,
    with C{orZero}).
    """
    def coerce(value: str) -> float:
        try:
            seconds = float(value)
        except ValueError:
            raise ValueError(f"--{name} wants a number of seconds, got {value!r}") from None
        if not (seconds >= 0 if orZero else seconds > 0) or seconds == float("inf"):
            wanted = "0 or more" if orZero else "a positive number"
            raise ValueError(f"--{name} wants {wanted} seconds, got {value!r}")
        return seconds

    coerce.coerceDoc = "Seconds."  # type: ignore[attr-defined]
    return coerce


def _count(name: str) -> Any:
    """
    An option's coercion to a whole number, 1 or more.
    """
    def coerce(value: str) -> int:
        if not value.strip().isdigit() or int(value) < 1:
            raise ValueError(f"--{name} wants a whole number, 1 or more, got {value!r}")
        return int(value)

    coerce.coerceDoc = "A whole number, 1 or more."  # type: ignore[attr-defined]
    return coerce


#: Where a proxy's forward port listens when no C{--listen} is given.
DEFAULT_LISTEN = "tcp:3128:interface=127.0.0.1"

#: How many connections may wait to be accepted on a listener whose
#: description names no C{backlog}. Twisted's default is 50: a browser that
#: opens dozens of connections at once while the proxy is busy would have some
#: of its SYNs dropped and sent again a second later.
LISTEN_BACKLOG = 1024
_BACKLOG_KINDS = frozenset({"tcp", "tcp6", "unix"})


def splitDescription(description: str) -> list[str]:
    """
    An endpoint description's parts, split at the colons not escaped with
    a backslash (as C{tcp6:8080:interface=\\:\\:1} escapes them), unescaped.
    """
    parts = [""]
    escaped = False
    for char in description:
        if escaped:
            parts[-1] += char
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == ":":
            parts.append("")
        else:
            parts[-1] += char
    return parts


def withBacklog(description: str) -> str:
    """
    C{description} with C{backlog=LISTEN_BACKLOG} added when it is a TCP or
    UNIX endpoint that names no backlog of its own.
    """
    kind = description.split(":", 1)[0].strip().lower()
    if kind not in _BACKLOG_KINDS or description.endswith("\\"):
        return description
    if any(part.strip().lower().startswith("backlog=") for part in description.split(":")[1:]):
        return description
    return f"{description}:backlog={LISTEN_BACKLOG}"


@dataclass(frozen=True, kw_only=True)
class Destinations:
    """
    Where a proxy may go (L{netlog.net.options.DestinationOptions}).

    @ivar resolve: names resolved to fixed addresses (C{--resolve}).
    @ivar resolveOnly: no other name is looked up (C{--resolve-only}).
    @ivar allow: refused networks let through (C{--allow}).
    @ivar refusePrivate: the private ranges are refused too.
    @ivar connectTimeout: seconds to wait for an upstream connection.
    @ivar idleTimeout: seconds a tunnel or connection may be silent.
    @ivar upstreamConnections: connections open at once to one upstream.
    @ivar upstreamProxy: the proxy every connection to a live host goes
        through (C{--upstream-proxy}, with its credentials), or L{None}.
    @ivar upstreamProxyAuthFile: where those credentials were read from.
    """

    resolve: Mapping[str, str]
    resolveOnly: bool
    allow: tuple[IPNetwork, ...]
    refusePrivate: bool
    connectTimeout: float
    idleTimeout: float
    upstreamConnections: int
    upstreamProxy: UpstreamProxy | None = None
    upstreamProxyAuthFile: str | None = None


class DestinationOptions:
    """
    C{--resolve NAME=ADDRESS} (repeatable), C{--resolve-only},
    C{--allow CIDR} (repeatable), C{--refuse-private}, C{--connect-timeout},
    C{--idle-timeout}, C{--upstream-connections}, C{--upstream-proxy},
    C{--upstream-proxy-auth-file}.

    A mixin for a L{usage.Options} subclass (usage gathers C{optParameters}
    and C{opt_} methods from every base).
    """

    optFlags = [
        ["resolve-only", None, "Look no name up: names not given by --resolve don't resolve."],
        ["refuse-private", None, "Refuse the private ranges too (10/8, 172.16/12, 192.168/16, "
         "100.64/10, fc00::/7), which are allowed by default."],
    ]
    optParameters = [
        ["connect-timeout", None, DEFAULT_CONNECT_TIMEOUT,
         "Seconds to wait for an upstream connection (then 504).", _seconds("connect-timeout")],
        ["idle-timeout", None, DEFAULT_IDLE_TIMEOUT,
         "Seconds a tunnel or connection may be silent before it is closed.",
         _seconds("idle-timeout")],
        ["upstream-connections", None, MAX_CONNECTIONS_PER_UPSTREAM,
         "Connections open at once to one upstream (a backend, a live host's origin) at most; "
         "requests beyond wait in the order they came (a site's backend_connections wins).",
         _count("upstream-connections")],
        ["upstream-proxy", None, None,
         "http://HOST:PORT: connect to every live host through this proxy (CONNECT for tunnels, "
         "absolute-form for plain requests); it resolves the names --resolve doesn't give."],
        ["upstream-proxy-auth-file", None, None,
         "A file whose one line, user:password, is sent to --upstream-proxy as Basic credentials."],
    ]

    def opt_resolve(self, value: str) -> None:
        """
        NAME=ADDRESS: resolve NAME to ADDRESS, and let it reach loopback
        and private addresses (repeatable).
        """
        try:
            name, address = parseResolveOption(value)
        except ValueError as e:
            raise usage.UsageError(str(e)) from None
        self.setdefault("resolve", {})[name] = address  # type: ignore[attr-defined]

    def opt_allow(self, value: str) -> None:
        """
        CIDR: let connections reach these addresses though refused: loopback, link-local, unspecified, multicast, or private with --refuse-private (repeatable).
        """
        # An IPv6 address carrying an IPv4 one is judged as that one; the
        # proxy's own listeners are refused whatever --allow says.
        try:
            network = parseAllowOption(value)
        except ValueError as e:
            raise usage.UsageError(str(e)) from None
        self.setdefault("allow", []).append(network)  # type: ignore[attr-defined]

    def checkDestinations(self) -> None:
        """
        Fill the defaults of the repeatable options; call from C{postOptions}.
        """
        self.setdefault("resolve", {})  # type: ignore[attr-defined]
        self.setdefault("allow", [])  # type: ignore[attr-defined]
        self["upstreamProxy"] = readUpstreamProxy(self)  # type: ignore[index]

    def destinations(self) -> Destinations:
        """
        What these options say, once checked: a proxy's config holds it.
        """
        options = cast(usage.Options, self)
        return Destinations(
            resolve=dict(options["resolve"]),
            resolveOnly=bool(options["resolve-only"]),
            allow=tuple(options["allow"]),
            refusePrivate=bool(options["refuse-private"]),
            connectTimeout=float(options["connect-timeout"]),
            idleTimeout=float(options["idle-timeout"]),
            upstreamConnections=int(options["upstream-connections"]),
            upstreamProxy=options.get("upstreamProxy"),
            upstreamProxyAuthFile=options.get("upstream-proxy-auth-file"),
        )


def readUpstreamProxy(config: Any) -> UpstreamProxy | None:
    """
    The upstream proxy C{--upstream-proxy} and C{--upstream-proxy-auth-file}
    name, or L{None}.

    @raise usage.UsageError: in one line, for a value that isn't
        C{http://HOST:PORT}, or an auth file that can't be read or isn't
        C{user:password} (never quoting it).
    """
    value = config.get("upstream-proxy")
    path = config.get("upstream-proxy-auth-file")
    if value is None:
        if path is not None:
            raise usage.UsageError("--upstream-proxy-auth-file needs --upstream-proxy")
        return None
    try:
        host, port = parseUpstreamProxy(value)
    except ValueError as e:
        raise usage.UsageError(str(e)) from None
    if path is None:
        return UpstreamProxy(host, port)
    from netlog.privileged import openPrivileged

    try:
        with open(openPrivileged(path), "rb", closefd=True) as f:
            text = f.read(4096).decode("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        why = getattr(e, "strerror", None) or "isn't UTF-8 text"
        raise usage.UsageError(f"--upstream-proxy-auth-file {path}: {why}") from None
    try:
        return UpstreamProxy(host, port, parseCredentials(text))
    except ValueError as e:
        raise usage.UsageError(f"--upstream-proxy-auth-file {path} {e}") from None


def buildDestinations(destinations: Destinations, reactor: IProxyReactor) -> tuple[Resolver, DestinationPolicy]:
    """
    The resolver and the destination policy the options describe.
    """
    resolver = Resolver(reactor, dict(destinations.resolve), destinations.resolveOnly)
    policy = DestinationPolicy(destinations.allow, destinations.refusePrivate)
    return resolver, policy


def upstreamProxyArguments(destinations: Destinations) -> dict[str, Any]:
    """
    The L{netlog.proxy.service.ProxyService} arguments the upstream proxy's
    options give: the proxy, and its auth file (for a supervisor to hand
    its workers what it read there).
    """
    return {"upstreamProxy": destinations.upstreamProxy,
            "upstreamProxyAuthFile": destinations.upstreamProxyAuthFile}
