"""
A blind relay's bytes moved by the kernel: C{splice(2)} from one socket into
a pipe and from the pipe into the other socket, so a tunnel's bytes never
come up into Python (no C{bytes} made, no C{dataReceived} chain, no copy into
user space and back).

L{KernelRelay} takes over the reading and writing of two plain TCP
transports while they relay: the reactor still watches them (their
C{startReading} and C{stopReading}, their pausing as producers, their
C{abortConnection} and C{connectionLost} are Twisted's own), but what it
calls when a socket is readable or writable is the splice. Each way has its
pipe, of L{PIPE_SIZE} bytes: when the sink doesn't take everything the pipe
holds, the source's gate is held for backpressure until the pipe is empty,
so a slow reader never makes the proxy hold more than the pipe.

When a socket ends (end of file, a reset) or the relay is cut, the kernel
path is stopped first: the pipes' bytes go into the sinks' Twisted buffers
(written before any close) and the transports are theirs again, and then
the end takes the path it takes without the splice. Where splice is missing
or the kernel refuses it for these sockets, the relay stays (or goes back)
in Python.
"""

from __future__ import annotations

import errno
import fcntl
import os
from typing import TYPE_CHECKING, Any, Callable, TypeAlias

from twisted.internet import error, main, tcp
from twisted.python.failure import Failure

from netlog.net.send import nothingBuffered

if TYPE_CHECKING:
    from netlog.net.gate import Gate

#: The splice system call, or L{None} where the platform has none.
splice: Callable[..., int] | None = getattr(os, "splice", None)

#: Bytes a pipe holds: the most the proxy holds for one way of a tunnel
#: whose reader is slower than its writer (Twisted's own write buffer
#: pauses its producer past 64 KB too).
PIPE_SIZE = 64 * 1024

#: Moves pages rather than copying them where it can; never blocks.
_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)

#: What the kernel says when it can't splice these descriptors: the relay
#: goes on in Python.
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP})

#: The transports the kernel may relay between: plain TCP connections,
#: exactly (TLS or a subclass reads and writes differently).
_PLAIN = frozenset({tcp.Server, tcp.Client})

#: What a transport's C{doRead} or C{doWrite} returns: why it is gone, or
#: L{None}.
_Why: TypeAlias = "error.ConnectionDone | error.ConnectionLost | None"

#: Why a source is paused: the pipe towards its sink isn't empty.
PIPE_FULL = "pipe-full"


def available() -> bool:
    """
    Whether this platform has C{splice(2)}.
    """
    return splice is not None


def canSplice(transport: Any) -> bool:
    """
    Whether the kernel may relay C{transport}'s bytes now: a plain TCP
    connection, open, with nothing in its Twisted buffer (bytes spliced
    would overtake them).
    """
    return type(transport) in _PLAIN and nothingBuffered(transport)


class _Way:
    """
    One way of the relay: from a source transport through a pipe into a
    sink transport.

    @ivar held: bytes in the pipe, not yet taken by the sink.
    @ivar waiting: the source is paused until the sink takes the pipe's
        bytes.
    """

    __slots__ = ("source", "sink", "sourceGate", "count", "sourceFd", "sinkFd", "readEnd", "writeEnd",
                 "held", "waiting", "doRead", "doWrite")

    def __init__(self, source: tcp.Connection, sink: tcp.Connection, sourceGate: Gate,
                 count: Callable[[int], None], pipe: tuple[int, int]) -> None:
        self.source = source
        self.sink = sink
        self.sourceGate = sourceGate
        self.count = count
        self.sourceFd = source.fileno()
        self.sinkFd = sink.fileno()
        self.readEnd, self.writeEnd = pipe
        self.held = 0
        self.waiting = False
        self.doRead: Callable[[], _Why] | None = None
        self.doWrite: Callable[[], _Why] | None = None


