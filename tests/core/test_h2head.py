"""
Reading an HTTP/2 request's fields (RFC 9113 8.1-8.3): tables of decoded
fields in, a head (as logged and as relayed to HTTP/1.1) or the reason it is
malformed out.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.h2head import (
    MAX_HEADER_LIST_SIZE,
    Malformed,
    chunk,
    contentLength,
    lastChunk,
    readAnswer,
    readRequest,
    upstreamRequest,
    withChunkedBody,
)
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


class UpstreamRequestTests(SynchronousTestCase):
    """
    A request's fields as they go to an HTTP/2 upstream.
    """

    def _block(self, raw: bytes, extra: list[tuple[bytes, bytes]] = []) -> list[tuple[bytes, bytes]]:  # noqa: B006
        from netlog.core.http1 import HeadFields, RequestReader

        [head, *_] = RequestReader(forwardProxy=True).feed(raw)
        assert isinstance(head, RequestHead)
        fields = HeadFields(head.version, head.headers)
        return upstreamRequest(head, fields, fields.relayDrop, extra)

    def test_pseudoFields(self) -> None:
        """
        The pseudo-fields come first: the method, C{https}, C{:authority}
        from C{Host}, the target in origin-form; the rest lowercased, in
        order, without C{Host}.
        """
        block = self._block(b"GET http://shop.test:8443/a?b=1 HTTP/1.1\r\nHost: shop.test:8443\r\n"
                            b"Accept: */*\r\nX-Two: 2\r\n\r\n")
        self.assertEqual(block, [(b":method", b"GET"), (b":scheme", b"https"), (b":authority", b"shop.test:8443"),
                                 (b":path", b"/a?b=1"), (b"accept", b"*/*"), (b"x-two", b"2")])

    def test_connectionSpecific(self) -> None:
        """
        No field about one HTTP/1.1 connection goes (those C{Connection}
        names too); C{te} goes only as C{trailers}, and C{extra} fields
        follow.
        """
        block = self._block(b"POST http://shop.test/up HTTP/1.1\r\nHost: shop.test\r\nConnection: keep-alive, x-hop\r\n"
                            b"Keep-Alive: 5\r\nProxy-Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n"
                            b"Upgrade: h2c\r\nX-Hop: 1\r\nTE: trailers\r\nX-Kept: yes\r\n\r\n",
                            [(b"Via", b"1.1 netlog"), (b"Connection", b"close")])
        self.assertEqual(block[4:], [(b"te", b"trailers"), (b"x-kept", b"yes"), (b"via", b"1.1 netlog")])
        block = self._block(b"GET http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nTE: gzip\r\n\r\n")
        self.assertNotIn(b"te", [name for name, _ in block])


class ReadAnswerTests(SynchronousTestCase):
    """
    An HTTP/2 answer's head, read as the exchange reads an answer.
    """

    def test_chunkedForHTTP11(self) -> None:
        """
        An answer without C{content-length} is framed in chunks for an
        HTTP/1.1 browser; the reason phrase is the status's usual one.
        """
        read = readAnswer([(b":status", b"200"), (b"content-type", b"text/plain")], b"GET")
        assert not isinstance(read, str)
        head, chunked = read
        self.assertTrue(chunked)
        self.assertEqual((head.status, head.reason, head.version, head.interim), (200, b"OK", b"HTTP/2", False))
        self.assertEqual(head.headers, [(b"content-type", b"text/plain"), (b"transfer-encoding", b"chunked")])
        self.assertEqual(chunk(b"abc"), b"3\r\nabc\r\n")
        self.assertEqual(lastChunk([(b"grpc-status", b"0")]), b"0\r\ngrpc-status: 0\r\n\r\n")

    def test_lengthOrNoBody(self) -> None:
        """
        An answer with C{content-length}, a C{204}, a C{304} and the answer
        to a C{HEAD} are not chunked; a 1xx is interim.
        """
        for fields, method in (([(b":status", b"200"), (b"content-length", b"3")], b"GET"),
                               ([(b":status", b"204")], b"GET"), ([(b":status", b"304")], b"GET"),
                               ([(b":status", b"200")], b"HEAD")):
            read = readAnswer(fields, method)
            assert not isinstance(read, str)
            self.assertFalse(read[1], fields)
            self.assertNotIn(b"transfer-encoding", [n for n, _ in read[0].headers])
        read = readAnswer([(b":status", b"103"), (b"link", b"</a.css>")], b"GET")
        assert not isinstance(read, str)
        self.assertTrue(read[0].interim)

    def test_malformed(self) -> None:
        """
        An answer without a valid C{:status}, or with a request's
        pseudo-field, can't be read.
        """
        self.assertIsInstance(readAnswer([(b"content-length", b"0")], b"GET"), str)
        self.assertIsInstance(readAnswer([(b":status", b"2000")], b"GET"), str)
        self.assertIsInstance(readAnswer([(b":status", b"200"), (b":path", b"/")], b"GET"), str)
