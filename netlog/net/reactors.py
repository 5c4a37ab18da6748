"""
The reactor a netlog process runs on, as one type.

Twisted declares each of a reactor's abilities as its own interface and no
type for several at once; a proxy's services want most of them (time, TCP,
adopting inherited sockets, watching descriptors, threads, processes, the
name resolver). L{IProxyReactor} is that set, what Twisted's epoll reactor
(netlog's, on Linux) provides, so code passing the reactor on says what it
is rather than C{Any}. Code that needs one ability only types its reactor by
that interface (C{IReactorTime}, C{IReactorTCP}).
"""

from __future__ import annotations

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
