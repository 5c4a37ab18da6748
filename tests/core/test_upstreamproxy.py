"""
The upstream proxy's pure parts (L{netlog.core.upstreamproxy}) and the
handshake of a tunnel through it (L{netlog.net.viaproxy}), in memory.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.internet.protocol import Protocol
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.upstreamproxy import (
    ConnectAnswer,
    UpstreamProxy,
    UpstreamProxyFailed,
    UpstreamProxyRefused,
    absoluteTarget,
    connectRequest,
    parseCredentials,
    parseUpstreamProxy,
    readConnectAnswer,
)
from netlog.net.connect import describeFailure, failureMarks
from netlog.net.viaproxy import connectVia


class ParseTests(SynchronousTestCase):
    def test_proxy(self) -> None:
        """
        C{http://HOST:PORT} is the one form taken; an IPv6 address is in
        brackets; a trailing slash is allowed.
        """
        self.assertEqual(parseUpstreamProxy("http://127.0.0.1:3128"), ("127.0.0.1", 3128))
        self.assertEqual(parseUpstreamProxy("HTTP://Proxy.Example:8080/"), ("proxy.example", 8080))
        self.assertEqual(parseUpstreamProxy("http://[::1]:3128"), ("::1", 3128))

    def test_badProxy(self) -> None:
        """
        Anything else is refused with a line saying what to write; an
        https:// proxy is refused as not supported.
        """
        for value in ("127.0.0.1:3128", "socks5://h:1", "http://h", "http://h:0", "http://h:x", "http://u:p@h:1",
                      "http://h:1/p", "http://::1:3128", "http://[::1]", "http://", ""):
            with self.assertRaises(ValueError, msg=value) as caught:
                parseUpstreamProxy(value)
            self.assertIn("--upstream-proxy", str(caught.exception))
        with self.assertRaises(ValueError) as caught:
            parseUpstreamProxy("https://h:443")
        self.assertIn("not supported", str(caught.exception))

    def test_credentials(self) -> None:
        """
        One line C{user:password} (the password may hold colons) is Basic
        credentials; an empty file, two lines, or no colon are refused,
        without the secret in the message.
        """
        self.assertEqual(parseCredentials("netlog:pa:ss\n"), b"Basic bmV0bG9nOnBhOnNz")
        for text in ("", "\n", "a:b\nc:d\n", "secretwithoutcolon", ":nouser"):
            with self.assertRaises(ValueError) as caught:
                parseCredentials(text)
            self.assertNotIn("secret", str(caught.exception))

    def test_secretNotInRepr(self) -> None:
        """
        An upstream proxy's C{repr} leaves its credentials out.
        """
        proxy = UpstreamProxy("127.0.0.1", 3128, b"Basic c2VjcmV0")
        self.assertNotIn("c2VjcmV0", repr(proxy))
        self.assertEqual(proxy.label, "127.0.0.1:3128")
        self.assertEqual(UpstreamProxy("::1", 3128).label, "[::1]:3128")


class MessageTests(SynchronousTestCase):
    def test_connectRequest(self) -> None:
        """
        The CONNECT names the host and port, with C{Proxy-Authorization}
        when there are credentials.
        """
        self.assertEqual(connectRequest("a.test", 443, None),
                         b"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n")
        self.assertEqual(connectRequest("::1", 8443, b"Basic eA=="),
                         b"CONNECT [::1]:8443 HTTP/1.1\r\nHost: [::1]:8443\r\nProxy-Authorization: Basic eA==\r\n\r\n")

    def test_absoluteTarget(self) -> None:
        """
        A plain request's target goes in absolute-form, the default port
        left out.
        """
        self.assertEqual(absoluteTarget("a.test", 80, b"/x?y=1"), b"http://a.test/x?y=1")
        self.assertEqual(absoluteTarget("a.test", 8000, b"http://a.test:8000/x"), b"http://a.test:8000/x")

    def test_readConnectAnswer(self) -> None:
        """
        The answer's head is read once whole; what follows it is the
        tunnel's; an answer that isn't HTTP, or a head too big, is refused.
        """
        self.assertIsNone(readConnectAnswer(b"HTTP/1.1 200 Connection established\r\n"))
        answer = readConnectAnswer(b"HTTP/1.1 200 Connection established\r\n\r\nhello")
        self.assertEqual(answer, ConnectAnswer(200, "Connection established", b"hello"))
        assert answer is not None
        self.assertTrue(answer.tunnel)
        refused = readConnectAnswer(b"HTTP/1.0 407 Proxy Authentication Required\r\nX: y\r\n\r\n")
        assert refused is not None
        self.assertEqual((refused.status, refused.tunnel), (407, False))
        for data in (b"SSH-2.0-OpenSSH\r\n", b"HTTP/1.1 2000 x\r\n\r\n", b"HTTP/1.1 " + b"x" * 70_000):
            with self.assertRaises(ValueError):
                readConnectAnswer(data)


class _Server(Protocol):
    def __init__(self) -> None:
        self.received = b""
        self.made = False

    def connectionMade(self) -> None:
        self.made = True

    def dataReceived(self, data: bytes) -> None:
        self.received += data


class TunnelHandshakeTests(SynchronousTestCase):
    """
    L{connectVia} against a fake upstream proxy: a memory reactor and a
    string transport.
    """

    def setUp(self) -> None:
        memory: Any = MemoryReactorClock()
        self.reactor = memory
        self.connected: list[Any] = []
        self.failed: list[Failure] = []
        self.proxy = UpstreamProxy("127.0.0.1", 3128, b"Basic eA==")
        connectVia(self.reactor, self.proxy, "127.0.0.1", "a.test", 443, _Server, self.connected.append,
                   self.failed.append, timeout=5.0)
        host, port, factory, _, _ = self.reactor.tcpClients[0]
        self.assertEqual((host, port), ("127.0.0.1", 3128))
        asking: Any = factory.buildProtocol(None)
        self.asking = asking
        self.transport = StringTransport()
        self.transport.protocol = self.asking  # type: ignore[attr-defined]
        self.asking.makeConnection(self.transport)

    def test_tunnel(self) -> None:
        """
        The CONNECT goes with netlog's credentials; on C{200} the caller's
        protocol takes the transport over, and gets what followed the head.
        """
        self.assertEqual(self.transport.value(), connectRequest("a.test", 443, b"Basic eA=="))
        self.asking.dataReceived(b"HTTP/1.1 200 OK\r\n\r\nearly")
        [server] = self.connected
        self.assertTrue(server.made)
        self.assertIs(self.transport.protocol, server)  # type: ignore[attr-defined]
        self.assertEqual(server.received, b"early")
        self.assertEqual(self.failed, [])
        self.reactor.advance(10)
        self.assertEqual(self.failed, [])

    def test_refused(self) -> None:
        """
        Any other status fails the connection with L{UpstreamProxyRefused}:
        the browser's status is the proxy's, and the entry is marked.
        """
        self.asking.dataReceived(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
        [failure] = self.failed
        self.assertIsInstance(failure.value, UpstreamProxyRefused)
        self.assertEqual(describeFailure(failure), (
            "the upstream proxy 127.0.0.1:3128 refused the tunnel: 407 Proxy Authentication Required", 407))
        self.assertEqual(failureMarks(failure), {"_upstreamProxy": {"proxy": "127.0.0.1:3128", "status": 407}})
        self.assertTrue(self.transport.disconnecting)
        self.assertEqual(self.connected, [])

    def test_closedBeforeAnswer(self) -> None:
        """
        The proxy closing before it answers is a 502 naming it.
        """
        self.asking.connectionLost(Failure(error.ConnectionDone()))
        [failure] = self.failed
        self.assertIsInstance(failure.value, UpstreamProxyFailed)
        self.assertEqual(describeFailure(failure)[1], 502)
        self.assertIsNone(failureMarks(failure))

    def test_silent(self) -> None:
        """
        No answer within the timeout is a 504, and the connection is cut.
        """
        self.reactor.advance(5)
        [failure] = self.failed
        self.assertEqual(describeFailure(failure)[1], 504)

    def test_notHTTP(self) -> None:
        """
        An answer that isn't HTTP is a 502.
        """
        self.asking.dataReceived(b"SSH-2.0-x\r\n")
        [failure] = self.failed
        self.assertEqual(describeFailure(failure)[1], 502)

    def test_unreachable(self) -> None:
        """
        A proxy that refuses the connection is a 502 naming it.
        """
        failed: list[Failure] = []
        connectVia(self.reactor, self.proxy, "127.0.0.1", "a.test", 443, _Server, self.connected.append,
                   failed.append, timeout=5.0)
        factory = self.reactor.tcpClients[1][2]
        factory.clientConnectionFailed(None, Failure(error.ConnectionRefusedError()))  # type: ignore[arg-type]
        [failure] = failed
        self.assertEqual(describeFailure(failure),
                         ("the upstream proxy 127.0.0.1:3128 refused the connection", 502))
