"""
The destination policy: which addresses a proxy may connect to.

Loopback, link-local (the cloud metadata service at 169.254.169.254 among
them), unspecified, multicast and the proxy's own listeners are refused, so
the proxy can't be used to reach itself or the machine's own services,
unless C{--allow CIDR} covers the address or C{--resolve} named the host. The
proxy's own listeners are refused always: a proxy connecting to itself can only
loop.

The private ranges (L{PRIVATE_NETWORKS}) are allowed unless
C{--refuse-private} is given: the sites a proxy is used for often live there.

An IPv6 address that carries an IPv4 address inside it (IPv4-mapped,
IPv4-compatible, IPv4-translated, NAT64's C{64:ff9b::/96}, 6to4's
C{2002::/16}) is judged as that IPv4 address, since that is where a
connection to it may end up: C{64:ff9b::a9fe:a9fe} is 169.254.169.254.
"""

from __future__ import annotations

import ipaddress
from typing import Iterable

from netlog.net.resolve import parseAddress

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


def parseAllowOption(value: str) -> IPNetwork:
    """
    Read one C{--allow CIDR} (a bare address is a one-address network).

    @raise ValueError: with a message saying what to fix.
    """
    try:
        return ipaddress.ip_network(value.strip(), strict=False)
    except ValueError:
        raise ValueError(f"--allow wants an address or CIDR such as 10.0.0.0/8, got {value!r}") from None


#: The private ranges C{--refuse-private} refuses: RFC 1918, the carrier-grade
#: NAT range (RFC 6598) and IPv6 unique local addresses (RFC 4193).
PRIVATE_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "fc00::/7")
)

#: IPv6 prefixes whose last 32 bits are an IPv4 address: IPv4-compatible
#: (RFC 4291; C{::} and C{::1} excepted), IPv4-mapped, IPv4-translated
#: (RFC 2765) and NAT64's well-known prefix (RFC 6052).
_EMBEDDING_96 = tuple(
    ipaddress.IPv6Network(n) for n in ("::/96", "::ffff:0:0/96", "::ffff:0:0:0/96", "64:ff9b::/96")
)
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")


def embedded(address: IPAddress) -> ipaddress.IPv4Address | None:
    """
    The IPv4 address an IPv6 address carries, where a connection to it may
    end up: IPv4-mapped, IPv4-compatible, IPv4-translated, NAT64
    (C{64:ff9b::/96}) or 6to4 (C{2002::/16}); None for any other address.
    """
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address in _SIX_TO_FOUR:
        return address.sixtofour
    if address.is_unspecified or address.is_loopback:
        return None  # :: and ::1 are themselves, not IPv4-compatible
    for network in _EMBEDDING_96:
        if address in network:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _plain(address: IPAddress) -> IPAddress:
    """
    An IPv6 address that carries an IPv4 address (see L{embedded}) as that
    IPv4 address; any other as itself.
    """
    return embedded(address) or address


def _special(address: IPAddress, refusePrivate: bool) -> str | None:
    """
    The kind of a refused address (C{"loopback"}, ...), or None.
    """
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    if refusePrivate and any(address.version == n.version and address in n for n in PRIVATE_NETWORKS):
        return "private"
    return None


class DestinationPolicy:
    """
    Decides whether an address and port may be connected to.

    @param allow: networks let through though their addresses are refused
        (C{--allow}); an address is let through when it, or the IPv4 address
        it carries, is in one of them.
    @param refusePrivate: refuse L{PRIVATE_NETWORKS} too (C{--refuse-private}).
    """

    def __init__(self, allow: Iterable[IPNetwork] = (), refusePrivate: bool = False) -> None:
        self.allow = list(allow)
        self.refusePrivate = refusePrivate
        self._listeners: set[tuple[IPAddress, int]] = set()
        self._wildcardPorts: set[int] = set()
        self._seen: set[tuple[str, int]] = set()
        self._decided: dict[tuple[str, int, bool], str | None] = {}

    def addListener(self, host: str, port: int) -> None:
        """
        Remember one of the proxy's own listening addresses (called for each
        accepted connection with its C{getHost()}, and for the configured
        descriptions with a fixed port).
        """
        if (host, port) in self._seen:
            return
        self._seen.add((host, port))
        self._decided.clear()
        canonical = parseAddress(host)
        if canonical is None or not port:
            return
        address = _plain(ipaddress.ip_address(canonical))
        if address.is_unspecified:
            self._wildcardPorts.add(port)
        else:
            self._listeners.add((address, port))

    def _isOwnListener(self, address: IPAddress, port: int) -> bool:
        if (address, port) in self._listeners:
            return True
        return port in self._wildcardPorts and (
            address.is_loopback or address.is_unspecified
            or any(a == address for a, _ in self._listeners)
        )

    def check(self, address: str, port: int, named: bool = False) -> str | None:
        """
        Why C{address:port} may not be connected to, or L{None} if it may.

        @param named: the host was named by C{--resolve}.
        """
        key = (address, port, named)
        try:
            return self._decided[key]
        except KeyError:
            pass
        if len(self._decided) > 4096:
            self._decided.clear()
        why = self._decided[key] = self._check(address, port, named)
        return why

    def checkName(self, host: str, port: int) -> str | None:
        """
        Why the name C{host} may not be reached at C{port}, or L{None}, when
        the upstream proxy resolves it (C{--upstream-proxy}) and no address
        is known here: C{localhost} and its subdomains (RFC 6761) are judged
        as C{127.0.0.1}, any other name is the upstream proxy's to judge.
        """
        name = host.lower().rstrip(".")
        if name == "localhost" or name.endswith(".localhost"):
            return self.check("127.0.0.1", port)
        return None

    def _check(self, address: str, port: int, named: bool) -> str | None:
        canonical = parseAddress(address)
        if canonical is None:
            return f"{address} is not an IP address"
        given = ipaddress.ip_address(canonical)
        ip = _plain(given)
        if self._isOwnListener(ip, port):
            return f"{canonical} port {port} is this proxy's own listener"
        kind = _special(ip, self.refusePrivate)
        if kind is None or named:
            return None
        for candidate in {ip, given}:
            if any(candidate.version == net.version and candidate in net for net in self.allow):
                return None
        article = "an" if kind[0] in "aeiou" else "a"
        what = canonical if ip == given else f"{canonical} (which carries {ip})"
        return (
            f"{what} is {article} {kind} address "
            f"(allow it with --allow or name the host with --resolve)"
        )
