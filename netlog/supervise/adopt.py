"""
Listening sockets: bound once in the supervisor, served by each worker in turn.

The supervisor binds every listener in twistd's privileged step and keeps it
for its whole life, never accepting on it; each worker adopts them. While no
worker runs, connections wait in the kernel's backlog for the next one.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from twisted.application.service import Service
from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.endpoints import serverFromString
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure

from netlog.net.options import withBacklog
from netlog.net.reactors import IProxyReactor


#: Endpoint types the supervisor can hand to a worker: plain TCP sockets. (A
#: worker that stopped serving an adopted UNIX socket would remove its file.)
ADOPTABLE = ("tcp", "tcp6")


class NotAdoptable(ValueError):
    """
    A listener description a worker can't inherit (TLS done by the endpoint,
    say); the message says what to do.
    """


def checkAdoptable(description: str) -> None:
    """
    Refuse a description whose endpoint is more than a bound socket.
    """
    kind = description.split(":", 1)[0].strip().lower()
    if kind.isdigit():
        return  # a bare port number means tcp
    if kind not in ADOPTABLE:
        raise NotAdoptable(
            f"the listener {description!r} can't be handed to a supervised worker "
            f"(only {', '.join(ADOPTABLE)} endpoints can); use one of those, or "
            f"--no-supervise"
        )


class _NeverUsed(Protocol):
    pass


class BoundListener:
    """
    A socket bound and listening in the supervisor, which never accepts on it.

    @ivar fd: its file descriptor, to hand to a worker.
    @ivar family: its address family's name (C{"AF_INET"}, ...).
    """

    def __init__(self, role: str, description: str, port: Any) -> None:
        self.role = role
        self.description = description
        self._port = port
        self.fd: int = port.fileno()
        self.family: str = socket.AddressFamily(port.socket.family).name

    def getHost(self) -> Any:
        return self._port.getHost()

    def close(self) -> Deferred[None] | None:
        return self._port.stopListening()


def bindListener(reactor: IProxyReactor, role: str, description: str) -> BoundListener:
    """
    Bind C{description} now (synchronously, as twistd's privileged step
    needs) and stop the reactor from accepting on it.

    @raise Exception: what binding raised (the port is taken, say).
    """
    checkAdoptable(description)
    endpoint = serverFromString(reactor, withBacklog(description))
    factory = Factory.forProtocol(_NeverUsed)
    factory.noisy = False
    result: list[Any] = []
    endpoint.listen(factory).addBoth(result.append)
    if not result:
        raise RuntimeError(f"binding {description!r} did not finish at once")
    if isinstance(result[0], Failure):
        result[0].raiseException()
    port = result[0]
    # The supervisor keeps the socket but never accepts: only workers do.
    port.stopReading()
    return BoundListener(role, description, port)


class AdoptedListeners(Service):
    """
    The worker's side: serve inherited listening sockets.

    @param listeners: C{(fd, family, factory)} for each.
    """

    name = "adopted-listeners"

    def __init__(self, reactor: IProxyReactor, listeners: list[tuple[int, int, Any]]) -> None:
        self._reactor = reactor
        self._listeners = listeners
        self.ports: list[Any] = []

    def startService(self) -> None:
        Service.startService(self)
        for fd, family, factory in self._listeners:
            self.ports.append(self._reactor.adoptStreamPort(fd, socket.AddressFamily(family), factory))
            # The reactor made its own copy.
            os.close(fd)

    def stopService(self) -> Deferred[Any] | None:
        Service.stopService(self)
        # Stop accepting first: what arrives now waits in the backlog for the
        # next worker, the supervisor's copy keeps the socket open.
        waits = [port.stopListening() for port in self.ports]
        self.ports = []
        waits = [w for w in waits if w is not None]
        return DeferredList(waits) if waits else None
