"""
The seam between an exchange and where its answer comes from: an upstream
connection and a recording both provide L{IAnswerSource}, so the exchange
reads its answer the same way from each.
"""

from __future__ import annotations

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from netlog.core.http1 import RequestHead, RequestReader
from netlog.core.replay import MatchRules
from netlog.proxy.contracts import IAnswerSource
from netlog.proxy.mode import IAnswers
from netlog.proxy.replay import Replay
from netlog.proxy.upstream import UpstreamProtocol
from tests.proxy.recordings import writeLog


def getHead(url: str = "http://shop.test/") -> RequestHead:
    [head, *_] = RequestReader(forwardProxy=True).feed(b"GET " + url.encode() + b" HTTP/1.1\r\nHost: shop.test\r\n\r\n")
    assert isinstance(head, RequestHead)
    return head


class ProvidesTests(SynchronousTestCase):
    def test_upstream(self) -> None:
        """
        An upstream connection provides L{IAnswerSource}, and goes back to
        the pool when done with.
        """
        upstream = UpstreamProtocol(MemoryReactorClock(), ("http", "127.0.0.1", 80, None))
        self.assertTrue(verifyObject(IAnswerSource, upstream))
        self.assertTrue(upstream.pooled)

    def test_recording(self) -> None:
        """
        A recording provides L{IAnswers}, and the source it makes for a
        request provides L{IAnswerSource}, never pooled.
        """
        path = writeLog(self.mktemp(), [("GET", "http://shop.test/", 200, b"hello")])
        replay = Replay(path, MatchRules())
        self.assertTrue(verifyObject(IAnswers, replay))
        source = replay.sourceFor(MemoryReactorClock(), getHead(), "http://shop.test/")
        self.assertTrue(verifyObject(IAnswerSource, source))
        self.assertFalse(source.pooled)
