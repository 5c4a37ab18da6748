"""
C{netlog mcp [--api URL] [--http HOST:PORT]}: serve a proxy's API to an
agent over the Model Context Protocol, on standard input and output (the
default, for an agent that starts it), or as streamable HTTP on loopback.
The API and its token are found as C{netlog session} finds them, and
asked once before serving (C{GET /sessions}), so a wrong URL is said at
once, in one line, not at an agent's first call.
"""

from __future__ import annotations

import argparse
import sys

from netlog.client import NetlogError
from netlog.session.cli import ClientOptionError, api, clientOf

#: Where C{--http} listens when only a port is given.
LOOPBACK = "127.0.0.1"
#: The names C{--http} may listen on.
_LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1"})


def addArguments(parser: argparse.ArgumentParser) -> None:
    api(parser)
    parser.add_argument("--http", metavar="[HOST:]PORT",
                        help="serve streamable HTTP at http://HOST:PORT/mcp (loopback only) instead of stdio")


def _listenOn(text: str) -> tuple[str, int]:
    """
    C{--http}'s host and port.

    @raise ValueError: not C{[HOST:]PORT} on loopback.
    """
    host, colon, port = text.rpartition(":")
    host = host.strip("[]") if colon else LOOPBACK
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not [HOST:]PORT")
    if host not in _LOOPBACK_NAMES:
        raise ValueError(f"{host} is not loopback: netlog mcp listens on 127.0.0.1, ::1 or localhost only")
    return host, int(port)


def run(args: argparse.Namespace) -> int:
    try:
        client = clientOf(args)
        listen = _listenOn(args.http) if args.http else None
    except (ClientOptionError, ValueError) as e:
        # ValueError: --http's.
        sys.stderr.write(f"netlog mcp: {e}\n")
        return 1
    try:
        client.sessions()
    except NetlogError as e:
        sys.stderr.write(f"netlog mcp: {e}\n")
        return 1
    try:
        from netlog.mcp.tools import makeServer

        server = makeServer(client)
    except ImportError:
        sys.stderr.write("netlog mcp: the mcp package is not installed (pip install 'netlog[mcp]')\n")
        return 1
    if listen is None:
        server.run("stdio")
    else:
        server.run("streamable-http", host=listen[0], port=listen[1])
    return 0
