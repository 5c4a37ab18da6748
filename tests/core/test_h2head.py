"""
Reading an HTTP/2 request's fields (RFC 9113 8.1-8.3): tables of decoded
fields in, a head (as logged and as relayed to HTTP/1.1) or the reason it is
malformed out.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.h2head import MAX_HEADER_LIST_SIZE, Malformed, contentLength, readRequest, withChunkedBody
from netlog.core.http1 import RequestHead

GET = [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"shop.test"), (b":path", b"/a?b=1")]


class ReadRequestTests(SynchronousTestCase):
    def test_good(self) -> None:
        """
        A request's head keeps its fields as sent (pseudo-fields first),
        names its host and port, and relays as HTTP/1.1: C{host} first from
        C{:authority}, no pseudo-fields, cookie crumbs joined.
        """
        fields = GET + [(b"accept", b"*/*"), (b"cookie", b"a=1"), (b"cookie", b"b=2")]
        head = readRequest(fields)
        assert isinstance(head, RequestHead)
        self.assertEqual((head.method, head.target, head.version), (b"GET", b"/a?b=1", b"HTTP/2"))
        self.assertEqual(head.headers, fields)
        self.assertEqual((head.host, head.port), ("shop.test", None))
        self.assertEqual(head.relayed, [(b"host", b"shop.test"), (b"accept", b"*/*"), (b"cookie", b"a=1; b=2")])

    def test_authorityWithPort(self) -> None:
        """
        C{:authority} with a port names that port; without C{:authority},
        C{host} or the tunnel's authority is used.
        """
        head = readRequest([(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"Shop.test:8443"),
                            (b":path", b"/")])
        assert isinstance(head, RequestHead)
        self.assertEqual((head.host, head.port), ("shop.test", 8443))
        tunnel = readRequest([(b":method", b"GET"), (b":scheme", b"https"), (b":path", b"/")], "shop.test:443")
        assert isinstance(tunnel, RequestHead)
        self.assertEqual((tunnel.host, tunnel.port), ("shop.test", 443))

    def test_malformed(self) -> None:
        """
        Each request RFC 9113 makes malformed is refused with a reason that
        names what is wrong.
        """
        table = [
            (GET + [(b"X-Upper", b"1")], "lowercase"),
            (GET + [(b"connection", b"keep-alive")], "connection-specific"),
            (GET + [(b"transfer-encoding", b"chunked")], "connection-specific"),
            (GET + [(b"upgrade", b"websocket")], "connection-specific"),
            (GET + [(b"te", b"gzip")], "te may only"),
            (GET + [(b"x", b"a\r\nb")], "forbidden character"),
            (GET + [(b"x", b" lead")], "forbidden character"),
            (GET + [(b":method", b"GET")], "repeated"),
            ([(b"accept", b"*/*")] + GET, "after a regular field"),
            (GET + [(b":status", b"200")], "not a request pseudo-header"),
            (GET[:1] + GET[2:], "lacks :scheme or :path"),
            (GET[1:], "no :method"),
            ([(b":method", b"CONNECT"), (b":authority", b"shop.test:443")], "CONNECT"),
            (GET[:3] + [(b":path", b"a")], "absolute path"),
            ([(b":method", b"GET"), (b":scheme", b"ftp"), (b":authority", b"a"), (b":path", b"/")], "scheme"),
            (GET + [(b"host", b"other.test")], "disagree"),
            ([(b":method", b"GET"), (b":scheme", b"https"), (b":path", b"/")], "no valid authority"),
            (GET + [(b"x-%d" % i, b"v" * 1000) for i in range(MAX_HEADER_LIST_SIZE // 1000)], "bytes"),
        ]
        for fields, why in table:
            read = readRequest(fields)
            assert isinstance(read, Malformed), (fields, read)
            self.assertIn(why, read.reason)

    def test_malformedKeepsWhatWasRead(self) -> None:
        """
        A malformed request still says its method, path and authority where
        they were read, for the refusal's log line.
        """
        read = readRequest(GET + [(b"X-Upper", b"1")])
        assert isinstance(read, Malformed)
        self.assertEqual((read.method, read.path, read.authority), ("GET", "/a?b=1", "shop.test"))

    def test_contentLength(self) -> None:
        """
        C{content-length} is one number or the request is malformed; a body
        of no given length is relayed in chunks.
        """
        head = readRequest(GET + [(b"content-length", b"12")])
        assert isinstance(head, RequestHead)
        self.assertEqual(contentLength(head), 12)
        for bad in (b"1x", b"-1", b""):
            head = readRequest(GET + [(b"content-length", bad)])
            assert isinstance(head, RequestHead)
            self.assertIsInstance(contentLength(head), Malformed)
        head = readRequest(GET + [(b"content-length", b"1"), (b"content-length", b"2")])
        assert isinstance(head, RequestHead)
        self.assertIsInstance(contentLength(head), Malformed)
        head = readRequest(GET)
        assert isinstance(head, RequestHead)
        self.assertIsNone(contentLength(head))
        chunked = withChunkedBody(head)
        self.assertEqual(chunked.relayed[-1], (b"transfer-encoding", b"chunked"))  # type: ignore[index]
