"""
L{netlog.net.send.sendNow}: bytes to an idle TCP connection go at once, and
never overtake bytes already buffered.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, protocol, reactor
from twisted.internet.testing import StringTransport
from twisted.trial import unittest

from netlog.net.send import sendNow


class _Collect(protocol.Protocol):
    def __init__(self, want: int, done: defer.Deferred[bytes]) -> None:
        self.want = want
        self.done = done
        self.got = b""

    def dataReceived(self, data: bytes) -> None:
        self.got += data
        if len(self.got) >= self.want and not self.done.called:
            self.done.callback(self.got)


class SendNowTests(unittest.TestCase):
    @defer.inlineCallbacks
    def _pair(self, want: int) -> Any:
        """
        A connected TCP client transport on loopback, and a Deferred that
        fires with the first C{want} bytes the server side receives.
        """
        received: defer.Deferred[bytes] = defer.Deferred()
        factory = protocol.Factory.forProtocol(lambda: _Collect(want, received))
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        client = yield protocol.ClientCreator(reactor, protocol.Protocol).connectTCP(
            "127.0.0.1", port.getHost().port
        )
        self.addCleanup(client.transport.abortConnection)
        return client.transport, received

    @defer.inlineCallbacks
    def test_idleConnectionSendsAtOnce(self) -> Any:
        """
        Nothing is left in the transport's buffer: the socket took the bytes
        during the call, and the peer gets them.
        """
        transport, received = yield self._pair(5)
        sendNow(transport, b"hello")
        self.assertEqual(transport.dataBuffer, b"")
        self.assertEqual(transport._tempDataLen, 0)
        self.assertEqual((yield received), b"hello")

    @defer.inlineCallbacks
    def test_neverOvertakesBufferedBytes(self) -> Any:
        """
        Bytes written through C{transport.write} and not yet sent stay ahead:
        the later bytes are buffered behind them.
        """
        transport, received = yield self._pair(6)
        transport.write(b"abc")
        sendNow(transport, b"def")
        self.assertEqual(transport._tempDataLen, 6)
        self.assertEqual((yield received), b"abcdef")

    @defer.inlineCallbacks
    def test_bigWriteKeepsTheRest(self) -> Any:
        """
        More than the socket takes at once: what it didn't take is buffered,
        and every byte arrives in order.
        """
        data = bytes(range(256)) * 40_000  # 10 MB: more than a socket buffer
        transport, received = yield self._pair(len(data))
        sendNow(transport, data)
        self.assertGreater(transport._tempDataLen, 0)
        self.assertEqual((yield received), data)

    @defer.inlineCallbacks
    def test_closingConnectionWritesLater(self) -> Any:
        """
        A connection being closed gets the bytes through its own write,
        which sends them before it closes.
        """
        transport, received = yield self._pair(4)
        transport.write(b"ab")
        transport.loseConnection()
        sendNow(transport, b"cd")
        self.assertEqual((yield received), b"abcd")

    def test_otherTransportsWrite(self) -> None:
        """
        A transport that isn't a plain TCP connection (TLS, a test double)
        gets an ordinary C{write}.
        """
        transport = StringTransport()
        sendNow(transport, b"xyz")
        self.assertEqual(transport.value(), b"xyz")
