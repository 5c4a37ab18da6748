"""
The reactor a netlog process runs on: its type, and the reactor itself.

Twisted declares each of a reactor's abilities as its own interface and no
type for several at once; a proxy's services want most of them (time, TCP,
adopting inherited sockets, watching descriptors, threads, processes, the
name resolver). L{IProxyReactor} is that set, what Twisted's epoll reactor
(netlog's, on Linux) provides, so code passing the reactor on says what it
is rather than C{Any}. Code that needs one ability only types its reactor by
that interface (C{IReactorTime}, C{IReactorTCP}).

L{ProxyReactor} is Twisted's epoll reactor, dispatching a ready descriptor
straight to its C{doRead} or C{doWrite}. Twisted's wraps each dispatch in the
legacy log context (C{twisted.python.log.callWithLogger}: the descriptor's
C{logPrefix} as the C{system} of any C{log.msg} made while it runs), about
2 µs an event in Python, a tenth of a relayed request's CPU in a spliced
tunnel (see benchmarks/README.md). netlog logs with C{twisted.logger}, whose
events don't read that context; what it loses is the prefix on Twisted's own
legacy messages about a descriptor (an unhandled error in a protocol says
C{-} where it said the protocol's name; the traceback is the same).
L{install} puts it in place of Twisted's default: twistd's netlog plugins
and a worker process call it, unless a reactor is installed already
(C{twistd --reactor NAME} chooses another).
"""

from __future__ import annotations

import sys
from typing import cast

from twisted.internet.interfaces import (
    IReactorCore,
    IReactorFDSet,
    IReactorPluggableNameResolver,
    IReactorProcess,
    IReactorSocket,
    IReactorTCP,
    IReactorThreads,
    IReactorTime,
)


class IProxyReactor(IReactorCore, IReactorTime, IReactorTCP, IReactorSocket, IReactorFDSet,
                    IReactorThreads, IReactorProcess, IReactorPluggableNameResolver):
    """
    A reactor with every ability a netlog process uses.
    """


def theReactor() -> IProxyReactor:
    """
    The global reactor, installed by twistd (or on first import), as the
    type it is.
    """
    from twisted.internet import reactor

    return cast(IProxyReactor, reactor)


try:
    from twisted.internet.epollreactor import EPollReactor
except ImportError:  # No epoll (not Linux): Twisted's default is used.
    EPollReactor = None  # type: ignore[assignment,misc]


if EPollReactor is not None:

    class ProxyReactor(EPollReactor):  # type: ignore[misc,valid-type]
        """
        Twisted's epoll reactor without the legacy log context around each
        dispatch (see the module's docstring).
        """

        def doPoll(self, timeout: float | None) -> None:
            """
            Wait for ready descriptors (at most C{timeout} seconds, or until
            one is) and handle each, as Twisted's C{doPoll} does.
            """
            try:
                events = self._poller.poll(-1 if timeout is None else timeout, len(self._selectables))
            except InterruptedError:
                return
            selectables = self._selectables
            handle = self._doReadOrWrite
            for fd, event in events:
                selectable = selectables.get(fd)
                if selectable is None:
                    continue
                try:
                    handle(selectable, fd, event)
                except KeyboardInterrupt:
                    raise
                except BaseException:
                    # As Twisted's dispatch does: the error is logged (with
                    # the descriptor's prefix) and the next event handled.
                    _logError(selectable)

        doIteration = doPoll


def _logError(selectable: object) -> None:
    """
    Log the error being handled, raised while C{selectable} was dispatched,
    as Twisted's own dispatch logs it (C{Unhandled Error}, the traceback).
    """
    from twisted.python import log

    try:
        prefix = selectable.logPrefix()  # type: ignore[attr-defined]
    except Exception:
        prefix = "(buggy logPrefix method)"
    log.err(system=prefix)


def install() -> None:
    """
    Install L{ProxyReactor} as the global reactor, or Twisted's default where
    there is no epoll; nothing when a reactor is installed already (twistd's
    C{--reactor}, trial's, a test runner's).
    """
    if "twisted.internet.reactor" in sys.modules:
        return
    if EPollReactor is None:
        from twisted.internet import default

        default.install()
        return
    from twisted.internet.main import installReactor

    installReactor(ProxyReactor())
