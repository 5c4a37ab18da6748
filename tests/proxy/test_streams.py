"""
The seam between an exchange and the browser: every protocol toward the
browser provides L{IBrowserStream}, so the exchange carries its answer the
same way over each.
"""

from __future__ import annotations

from twisted.internet.address import IPv4Address
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from netlog.net.policy import DestinationPolicy
from netlog.net.resolve import Resolver
from netlog.proxy.browser import BrowserConnection
from netlog.proxy.contracts import IBrowserStream
from netlog.proxy.h2 import H2Connection, H2Stream
from netlog.proxy.service import ProxyService
from netlog.standin.mode import StandinMode
from tests.standin.test_memory import RecordingWriter


def memoryProxy() -> ProxyService:
    """
    A stand-in's engine on a memory reactor, its log kept in memory.
    """
    reactor = MemoryReactorClock()
    return ProxyService(
        StandinMode(), RecordingWriter(), reactor,
        Resolver(reactor, {"x.test": "192.0.2.10"}, resolveOnly=True),
        DestinationPolicy(), ["forward"], connectTimeout=5, idleTimeout=60, headerTimeout=10,
    )


class ProvidesTests(SynchronousTestCase):
    def test_http1(self) -> None:
        """
        An HTTP/1.1 browser connection provides L{IBrowserStream}, and names
        its protocol for the log as C{HTTP/1.1}.
        """
        [(_, _, factory)] = memoryProxy().listeners
        browser = factory.buildProtocol(None)
        assert isinstance(browser, BrowserConnection)
        browser.makeConnection(StringTransport(hostAddress=IPv4Address("TCP", "127.0.0.1", 3128),
                                               peerAddress=IPv4Address("TCP", "127.0.0.1", 50000)))
        self.assertTrue(verifyObject(IBrowserStream, browser))
        self.assertEqual(browser.version, b"HTTP/1.1")

    def test_http2(self) -> None:
        """
        A stream of an HTTP/2 connection provides L{IBrowserStream}, names
        its protocol C{HTTP/2}, and shares its connection's id.
        """
        [(_, _, factory)] = memoryProxy().listeners
        browser = factory.buildProtocol(None)
        browser.makeConnection(StringTransport(hostAddress=IPv4Address("TCP", "127.0.0.1", 3128),
                                               peerAddress=IPv4Address("TCP", "127.0.0.1", 50000)))
        connection = H2Connection(browser, browser.proxy, 120.0)
        stream = H2Stream(connection, 1)
        self.assertTrue(verifyObject(IBrowserStream, stream))
        self.assertEqual(stream.version, b"HTTP/2")
        self.assertEqual(stream.connectionId, browser.connectionId)
