"""
The stand-in's shell in memory: a browser connection on a
L{StringTransport}, upstream connections caught by a L{MemoryReactorClock},
and a writer that keeps its lines; for the paths real loopback sockets can't
reach on demand (a connect timeout, a browser leaving mid-connect).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings, strategies as st
from twisted.internet import error
from twisted.internet.address import IPv4Address
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial import unittest

from netlog.net.policy import DestinationPolicy
from netlog.net.resolve import Resolver
from netlog.proxy.service import ProxyService
from netlog.standin.mode import StandinMode


class RecordingWriter:
    """
    Keeps each line's fields; numbers them like the LogWriter. An
    L{ILogWriter} as it is: the engine takes it with no cast.
    """

    enabled = True

    def __init__(self) -> None:
        self.lines: list[tuple[str, int, dict[str, Any]]] = []

    def open(self, fields: dict[str, Any]) -> int:
        n = len(self.lines) + 1
        self.lines.append(("open", n, fields))
        return n

    def end(self, exchangeId: int, fields: dict[str, Any]) -> None:
        self.lines.append(("end", exchangeId, fields))

    def refuse(self, openFields: dict[str, Any], endFields: dict[str, Any]) -> int:
        n = self.open(openFields)
        self.end(n, endFields)
        return n

    def head(self, exchangeId: int, fields: dict[str, Any]) -> None:
        self.lines.append(("head", exchangeId, fields))

    def message(self, exchangeId: int, fields: dict[str, Any]) -> None:
        self.lines.append(("message", exchangeId, fields))


class MemoryTests(unittest.SynchronousTestCase):
    def setUp(self) -> None:
        self.reactor = MemoryReactorClock()
        self.writer = RecordingWriter()
        proxy = ProxyService(
            StandinMode(),
            self.writer,
            self.reactor,
            Resolver(self.reactor, {"x.test": "192.0.2.10"}, resolveOnly=True),
            DestinationPolicy(),
            ["forward"],
            connectTimeout=5, idleTimeout=60, headerTimeout=10,
        )
        [(_, _, factory)] = proxy.listeners
        self.browser = factory.buildProtocol(None)
        self.transport = StringTransport(
            hostAddress=IPv4Address("TCP", "127.0.0.1", 3128),
            peerAddress=IPv4Address("TCP", "127.0.0.1", 50000),
        )
        self.browser.makeConnection(self.transport)

    def test_connectTimeout(self) -> None:
        """
        A connection not made within the connect timeout is a 504 saying so,
        and an entry with C{_failed}.
        """
        self.browser.dataReceived(b"GET http://x.test/ HTTP/1.1\r\nHost: x.test\r\n\r\n")
        [(host, port, factory, timeout, _)] = self.reactor.tcpClients
        self.assertEqual((host, port, timeout), ("192.0.2.10", 80, 5))
        factory.clientConnectionFailed(None, Failure(error.TimeoutError()))
        answer = self.transport.value()
        self.assertTrue(answer.startswith(b"HTTP/1.1 504 Gateway Timeout\r\n"), answer)
        self.assertIn(b"connecting to x.test:80 timed out", answer)
        [(kind1, n, opened), (kind2, m, ended)] = self.writer.lines
        self.assertEqual((kind1, kind2, n), ("open", "end", m))
        self.assertEqual(opened["server"]["address"], "192.0.2.10")
        self.assertEqual(ended["_failed"], {"reason": "connecting to x.test:80 timed out", "status": 504})
        self.assertEqual(ended["response"]["status"], 504)
        self.assertTrue(self.transport.disconnecting)

    def test_browserLeavesWhileConnecting(self) -> None:
        """
        A browser that leaves before the connection is made still gets its
        entry: both lines, failed, and the late connection is dropped.
        """
        self.browser.dataReceived(b"CONNECT x.test:443 HTTP/1.1\r\nHost: x.test:443\r\n\r\n")
        self.browser.connectionLost(Failure(error.ConnectionDone()))
        [(kind1, _, opened), (kind2, _, ended)] = self.writer.lines
        self.assertEqual((kind1, kind2), ("open", "end"))
        self.assertEqual(opened["kind"], "tunnel")
        self.assertEqual(ended["_failed"]["reason"], "the browser closed the connection before the tunnel was connected")
        self.assertEqual(ended["closed_by"], "client")
        [(_, _, factory, _, _)] = self.reactor.tcpClients
        upstream = factory.buildProtocol(None)
        late = StringTransport()
        upstream.makeConnection(late)
        self.assertTrue(late.disconnecting)
        self.assertEqual(len(self.writer.lines), 2)

    def test_headerTimeout(self) -> None:
        """
        A head begun and not finished in time is a 408; a silent
        connection is closed without an entry.
        """
        self.browser.dataReceived(b"GET http://x.test/ HTTP/1.1\r\n")
        self.reactor.advance(10)
        self.assertTrue(self.transport.value().startswith(b"HTTP/1.1 408 "))
        [(_, _, _), (_, _, ended)] = self.writer.lines
        self.assertEqual(ended["_refused"]["status"], 408)

    def test_idleConnectionClosed(self) -> None:
        self.reactor.advance(61)
        self.assertTrue(self.transport.disconnecting)
        self.assertEqual(self.writer.lines, [])


def _cuts(data: bytes, points: list[int]) -> list[bytes]:
    points = sorted({p % (len(data) + 1) for p in points})
    pieces, last = [], 0
    for p in points + [len(data)]:
        pieces.append(data[last:p])
        last = p
    return [p for p in pieces if p]


REQUEST = (b"POST http://x.test/p?q=1 HTTP/1.1\r\nHost: x.test\r\nProxy-Connection: keep-alive\r\n"
           b"Content-Length: 5\r\n\r\nhello")
UPSTREAM_REQUEST = (b"POST /p?q=1 HTTP/1.1\r\nHost: x.test\r\nContent-Length: 5\r\n\r\nhello")
RESPONSE = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n"
            b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")
RESPONSE_DOWN = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n"
                 b"3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n")


class CutsTests(unittest.SynchronousTestCase):
    """
    However the bytes are cut into reads, both ways, the same bytes go up
    and down and the same entry is written.
    """

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.integers(0, 200), max_size=8), st.lists(st.integers(0, 200), max_size=8))
    def test_cuts(self, requestCuts: list[int], responseCuts: list[int]) -> None:
        memory = MemoryTests("test_connectTimeout")
        memory.setUp()
        for piece in _cuts(REQUEST, requestCuts):
            memory.browser.dataReceived(piece)
        [(_, _, factory, _, _)] = memory.reactor.tcpClients
        upstream = factory.buildProtocol(None)
        server = StringTransport()
        upstream.makeConnection(server)
        self.assertEqual(server.value(), UPSTREAM_REQUEST)
        for piece in _cuts(RESPONSE, responseCuts):
            upstream.dataReceived(piece)
        self.assertEqual(memory.transport.value(), RESPONSE_DOWN)
        [(_, n, opened), (_, m, ended)] = memory.writer.lines
        self.assertEqual(n, m)
        self.assertEqual(opened["request"]["url"], "http://x.test/p?q=1")
        self.assertEqual(ended["request_body"], {"size": 5})
        self.assertEqual(ended["response"]["body"], {"size": 7})
        self.assertEqual(ended["bytes"], {"up": len(UPSTREAM_REQUEST), "down": len(RESPONSE_DOWN)})
        self.assertFalse(memory.transport.disconnecting)


class BackpressureTests(unittest.SynchronousTestCase):
    def test_slowBrowserPausesServer(self) -> None:
        """
        While the browser's connection can't take more (its transport pauses
        its producer), the server's connection is not read; and the other
        way round for an upload.
        """
        memory = MemoryTests("test_connectTimeout")
        memory.setUp()
        memory.browser.dataReceived(b"GET http://x.test/big HTTP/1.1\r\nHost: x.test\r\n\r\n")
        [(_, _, factory, _, _)] = memory.reactor.tcpClients
        upstream = factory.buildProtocol(None)
        server = StringTransport()
        upstream.makeConnection(server)
        memory.transport.producer.pauseProducing()
        self.assertEqual(server.producerState, "paused")
        memory.transport.producer.resumeProducing()
        self.assertEqual(server.producerState, "producing")
        server.producer.pauseProducing()
        self.assertEqual(memory.transport.producerState, "paused")
