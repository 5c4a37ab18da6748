"""
HTTP/2 toward the browser, end to end over loopback sockets and real TLS:
ALPN's choice on the HTTPS route and in decrypted CONNECTs, each stream an
exchange with its own open and end lines, bodies both ways under flow
control, the answers' kinds (HEAD, 204, 304, 103, trailers), cancelling,
malformed requests refused on their stream alone, and the limits that keep
one abusive connection from costing more than it should.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from typing import Any

from h2.errors import ErrorCodes
from h2.settings import SettingCodes
from twisted.internet import defer, reactor, task, threads
from twisted.trial.unittest import SkipTest, TestCase
from twisted.web import resource, server

from netlog.core.http1 import MAX_HEAD
from netlog.proxy.h2 import MAX_CONCURRENT_STREAMS, RESET_BURST, RESETS_PER_SECOND
from tests.site.h2client import Answer, H2Client, h2Context
from tests.site.support import RunningProxy, connectTunnel, listenScripted, listenWeb

#: A megabyte and a bit, not a multiple of any frame or window size.
BIG = 1024 * 1024 + 17


def bigBody(size: int) -> bytes:
    block = hashlib.sha256(b"netlog").digest() * 2048
    return (block * (size // len(block) + 1))[:size]


@defer.inlineCallbacks
def settled(timeout: float = 10.0) -> Any:
    """
    Wait (bounded) until no upstream connection attempt is pending in this
    reactor.
    """
    for _ in range(int(timeout / 0.05)):
        if not any("failIfNotConnected" in str(call.func) for call in reactor.getDelayedCalls()):
            return
        yield task.deferLater(reactor, 0.05, lambda: None)


class Backend(resource.Resource):
    """
    A plain HTTP/1.1 backend: C{/big?n=N} answers N binary bytes, C{/echo}
    the request's body's size and sha256, C{/empty} a 204, C{/cached} a
    304, anything else a short text.
    """

    isLeaf = True

    def __init__(self) -> None:
        resource.Resource.__init__(self)
        self.seen: list[dict[str, Any]] = []

    def render(self, request: Any) -> bytes:
        body = request.content.read()
        self.seen.append({"method": request.method, "uri": request.uri, "size": len(body),
                          "headers": dict(request.requestHeaders.getAllRawHeaders())})
        path = request.path
        if path == b"/big":
            request.setHeader(b"content-type", b"application/octet-stream")
            return bigBody(int(request.args[b"n"][0]))
        if path == b"/half":
            # Half the body now, the rest never: a stream still mid-body.
            n = int(request.args[b"n"][0])
            request.setHeader(b"content-type", b"application/octet-stream")
            request.setHeader(b"content-length", b"%d" % n)
            request.write(bigBody(n)[: n // 2])
            return server.NOT_DONE_YET  # type: ignore[no-any-return]
        if path == b"/echo":
            request.setHeader(b"content-type", b"text/plain")
            return b"%d %s" % (len(body), hashlib.sha256(body).hexdigest().encode())
        if path == b"/empty":
            request.setResponseCode(204)
            return b""
        if path == b"/cached":
            request.setResponseCode(304)
            return b""
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        request.setHeader(b"connection", b"keep-alive")
        return b"hello " + request.uri


SITES = """
[[site]]
name = "shop"
origins = ["https://shop.test"]
backend = "http://127.0.0.1:{port}"
"""


class H2Tests(TestCase):
    timeout = 60

    def setUp(self) -> None:
        self.backend = Backend()
        port = listenWeb(self, self.backend)
        self.proxy = RunningProxy(self, SITES.format(port=port), resolve={"shop.test": "127.0.0.1"})
        self.route = self.proxy.ports["https-route"]
        self.forward = self.proxy.ports["forward"]

    def client(self, **kw: Any) -> H2Client:
        client = H2Client.toRoute(self.route, "shop.test", self.proxy.caFile, **kw)
        self.addCleanup(client.close)
        return client

    @defer.inlineCallbacks
    def test_alpnChoosesH2(self) -> Any:
        """
        On the HTTPS route and in a decrypted CONNECT, a browser offering
        C{h2} gets HTTP/2; each request is an exchange logged with version
        C{HTTP/2}, its fields as sent (lowercase, pseudo-fields first, in
        order) and C{headers_size} -1; the streams of one connection share
        its connection id.
        """

        def run() -> list[Any]:
            route = self.client()
            a, b = route.get("/a"), route.get("/b?x=1", extra=[(b"accept", b"text/html")])
            answers = route.wait(a, b)
            tunnel = H2Client.throughTunnel(self.forward, "shop.test:443", self.proxy.caFile)
            self.addCleanup(tunnel.close)
            [c] = tunnel.wait(tunnel.get("/c"))
            return [route.alpn, tunnel.alpn] + answers + [c]

        alpnRoute, alpnTunnel, a, b, c = yield threads.deferToThread(run)
        self.assertEqual((alpnRoute, alpnTunnel), ("h2", "h2"))
        self.assertEqual([x.status for x in (a, b, c)], [200, 200, 200])
        self.assertEqual(bytes(b.data), b"hello /b?x=1")
        ended = yield self.proxy.waitForEnds(3)
        urls = sorted(o["request"]["url"] for o, _ in ended)
        self.assertEqual(urls, ["https://shop.test/a", "https://shop.test/b?x=1", "https://shop.test/c"])
        for opened, end in ended:
            self.assertEqual(opened["request"]["version"], "HTTP/2")
            self.assertEqual(opened["request"]["headers_size"], -1)
            self.assertEqual(end["response"]["version"], "HTTP/2")
            self.assertEqual(end["response"]["headers_size"], -1)
            self.assertEqual(end["response"]["status"], 200)
            names = [n for n, _ in end["response"]["headers"]]
            self.assertEqual(names, [n.lower() for n in names])
            self.assertNotIn("connection", names)
        byUrl = {o["request"]["url"]: o for o, _ in ended}
        headers = byUrl["https://shop.test/b?x=1"]["request"]["headers"]
        self.assertEqual(headers[:5], [[":method", "GET"], [":scheme", "https"], [":authority", "shop.test"],
                                       [":path", "/b?x=1"], ["accept", "text/html"]])
        self.assertEqual(byUrl["https://shop.test/a"]["connection"], byUrl["https://shop.test/b?x=1"]["connection"])
        self.assertNotEqual(byUrl["https://shop.test/a"]["connection"], byUrl["https://shop.test/c"]["connection"])
        # The backend got HTTP/1.1 with a Host, and no pseudo-fields.
        seen = {s["uri"]: s for s in self.backend.seen}
        self.assertEqual(seen[b"/b?x=1"]["headers"][b"Host"], [b"shop.test"])
        self.assertFalse(any(name.startswith(b":") for name in seen[b"/b?x=1"]["headers"]))

    @defer.inlineCallbacks
    def test_http1StillOffered(self) -> Any:
        """
        A browser that offers only C{http/1.1} gets it, as before.
        """

        def run() -> str | None:
            sock = connectTunnel(self.forward, "shop.test:443", h2Context(self.proxy.caFile, ("http/1.1",)),
                                 "shop.test")
            try:
                sock.sendall(b"GET /one HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
                data = b""
                while chunk := sock.recv(65536):
                    data += chunk
                assert data.startswith(b"HTTP/1.1 200"), data
                return sock.selected_alpn_protocol()  # type: ignore[attr-defined, no-any-return]
            finally:
                sock.close()

        alpn = yield threads.deferToThread(run)
        self.assertEqual(alpn, "http/1.1")
        [(opened, end)] = yield self.proxy.waitForEnds(1)
        self.assertEqual(opened["request"]["version"], "HTTP/1.1")

    @defer.inlineCallbacks
    def test_bodiesBothWays(self) -> Any:
        """
        A request body with a content-length, and one without (sent up in
        chunks), reach the backend whole; a large answer comes down whole
        under flow control; each is kept (the binary answer by its sha256).
        """
        upload = bigBody(300 * 1024)

        def run() -> list[Any]:
            c = self.client()
            a = c.get("/echo", method="POST", body=upload, extra=[(b"content-length", b"%d" % len(upload))])
            b = c.get("/echo", method="POST", body=b"no length given")
            d = c.get(f"/big?n={BIG}")
            return c.wait(a, b, d, timeout=30)

        a, b, d = yield threads.deferToThread(run)
        self.assertEqual(bytes(a.data), b"%d %s" % (len(upload), hashlib.sha256(upload).hexdigest().encode()))
        self.assertEqual(bytes(b.data), b"15 " + hashlib.sha256(b"no length given").hexdigest().encode())
        self.assertEqual(len(d.data), BIG)
        self.assertEqual(bytes(d.data), bigBody(BIG))
        ended = yield self.proxy.waitForEnds(3)
        big = [e for o, e in ended if o["request"]["url"].endswith(f"n={BIG}")][0]
        self.assertEqual(big["response"]["body"]["size"], BIG)
        self.assertEqual(big["response"]["body"]["sha256"], hashlib.sha256(bigBody(BIG)).hexdigest())
        sizes = sorted(e["request_body"]["size"] for o, e in ended if "request_body" in e)
        self.assertEqual(sizes, [15, len(upload)])

    @defer.inlineCallbacks
    def test_expectContinue(self) -> Any:
        """
        A request that says C{expect: 100-continue} gets the backend's
        C{100} on its stream before it sends its body, then the answer.
        """

        def run() -> Any:
            c = self.client()
            sid = c.h2.get_next_available_stream_id()
            c.answers[sid] = Answer()
            c.h2.send_headers(sid, [(b":method", b"POST"), (b":scheme", b"https"), (b":authority", b"shop.test"),
                                    (b":path", b"/echo"), (b"expect", b"100-continue"),
                                    (b"content-length", b"5")])
            c.flush()
            c.pump(lambda: bool(c.answers[sid].interim), 10)
            interim = list(c.answers[sid].interim)
            c.sendBody(sid, b"hello")
            [answer] = c.wait(sid)
            return interim, answer

        interim, answer = yield threads.deferToThread(run)
        self.assertEqual(interim, [100])
        self.assertEqual(bytes(answer.data), b"5 " + hashlib.sha256(b"hello").hexdigest().encode())
        [(_, end)] = yield self.proxy.waitForEnds(1)
        self.assertEqual(end.get("interim"), [100])

    @defer.inlineCallbacks
    def test_answerKinds(self) -> Any:
        """
        HEAD, 204 and 304 answers end their streams with no body; the
        backend's HTTP/1.1 connection fields never reach the stream.
        """

        def run() -> list[Any]:
            c = self.client()
            return c.wait(c.get("/x", method="HEAD"), c.get("/empty"), c.get("/cached"))

        head, empty, cached = yield threads.deferToThread(run)
        self.assertEqual([head.status, empty.status, cached.status], [200, 204, 304])
        self.assertTrue(all(x.ended and not x.data for x in (head, empty, cached)))
        self.assertNotIn(b"connection", dict(head.headers))
        ended = yield self.proxy.waitForEnds(3)
        self.assertEqual(sorted(e["response"]["status"] for _, e in ended), [200, 204, 304])

    @defer.inlineCallbacks
    def test_cancelled(self) -> Any:
        """
        Of 100 streams downloading a megabyte each on one connection, the
        10 the browser resets mid-body end as cancelled, and the other 90
        complete.
        """

        def run() -> tuple[H2Client, list[int]]:
            c = self.client()
            sids = [c.get(f"/half?n={BIG}") for _ in range(10)] + [c.get(f"/big?n={BIG}") for _ in range(90)]
            c.pump(lambda: all(len(c.answers[s].data) > 0 for s in sids[:10]), 20)
            for s in sids[:10]:
                c.h2.reset_stream(s, ErrorCodes.CANCEL)
                c.answers[s].reset = int(ErrorCodes.CANCEL)
            c.flush()
            c.wait(*sids[10:], timeout=90)
            return c, sids

        c, sids = yield threads.deferToThread(run)
        self.assertTrue(all(c.answers[s].ended and len(c.answers[s].data) == BIG for s in sids[10:]))
        ended = yield self.proxy.waitForEnds(100, timeout=30)
        failed = [e for _, e in ended if e.get("_failed")]
        whole = [e for _, e in ended if not e.get("_failed")]
        self.assertEqual(len(failed), 10)
        self.assertEqual({e["_failed"]["reason"] for e in failed}, {"the browser cancelled the request"})
        self.assertEqual(len(whole), 90)
        self.assertTrue(all(e["response"]["body"]["size"] == BIG for e in whole))

    @defer.inlineCallbacks
    def test_malformedRefusedAlone(self) -> Any:
        """
        Requests RFC 9113 makes malformed (an uppercase field name, a
        connection-specific field, C{te} other than C{trailers}, a
        content-length the DATA disagrees with) are reset with
        C{PROTOCOL_ERROR} and logged refused; a good stream on the same
        connection is answered, and nothing malformed reaches the backend.
        """

        def run() -> list[Any]:
            c = self.client(validate=False)
            bad = [
                c.get("/upper", extra=[(b"X-Upper", b"1")]),
                c.get("/conn", extra=[(b"connection", b"keep-alive")]),
                c.get("/te", extra=[(b"te", b"gzip")]),
                c.get("/len", method="POST", body=b"four", extra=[(b"content-length", b"10")]),
            ]
            good = c.get("/good")
            return c.wait(*bad, good)

        *bad, good = yield threads.deferToThread(run)
        self.assertEqual([b.reset for b in bad], [int(ErrorCodes.PROTOCOL_ERROR)] * 4)
        self.assertEqual((good.status, bytes(good.data)), (200, b"hello /good"))
        ended = yield self.proxy.waitForEnds(5)
        refused = [e for _, e in ended if e.get("_refused")]
        self.assertEqual(len(refused), 4)
        self.assertEqual([s["uri"] for s in self.backend.seen if s["uri"] != b"/good"],
                         [] if len(self.backend.seen) == 1 else [b"/len"])

    @defer.inlineCallbacks
    def test_refusedOrigin(self) -> Any:
        """
        A stream for an origin that isn't a site is answered 403 on that
        stream and logged refused; the connection carries on.
        """

        def run() -> list[Any]:
            c = self.client()
            return c.wait(c.get("/", authority="other.test"), c.get("/after"))

        refused, after = yield threads.deferToThread(run)
        self.assertEqual((refused.status, after.status), (403, 200))
        ended = yield self.proxy.waitForEnds(2)
        self.assertEqual(sorted(bool(e.get("_refused")) for _, e in ended), [False, True])

    @defer.inlineCallbacks
    def test_stopSendsGoaway(self) -> Any:
        """
        The proxy stopping sends C{GOAWAY} on an HTTP/2 connection, and the
        exchange in flight on it ends as stopped.
        """

        def open_() -> tuple[H2Client, int]:
            c = self.client()
            sid = c.get(f"/half?n={BIG}")
            c.pump(lambda: len(c.answers[sid].data) > 0, 10)
            return c, sid

        c, sid = yield threads.deferToThread(open_)
        self.proxy.proxy.stopService()
        yield threads.deferToThread(c.pump, lambda: c.goaway is not None, 10)
        self.assertEqual(c.goaway, int(ErrorCodes.NO_ERROR))
        [(_, end)] = yield self.proxy.waitForEnds(1)
        self.assertEqual(end["_failed"]["reason"], "the proxy stopped")

    @defer.inlineCallbacks
    def test_rapidReset(self) -> Any:
        """
        A client that opens and resets streams as fast as it can (the rapid
        reset attack) gets C{GOAWAY} with C{ENHANCE_YOUR_CALM} once past
        the burst netlog allows, and the connection closes.
        """

        def run() -> H2Client:
            c = self.client()
            for _ in range(RESET_BURST * 3):
                if c.closed:
                    break
                sid = c.get("/big?n=100000")
                c.h2.reset_stream(sid, ErrorCodes.CANCEL)
                c.flush()
            c.pump(lambda: c.goaway is not None, 10)
            c.pump(lambda: c.closed, 5)
            return c

        c = yield threads.deferToThread(run)
        self.assertEqual(c.goaway, int(ErrorCodes.ENHANCE_YOUR_CALM))
        self.assertTrue(c.closed)
        # What the bucket let through is bounded: at most the burst and a
        # second's earnings reached the backend's side (each cancelled
        # stream's connection attempt finishes, then goes to the pool).
        yield settled()
        self.assertLessEqual(len(self.proxy.lines()) // 2, RESET_BURST + 2 * RESETS_PER_SECOND)

    @defer.inlineCallbacks
    def test_pingFlood(self) -> Any:
        """
        A flood of PINGs gets C{GOAWAY} with C{ENHANCE_YOUR_CALM}.
        """

        def run() -> H2Client:
            c = self.client()
            for i in range(1000):
                c.h2.ping(b"%08d" % i)
            c.flush()
            c.pump(lambda: c.goaway is not None, 10)
            return c

        c = yield threads.deferToThread(run)
        self.assertEqual(c.goaway, int(ErrorCodes.ENHANCE_YOUR_CALM))

    @defer.inlineCallbacks
    def test_settingsFlood(self) -> Any:
        """
        A flood of SETTINGS frames gets C{GOAWAY} with C{ENHANCE_YOUR_CALM}.
        """

        def run() -> H2Client:
            c = self.client()
            frame = bytes.fromhex("000006040000000000") + bytes.fromhex("000400010000")
            c.sendRaw(frame * 1000)
            c.pump(lambda: c.goaway is not None, 10)
            return c

        c = yield threads.deferToThread(run)
        self.assertEqual(c.goaway, int(ErrorCodes.ENHANCE_YOUR_CALM))

    @defer.inlineCallbacks
    def test_continuationFlood(self) -> Any:
        """
        A header block that never ends (HEADERS, then CONTINUATION frames
        without END_HEADERS) ends the connection before it is all sent: it
        is capped as it arrives, not buffered whole.
        """

        def run() -> tuple[H2Client, int]:
            c = self.client()
            c.pump(lambda: False, 0.3)
            headers = bytes.fromhex("000004010000000001") + b"\x82\x87\x84\x41"
            continuation = b"\x00\x40\x00\x09\x00\x00\x00\x00\x01" + b"\x00" * 0x4000
            c.sendRaw(headers)
            sent = 0
            for _ in range(2000):
                if c.closed:
                    break
                c.sendRaw(continuation)
                sent += 1
            c.pump(lambda: c.closed, 10)
            return c, sent

        c, sent = yield threads.deferToThread(run)
        self.assertEqual(c.goaway, int(ErrorCodes.PROTOCOL_ERROR))
        self.assertTrue(c.closed)

    @defer.inlineCallbacks
    def test_headerListCap(self) -> Any:
        """
        A request whose fields take more than the advertised maximum header
        list size is turned down; the proxy keeps serving the connection's
        peers.
        """

        def run() -> tuple[H2Client, Any]:
            c = self.client()
            sid = c.get("/huge", extra=[(b"x-big-%d" % i, b"v" * 4000) for i in range(MAX_HEAD // 4000 + 2)])
            c.pump(lambda: c.answers[sid].done or c.goaway is not None or c.closed, 10)
            other = self.client()
            [ok] = other.wait(other.get("/fine"))
            return c, ok

        c, ok = yield threads.deferToThread(run)
        turnedDown = c.goaway is not None or c.answers[1].reset is not None or c.closed
        self.assertTrue(turnedDown)
        self.assertEqual(ok.status, 200)
        self.assertNotIn(b"/huge", [s["uri"] for s in self.backend.seen])

    @defer.inlineCallbacks
    def test_concurrentStreamLimit(self) -> Any:
        """
        netlog advertises at most 100 concurrent streams; a client that
        opens more anyway is refused (the stream or the connection), and the
        first 100 are served.
        """

        def run() -> H2Client:
            c = self.client()
            c.pump(lambda: c.h2.remote_settings.max_concurrent_streams == MAX_CONCURRENT_STREAMS, 5)
            # Ignore what was advertised.
            c.h2.remote_settings[SettingCodes.MAX_CONCURRENT_STREAMS] = 1000
            c.h2.remote_settings.acknowledge()
            sids = [c.get(f"/big?n={64 * 1024}") for _ in range(MAX_CONCURRENT_STREAMS + 1)]
            c.pump(lambda: c.closed or c.goaway is not None or all(c.answers[s].done for s in sids), 30)
            return c

        c = yield threads.deferToThread(run)
        answers = list(c.answers.values())
        self.assertTrue(c.goaway is not None or any(a.reset is not None for a in answers))
        yield settled()


class H2TimeoutTests(TestCase):
    timeout = 30

    @defer.inlineCallbacks
    def test_zeroWindowStall(self) -> Any:
        """
        A stream whose window the browser never opens is reset once the idle
        timeout passes, and its exchange ends failed; the connection lives.
        """
        backend = Backend()
        port = listenWeb(self, backend)
        proxy = RunningProxy(self, SITES.format(port=port), resolve={"shop.test": "127.0.0.1"}, idleTimeout=1.0)

        def run() -> tuple[H2Client, int, Any]:
            c = H2Client.toRoute(proxy.ports["https-route"], "shop.test", proxy.caFile, autoAck=False)
            self.addCleanup(c.close)
            sid = c.get(f"/big?n={BIG}")
            c.pump(lambda: c.answers[sid].done, 8)
            return c, sid, c.answers[sid]

        c, sid, answer = yield threads.deferToThread(run)
        self.assertIn(answer.reset, (int(ErrorCodes.CANCEL), int(ErrorCodes.INTERNAL_ERROR)))
        self.assertLess(len(answer.data), BIG)
        [(_, end)] = yield proxy.waitForEnds(1)
        self.assertIn("idle-timeout", end["_failed"]["reason"])

    @defer.inlineCallbacks
    def test_idleConnectionClosed(self) -> Any:
        """
        An HTTP/2 connection that carries no stream for the idle timeout is
        closed with C{GOAWAY}, as an HTTP/1.1 connection between requests
        is closed.
        """
        backend = Backend()
        port = listenWeb(self, backend)
        proxy = RunningProxy(self, SITES.format(port=port), resolve={"shop.test": "127.0.0.1"}, idleTimeout=1.0)

        def run() -> H2Client:
            c = H2Client.toRoute(proxy.ports["https-route"], "shop.test", proxy.caFile)
            self.addCleanup(c.close)
            c.wait(c.get("/one"))
            c.pump(lambda: c.closed, 8)
            return c

        c = yield threads.deferToThread(run)
        self.assertEqual(c.goaway, int(ErrorCodes.NO_ERROR))
        self.assertTrue(c.closed)

    @defer.inlineCallbacks
    def test_trailersAndEarlyHints(self) -> Any:
        """
        A backend's 103 reaches the stream as an interim answer, and its
        chunked body's trailers as the stream's trailers.
        """

        def script(p: Any, received: bytes) -> None:
            if b"\r\n\r\n" in received and not getattr(p, "answered", False):
                p.answered = True
                p.transport.write(b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n"
                                  b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                                  b"Trailer: x-sum\r\n\r\n5\r\nhello\r\n0\r\nx-sum: 42\r\n\r\n")

        port, _ = listenScripted(self, script)
        proxy = RunningProxy(self, SITES.format(port=port), resolve={"shop.test": "127.0.0.1"})

        def run() -> Any:
            c = H2Client.toRoute(proxy.ports["https-route"], "shop.test", proxy.caFile)
            self.addCleanup(c.close)
            [a] = c.wait(c.get("/t"))
            return a

        answer = yield threads.deferToThread(run)
        self.assertEqual(answer.interim, [103])
        self.assertEqual((answer.status, bytes(answer.data)), (200, b"hello"))
        self.assertEqual(answer.trailers, [(b"x-sum", b"42")])
        [(_, end)] = yield proxy.waitForEnds(1)
        self.assertEqual(end.get("interim"), [103])

    @defer.inlineCallbacks
    def test_noH2(self) -> Any:
        """
        With HTTP/2 turned off (C{--no-h2}), ALPN chooses C{http/1.1} even
        for a browser that offers C{h2} first.
        """
        from netlog.site.mode import SiteMode

        backend = Backend()
        port = listenWeb(self, backend)
        proxy = RunningProxy(self, SITES.format(port=port), resolve={"shop.test": "127.0.0.1"})
        assert isinstance(proxy.mode, SiteMode)
        proxy.mode.protocols = (b"http/1.1",)
        proxy.mode.ca = None
        proxy.mode.prepare()

        def run() -> str | None:
            sock = connectTunnel(proxy.ports["forward"], "shop.test:443", h2Context(proxy.caFile), "shop.test")
            try:
                return sock.selected_alpn_protocol()  # type: ignore[attr-defined, no-any-return]
            finally:
                sock.close()

        alpn = yield threads.deferToThread(run)
        self.assertEqual(alpn, "http/1.1")


class ClientToolTests(TestCase):
    """
    Real HTTP/2 clients: curl and nghttp (Debian's nghttp2-client).
    """

    timeout = 120

    def setUp(self) -> None:
        self.backend = Backend()
        port = listenWeb(self, self.backend)
        self.proxy = RunningProxy(self, SITES.format(port=port), resolve={"shop.test": "127.0.0.1"})

    def tool(self, name: str) -> str:
        path = shutil.which(name)
        if path is None:
            raise SkipTest(f"{name} is not installed (.ci/setup installs it)")
        return path

    def run_(self, argv: list[str]) -> Any:
        return threads.deferToThread(subprocess.run, argv, capture_output=True, timeout=90)

    @defer.inlineCallbacks
    def test_curl(self) -> Any:
        """
        C{curl --http2} answers over HTTP/2 through the forward port and
        directly at the HTTPS route.
        """
        curl = self.tool("curl")
        common = [curl, "-s", "--http2", "--cacert", self.proxy.caFile, "-w", "%{http_version}"]
        through = yield self.run_(common + ["-x", f"http://127.0.0.1:{self.proxy.ports['forward']}",
                                            "--proxy-cacert", self.proxy.caFile, "https://shop.test/one"])
        route = yield self.run_(common + ["--resolve", f"shop.test:{self.proxy.ports['https-route']}:127.0.0.1",
                                          "-H", "Host: shop.test",
                                          f"https://shop.test:{self.proxy.ports['https-route']}/two"])
        self.assertEqual(through.stdout, b"hello /one2", through.stderr)
        self.assertEqual(route.stdout, b"hello /two2", route.stderr)
        ended = yield self.proxy.waitForEnds(2)
        self.assertEqual([o["request"]["version"] for o, _ in ended], ["HTTP/2", "HTTP/2"])

    @defer.inlineCallbacks
    def test_nghttpConcurrent(self) -> Any:
        """
        100 concurrent streams of a megabyte on one nghttp connection: each
        is logged with the right size and sha256, on one connection id.
        """
        nghttp = self.tool("nghttp")
        result = yield self.run_([nghttp, "-n", "-m", "100", "-H", ":authority: shop.test",
                                  f"https://127.0.0.1:{self.proxy.ports['https-route']}/big?n={BIG}"])
        self.assertEqual(result.returncode, 0, result.stderr)
        ended = yield self.proxy.waitForEnds(100, timeout=60)
        digest = hashlib.sha256(bigBody(BIG)).hexdigest()
        self.assertEqual(len(ended), 100)
        self.assertEqual({(e["response"]["body"]["size"], e["response"]["body"]["sha256"]) for _, e in ended},
                         {(BIG, digest)})
        self.assertEqual(len({o["connection"] for o, _ in ended}), 1)

    @defer.inlineCallbacks
    def test_nghttpBigPost(self) -> Any:
        """
        A 20 MB POST over HTTP/2 reaches the backend whole, and is kept to
        10 MB, marked truncated.
        """
        nghttp = self.tool("nghttp")
        path = os.path.join(self.mktemp() + ".bin")
        with open(path, "wb") as f:
            f.write(bigBody(20 * 1024 * 1024))
        result = yield self.run_([nghttp, "-n", "-d", path, "-H", ":authority: shop.test",
                                  f"https://127.0.0.1:{self.proxy.ports['https-route']}/echo"])
        self.assertEqual(result.returncode, 0, result.stderr)
        [(_, end)] = yield self.proxy.waitForEnds(1, timeout=60)
        self.assertEqual(end["response"]["status"], 200)
        self.assertEqual(self.backend.seen[-1]["size"], 20 * 1024 * 1024)
        body = end["request_body"]
        self.assertEqual(body["size"], 20 * 1024 * 1024)
        self.assertTrue(body.get("_truncated"))
        yield task.deferLater(reactor, 0, lambda: None)
