"""
C{netlog view LOG [--listen tcp:8082:interface=127.0.0.1]}: the live view
over a log file, with no proxy running (a log copied off a test machine, or
one a proxy without C{--api} writes): the API's own resources, served on
loopback, and the URL to open printed.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from netlog.net.reactors import IProxyReactor

#: Where C{netlog view} listens unless told.
DEFAULT_LISTEN = "tcp:8082:interface=127.0.0.1"


def addArguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", metavar="LOG", help="the network log (JSON lines)")
    parser.add_argument(
        "--listen",
        default=DEFAULT_LISTEN,
        metavar="DESCRIPTION",
        help=f"where to serve the page, an endpoint description (default {DEFAULT_LISTEN})",
    )
    parser.add_argument(
        "--api-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host to answer besides loopback and the listening address (repeatable)",
    )


def viewURL(address: Any) -> str:
    """
    The URL to open for a listener bound at C{address}.
    """
    host = address.host
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1" if host == "0.0.0.0" else "::1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{address.port}/"


def run(args: argparse.Namespace, reactor: IProxyReactor | None = None) -> int:
    from twisted.internet.endpoints import serverFromString
    from twisted.python.usage import UsageError
    from twisted.web.server import Site

    from netlog.api.door import apiHostName
    from netlog.api.root import makeApiRoot
    from netlog.api import API_IDLE_TIMEOUT, MAX_API_CONNECTIONS
    from netlog.api.service import CappedFactory
    from netlog.log.reader import LogUnreadable, read
    from netlog.net.endpoints import checkListen

    try:
        checkListen("--listen", args.listen)
        hosts = frozenset(apiHostName(name) for name in args.api_host)
        read(args.log, 0, 1)
    except (LogUnreadable, UsageError) as e:
        print(f"netlog view: {e}", file=sys.stderr)
        return 1
    if reactor is None:
        from netlog.net.reactors import theReactor

        reactor = theReactor()
    root = makeApiRoot(reactor, reactor.getThreadPool(), args.log, hosts=hosts)
    site = Site(root, timeout=API_IDLE_TIMEOUT)
    site.displayTracebacks = False
    site.noisy = False
    site.log = lambda request: None  # type: ignore[method-assign]
    try:
        endpoint = serverFromString(reactor, args.listen)
    except ValueError as e:
        print(f"netlog view: --listen {args.listen}: {e}", file=sys.stderr)
        return 1
    failed: list[str] = []

    def listening(port: Any) -> None:
        print(f"netlog view: serving {args.log} on {viewURL(port.getHost())}", flush=True)

    def notListening(failure: Any) -> None:
        failed.append(f"netlog view: --listen {args.listen}: {failure.getErrorMessage()}")
        reactor.stop()

    d = endpoint.listen(CappedFactory(site, MAX_API_CONNECTIONS))
    d.addCallbacks(listening, notListening)
    reactor.run()
    if failed:
        print(failed[0], file=sys.stderr)
        return 1
    return 0
