"""
Tables of raw bytes in, events out, for L{netlog.core.http1}.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.http1 import (
    MAX_FIELDS,
    MAX_HEAD,
    MAX_REQUEST_LINE,
    Body,
    EndOfMessage,
    Event,
    Incomplete,
    Refused,
    RequestHead,
    RequestReader,
    ResponseHead,
    ResponseReader,
    Unparsable,
    hopByHop,
    keepAlive,
    serializeHead,
)

HOST = b"Host: a.test\r\n"


def feedAll(reader: RequestReader | ResponseReader, data: bytes, eof: bool = False) -> list[Event]:
    events = reader.feed(data)
    if eof:
        events += reader.feedEOF()
    return events


def summary(events: list[Event]) -> list[object]:
    """
    The events with consecutive bodies merged, heads reduced to their start
    line, for comparing what was read however the bytes were cut.
    """
    out: list[object] = []
    for event in events:
        if isinstance(event, Body):
            if out and isinstance(out[-1], tuple) and out[-1][0] == "body":
                out[-1] = ("body", out[-1][1] + event.data)
            else:
                out.append(("body", event.data))
        elif isinstance(event, RequestHead):
            out.append(("request", event.method, event.target, event.headers))
        elif isinstance(event, ResponseHead):
            out.append(("response", event.status, event.interim, event.headers))
        elif isinstance(event, EndOfMessage):
            out.append(("end", event.trailers))
        else:
            out.append(event)
    return out


def rawOf(events: list[Event]) -> bytes:
    return b"".join(
        e.raw for e in events if isinstance(e, (RequestHead, ResponseHead, Body, EndOfMessage))
    )


# Requests refused on a forward proxy port: (what, bytes, status).
FORWARD_REFUSED: list[tuple[str, bytes, int]] = [
    # Framing that could be read two ways.
    (
        "CL with TE",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
    ),
    (
        "TE with CL",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
        400,
    ),
    ("differing CL", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n", 400),
    # A Connection header naming a framing field: dropped on the way up, the
    # rest of the body would be read upstream as a second request.
    (
        "Connection names Content-Length",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Connection: Content-Length\r\nContent-Length: 3\r\n\r\nabc",
        400,
    ),
    (
        "Connection names Host",
        b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Connection: keep-alive, host\r\n\r\n",
        400,
    ),
    (
        "Connection names Transfer-Encoding",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    ),
    ("differing CL in a list", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 3, 4\r\n\r\n", 400),
    ("CL plus sign", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: +3\r\n\r\n", 400),
    ("CL minus sign", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: -3\r\n\r\n", 400),
    ("CL space inside", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 1 2\r\n\r\n", 400),
    ("CL hex", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 0x10\r\n\r\n", 400),
    ("CL letters", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 1a\r\n\r\n", 400),
    ("CL empty", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length:\r\n\r\n", 400),
    ("CL trailing comma", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 3,\r\n\r\n", 400),
    (
        "CL overflow",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 99999999999999999999\r\n\r\n",
        400,
    ),
    (
        "CL just over 2**63-1",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 9223372036854775808\r\n\r\n",
        400,
    ),
    ("TE unknown", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: foo\r\n\r\n", 501),
    ("TE identity", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: identity\r\n\r\n", 501),
    ("TE gzip, chunked", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: gzip, chunked\r\n\r\n", 501),
    ("TE chunked, gzip", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked, gzip\r\n\r\n", 400),
    ("TE gzip alone", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: gzip\r\n\r\n", 400),
    ("TE chunked twice", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked, chunked\r\n\r\n", 400),
    ("TE with an empty element", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked,\r\n\r\n", 400),
    ("TE with an empty element first", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: , chunked\r\n\r\n", 400),
    (
        "TE chunked in two fields",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
        400,
    ),
    ("TE empty", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding:\r\n\r\n", 400),
    ("TE with HTTP/1.0", b"POST http://a.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    ("TE quoted", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b'Transfer-Encoding: "chunked"\r\n\r\n', 400),
    # Bad chunks.
    ("chunk size not hex", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    ("chunk size empty", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n\r\n", 400),
    ("chunk size signed", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n-1\r\n", 400),
    ("chunk size 0x", b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n0x5\r\n", 400),
    (
        "chunk size overflow",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n10000000000000000\r\n",
        400,
    ),
    (
        "chunk size with a trailing space",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "chunk ext without a name",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n5;\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    # Whitespace between the size and an extension: the grammar's BWS, which
    # a recipient may read and a sender must not send; h11 refuses it.
    (
        "chunk ext after a space",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n5 ;a\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "chunk ext after a tab",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n0\t;a=b\r\n\r\n",
        400,
    ),
    (
        "chunk ext with a bare CR",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n5;a\rb\r\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "chunk line bare LF",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
        400,
    ),
    (
        "chunk data too long",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhelloX\r\n0\r\n\r\n",
        400,
    ),
    (
        "chunk data then bare LF",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
        400,
    ),
    (
        "chunk line too long",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n5;a=" + b"b" * 5000,
        400,
    ),
    (
        "trailer with obs-fold",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n0\r\nA: b\r\n c\r\n\r\n",
        400,
    ),
    (
        "trailer bare LF",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n0\r\nA: b\n\r\n",
        400,
    ),
    # Field syntax.
    ("space before colon", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo : bar\r\n\r\n", 400),
    ("tab before colon", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo\t: bar\r\n\r\n", 400),
    ("space before colon in Host", b"GET http://a.test/ HTTP/1.1\r\nHost : a.test\r\n\r\n", 400),
    ("obs-fold", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo: bar\r\n baz\r\n\r\n", 400),
    ("obs-fold with tab", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo: bar\r\n\tbaz\r\n\r\n", 400),
    ("fold right after the request line", b"GET http://a.test/ HTTP/1.1\r\n Foo: bar\r\n" + HOST + b"\r\n", 400),
    ("line without colon", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo bar\r\n\r\n", 400),
    ("empty name", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b": bar\r\n\r\n", 400),
    ("name with a slash", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Fo/o: bar\r\n\r\n", 400),
    ("NUL in a value", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo: b\x00ar\r\n\r\n", 400),
    ("NUL in a name", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"F\x00oo: bar\r\n\r\n", 400),
    ("control byte in a value", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo: b\x01ar\r\n\r\n", 400),
    ("DEL in a value", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo: b\x7far\r\n\r\n", 400),
    ("bare CR in a value", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo: b\rar\r\n\r\n", 400),
    ("bare CR ending a line", b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"Foo: bar\r\r\n\r\n", 400),
    ("bare LF ending a field", b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\nFoo: bar\r\n\r\n", 400),
    ("bare LF ending the head", b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\n", 400),
    ("bare LFs only", b"GET http://a.test/ HTTP/1.1\nHost: a.test\n\n", 400),
    ("bare LF inside a value", b"GET http://a.test/ HTTP/1.1\r\nFoo: a\nb\r\n" + HOST + b"\r\n", 400),
    (
        "bare LF starting the next request, after a body ending in CR",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Content-Length: 1\r\n\r\n\r\nGET http://a.test/ HTTP/1.1\r\n" + HOST + b"\r\n",
        400,
    ),
    # The request line.
    ("two spaces", b"GET  http://a.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("trailing space", b"GET http://a.test/ HTTP/1.1 \r\n" + HOST + b"\r\n", 400),
    ("leading space", b" GET http://a.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("tab separator", b"GET\thttp://a.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("four parts", b"GET http://a.test/ x HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("one part", b"GET\r\n\r\n", 400),
    ("method not a token", b"G(T http://a.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("NUL in target", b"GET http://a.test/\x00 HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("DEL in target", b"GET http://a.test/\x7f HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("lowercase version", b"GET http://a.test/ http/1.1\r\n" + HOST + b"\r\n", 400),
    ("long version", b"GET http://a.test/ HTTP/1.10\r\n" + HOST + b"\r\n", 400),
    ("no minor version", b"GET http://a.test/ HTTP/1\r\n" + HOST + b"\r\n", 400),
    ("bare LF after the request line", b"GET http://a.test/ HTTP/1.1\n", 400),
    ("bare CR in the request line", b"GET http://a.test/\r HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("HTTP/0.9", b"GET /\r\n", 505),
    ("HTTP/0.9 absolute", b"GET http://a.test/\r\n", 505),
    ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
    ("HTTP/2.0", b"GET http://a.test/ HTTP/2.0\r\n" + HOST + b"\r\n", 505),
    ("HTTP/1.2", b"GET http://a.test/ HTTP/1.2\r\n" + HOST + b"\r\n", 505),
    ("HTTP/0.9 spelled", b"GET http://a.test/ HTTP/0.9\r\n" + HOST + b"\r\n", 505),
    ("HTTP/3.0", b"GET http://a.test/ HTTP/3.0\r\n" + HOST + b"\r\n", 505),
    # Targets on a forward port.
    ("origin-form", b"GET / HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("asterisk", b"OPTIONS * HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("ftp URL", b"GET ftp://a.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("URL with userinfo", b"GET http://u:p@a.test/ HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("URL with fragment", b"GET http://a.test/#x HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("URL without host", b"GET http:/// HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("URL with a bad port", b"GET http://a.test:99999/ HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("URL with letters in port", b"GET http://a.test:8o/ HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("not a URL", b"GET a.test/x HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("Host disagrees", b"GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", 400),
    ("Host port disagrees", b"GET http://a.test/ HTTP/1.1\r\nHost: a.test:8080\r\n\r\n", 400),
    ("Host default port disagrees", b"GET http://a.test:8080/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400),
    ("two Hosts", b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n", 400),
    ("two Hosts differing", b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n", 400),
    ("no Host in HTTP/1.1", b"GET http://a.test/ HTTP/1.1\r\n\r\n", 400),
    ("empty Host", b"GET http://a.test/ HTTP/1.1\r\nHost:\r\n\r\n", 400),
    ("Host with a path", b"GET http://a.test/ HTTP/1.1\r\nHost: a.test/x\r\n\r\n", 400),
    ("Host with userinfo", b"GET http://a.test/ HTTP/1.1\r\nHost: u@a.test\r\n\r\n", 400),
    ("CONNECT without port", b"CONNECT a.test HTTP/1.1\r\nHost: a.test\r\n\r\n", 400),
    ("CONNECT with empty port", b"CONNECT a.test: HTTP/1.1\r\nHost: a.test\r\n\r\n", 400),
    ("CONNECT to a URL", b"CONNECT http://a.test:443/ HTTP/1.1\r\nHost: a.test\r\n\r\n", 400),
    ("CONNECT origin-form", b"CONNECT / HTTP/1.1\r\nHost: a.test\r\n\r\n", 400),
    ("CONNECT port 0", b"CONNECT a.test:0 HTTP/1.1\r\n\r\n", 400),
    ("CONNECT port too big", b"CONNECT a.test:65536 HTTP/1.1\r\n\r\n", 400),
    # Limits.
    ("request line over 8 KiB", b"GET http://a.test/" + b"a" * MAX_REQUEST_LINE + b" HTTP/1.1\r\n" + HOST + b"\r\n", 414),
    ("request line over 8 KiB, unfinished", b"GET http://a.test/" + b"a" * MAX_REQUEST_LINE, 414),
    (
        "head over 64 KiB",
        b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 1000) for i in range(70)) + b"\r\n",
        431,
    ),
    (
        "head over 64 KiB, unfinished",
        b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"X: " + b"v" * MAX_HEAD,
        431,
    ),
    (
        "over 100 fields",
        b"GET http://a.test/ HTTP/1.1\r\n" + HOST + b"".join(b"X-%d: v\r\n" % (i,) for i in range(MAX_FIELDS)) + b"\r\n",
        431,
    ),
    (
        "trailers over 100 fields",
        b"POST http://a.test/ HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n\r\n0\r\n"
        + b"".join(b"X-%d: v\r\n" % (i,) for i in range(MAX_FIELDS + 1))
        + b"\r\n",
        431,
    ),
]

# Requests refused on a site port (origin-form allowed).
ORIGIN_REFUSED: list[tuple[str, bytes, int]] = [
    ("no Host", b"GET / HTTP/1.1\r\n\r\n", 400),
    ("asterisk with GET", b"GET * HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("absolute URL, Host disagrees", b"GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n", 400),
    ("two Hosts", b"GET / HTTP/1.1\r\nHost: a.test\r\nHost: a.test\r\n\r\n", 400),
    ("fragment", b"GET /x#y HTTP/1.1\r\n" + HOST + b"\r\n", 400),
    ("space before colon", b"GET / HTTP/1.1\r\nHost : a.test\r\n\r\n", 400),
    ("CL with TE", b"POST / HTTP/1.1\r\n" + HOST + b"Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    ("HTTP/0.9", b"GET /\r\n", 505),
]


class RefusedRequestTests(SynchronousTestCase):
    """
    Each malformed request is refused with its status, whether it comes
    whole or a byte at a time, and nothing after it is read.
    """

    def check(self, table: list[tuple[str, bytes, int]], forwardProxy: bool) -> None:
        for what, data, status in table:
            events = RequestReader(forwardProxy=forwardProxy).feed(data)
            self.assertTrue(events, what)
            last = events[-1]
            self.assertIsInstance(last, Refused, what)
            assert isinstance(last, Refused)
            self.assertEqual((what, last.status), (what, status))
            self.assertTrue(last.reason, what)
            self.assertFalse(any(isinstance(e, Refused) for e in events[:-1]), what)
            if len(data) < 20000:
                reader = RequestReader(forwardProxy=forwardProxy)
                pieces: list[Event] = []
                for i in range(len(data)):
                    pieces += reader.feed(data[i : i + 1])
                self.assertEqual(summary(pieces), summary(events), what)

    def test_forwardPort(self) -> None:
        """
        On a forward proxy port every request in the table is refused with
        its status.
        """
        self.check(FORWARD_REFUSED, forwardProxy=True)

    def test_sitePort(self) -> None:
        """
        Where origin-form is allowed, the rest of the rules hold.
        """
        self.check(ORIGIN_REFUSED, forwardProxy=False)

    def test_nothingAfterRefusal(self) -> None:
        """
        After a refusal, a valid request on the same connection is never
        read, and the reader drops what it is fed.
        """
        reader = RequestReader(forwardProxy=True)
        smuggled = b"GET http://a.test/admin HTTP/1.1\r\nHost: a.test\r\n\r\n"
        events = reader.feed(
            b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + smuggled
        )
        self.assertEqual(len(events), 1)
        self.assertIsInstance(events[0], Refused)
        self.assertEqual(reader.feed(smuggled), [])
        self.assertEqual(reader.feedEOF(), [])
        self.assertEqual(reader.leftover(), b"")

    def test_refusedInSecondMessage(self) -> None:
        """
        A good request is read, then a bad one on the same connection is
        refused.
        """
        events = RequestReader(forwardProxy=True).feed(
            b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"
            b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"
        )
        self.assertEqual([type(e) for e in events], [RequestHead, EndOfMessage, Refused])


class AcceptedRequestTests(SynchronousTestCase):
    """
    Valid requests are read exactly.
    """

    def test_absoluteGet(self) -> None:
        """
        An absolute-form GET gives its head with headers as sent, the URL,
        host and port, and the end of the message.
        """
        raw = b"GET http://A.test:8080/p?q=1 HTTP/1.1\r\nHost: a.TEST:8080\r\nX-Y:  v w \r\n\r\n"
        events = RequestReader(forwardProxy=True).feed(raw)
        self.assertEqual(
            events,
            [
                RequestHead(
                    b"GET",
                    b"http://A.test:8080/p?q=1",
                    b"HTTP/1.1",
                    [(b"Host", b"a.TEST:8080"), (b"X-Y", b"v w")],
                    raw,
                    "http://A.test:8080/p?q=1",
                    "a.test",
                    8080,
                ),
                EndOfMessage([], b""),
            ],
        )

    def test_urlForms(self) -> None:
        """
        An absolute URL without a path gets C{/}; the default port counts as
        equal to none in C{Host}; https URLs default to 443; IPv6 hosts
        lose their brackets in C{host}.
        """
        table = [
            (b"http://a.test", b"a.test", "http://a.test/", "a.test", 80),
            (b"http://a.test?x=1", b"a.test", "http://a.test/?x=1", "a.test", 80),
            (b"http://a.test:80/", b"a.test", "http://a.test:80/", "a.test", 80),
            (b"http://a.test/", b"a.test:80", "http://a.test/", "a.test", 80),
            (b"HTTP://a.test/", b"a.test", "http://a.test/", "a.test", 80),
            (b"https://a.test/x", b"a.test", "https://a.test/x", "a.test", 443),
            (b"http://[::1]:81/", b"[::1]:81", "http://[::1]:81/", "::1", 81),
            (b"http://127.0.0.1/", b"127.0.0.1", "http://127.0.0.1/", "127.0.0.1", 80),
        ]
        for target, host, url, hostName, port in table:
            events = RequestReader(forwardProxy=True).feed(
                b"GET " + target + b" HTTP/1.1\r\nHost: " + host + b"\r\n\r\n"
            )
            head = events[0]
            assert isinstance(head, RequestHead), (target, events)
            self.assertEqual((head.url, head.host, head.port), (url, hostName, port))

    def test_http10WithoutHost(self) -> None:
        """
        HTTP/1.0 needs no C{Host}.
        """
        events = RequestReader(forwardProxy=True).feed(b"GET http://a.test/ HTTP/1.0\r\n\r\n")
        self.assertIsInstance(events[0], RequestHead)
        self.assertIsInstance(events[1], EndOfMessage)

    def test_originForm(self) -> None:
        """
        Off a forward port, origin-form and C{OPTIONS *} are read; host and
        port come from C{Host}, the port defaulting by the reader's scheme.
        """
        events = RequestReader(forwardProxy=False, scheme="https").feed(
            b"GET /x HTTP/1.1\r\nHost: shop.test\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: shop.test:8443\r\n\r\n"
        )
        first, third = events[0], events[2]
        assert isinstance(first, RequestHead) and isinstance(third, RequestHead)
        self.assertEqual((first.url, first.host, first.port), (None, "shop.test", 443))
        self.assertEqual((third.host, third.port), ("shop.test", 8443))

    def test_contentLength(self) -> None:
        """
        A length-framed body is given as sent, in the pieces it came in,
        then the next request on the connection is read.
        """
        reader = RequestReader(forwardProxy=True)
        head = b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 10\r\n\r\n"
        events = reader.feed(head + b"01234")
        self.assertEqual(events[1:], [Body(b"01234", b"01234")])
        events = reader.feed(b"56789GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n")
        self.assertEqual(events[:2], [Body(b"56789", b"56789"), EndOfMessage([], b"")])
        self.assertIsInstance(events[2], RequestHead)
        self.assertTrue(reader.idle)

    def test_bodyNotCopied(self) -> None:
        """
        Body data of a length-framed message passes through as the very
        bytes fed (no copy) when a feed is all body.
        """
        reader = RequestReader(forwardProxy=True)
        reader.feed(b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 200000\r\n\r\n")
        piece = b"x" * 100000
        events = reader.feed(piece)
        body = events[0]
        assert isinstance(body, Body)
        self.assertIs(body.data, piece)
        self.assertIs(body.raw, piece)

    def test_serializeRoundTrip(self) -> None:
        """
        A head read, then built again without its hop-by-hop fields, reads
        back with every other field in order.
        """
        events = RequestReader(forwardProxy=True).feed(
            b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nProxy-Connection: keep-alive\r\n"
            b"Connection: X-Hop\r\nX-Hop: 1\r\nAccept: */*\r\nCookie: a=b\r\n\r\n"
        )
        head = events[0]
        assert isinstance(head, RequestHead)
        built = serializeHead(b"GET / HTTP/1.1", head.headers, drop=hopByHop(head.headers))
        again = RequestReader(forwardProxy=False).feed(built)[0]
        assert isinstance(again, RequestHead)
        self.assertEqual(again.headers, [(b"Host", b"a.test"), (b"Accept", b"*/*"), (b"Cookie", b"a=b")])

    def test_repeatedIdenticalLengths(self) -> None:
        """
        A request that repeats its Content-Length, even with the same value,
        is refused with 400 before its head is handed on; an answer's
        identical repeated values are read as one.
        """
        for fields in (b"Content-Length: 3, 3\r\n", b"Content-Length: 3\r\nContent-Length: 3\r\n"):
            events = RequestReader(forwardProxy=True).feed(
                b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\n" + fields + b"\r\nabc"
            )
            self.assertEqual(len(events), 1)
            refused = events[0]
            assert isinstance(refused, Refused)
            self.assertEqual((refused.status, refused.reason), (400, "repeated Content-Length (send it once)"))
            reader = ResponseReader()
            reader.expectResponseTo(b"GET")
            answer = reader.feed(b"HTTP/1.1 200 OK\r\n" + fields + b"\r\nabc")
            self.assertEqual(answer[1:], [Body(b"abc", b"abc"), EndOfMessage([], b"")])

    def test_zeroLength(self) -> None:
        """
        C{Content-Length: 0} (and leading zeros) are a message without body.
        """
        for value in (b"0", b"000"):
            events = RequestReader(forwardProxy=True).feed(
                b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: " + value + b"\r\n\r\n"
            )
            self.assertEqual(events[1:], [EndOfMessage([], b"")])

    def test_chunked(self) -> None:
        """
        A chunked body is decoded, extensions (per the grammar) skipped,
        trailers read; the raw bytes of all events are the bytes sent.
        """
        head = b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: Chunked\r\n\r\n"
        body = (
            b"5\r\nhello\r\n"
            b"6;name\r\n world\r\n"
            b"1; a = b ;c=\"q \\\" d\"\r\n!\r\n"
            b"00A\r\n0123456789\r\n"
            b"0;last=1\r\nExpires: never\r\nX-Sum:  abc \r\n\r\n"
        )
        events = RequestReader(forwardProxy=True).feed(head + body)
        self.assertEqual(
            summary(events)[1:],
            [("body", b"hello world!0123456789"), ("end", [(b"Expires", b"never"), (b"X-Sum", b"abc")])],
        )
        self.assertEqual(rawOf(events), head + body)

    def test_connect(self) -> None:
        """
        A CONNECT is read (host and port from its target), then the reader
        stops: the bytes after the head are the tunnel's.
        """
        reader = RequestReader(forwardProxy=True)
        head = b"CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n"
        events = reader.feed(head + b"\x16\x03\x01")
        self.assertEqual(
            events,
            [
                RequestHead(b"CONNECT", b"a.test:443", b"HTTP/1.1", [(b"Host", b"a.test:443")], head, None, "a.test", 443),
                EndOfMessage([], b""),
            ],
        )
        assert isinstance(events[0], RequestHead)
        self.assertTrue(events[0].isConnect)
        self.assertTrue(reader.paused)
        self.assertEqual(reader.feed(b"GET / HTTP/1.1\r\n\r\n"), [])
        self.assertEqual(reader.leftover(), b"\x16\x03\x01GET / HTTP/1.1\r\n\r\n")
        self.assertEqual(reader.leftover(), b"")

    def test_connectIPv6(self) -> None:
        """
        A CONNECT to a bracketed IPv6 address gives the address.
        """
        events = RequestReader(forwardProxy=True).feed(b"CONNECT [::1]:8443 HTTP/1.1\r\n\r\n")
        head = events[0]
        assert isinstance(head, RequestHead)
        self.assertEqual((head.host, head.port), ("::1", 8443))

    def test_upgrade(self) -> None:
        """
        A request with C{Upgrade} is read whole, then the reader stops; when
        the server declines, C{resume} reads on.
        """
        reader = RequestReader(forwardProxy=True)
        head = (
            b"GET http://a.test/ws HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\n"
            b"Upgrade: websocket\r\n\r\n"
        )
        nextRequest = b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"
        events = reader.feed(head + nextRequest)
        self.assertEqual(len(events), 2)
        assert isinstance(events[0], RequestHead)
        self.assertTrue(events[0].upgrade)
        self.assertTrue(reader.paused)
        events = reader.resume()
        self.assertEqual([type(e) for e in events], [RequestHead, EndOfMessage])
        self.assertFalse(reader.paused)

    def test_upgradeWithBody(self) -> None:
        """
        An Upgrade request's body is read before the reader stops.
        """
        reader = RequestReader(forwardProxy=True)
        events = reader.feed(
            b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nUpgrade: foo\r\nContent-Length: 2\r\n\r\nhiTUNNEL"
        )
        self.assertEqual(events[1:], [Body(b"hi", b"hi"), EndOfMessage([], b"")])
        self.assertEqual(reader.leftover(), b"TUNNEL")

    def test_leadingEmptyLines(self) -> None:
        """
        Empty lines before a request line are skipped (RFC 9112 2.2).
        """
        events = RequestReader(forwardProxy=True).feed(
            b"\r\n\r\nGET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"
        )
        self.assertEqual([type(e) for e in events], [RequestHead, EndOfMessage])

    def test_limitsExactly(self) -> None:
        """
        A request line of exactly 8 KiB and exactly 100 fields are read.
        """
        prefix = b"GET http://a.test/"
        target = prefix + b"a" * (MAX_REQUEST_LINE - len(prefix) - len(b"  HTTP/1.1") + 1)
        line = b"GET " + target[4:] + b" HTTP/1.1"
        self.assertEqual(len(line), MAX_REQUEST_LINE)
        events = RequestReader(forwardProxy=True).feed(line + b"\r\n" + HOST + b"\r\n")
        self.assertIsInstance(events[0], RequestHead)
        fields = HOST + b"".join(b"X-%d: v\r\n" % (i,) for i in range(MAX_FIELDS - 1))
        events = RequestReader(forwardProxy=True).feed(b"GET http://a.test/ HTTP/1.1\r\n" + fields + b"\r\n")
        self.assertIsInstance(events[0], RequestHead)

    def test_highBytes(self) -> None:
        """
        Bytes 0x80-0xFF in a target and a value are kept as they are.
        """
        events = RequestReader(forwardProxy=True).feed(
            b"GET http://a.test/\xc3\xa9 HTTP/1.1\r\nHost: a.test\r\nX: caf\xe9\r\n\r\n"
        )
        head = events[0]
        assert isinstance(head, RequestHead)
        self.assertEqual(head.headers[1], (b"X", b"caf\xe9"))
        self.assertEqual(head.url, "http://a.test/\xc3\xa9")

    def test_eof(self) -> None:
        """
        EOF between requests is clean; inside one it is L{Incomplete}.
        """
        reader = RequestReader(forwardProxy=True)
        reader.feed(b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n")
        self.assertEqual(reader.feedEOF(), [])
        reader = RequestReader(forwardProxy=True)
        reader.feed(b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nContent-Length: 5\r\n\r\nab")
        self.assertEqual([type(e) for e in reader.feedEOF()], [Incomplete])
        reader = RequestReader(forwardProxy=True)
        reader.feed(b"GET http://a.te")
        self.assertEqual([type(e) for e in reader.feedEOF()], [Incomplete])


def response(method: bytes, data: bytes, eof: bool = False) -> list[Event]:
    reader = ResponseReader()
    reader.expectResponseTo(method)
    return feedAll(reader, data, eof)


class ResponseTests(SynchronousTestCase):
    """
    Responses are framed by the request they answer and read leniently.
    """

    def test_framing(self) -> None:
        """
        HEAD, 204, 304 and 1xx answers have no body; a length or chunked
        body is read; an answer with neither is read to EOF.
        """
        ok = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
        table: list[tuple[bytes, bytes, bool, list[object]]] = [
            (b"GET", ok + b"hello", False, [("response", 200, False, [(b"Content-Length", b"5")]), ("body", b"hello"), ("end", [])]),
            (b"HEAD", ok, False, [("response", 200, False, [(b"Content-Length", b"5")]), ("end", [])]),
            (
                b"HEAD",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                False,
                [("response", 200, False, [(b"Transfer-Encoding", b"chunked")]), ("end", [])],
            ),
            (b"GET", b"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", False, [("response", 204, False, [(b"Content-Length", b"5")]), ("end", [])]),
            (b"GET", b"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n", False, [("response", 304, False, [(b"Content-Length", b"5")]), ("end", [])]),
            (
                b"POST",
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n" + ok + b"hello",
                False,
                [
                    ("response", 100, True, []),
                    ("response", 103, True, [(b"Link", b"</a>")]),
                    ("response", 200, False, [(b"Content-Length", b"5")]),
                    ("body", b"hello"),
                    ("end", []),
                ],
            ),
            (b"GET", b"HTTP/1.0 200 OK\r\n\r\nto the end", True, [("response", 200, False, []), ("body", b"to the end"), ("end", [])]),
            (
                b"GET",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzzz",
                True,
                [("response", 200, False, [(b"Transfer-Encoding", b"gzip")]), ("body", b"zzz"), ("end", [])],
            ),
            (
                b"GET",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 99\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                False,
                [
                    ("response", 200, False, [(b"Transfer-Encoding", b"chunked"), (b"Content-Length", b"99")]),
                    ("body", b"abc"),
                    ("end", []),
                ],
            ),
            (
                b"GET",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\nT: 1\r\n\r\n",
                False,
                [("response", 200, False, [(b"Transfer-Encoding", b"chunked")]), ("body", b"abc"), ("end", [(b"T", b"1")])],
            ),
            (
                b"GET",
                b"HTTP/1.1 200 OK\r\nFolded: a\r\n b\r\nSpaced : c\r\nContent-Length: 0\r\n\r\n",
                False,
                [("response", 200, False, [(b"Folded", b"a b"), (b"Spaced", b"c"), (b"Content-Length", b"0")]), ("end", [])],
            ),
            (b"GET", b"HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", False, [("response", 404, False, [(b"Content-Length", b"0")]), ("end", [])]),
        ]
        for method, data, eof, expected in table:
            events = response(method, data, eof)
            self.assertEqual(summary(events), expected, data)
            self.assertEqual(rawOf(events), data, data)
            reader = ResponseReader()
            reader.expectResponseTo(method)
            pieces: list[Event] = []
            for i in range(len(data)):
                pieces += reader.feed(data[i : i + 1])
            if eof:
                pieces += reader.feedEOF()
            self.assertEqual(summary(pieces), expected, data)
            self.assertEqual(rawOf(pieces), data, data)

    def test_eofFramed(self) -> None:
        """
        A response read to EOF says so (its connection can't be reused).
        """
        head = response(b"GET", b"HTTP/1.1 200 OK\r\n\r\n")[0]
        assert isinstance(head, ResponseHead)
        self.assertTrue(head.eofFramed)
        head = response(b"GET", b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n")[0]
        assert isinstance(head, ResponseHead)
        self.assertFalse(head.eofFramed)

    def test_pipelined(self) -> None:
        """
        Answers to pipelined requests are framed by their own methods.
        """
        reader = ResponseReader()
        for method in (b"HEAD", b"GET", b"HEAD"):
            reader.expectResponseTo(method)
        ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
        events = reader.feed(ok + ok + b"hi" + ok)
        self.assertEqual(
            [type(e) for e in events],
            [ResponseHead, EndOfMessage, ResponseHead, Body, EndOfMessage, ResponseHead, EndOfMessage],
        )

    def test_connectAndSwitch(self) -> None:
        """
        A 2xx to CONNECT and a 101 stop the reader; the rest is the
        tunnel's. A refused CONNECT is an ordinary answer.
        """
        for method, head in ((b"CONNECT", b"HTTP/1.1 200 Connection established\r\n\r\n"), (b"GET", b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n")):
            reader = ResponseReader()
            reader.expectResponseTo(method)
            events = reader.feed(head + b"\x81\x02hi")
            self.assertEqual([type(e) for e in events], [ResponseHead, EndOfMessage])
            self.assertTrue(reader.paused)
            self.assertEqual(reader.leftover(), b"\x81\x02hi")
        events = response(b"CONNECT", b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno")
        self.assertEqual(summary(events)[1:], [("body", b"no"), ("end", [])])

    def test_unparsable(self) -> None:
        """
        What can't be read as HTTP is L{Unparsable} with every byte not yet
        given in an event; what follows is left to the caller.
        """
        table = [
            (b"SSH-2.0-OpenSSH\r\n", b""),
            (b"<html>hello</html>", b""),
            (b"HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", b""),
            (b"HTTP/1.1 200 OK\nContent-Length: 0\n\n", b""),
            (b"HTTP/1.1 200 OK\r\nA: b\nC: d\r\n\r\n", b""),
            (b"HTTP/1.1 200 OK\r\nA: b\x00\r\n\r\n", b""),
            (b"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", b""),
            (b"HTTP/1.1 2000 OK\r\n\r\n", b""),
            (b"HTTP/1.1 abc OK\r\n\r\n", b""),
            (b"HTTP/2 200\r\n\r\n", b""),
            (b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", b""),
            (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", b""),
            (b"HTTP/1.1 200 OK\r\n Folded: first\r\n\r\n", b""),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                b"3\r\nabcX\r\n",
            ),
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"zz\r\n"),
        ]
        for head, body in table:
            events = response(b"GET", head + body)
            last = events[-1]
            self.assertIsInstance(last, Unparsable, head)
            assert isinstance(last, Unparsable)
            self.assertEqual(rawOf(events) + last.raw, head + body, head)
        reader = ResponseReader()
        events = reader.feed(b"garbage")
        self.assertEqual(reader.feed(b" more"), [])
        self.assertEqual(reader.leftover(), b" more")

    def test_headTooLarge(self) -> None:
        """
        A response head over 1 MB is L{Unparsable}; one under it is read.
        """
        big = b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 2000) for i in range(600))
        events = response(b"GET", big + b"Content-Length: 0\r\n\r\n")
        self.assertIsInstance(events[0], Unparsable)
        events = response(b"GET", big[: 500 * 1000] .rsplit(b"\r\n", 1)[0] + b"\r\nContent-Length: 0\r\n\r\n")
        self.assertIsInstance(events[0], ResponseHead)

    def test_eof(self) -> None:
        """
        EOF inside a length-framed body is L{Incomplete}.
        """
        events = response(b"GET", b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", eof=True)
        self.assertIsInstance(events[-1], Incomplete)
        events = response(b"GET", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", eof=True)
        self.assertIsInstance(events[-1], Incomplete)
        self.assertEqual(response(b"GET", b"", eof=True), [])

    def test_eofKeepsEveryByte(self) -> None:
        """
        Cut short by EOF, the bytes read but not given in an event (the
        last chunk's line, a trailer section begun) are in L{Incomplete}, so
        a relay loses none.
        """
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        for cut in (b"3\r\nabc\r\n0;x=y\r\nT: 1\r", b"3\r\nabc\r", b"3\r\nab", b"3;a\r"):
            events = response(b"GET", head + cut, eof=True)
            last = events[-1]
            assert isinstance(last, Incomplete), events
            self.assertEqual(rawOf(events) + last.raw, head + cut)
        reader = RequestReader(forwardProxy=True)
        data = b"POST http://a.test/ HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n"
        events = feedAll(reader, data, eof=True)
        last = events[-1]
        assert isinstance(last, Incomplete)
        self.assertEqual(rawOf(events) + last.raw, data)

    def test_eofInHead(self) -> None:
        """
        EOF inside a head is L{Unparsable} with the bytes that came, so the
        proxy can relay them.
        """
        events = response(b"GET", b"HTTP/1.1 200 OK\r\nServer: x", eof=True)
        self.assertEqual(events, [Unparsable("the connection closed in the middle of a response head", b"HTTP/1.1 200 OK\r\nServer: x")])


class HelperTests(SynchronousTestCase):
    """
    Hop-by-hop headers, head building and keep-alive.
    """

    def test_hopByHop(self) -> None:
        """
        The fixed hop-by-hop names and those C{Connection} lists are
        hop-by-hop, lowercased.
        """
        headers = [
            (b"Host", b"a.test"),
            (b"Connection", b"keep-alive, X-Secret"),
            (b"connection", b"Other"),
            (b"X-Secret", b"1"),
        ]
        names = hopByHop(headers)
        for name in (
            b"connection", b"proxy-connection", b"keep-alive", b"te", b"transfer-encoding",
            b"upgrade", b"proxy-authenticate", b"proxy-authorization", b"trailer", b"x-secret", b"other",
        ):
            self.assertIn(name, names)
        self.assertNotIn(b"host", names)

    def test_hopByHopKeepsFraming(self) -> None:
        """
        A C{Connection} header never makes C{Host} or C{Content-Length}
        hop-by-hop (an answer's head, which the reader doesn't refuse for
        it, must keep its framing when relayed).
        """
        names = hopByHop([(b"Connection", b"Content-Length, host, X-A"), (b"Content-Length", b"3")])
        self.assertNotIn(b"content-length", names)
        self.assertNotIn(b"host", names)
        self.assertIn(b"x-a", names)

    def test_serializeHead(self) -> None:
        """
        A head is built from a start line and the headers not dropped, in
        order, then the extra ones.
        """
        headers = [(b"Host", b"a.test"), (b"Proxy-Connection", b"keep-alive"), (b"Accept", b"*/*")]
        self.assertEqual(
            serializeHead(b"GET / HTTP/1.1", headers, drop=hopByHop(headers), extra=[(b"Via", b"1.1 netlog")]),
            b"GET / HTTP/1.1\r\nHost: a.test\r\nAccept: */*\r\nVia: 1.1 netlog\r\n\r\n",
        )

    def test_keepAlive(self) -> None:
        """
        HTTP/1.1 keeps the connection unless C{close}; HTTP/1.0 only with
        C{keep-alive}.
        """
        self.assertTrue(keepAlive(b"HTTP/1.1", []))
        self.assertFalse(keepAlive(b"HTTP/1.1", [(b"Connection", b"Close")]))
        self.assertFalse(keepAlive(b"HTTP/1.0", []))
        self.assertTrue(keepAlive(b"HTTP/1.0", [(b"Connection", b"Keep-Alive")]))
        self.assertFalse(keepAlive(b"HTTP/1.0", [(b"Connection", b"keep-alive, close")]))
