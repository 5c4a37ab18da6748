"""
The relay in the kernel (L{netlog.net.splice}) over real loopback sockets:
a client socket, the relay in this process's reactor (the client's side
accepted by Twisted, the server's side connected by it, as a tunnel does),
and a server socket; the sockets driven from threads. Bytes and counts each
way, each side closing, the idle timeout, resets, the fallback to Python,
and the bound a slow reader puts on what the relay holds.
"""

from __future__ import annotations

import errno
import hashlib
import socket
import struct
import time
from typing import Any

from twisted.internet import defer, error, reactor, task
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.threads import deferToThread
from twisted.python.failure import Failure
from twisted.trial import unittest

from netlog.net import splice as spliceModule
from netlog.net.gate import Gate
from netlog.net.relay import Relay, RelayResult, RelayServerProtocol
from netlog.net.splice import PIPE_SIZE

#: Seconds a socket in a test waits before giving up.
WAIT = 10.0


def _blob(size: int, seed: bytes) -> bytes:
    """
    C{size} bytes that differ from place to place (a shifted or repeated
    piece would not compare equal).
    """
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(seed + counter.to_bytes(8, "big")).digest() * 64
        counter += 1
    return bytes(out[:size])


def _readAll(s: socket.socket) -> bytes:
    """
    What C{s} reads until its end of file (or a reset).
    """
    pieces = []
    while True:
        try:
            piece = s.recv(256 * 1024)
        except (ConnectionResetError, socket.timeout):
            break
        if not piece:
            break
        pieces.append(piece)
    return b"".join(pieces)


def _readExactly(s: socket.socket, size: int) -> bytes:
    """
    C{size} bytes from C{s}, or fewer if it ends first.
    """
    pieces, got = [], 0
    while got < size:
        piece = s.recv(min(size - got, 1024 * 1024))
        if not piece:
            break
        pieces.append(piece)
        got += len(piece)
    return b"".join(pieces)


def _reset(s: socket.socket) -> None:
    """
    Close C{s} with a reset (RST), not a FIN.
    """
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


class ClientSide(Protocol):
    """
    The relay's client side, as a tunnel's browser connection feeds it; it
    counts the bytes that came up through Python.
    """

    relay: Relay | None = None
    gate: Gate

    def __init__(self) -> None:
        self.pythonBytes = 0
        self.early: list[bytes] = []

    def connectionMade(self) -> None:
        self.gate = Gate(self.transport)
        self.factory.accepted.callback(self)  # type: ignore[attr-defined]

    def dataReceived(self, data: bytes) -> None:
        self.pythonBytes += len(data)
        if self.relay is None:
            self.early.append(data)
        else:
            self.relay.fromClient(data)

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        relay = self.relay
        if relay is None:
            return
        if relay.result is None:
            relay.clientLost(reason)
        else:
            relay.otherLost()


class CountingServerSide(RelayServerProtocol):
    """
    The relay's server side, counting the bytes that came down through
    Python.
    """

    pythonBytes = 0

    def dataReceived(self, data: bytes) -> None:
        self.pythonBytes += len(data)
        super().dataReceived(data)


