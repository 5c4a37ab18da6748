"""
The blind two-way relay: bytes go across as they come, each side the other's
producer (as C{twisted/protocols/portforward.py} does), so a slow reader never
makes the proxy buffer without bound. It counts bytes each way, says who closed,
and reports exactly once when it is over. Once joined, its bytes may move in
the kernel instead (L{Relay.moveToKernel}, L{netlog.net.splice}), with the
same counts, ends and timeouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from twisted.internet import error
from twisted.internet.interfaces import IReactorTime
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure

from netlog.net.gate import Gate
from netlog.net.idle import IdleTimer
from netlog.net.send import sendNow
from netlog.net.shape import Shaper, shaperFor
from netlog.net.splice import KernelRelay
from netlog.net.splice import available as spliceAvailable
from netlog.net.timeouts import DEFAULT_IDLE_TIMEOUT

CLIENT = "client"
SERVER = "server"
PROXY = "proxy"


def idleReason(idleTimeout: float) -> str:
    """
    Why the proxy cut a relay that passed nothing for C{idleTimeout} seconds,
    as its entry's C{_failed} says it.
    """
    return f"idle for {idleTimeout:g} s (see --idle-timeout)"


#: What the browser gets when its CONNECT's tunnel is open.
TUNNEL_ANSWER = b"HTTP/1.1 200 Connection established\r\n\r\n"


def tunnelAnswerFields() -> dict[str, Any]:
    """
    L{TUNNEL_ANSWER} as a tunnel's end line keeps it (its C{response}).
    """
    return {
        "status": 200,
        "reason": "Connection established",
        "version": "HTTP/1.1",
        "headers": [],
        "headers_size": len(TUNNEL_ANSWER),
        "body": {"size": 0},
    }


def isReset(reason: Failure) -> bool:
    """
    Whether a connection was lost uncleanly (reset) rather than closed.
    """
    return not reason.check(error.ConnectionDone)


@dataclass
class RelayResult:
    """
    How a relay went.

    @ivar up: bytes written towards the server.
    @ivar down: bytes written towards the client.
    @ivar closedBy: C{"client"}, C{"server"} or C{"proxy"}.
    @ivar failure: why it failed (a reset, an idle timeout), or L{None}.
    @ivar firstByte: when the server's first byte came, or L{None}.
    """

    up: int
    down: int
    closedBy: str
    failure: str | None
    firstByte: float | None
    ended: float


class Relay:
    """
    Joins a client transport and a server transport.

    The owner feeds L{fromClient}, L{fromServer}, L{clientLost} and
    L{serverLost}; L{RelayServerProtocol} does it for the server side.

    @param onOpen: called once when L{start} joins the two sides, before any
        byte passes (the stand-in writes its open line there).
    @param onEnd: called once with a L{RelayResult} as soon as either side is
        gone (the other is then closed after its buffered bytes are written).
    @param kernelAfter: reads relayed in Python before the rest moves to
        the kernel (L{moveToKernel}), or L{None} to stay in Python unless
        told.
    @param shapeUp: bytes a second towards the server, or L{None} for no
        limit (the rules' C{bandwidth}, L{netlog.net.shape}); C{shapeDown}
        towards the client. A shaped relay stays in Python.
    """

    def __init__(
        self,
        reactor: IReactorTime,
        clientTransport: Any,
        clientGate: Gate,
        onEnd: Callable[[RelayResult], None],
        onOpen: Callable[[], None] | None = None,
        idleTimeout: float = DEFAULT_IDLE_TIMEOUT,
        up: int = 0,
        down: int = 0,
        kernelAfter: int | None = None,
        shapeUp: int | None = None,
        shapeDown: int | None = None,
    ) -> None:
        self._reactor = reactor
        self.client = clientTransport
        self.clientGate = clientGate
        self.server: Any = None
        self.serverGate: Gate | None = None
        self._onEnd = onEnd
        self._onOpen = onOpen
        self.idleTimeout = idleTimeout
        self.up = up
        self.down = down
        self.firstByte: float | None = None
        self.result: RelayResult | None = None
        self._lastActivity = reactor.seconds()
        #: Cuts the relay once it passed nothing for C{idleTimeout}.
        self._idle = IdleTimer(reactor, self._idleDeadline, self._checkIdle)
        self._closeCall: Any = None
        #: The kernel relaying the bytes, while it does (see L{moveToKernel}).
        self.kernel: KernelRelay | None = None
        self._kernelAfter = kernelAfter
        #: Reads relayed in Python: the next try at the kernel is at
        #: C{_kernelAt}.
        self._reads = 0
        self._kernelAt = kernelAfter if kernelAfter is not None and spliceAvailable() else None
        self._shapes = (shapeUp, shapeDown)
        if shapeUp is not None or shapeDown is not None:
            self._kernelAt = None
        self._upShaper: Shaper | None = None
        self._downShaper: Shaper | None = None

    def start(
        self,
        serverTransport: Any,
        pending: bytes = b"",
        serverGate: Gate | None = None,
        pendingDown: bytes = b"",
    ) -> None:
        """
        Join the server side: each transport becomes the other's producer.

        Neither transport may have a producer registered yet.

        @param pending: bytes the client sent before the relay began (after a
            CONNECT head, say), to go up first.
        @param serverGate: the server transport's gate, when it has one already
            (so a pause it holds is kept).
        @param pendingDown: bytes the server sent before the relay began (after
            a C{101} head), to go down first.
        """
        self.server = serverTransport
        self.serverGate = serverGate if serverGate is not None else Gate(serverTransport)
        self._upShaper = shaperFor(self._reactor, self._shapes[0], self.clientGate)
        self._downShaper = shaperFor(self._reactor, self._shapes[1], self.serverGate)
        if self._onOpen is not None:
            self._onOpen()
        serverTransport.registerProducer(self.clientGate, True)
        self.client.registerProducer(self.serverGate, True)
        self._idle.arm(self._reactor.seconds() + self.idleTimeout)
        if pendingDown:
            self.fromServer(pendingDown)
        if pending:
            self.fromClient(pending)

    def moveToKernel(self) -> bool:
        """
        Relay the rest in the kernel (C{splice(2)}), when it can: both sides
        plain TCP with nothing buffered, a platform with splice. Call it
        once the bytes that must go first (a C{CONNECT}'s answer) are
        written; if they are still buffered, the relay stays in Python.

        @return: whether the kernel relays from now on.
        """
        if self.result is not None or self.server is None or self.serverGate is None:
            return False
        self.kernel = KernelRelay.engage(
            self.client, self.clientGate, self.server, self.serverGate, self._countUp, self._countDown
        )
        return self.kernel is not None

    # -- bytes -----------------------------------------------------------------

    def _countUp(self, size: int) -> None:
        self.up += size
        self._lastActivity = self._reactor.seconds()

    def _countDown(self, size: int) -> None:
        now = self._reactor.seconds()
        if self.firstByte is None:
            self.firstByte = now
        self.down += size
        self._lastActivity = now

    def fromClient(self, data: bytes) -> None:
        if self.result is not None or self.server is None:
            return
        self._countUp(len(data))
        sendNow(self.server, data)
        if self._upShaper is not None:
            self._upShaper.passed(len(data))
        if self._kernelAt is not None:
            self._readInPython()

    def fromServer(self, data: bytes) -> None:
        if self.result is not None:
            return
        self._countDown(len(data))
        sendNow(self.client, data)
        if self._downShaper is not None:
            self._downShaper.passed(len(data))
        if self._kernelAt is not None:
            self._readInPython()

    def _readInPython(self) -> None:
        """
        One more read relayed in Python: past C{kernelAfter} of them, the
        rest moves to the kernel; if it can't yet (bytes still buffered, no
        pipe to be had), it tries again as many reads later.
        """
        self._reads += 1
        if self._kernelAt is None or self._reads < self._kernelAt:
            return
        if self.moveToKernel():
            self._kernelAt = None
        elif self._kernelAfter is not None:
            self._kernelAt = self._reads + max(1, self._kernelAfter)

    # -- ends ------------------------------------------------------------------

    def clientLost(self, reason: Failure) -> None:
        failure = "the client reset the connection" if isReset(reason) else None
        self._finish(CLIENT, failure, self.server)

    def serverLost(self, reason: Failure) -> None:
        failure = "the server reset the connection" if isReset(reason) else None
        self._finish(SERVER, failure, self.client)

    def abort(self, failure: str | None = None) -> None:
        """
        The proxy ends the relay (idle timeout, shutdown): both sides go.

        @param failure: why, for the entry's C{_failed} (say
            C{REASON_STOPPED} when the proxy stops); a cut by the proxy
            always has a reason, so give one.
        """
        if self.result is not None:
            return
        self._finish(PROXY, failure, None)
        for transport in (self.client, self.server):
            if transport is not None:
                transport.abortConnection()

    def _finish(self, closedBy: str, failure: str | None, other: Any) -> None:
        if self.result is not None:
            return
        if self.kernel is not None:
            # The pipes' bytes go into the transports' buffers, to be written
            # before the close (or dropped by an abort).
            self.kernel.stop()
        for shaper in (self._upShaper, self._downShaper):
            if shaper is not None:
                shaper.stop()
        self.result = RelayResult(
            self.up, self.down, closedBy, failure, self.firstByte, self._reactor.seconds()
        )
        self._idle.stop()
        if other is not None:
            # Write what is buffered, then close; a peer that never reads is
            # cut off after the idle timeout.
            other.loseConnection()
            self._closeCall = self._reactor.callLater(self.idleTimeout, other.abortConnection)
        self._onEnd(self.result)

    def otherLost(self) -> None:
        """
        The side closed after the relay ended is gone: stop waiting for it.
        """
        if self._closeCall is not None and self._closeCall.active():
            self._closeCall.cancel()
        self._closeCall = None

    # -- idle ------------------------------------------------------------------

    def _idleDeadline(self) -> float | None:
        return self._lastActivity + self.idleTimeout

    def _checkIdle(self) -> None:
        if self.result is not None:
            return
        quiet = self._reactor.seconds() - self._lastActivity
        if quiet >= self.idleTimeout:
            self.abort(idleReason(self.idleTimeout))
        else:
            self._idle.arm()


class RelayServerProtocol(Protocol):
    """
    The server side of a L{Relay}: hands its bytes and its end to the relay.
    """

    relay: Relay | None = None

    def dataReceived(self, data: bytes) -> None:
        if self.relay is not None:
            self.relay.fromServer(data)

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        relay = self.relay
        if relay is None:
            return
        if relay.result is None:
            relay.serverLost(reason)
        else:
            relay.otherLost()
