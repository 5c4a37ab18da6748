"""
The destination policy: which addresses a proxy may connect to.

Loopback, link-local, unspecified and the proxy's own listeners are refused,
so the proxy can't be used to reach itself or the machine's private services,
unless C{--allow CIDR} covers the address or C{--resolve} named the host. The
proxy's own listeners are refused always: a proxy connecting to itself can only
loop.
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


def _plain(address: IPAddress) -> IPAddress:
    """
    An IPv4-mapped IPv6 address as the IPv4 address it is.
    """
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _private(address: IPAddress) -> str | None:
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_unspecified:
        return "unspecified"
    if address.is_multicast:
        return "multicast"
    return None


class DestinationPolicy:
    """
    Decides whether an address and port may be connected to.
    """

    def __init__(self, allow: Iterable[IPNetwork] = ()) -> None:
        self.allow = list(allow)
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

    def _check(self, address: str, port: int, named: bool) -> str | None:
        canonical = parseAddress(address)
        if canonical is None:
            return f"{address} is not an IP address"
        given = ipaddress.ip_address(canonical)
        ip = _plain(given)
        if self._isOwnListener(ip, port):
            return f"{canonical} port {port} is this proxy's own listener"
        kind = _private(ip)
        if kind is None or named:
            return None
        for candidate in {ip, given}:
            if any(candidate.version == net.version and candidate in net for net in self.allow):
                return None
        article = "an" if kind[0] in "aeiou" else "a"
        return (
            f"{canonical} is {article} {kind} address "
            f"(allow it with --allow or name the host with --resolve)"
        )
