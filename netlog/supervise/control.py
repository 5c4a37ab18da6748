"""
The control channel between the supervisor and a worker: a UNIX socket pair
over which the supervisor hands a running worker the sessions made over the
API (their log and listener, as file descriptors) and asks it to stop one.

One JSON object per line. The supervisor sends:

  - C{{"op": "add", "name", "log", "port", "family", "rules", "slot"}}
    after two file descriptors (the log, then the listener), C{slot} the
    worker slot whose workers alone write that log;
  - C{{"op": "delete", "name", "timeout"}};
  - C{{"op": "rules", "name", "rules"}}: a session's rules document, or
    the main listener's when C{name} is C{null}, checked already (see
    L{netlog.core.rules}).

The worker answers a delete with C{{"op": "deleted", "name"}} once the
session's exchanges have ended (or were ended as stopped) and its log is
closed, and new rules with C{{"op": "ruled", "name"}} once the next request
asks them (so that the API answers a change only once it is in force).

The worker asks C{{"op": "mint", "host"}} for a decrypted live host's
certificate; the supervisor answers C{{"op": "minted", "host", "cert"}}
(PEM) or C{{"op": "minted", "host", "error"}} (see L{netlog.site.minter}).
"""

from __future__ import annotations

import json
import os
import socket
from collections import deque
from typing import Any, Callable

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IAddress, IFileDescriptorReceiver
from twisted.internet.protocol import Protocol, ServerFactory
from twisted.logger import Logger
from zope.interface import implementer

from netlog.net.coalesce import Coalesced
from netlog.net.reactors import IProxyReactor
from netlog.proxy.mode import MintError

_log = Logger(namespace="netlog.control")

#: The longest line either side reads.
MAX_LINE = 64 * 1024


class SideFactory(ServerFactory[Any]):
    """
    The factory of the one connection a side of the control socket adopts:
    its protocol is the one C{build} gives.
    """

    noisy = False

    def __init__(self, build: Callable[[], Protocol]) -> None:
        self._build = build

    def buildProtocol(self, addr: IAddress | None) -> Protocol:
        side = self._build()
        side.factory = self
        return side


class _Lines(Protocol):
    """
    JSON lines in, each handed to L{lineReceived}.
    """

    def connectionMade(self) -> None:
        self._buffer = b""

    def dataReceived(self, data: bytes) -> None:
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            try:
                message = json.loads(line)
            except ValueError:
                _log.error("a control line that is not JSON: {line!r}", line=line[:200])
                continue
            self.messageReceived(message)
        if len(self._buffer) > MAX_LINE:
            _log.error("a control line longer than {limit} bytes; closing", limit=MAX_LINE)
            self.transport.loseConnection()  # type: ignore[union-attr]

    def send(self, message: dict[str, Any]) -> None:
        self.transport.write(json.dumps(message).encode("utf-8") + b"\n")  # type: ignore[union-attr]

    def messageReceived(self, message: dict[str, Any]) -> None:
        raise NotImplementedError()


class SupervisorSide(_Lines):
    """
    The supervisor's end, for one worker: sends, waits for the answers to
    deletes, and answers the worker's mints with C{mint}.
    """

    def __init__(self, mint: Callable[[str], Deferred[str]] | None = None) -> None:
        self._mint = mint
        self.pending: dict[str, list[Deferred[None]]] = {}
        #: The rules sent and not yet answered, in the order sent (the
        #: worker answers them in that order).
        self.ruling: deque[Deferred[None]] = deque()
        self.closed = False

    def add(self, name: str, logPath: str, logFd: int, listenFd: int, family: str, port: int,
            rules: dict[str, Any], slot: int = 0) -> None:
        """
        Hand a session to the worker; nothing when its channel is gone (a
        worker killed and not yet noticed dead: the next worker gets the
        session in its SPEC).

        @param slot: the worker slot the supervisor put the session in; a
            worker of another slot refuses it.
        """
        if self.closed or self.transport is None:
            return
        transport: Any = self.transport
        transport.sendFileDescriptor(logFd)
        transport.sendFileDescriptor(listenFd)
        self.send({"op": "add", "name": name, "log": logPath, "family": family, "port": port, "rules": rules,
                   "slot": slot})

    def setRules(self, name: str | None, rules: dict[str, Any]) -> Deferred[None]:
        """
        Hand the worker new rules for session C{name} (L{None}: the main
        listener); nothing when its channel is gone (the next worker gets
        them in its SPEC).

        @return: fires once the worker has them in force, or is gone.
        """
        d: Deferred[None] = Deferred()
        if self.closed or self.transport is None:
            d.callback(None)
            return d
        self.ruling.append(d)
        self.send({"op": "rules", "name": name, "rules": rules})
        return d

    def delete(self, name: str, timeout: float) -> Deferred[None]:
        """
        Fires once the worker says the session is stopped, or it is gone.
        """
        d: Deferred[None] = Deferred()
        if self.closed:
            d.callback(None)
            return d
        self.pending.setdefault(name, []).append(d)
        self.send({"op": "delete", "name": name, "timeout": timeout})
        return d

    def messageReceived(self, message: dict[str, Any]) -> None:
        if message.get("op") == "deleted":
            for d in self.pending.pop(str(message.get("name")), []):
                d.callback(None)
        elif message.get("op") == "ruled" and self.ruling:
            self.ruling.popleft().callback(None)
        elif message.get("op") == "mint":
            self._answerMint(str(message.get("host", "")))

    def _answerMint(self, host: str) -> None:
        """
        Mint C{host}'s certificate for the worker and send it (or why not).
        """
        if self._mint is None:
            self._minted({"host": host, "error": "this proxy mints no certificates"})
            return

        def failed(failure: Any) -> None:
            self._minted({"host": host, "error": failure.getErrorMessage()})

        self._mint(host).addCallbacks(lambda pem: self._minted({"host": host, "cert": pem}), failed)

    def _minted(self, answer: dict[str, Any]) -> None:
        if not self.closed and self.transport is not None:
            self.send({"op": "minted", **answer})

    def connectionLost(self, reason: Any = None) -> None:
        self.closed = True
        ruling, self.ruling = self.ruling, deque()
        for d in ruling:
            d.callback(None)
        pending, self.pending = self.pending, {}
        for waiting in pending.values():
            for d in waiting:
                d.callback(None)