class KernelRelayTests(unittest.TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def join(self, idleTimeout: float = 30.0, clientOptions: dict[int, int] | None = None,
             kernelAfter: int | None = None) -> Any:
        """
        A client socket relayed to a server socket as a tunnel relays them:
        in the kernel at once, or with C{kernelAfter} after that many reads.

        @return: a L{Deferred} firing with the client socket, the server
            socket and the relay (in the kernel, if it could).
        """
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(WAIT)

        factory = Factory.forProtocol(ClientSide)
        factory.accepted = defer.Deferred()  # type: ignore[attr-defined]
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")  # type: ignore[attr-defined]
        self.addCleanup(port.stopListening)

        def connectClient() -> socket.socket:
            s = socket.socket()
            for option, value in (clientOptions or {}).items():
                s.setsockopt(socket.SOL_SOCKET, option, value)
            s.settimeout(WAIT)
            s.connect(("127.0.0.1", port.getHost().port))
            return s

        client = yield deferToThread(connectClient)
        self.addCleanup(client.close)
        side: ClientSide = yield factory.accepted  # type: ignore[attr-defined]
        side.gate.hold("connecting")
        accepted = deferToThread(listener.accept)
        serverSide = yield connectProtocol(
            TCP4ClientEndpoint(reactor, "127.0.0.1", listener.getsockname()[1]), CountingServerSide()
        )
        server, _ = yield accepted
        server.settimeout(WAIT)
        self.addCleanup(server.close)

        self.results: list[RelayResult] = []
        self.ended: defer.Deferred[RelayResult] = defer.Deferred()

        def onEnd(result: RelayResult) -> None:
            self.results.append(result)
            self.ended.callback(result)

        relay = Relay(reactor, side.transport, side.gate, onEnd, idleTimeout=idleTimeout, kernelAfter=kernelAfter)
        side.relay = relay
        serverSide.relay = relay
        relay.start(serverSide.transport, b"".join(side.early))
        side.gate.release("connecting")
        self.kernel = relay.moveToKernel() if kernelAfter is None else False
        self.side = side
        self.serverSide = serverSide
        self.addCleanup(lambda: relay.abort("the test ended") if relay.result is None else None)
        return client, server, relay

    def wait(self, seconds: float) -> defer.Deferred[None]:
        return task.deferLater(reactor, seconds, lambda: None)

    @defer.inlineCallbacks
    def test_bytesBothWaysCounted(self) -> Any:
        """
        Megabytes each way at once arrive whole and in order, counted each
        way as the end line counts them, and none of them came up through
        Python: the kernel moved them. The client closing ends the relay,
        closed by the client, without a failure.
        """
        client, server, relay = yield self.join()
        self.assertTrue(self.kernel)
        up = _blob(1_000_000, b"up")
        down = _blob(3_000_000, b"down")

        def serve() -> bytes:
            server.sendall(down)
            return _readExactly(server, len(up))

        def browse() -> bytes:
            client.sendall(up)
            got = _readExactly(client, len(down))
            client.close()
            return got

        served = deferToThread(serve)
        browsed = yield deferToThread(browse)
        gotUp = yield served
        result = yield self.ended
        self.assertEqual(hashlib.sha256(gotUp).digest(), hashlib.sha256(up).digest())
        self.assertEqual(hashlib.sha256(browsed).digest(), hashlib.sha256(down).digest())
        self.assertEqual((result.up, result.down), (len(up), len(down)))
        self.assertEqual((result.closedBy, result.failure), ("client", None))
        self.assertIsNotNone(result.firstByte)
        self.assertEqual((self.side.pythonBytes, self.serverSide.pythonBytes), (0, 0))
        # The server's side is closed after it: its socket reads the end.
        rest = yield deferToThread(_readAll, server)
        self.assertEqual(rest, b"")

    @defer.inlineCallbacks
    def test_movesAfterReads(self) -> Any:
        """
        A relay told to move after some reads relays them in Python, then
        the rest in the kernel; every byte arrives, counted once.
        """
        client, server, relay = yield self.join(kernelAfter=4)
        sent = b""
        for i in range(3):
            piece = _blob(1000, b"python %d" % i)
            yield deferToThread(client.sendall, piece)
            self.assertEqual((yield deferToThread(_readExactly, server, len(piece))), piece)
            sent += piece
        self.assertIsNone(relay.kernel)
        self.assertEqual(self.side.pythonBytes, 3000)
        big = _blob(2_000_000, b"kernel")
        gotDown = deferToThread(_readExactly, client, 3000)
        yield deferToThread(server.sendall, big[:3000])
        self.assertEqual((yield gotDown), big[:3000])
        assert relay.kernel is not None
        self.assertTrue(relay.kernel.active)
        got = deferToThread(_readExactly, server, len(big))
        yield deferToThread(client.sendall, big)
        self.assertEqual(hashlib.sha256((yield got)).digest(), hashlib.sha256(big).digest())
        client.close()
        result = yield self.ended
        self.assertEqual((result.up, result.down), (3000 + len(big), 3000))
        self.assertEqual(self.side.pythonBytes, 3000)

    @defer.inlineCallbacks
    def test_clientHalfCloses(self) -> Any:
        """
        The client shutting its sending side: the server gets every byte
        sent before, then its end of file; the relay is closed by the
        client.
        """
        client, server, relay = yield self.join()
        up = _blob(300_000, b"half")

        def browse() -> None:
            client.sendall(up)
            client.shutdown(socket.SHUT_WR)

        yield deferToThread(browse)
        got = yield deferToThread(_readAll, server)
        result = yield self.ended
        self.assertEqual(got, up)
        self.assertEqual((result.closedBy, result.failure, result.up, result.down), ("client", None, len(up), 0))

    @defer.inlineCallbacks
    def test_serverHalfClosesToSlowReader(self) -> Any:
        """
        The server sending megabytes then shutting its sending side, to a
        client that starts reading only later: the client still gets every
        byte, then its end of file; the relay is closed by the server.
        """
        client, server, relay = yield self.join()
        down = _blob(2_000_000, b"slow")

        def serve() -> None:
            server.sendall(down)
            server.shutdown(socket.SHUT_WR)

        served = deferToThread(serve)
        yield self.wait(0.3)
        got = yield deferToThread(_readAll, client)
        yield served
        result = yield self.ended
        self.assertEqual(hashlib.sha256(got).digest(), hashlib.sha256(down).digest())
        self.assertEqual((result.closedBy, result.failure, result.down, result.up), ("server", None, len(down), 0))

    @defer.inlineCallbacks
    def test_idleTimeout(self) -> Any:
        """
        Bytes the kernel moves keep the relay from its idle timeout; once
        nothing passes for the timeout, the proxy cuts both sides and says
        why.
        """
        client, server, relay = yield self.join(idleTimeout=0.6)
        self.assertTrue(self.kernel)
        for _ in range(5):
            yield deferToThread(client.sendall, b"tick")
            yield deferToThread(server.recv, 10)
            yield self.wait(0.25)
        self.assertEqual(self.results, [])
        self.assertEqual(relay.up, 20)
        started = time.monotonic()
        result = yield self.ended
        self.assertGreaterEqual(time.monotonic() - started, 0.3)
        self.assertEqual((result.closedBy, result.failure), ("proxy", "idle for 0.6 s (see --idle-timeout)"))
        self.assertEqual((yield deferToThread(_readAll, client)), b"")
        self.assertEqual((yield deferToThread(_readAll, server)), b"")

    @defer.inlineCallbacks
    def test_serverResetsMidTransfer(self) -> Any:
        """
        A server that resets while megabytes are on their way: the relay
        ends closed by the server, with the reset as its failure, and the
        client's connection is closed.
        """
        client, server, relay = yield self.join()

        def serve() -> None:
            server.sendall(_blob(500_000, b"reset"))
            _reset(server)

        yield deferToThread(serve)
        result = yield self.ended
        self.assertEqual((result.closedBy, result.failure), ("server", "the server reset the connection"))
        got = yield deferToThread(_readAll, client)
        self.assertLessEqual(len(got), 500_000)
        self.assertGreater(result.down, 0)

    @defer.inlineCallbacks
    def test_clientResetsMidTransfer(self) -> Any:
        """
        A client that resets while the server is sending: closed by the
        client, with the reset as its failure; the server's side is closed.
        """
        client, server, relay = yield self.join()
        down = _blob(4_000_000, b"client-reset")

        def serve() -> None:
            try:
                server.sendall(down)
            except OSError:
                pass

        served = deferToThread(serve)
        yield deferToThread(client.recv, 1000)
        _reset(client)
        result = yield self.ended
        yield served
        self.assertEqual((result.closedBy, result.failure), ("client", "the client reset the connection"))

    @defer.inlineCallbacks
    def test_fallbackWhenTheKernelRefuses(self) -> Any:
        """
        Where the kernel refuses to splice these sockets, the relay goes on
        in Python from the first read: every byte arrives and is counted.
        """
        def refuse(*args: Any, **kwargs: Any) -> int:
            raise OSError(errno.EINVAL, "Invalid argument")

        self.patch(spliceModule, "splice", refuse)
        client, server, relay = yield self.join()
        self.assertTrue(self.kernel)
        up, down = _blob(200_000, b"fallback-up"), _blob(300_000, b"fallback-down")
        yield deferToThread(client.sendall, up)
        gotUp = yield deferToThread(_readExactly, server, len(up))
        yield deferToThread(server.sendall, down)
        gotDown = yield deferToThread(_readExactly, client, len(down))
        client.close()
        result = yield self.ended
        self.assertEqual((gotUp, gotDown), (up, down))
        self.assertEqual((result.up, result.down, result.closedBy), (len(up), len(down), "client"))
        self.assertEqual((self.side.pythonBytes, self.serverSide.pythonBytes), (len(up), len(down)))
        assert relay.kernel is not None
        self.assertFalse(relay.kernel.active)

    @defer.inlineCallbacks
    def test_fallbackWithoutSplice(self) -> Any:
        """
        On a platform without splice the relay stays in Python, and works
        as before.
        """
        self.patch(spliceModule, "splice", None)
        client, server, relay = yield self.join()
        self.assertFalse(self.kernel)
        yield deferToThread(server.sendall, b"hello")
        self.assertEqual((yield deferToThread(client.recv, 100)), b"hello")
        yield deferToThread(client.sendall, b"up")
        self.assertEqual((yield deferToThread(server.recv, 100)), b"up")
        server.close()
        result = yield self.ended
        self.assertEqual((result.up, result.down, result.closedBy), (2, 5, "server"))
        self.assertEqual(self.serverSide.pythonBytes, 5)

    @defer.inlineCallbacks
    def test_slowReaderBound(self) -> Any:
        """
        A client that doesn't read while the server sends 32 MB: the relay
        stops reading the server with at most the pipe's size held (nothing
        in Python's buffers), and once the client reads, every byte
        arrives.
        """
        client, server, relay = yield self.join(clientOptions={socket.SO_RCVBUF: 64 * 1024})
        down = _blob(32 * 1024 * 1024, b"bound")
        served = deferToThread(server.sendall, down)
        last, still = -1, 0
        while still < 4:
            yield self.wait(0.1)
            still = still + 1 if relay.down == last else 0
            last = relay.down
        assert relay.kernel is not None
        self.assertTrue(relay.kernel.active)
        self.assertLess(relay.down, len(down))
        self.assertLessEqual(relay.kernel.held, PIPE_SIZE)
        self.assertTrue(relay.serverGate is not None and relay.serverGate.paused)
        transport: Any = self.side.transport
        self.assertEqual((len(transport.dataBuffer), transport._tempDataLen), (0, 0))

        got = yield deferToThread(_readExactly, client, len(down))
        yield served
        self.assertEqual(hashlib.sha256(got).digest(), hashlib.sha256(down).digest())
        self.assertEqual(relay.down, len(down))
        self.assertEqual(self.serverSide.pythonBytes, 0)
