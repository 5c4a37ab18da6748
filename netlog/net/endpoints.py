"""
Endpoint descriptions read as text: whether a listener's C{--listen},
C{--api} or route is a description Twisted reads, with a port and an
interface that make sense, and where a TCP one listens. Nothing here binds
or opens anything (the taps' preflight tries the machine), so the options of
every command (the proxies' taps, C{netlog view}) check with it alike.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any

from twisted.internet.endpoints import serverFromString
from twisted.python import usage

from netlog.net.options import splitDescription

#: The highest TCP port.
MAX_PORT = 65535
#: An example to show with a mistake in a TCP description.
EXAMPLE = "tcp:3128:interface=127.0.0.1"


#: What a user writes for a listener that is not an endpoint description: a
#: bare port (C{3199}), or an address and a port (C{127.0.0.1:3199},
#: C{localhost:3199}, C{:3199}, C{[::1]:3199}).
_ADDRESS_AND_PORT = re.compile(r"(?:(\[[0-9A-Fa-f:.]*\]|[0-9.]*|localhost):)?(\d+)")


def _notADescription(where: str, description: str) -> str | None:
    """
    The line to say when C{description} is a port or C{host:port} rather
    than an endpoint description: it shows the description to write.
    """
    found = _ADDRESS_AND_PORT.fullmatch(description.strip())
    if found is None:
        return None
    host, port = found.group(1), found.group(2)
    if host and host.startswith("["):
        right = f"tcp6:{port}:interface=" + (host[1:-1] or "::1").replace(":", "\\:")
    else:
        right = f"tcp:{port}:interface=" + (host if host and host != "localhost" else "127.0.0.1")
    what = "a port" if host is None else "an address and a port"
    return f"{where}: {what}, not an endpoint description; write {right}"


#: The order of a TCP description's positional arguments after the port, as
#: Twisted reads them (they differ).
_POSITIONAL = {"tcp": ("interface", "backlog"), "tcp6": ("backlog", "interface")}


def _tcpParts(description: str) -> tuple[str, dict[str, str]] | None:
    """
    A TCP description's kind (C{tcp} or C{tcp6}) and its arguments by name;
    None for another kind of endpoint.

    @raise ValueError: an argument Twisted doesn't take, or too many.
    """
    parts = splitDescription(description.strip())
    kind = parts[0].lower()
    if kind.isdigit():
        kind, parts = "tcp", ["tcp", *parts]
    if kind not in _POSITIONAL:
        return None
    names = ("port", *_POSITIONAL[kind])
    positional = [p for p in parts[1:] if "=" not in p]
    if len(positional) > len(names):
        raise ValueError("too many arguments")
    arguments = dict(zip(names, positional))
    for part in parts[1:]:
        if "=" in part:
            key, value = part.split("=", 1)
            if key not in names or key in arguments:
                raise ValueError(f"{key}= is not an argument of it, or is given twice")
            arguments[key] = value
    return kind, arguments


def tcpAddress(description: str) -> tuple[int, str, int] | None:
    """
    The address family, interface and port a TCP description listens on,
    or None for another kind of endpoint. Call L{checkListen} first.
    """
    parsed = _tcpParts(description)
    if parsed is None:
        return None
    kind, arguments = parsed
    family = socket.AF_INET if kind == "tcp" else socket.AF_INET6
    interface = arguments.get("interface") or ("0.0.0.0" if kind == "tcp" else "::")
    return family, interface, int(arguments["port"])


def checkListen(option: str, description: str) -> None:
    """
    Check a listener's endpoint description as text: a TCP one must name a
    port from 0 to 65535 and, if any, an interface that is an IP address of
    its family; any other must be a description Twisted reads.

    @raise usage.UsageError: a line naming C{option}, the value and the fix.
    """
    where = f"{option} {description}"
    mistaken = _notADescription(where, description)
    if mistaken is not None:
        raise usage.UsageError(mistaken)
    try:
        parsed = _tcpParts(description)
    except ValueError as e:
        if "interface=" in description and "::" in description:
            raise usage.UsageError(
                f"{where}: write each colon of an IPv6 address as \\:, as in "
                f"tcp6:3128:interface=\\:\\:1"
            ) from None
        raise usage.UsageError(
            f"{where}: {e}; a TCP description has a port, then interface= and "
            f"backlog=, as in {EXAMPLE}"
        ) from None
    if parsed is None:
        try:
            serverFromString(None, description)
        except Exception as e:
            raise usage.UsageError(
                f"{where}: not an endpoint description Twisted reads ({e}); write one "
                f"such as {EXAMPLE}"
            ) from None
        return
    kind, arguments = parsed
    port = arguments.get("port", "")
    if not (port.isdigit() and port.isascii() and int(port) <= MAX_PORT):
        raise usage.UsageError(
            f"{where}: the port must be a number from 0 to {MAX_PORT} (0 picks a "
            f"free one), got {port!r}; write it as in {EXAMPLE}"
        )
    interface = arguments.get("interface")
    if interface is not None:
        version = 4 if kind == "tcp" else 6
        try:
            address: Any = ipaddress.ip_address(interface)
        except ValueError:
            address = None
        if address is None or address.version != version:
            sample = "127.0.0.1" if version == 4 else "\\:\\:1"
            raise usage.UsageError(
                f"{where}: interface= wants an IPv{version} address of this "
                f"machine, such as {sample}, got {interface!r}"
            )
    backlog = arguments.get("backlog", "1")
    if not (backlog.isdigit() and backlog.isascii() and int(backlog) > 0):
        raise usage.UsageError(f"{where}: backlog= wants a positive number, got {backlog!r}")
