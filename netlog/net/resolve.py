"""
Name resolution with overrides: C{--resolve NAME=ADDRESS} and C{--resolve-only}.
"""

from __future__ import annotations

import functools
import ipaddress
from dataclasses import dataclass, field
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IReactorPluggableNameResolver, IResolutionReceiver
from zope.interface import implementer


class DoesNotResolve(Exception):
    """
    A host name has no address (or may not be looked up: C{--resolve-only}).
    """

    def __init__(self, host: str) -> None:
        Exception.__init__(self, host)
        self.host = host

    def __str__(self) -> str:
        return f"{self.host} doesn't resolve"


@dataclass(frozen=True)
class Resolution:
    """
    Where a host name led.

    @ivar host: the name (or address literal) asked for.
    @ivar addresses: the IP addresses, in the order to try.
    @ivar named: whether C{--resolve} named it (the destination policy lets
        such names reach loopback).
    """

    host: str
    addresses: tuple[str, ...]
    named: bool = False


@functools.lru_cache(maxsize=4096)
def parseAddress(text: str) -> str | None:
    """
    The canonical form of an IP address literal (brackets allowed), or
    L{None} when C{text} isn't one.
    """
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def parseResolveOption(value: str) -> tuple[str, str]:
    """
    Read one C{--resolve NAME=ADDRESS}.

    @raise ValueError: with a message saying what to fix.
    """
    name, sep, address = value.partition("=")
    name = name.strip().lower().rstrip(".")
    if not sep or not name or not address:
        raise ValueError(f"--resolve wants NAME=ADDRESS, got {value!r}")
    canonical = parseAddress(address.strip())
    if canonical is None:
        raise ValueError(f"--resolve {value!r}: {address!r} is not an IP address")
    return name, canonical


@implementer(IResolutionReceiver)
@dataclass
class _Collect:
    deferred: defer.Deferred[list[str]]
    addresses: list[str] = field(default_factory=list)

    def resolutionBegan(self, resolution: Any) -> None:
        pass

    def addressResolved(self, address: Any) -> None:
        host = getattr(address, "host", None)
        if host and host not in self.addresses:
            self.addresses.append(host)

    def resolutionComplete(self) -> None:
        self.deferred.callback(self.addresses)


class Resolver:
    """
    Resolves through the reactor's name resolver, except the names given by
    C{--resolve}; with C{resolveOnly}, every other name fails as not
    resolving (tests use it: they never look a name up in DNS).
    """

    def __init__(
        self,
        reactor: IReactorPluggableNameResolver,
        overrides: dict[str, str] | None = None,
        resolveOnly: bool = False,
    ) -> None:
        self._reactor = reactor
        self.overrides = {k.lower().rstrip("."): v for k, v in (overrides or {}).items()}
        self.resolveOnly = resolveOnly

    def resolve(self, host: str) -> defer.Deferred[Resolution]:
        """
        The addresses of C{host}; fails with L{DoesNotResolve}.
        """
        literal = parseAddress(host)
        if literal is not None:
            return defer.succeed(Resolution(host, (literal,)))
        key = host.lower().rstrip(".")
        if key in self.overrides:
            return defer.succeed(Resolution(host, (self.overrides[key],), named=True))
        if self.resolveOnly or not key:
            return defer.fail(DoesNotResolve(host))
        d: defer.Deferred[list[str]] = defer.Deferred()
        try:
            self._reactor.nameResolver.resolveHostName(_Collect(d), key, 0)
        except Exception:
            return defer.fail(DoesNotResolve(host))

        def done(addresses: list[str]) -> Resolution:
            canonical = tuple(a for a in (parseAddress(x) for x in addresses) if a)
            if not canonical:
                raise DoesNotResolve(host)
            return Resolution(host, canonical)

        return d.addCallback(done)
