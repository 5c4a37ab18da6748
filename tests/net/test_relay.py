"""
The blind relay: bytes across and counted, each side the other's producer,
who closed, resets, the idle timeout; with in-memory transports and a clock.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial import unittest

from netlog.net.gate import Gate
from netlog.net.relay import Relay, RelayResult, RelayServerProtocol


class RelayTests(unittest.SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.client = StringTransport()
        self.server = StringTransport()
        self.results: list[RelayResult] = []
        self.opened: list[bool] = []
        self.relay = Relay(
            self.clock, self.client, Gate(self.client),
            onEnd=self.results.append, onOpen=lambda: self.opened.append(True), idleTimeout=30,
        )
        self.protocol = RelayServerProtocol()
        self.protocol.relay = self.relay
        self.protocol.makeConnection(self.server)

    def test_bytesAcrossAndCounted(self) -> None:
        """
        Bytes pass as they come, both ways, counted; bytes the client sent
        before the relay began go up first; the open callback runs first.
        """
        self.relay.start(self.server, pending=b"early")
        self.assertEqual(self.opened, [True])
        self.relay.fromClient(b"up!")
        self.protocol.dataReceived(b"down")
        self.assertEqual(self.server.value(), b"earlyup!")
        self.assertEqual(self.client.value(), b"down")
        self.assertEqual((self.relay.up, self.relay.down), (8, 4))

    def test_backpressure(self) -> None:
        """
        When one side's buffer is full (its transport pauses its producer),
        the other side stops being read, and reading resumes after.
        """
        self.relay.start(self.server)
        self.assertIs(self.client.producer, self.relay.serverGate)
        self.assertIs(self.server.producer, self.relay.clientGate)
        self.client.producer.pauseProducing()
        self.assertEqual(self.server.producerState, "paused")
        self.client.producer.resumeProducing()
        self.assertEqual(self.server.producerState, "producing")
        self.server.producer.pauseProducing()
        self.assertEqual(self.client.producerState, "paused")

    def test_gateReasons(self) -> None:
        """
        A gate stays paused while any reason holds.
        """
        transport = StringTransport()
        gate = Gate(transport)
        gate.hold("connecting")
        gate.pauseProducing()
        gate.release("connecting")
        self.assertEqual(transport.producerState, "paused")
        gate.resumeProducing()
        self.assertEqual(transport.producerState, "producing")
        gate.release("never held")
        self.assertEqual(transport.producerState, "producing")

    def test_clientCloses(self) -> None:
        """
        The client closing ends the relay once: closed by the client, the
        server's side closed after its buffered bytes.
        """
        self.relay.start(self.server)
        self.relay.fromClient(b"x")
        self.relay.clientLost(Failure(error.ConnectionDone()))
        self.protocol.connectionLost(Failure(error.ConnectionDone()))
        [result] = self.results
        self.assertEqual((result.closedBy, result.failure, result.up), ("client", None, 1))
        self.assertTrue(self.server.disconnecting)

    def test_serverResets(self) -> None:
        """
        A reset is a failure naming the side that reset.
        """
        self.relay.start(self.server)
        self.protocol.dataReceived(b"abc")
        self.protocol.connectionLost(Failure(error.ConnectionLost()))
        [result] = self.results
        self.assertEqual(result.closedBy, "server")
        self.assertEqual(result.failure, "the server reset the connection")
        self.assertEqual(result.firstByte, 0)
        self.assertTrue(self.client.disconnecting)

    def test_idle(self) -> None:
        """
        A relay silent for the idle timeout is closed by the proxy, which
        says why; traffic keeps it open.
        """
        self.relay.start(self.server)
        self.clock.advance(20)
        self.relay.fromClient(b"x")
        self.clock.advance(20)
        self.assertEqual(self.results, [])
        self.clock.advance(11)
        [result] = self.results
        self.assertEqual(result.closedBy, "proxy")
        self.assertEqual(result.failure, "idle for 30 s (see --idle-timeout)")

    def test_abortSaysWhy(self) -> None:
        """
        The proxy cutting a relay (a stop) ends it once, closed by the proxy
        with the reason it gave, and both sides go.
        """
        aborted: list[str] = []
        self.client.abortConnection = lambda: aborted.append("client")  # type: ignore[method-assign]
        self.server.abortConnection = lambda: aborted.append("server")  # type: ignore[method-assign]
        self.relay.start(self.server)
        self.relay.abort("the proxy stopped")
        self.relay.abort("again")
        [result] = self.results
        self.assertEqual((result.closedBy, result.failure), ("proxy", "the proxy stopped"))
        self.assertEqual(sorted(aborted), ["client", "server"])

    def test_peerNeverReads(self) -> None:
        """
        After one side is gone, a peer that never takes its buffered bytes is
        cut off after the idle timeout.
        """
        aborted: list[bool] = []
        self.server.abortConnection = lambda: aborted.append(True)  # type: ignore[method-assign]
        self.relay.start(self.server)
        self.relay.clientLost(Failure(error.ConnectionDone()))
        self.clock.advance(31)
        self.assertEqual(aborted, [True])