def connectSupervisorSide(reactor: IProxyReactor, mint: Callable[[str], Deferred[str]] | None = None
                          ) -> tuple[SupervisorSide, socket.socket]:
    """
    A socket pair: the supervisor's end served by a L{SupervisorSide}, and
    the worker's end, to hand to the worker (and close here once handed).

    @param mint: what mints the live hosts' certificates the worker asks for.
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    side = SupervisorSide(mint)
    reactor.adoptStreamConnection(ours.fileno(), socket.AF_UNIX, SideFactory(lambda: side))
    ours.close()
    return side, theirs


@implementer(IFileDescriptorReceiver)
class WorkerSide(_Lines):
    """
    The worker's end: descriptors received are queued until the line
    they came with.

    @param onAdd: C{(message, logFd, listenFd)}.
    @param onDelete: C{(message)}, returns a Deferred that fires once the
        session is stopped.
    @param onRules: C{(message)}: new rules.
    """

    def __init__(self, onAdd: Callable[[dict[str, Any], int, int], None],
                 onDelete: Callable[[dict[str, Any]], Deferred[Any]],
                 onRules: Callable[[dict[str, Any]], None]) -> None:
        self._onAdd = onAdd
        self._onDelete = onDelete
        self._onRules = onRules
        self._fds: deque[int] = deque()
        #: Mints asked and not yet answered, by host.
        self._minting: Coalesced[str, str] = Coalesced()

    def mint(self, host: str) -> Deferred[str]:
        """
        Ask the supervisor for the certificate (PEM) of the live host
        C{host}; many asking at once for one host ask once.
        """
        if self.transport is None:
            return fail(MintError("the control channel to the supervisor is closed"))
        d, first = self._minting.join(host)
        if first:
            self.send({"op": "mint", "host": host})
        return d

    def connectionLost(self, reason: Any = None) -> None:
        self._minting.refuseAll(MintError("the control channel to the supervisor is closed"))

    def fileDescriptorReceived(self, descriptor: int) -> None:
        self._fds.append(descriptor)

    def messageReceived(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "add":
            if len(self._fds) < 2:
                _log.error("a session came without its log and listener: {message}", message=message)
                return
            logFd, listenFd = self._fds.popleft(), self._fds.popleft()
            try:
                self._onAdd(message, logFd, listenFd)
            except Exception:
                _log.failure("the worker could not serve session {name}", name=message.get("name"))
                os.close(logFd)
                os.close(listenFd)
        elif op == "rules":
            try:
                self._onRules(message)
            except Exception:
                _log.failure("the worker could not take the rules of {name}", name=message.get("name"))
            self.send({"op": "ruled", "name": message.get("name")})
        elif op == "minted":
            host = str(message.get("host"))
            if isinstance(message.get("cert"), str):
                self._minting.answer(host, message["cert"])
            else:
                self._minting.refuse(host, MintError(f"no certificate for {host}: "
                                                     f"{message.get('error', 'no reason given')}"))
        elif op == "delete":
            name = message.get("name")
            d = self._onDelete(message)
            d.addErrback(lambda f: _log.failure("stopping session {name}", f, name=name))
            d.addBoth(lambda _: self.send({"op": "deleted", "name": name}))