def _openPipe() -> tuple[int, int] | None:
    """
    A non-blocking pipe of L{PIPE_SIZE} bytes, or L{None} when none can be
    had (out of descriptors, say).
    """
    try:
        readEnd, writeEnd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.fcntl(writeEnd, fcntl.F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        # Then the pipe has the system's default size (64 KB on Linux).
        pass
    return readEnd, writeEnd


class KernelRelay:
    """
    Both ways of a relay between two plain TCP transports, spliced.

    Build it with L{engage}; L{stop} hands the transports back.

    @ivar active: the kernel is relaying (L{stop} not called yet).
    """

    def __init__(self, ways: tuple[_Way, _Way]) -> None:
        self._ways = ways
        self.active = True

    @classmethod
    def engage(cls, client: Any, clientGate: Gate, server: Any, serverGate: Gate,
               countUp: Callable[[int], None], countDown: Callable[[int], None]) -> KernelRelay | None:
        """
        Start splicing between C{client} and C{server}, or say it can't
        (L{None}: no splice here, a transport that isn't plain TCP or has
        bytes buffered, no pipes to be had), and the relay stays in Python.

        @param countUp: called with the bytes read from the client, each time.
        @param countDown: called with the bytes read from the server.
        """
        if splice is None or not (canSplice(client) and canSplice(server)):
            return None
        pipes: list[tuple[int, int]] = []
        for _ in range(2):
            pipe = _openPipe()
            if pipe is None:
                for fd in (fd for p in pipes for fd in p):
                    os.close(fd)
                return None
            pipes.append(pipe)
        up = _Way(client, server, clientGate, countUp, pipes[0])
        down = _Way(server, client, serverGate, countDown, pipes[1])
        relay = cls((up, down))
        for way in (up, down):
            way.doRead = relay._reader(way)
            way.doWrite = relay._writer(way)
            # The reactor calls the instance's attributes: these shadow the
            # transport's own until stop() takes them away (as
            # abortConnection does with its own).
            way.source.doRead = way.doRead  # type: ignore[method-assign]
            way.sink.doWrite = way.doWrite  # type: ignore[method-assign]
        return relay

    def _reader(self, way: _Way) -> Callable[[], _Why]:
        def doRead() -> _Why:
            return self._read(way)
        return doRead

    def _writer(self, way: _Way) -> Callable[[], _Why]:
        def doWrite() -> _Why:
            return self._flush(way)
        return doWrite

    def _read(self, way: _Way) -> _Why:
        """
        The source is readable: splice what it has into the empty pipe, then
        on into the sink.

        @return: what a transport's C{doRead} returns: L{None}, or why the
            source is gone.
        """
        assert splice is not None
        try:
            moved = splice(way.sourceFd, way.writeEnd, PIPE_SIZE, flags=_FLAGS)
        except BlockingIOError:
            return None
        except OSError as e:
            self.stop()
            if e.errno in _UNSUPPORTED:
                return way.source.doRead()
            return main.CONNECTION_LOST
        if not moved:
            self.stop()
            return main.CONNECTION_DONE
        way.held += moved
        way.count(moved)
        return self._flush(way)

    def _flush(self, way: _Way) -> _Why:
        """
        Splice the pipe's bytes into the sink, as many as it takes; hold the
        source while any are left, and let it go once none are.
        """
        assert splice is not None
        while way.held:
            try:
                moved = splice(way.readEnd, way.sinkFd, way.held, flags=_FLAGS)
            except BlockingIOError:
                break
            except OSError as e:
                self.stop()
                if e.errno not in _UNSUPPORTED:
                    self._lose(way.sink, Failure(error.ConnectionLost(os.strerror(e.errno or 0))))
                return None
            if not moved:
                break
            way.held -= moved
        if way.held:
            if not way.waiting:
                way.waiting = True
                way.sourceGate.hold(PIPE_FULL)
                way.sink.startWriting()
        elif way.waiting:
            way.waiting = False
            way.sink.stopWriting()
            way.sourceGate.release(PIPE_FULL)
        return None

    def _lose(self, transport: tcp.Connection, reason: Failure) -> None:
        """
        C{transport}'s socket failed while the kernel wrote to it: it is
        lost as the reactor loses a transport whose write failed.
        """
        if transport.disconnected:
            return
        transport.reactor.removeReader(transport)
        transport.reactor.removeWriter(transport)
        transport.connectionLost(reason)

    @property
    def held(self) -> int:
        """
        Bytes in the pipes, both ways.
        """
        return sum(way.held for way in self._ways)

    def stop(self) -> None:
        """
        Hand the transports back: their own reading and writing again, the
        pipes' bytes in the sinks' buffers (written before any close), the
        pipes closed. Twice is once.
        """
        if not self.active:
            return
        self.active = False
        for way in self._ways:
            # Only our own: an abortConnection since put in its no-ops.
            if way.source.__dict__.get("doRead") is way.doRead:
                del way.source.doRead
            if way.sink.__dict__.get("doWrite") is way.doWrite:
                del way.sink.doWrite
        for way in self._ways:
            left = self._drain(way)
            os.close(way.readEnd)
            os.close(way.writeEnd)
            if way.waiting:
                way.waiting = False
                if not way.sink.disconnected:
                    way.sink.stopWriting()
            if left:
                way.sink.write(left)
            way.sourceGate.release(PIPE_FULL)

    def _drain(self, way: _Way) -> bytes:
        """
        The bytes still in C{way}'s pipe.
        """
        pieces = []
        while way.held:
            try:
                piece = os.read(way.readEnd, way.held)
            except OSError:
                break
            if not piece:
                break
            pieces.append(piece)
            way.held -= len(piece)
        way.held = 0
        return b"".join(pieces)
