"""
HTTP/2 toward a site's C{https://} backend, over real loopback sockets and
real TLS: the site proxy offers C{h2} by ALPN, a backend that picks it is
spoken to in HTTP/2 (many exchanges' streams on one connection), and any
browser-side protocol pairs with it. The backend is L{H2Origin} (HTTP/2 with
C{h2}, HTTP/1.1 with twisted.web), its certificate from a private CA named
by the site's C{ca_file}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import defer, reactor, task, threads
from twisted.trial.unittest import TestCase

from netlog.core.har import entriesFromLines
from netlog.site.ca import CertificateAuthority
from netlog.site.tls import HostTLS
from tests.har.support import export, validate
from tests.site.h2client import H2Client
from tests.site.support import RunningProxy, connectTunnel, request
from tests.support.h2origin import BIG, H2Origin


class H2BackendTests(TestCase):
    timeout = 120

    def setUp(self) -> None:
        folder = os.path.abspath(self.mktemp())
        ca = CertificateAuthority.loadOrCreate(os.path.join(folder, "backend-ca"))
        self.caPath = os.path.join(folder, "backend-ca.pem")
        with open(self.caPath, "wb") as f:
            f.write(ca.certPEM())
        self.origin = H2Origin(self, HostTLS(ca, "backend.test"), gather=100)

    def proxy(self, **options: Any) -> RunningProxy:
        return RunningProxy(self, f"""
[[site]]
name = "vault"
origins = ["https://vault.test"]
backend = "https://backend.test:{self.origin.port}"
ca_file = "{self.caPath}"
""", resolve={"backend.test": "127.0.0.1"}, **options)

    def get(self, running: RunningProxy, path: str, method: str = "GET", body: bytes = b"",
            headers: list[tuple[str, str]] = []) -> Any:  # noqa: B006
        """
        One request from an HTTP/1.1 browser through a decrypted tunnel.
        """
        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "vault.test:443", running.sslContext())
            try:
                return request(sock, method, path, [("Host", "vault.test")] + headers
                               + ([("Content-Length", str(len(body)))] if body else []), body)
            finally:
                sock.close()

        return threads.deferToThread(client)

    def har(self, running: RunningProxy) -> list[dict[str, Any]]:
        with open(running.logPath, "rb") as f:  # type: ignore[arg-type]
            entries, _ = entriesFromLines(f.readlines())
        return entries

    @defer.inlineCallbacks
    def test_http11BrowserH2Backend(self) -> Any:
        """
        An HTTP/1.1 browser's request goes to the backend in HTTP/2 (no
        connection-specific field, C{:authority} from C{Host}); the answer
        comes back whole, and the log and the HAR say HTTP/1.1 toward the
        browser and HTTP/2 toward the backend.
        """
        running = self.proxy()
        status, headers, body, _ = yield self.get(running, "/hello", headers=[("Connection", "keep-alive"),
                                                                             ("TE", "trailers")])
        self.assertEqual((status, body), (200, b"hello over h2"))
        self.assertEqual(self.origin.connections, ["h2"])
        [(version, fields)] = self.origin.requests
        self.assertEqual(version, "HTTP/2")
        names = [name for name, _ in fields]
        self.assertEqual(names[:4], [b":method", b":scheme", b":authority", b":path"])
        self.assertEqual(dict(fields)[b":path"], b"/hello")
        self.assertEqual(dict(fields)[b"te"], b"trailers")
        for name in (b"connection", b"keep-alive", b"host", b"transfer-encoding"):
            self.assertNotIn(name, names)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["request"]["version"], "HTTP/1.1")
        self.assertEqual(ended["response"]["version"], "HTTP/1.1")
        self.assertEqual(ended["response"]["reason"], "OK")
        self.assertEqual(ended["response"]["server_version"], "HTTP/2")
        [entry] = self.har(running)
        self.assertEqual(entry["request"]["httpVersion"], "HTTP/1.1")
        self.assertEqual(entry["response"]["httpVersion"], "HTTP/1.1")
        self.assertEqual(entry["response"]["_serverHttpVersion"], "HTTP/2.0")
        self.assertEqual(entry["response"]["content"]["text"], "hello over h2")
        with open(running.logPath, "rb") as f:  # type: ignore[arg-type]
            har, raw, _ = export(f.read())
        self.assertEqual(har["log"]["entries"][0]["response"]["_serverHttpVersion"], "HTTP/2.0")
        self.assertEqual(validate(raw), [], "the HAR with the server's version validates")

    @defer.inlineCallbacks
    def test_bodyUp(self) -> Any:
        """
        A request's body goes up as DATA; an answer without a length comes
        to an HTTP/1.1 browser in chunks.
        """
        running = self.proxy()
        payload = b"p" * 200000
        status, headers, body, _ = yield self.get(running, "/echo", "POST", payload)
        self.assertEqual((status, body), (200, payload))
        self.assertEqual(headers.get("transfer-encoding"), "chunked")
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["response"]["body"]["size"], len(payload))

    @defer.inlineCallbacks
    def test_trailersOverChunked(self) -> Any:
        """
        An HTTP/2 answer's trailers reach an HTTP/1.1 browser in the last
        chunk.
        """
        running = self.proxy()
        status, _, body, raw = yield self.get(running, "/trailers")
        self.assertEqual((status, body), (200, b"with trailers"))
        self.assertTrue(raw.endswith(b"0\r\nx-checksum: c0ffee\r\n\r\n"), raw)

    @defer.inlineCallbacks
    def test_h2BrowserH2Backend(self) -> Any:
        """
        An HTTP/2 browser's stream becomes a stream toward the backend; its
        answer's trailers reach the browser as HEADERS; the log says HTTP/2
        on both sides.
        """
        running = self.proxy()

        def client() -> Any:
            h2 = H2Client.throughTunnel(running.ports["forward"], "vault.test:443", running.caFile)
            try:
                sids = [h2.get("/trailers", "vault.test"), h2.get("/hello", "vault.test")]
                return h2.wait(*sids)
            finally:
                h2.close()

        trailers, hello = yield threads.deferToThread(client)
        self.assertEqual((trailers.status, bytes(trailers.data)), (200, b"with trailers"))
        self.assertEqual(trailers.trailers, [(b"x-checksum", b"c0ffee")])
        self.assertNotIn(b"transfer-encoding", dict(trailers.headers))
        self.assertEqual((hello.status, bytes(hello.data)), (200, b"hello over h2"))
        self.assertEqual(self.origin.connections, ["h2"])
        ends = yield running.waitForEnds(2)
        for opened, ended in ends:
            self.assertEqual(opened["request"]["version"], "HTTP/2")
            self.assertEqual((ended["response"]["version"], ended["response"]["server_version"]),
                             ("HTTP/2", "HTTP/2"))

    @defer.inlineCallbacks
    def test_hundredStreamsOneConnection(self) -> Any:
        """
        A hundred exchanges at once to a backend that spoke HTTP/2 are a
        hundred streams of one connection, all open together (the backend
        holds each until it has all of them).
        """
        running = self.proxy()
        status, _, body, _ = yield self.get(running, "/hello")
        self.assertEqual(status, 200)

        def client() -> Any:
            h2 = H2Client.throughTunnel(running.ports["forward"], "vault.test:443", running.caFile)
            try:
                sids = [h2.get("/gather", "vault.test") for _ in range(100)]
                return h2.wait(*sids, timeout=60)
            finally:
                h2.close()

        answers = yield threads.deferToThread(client)
        self.assertEqual([a.status for a in answers], [200] * 100)
        self.assertEqual(len({bytes(a.data) for a in answers}), 100, "each answer on its own stream")
        self.assertEqual(self.origin.peak, 100)
        self.assertEqual(self.origin.connections, ["h2"], "one backend connection carried them all")
        yield running.waitForEnds(101)

    @defer.inlineCallbacks
    def test_refusedStreamSentAgain(self) -> Any:
        """
        A stream the backend refused (C{REFUSED_STREAM}) is sent again: the
        browser gets the answer, and the entry has no failure.
        """
        running = self.proxy()
        status, _, body, _ = yield self.get(running, "/refuse-once")
        self.assertEqual((status, body), (200, b"answered after a refusal"))
        self.assertEqual(len(self.origin.requests), 2)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertNotIn("_failed", ended)
        self.assertEqual(ended["response"]["status"], 200)

    @defer.inlineCallbacks
    def test_goawaySentAgain(self) -> Any:
        """
        A request on a stream a C{GOAWAY} left unprocessed is sent again on
        a new connection; the entry has no failure.
        """
        running = self.proxy()
        status, _, body, _ = yield self.get(running, "/goaway-once")
        self.assertEqual((status, body), (200, b"answered after a GOAWAY"))
        self.assertEqual(self.origin.connections, ["h2", "h2"])
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertNotIn("_failed", ended)

    @defer.inlineCallbacks
    def test_unverified(self) -> Any:
        """
        A site with C{verify = false} offers C{h2} too.
        """
        running = RunningProxy(self, f"""
[[site]]
name = "vault"
origins = ["https://vault.test"]
backend = "https://backend.test:{self.origin.port}"
verify = false
""", resolve={"backend.test": "127.0.0.1"})
        status, _, body, _ = yield self.get(running, "/hello")
        self.assertEqual((status, body), (200, b"hello over h2"))
        self.assertEqual(self.origin.connections, ["h2"])

    @defer.inlineCallbacks
    def test_resetMidAnswer(self) -> Any:
        """
        A stream the backend resets in the middle of its answer cuts the
        browser's answer, and the entry is C{_failed} with the reset's code.
        """
        running = self.proxy()

        def client() -> bytes:
            sock = connectTunnel(running.ports["forward"], "vault.test:443", running.sslContext())
            sock.sendall(b"GET /reset-mid HTTP/1.1\r\nHost: vault.test\r\n\r\n")
            raw = b""
            try:
                while True:
                    piece = sock.recv(65536)
                    if not piece:
                        break
                    raw += piece
            except OSError:
                pass
            sock.close()
            return raw

        raw = yield threads.deferToThread(client)
        self.assertIn(b"partial", raw)
        self.assertTrue(raw.endswith(b"partial"), "the browser's answer is cut short of its length")
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["_failed"]["reason"],
                         f"backend.test:{self.origin.port} reset the stream (INTERNAL_ERROR) "
                         "in the middle of the answer")

    @defer.inlineCallbacks
    def test_slowBrowserPausesStream(self) -> Any:
        """
        While the browser reads nothing, the backend's stream is not given
        more window: its sending stalls far short of the body (nothing is
        buffered without bound); when the browser reads, the whole body
        comes.
        """
        running = self.proxy()
        def ask() -> Any:
            sock = connectTunnel(running.ports["forward"], "vault.test:443", running.sslContext())
            sock.sendall(b"GET /big HTTP/1.1\r\nHost: vault.test\r\n\r\n")
            return sock

        sock = yield threads.deferToThread(ask)
        self.addCleanup(sock.close)
        last, still = -1, 0
        for _ in range(200):
            yield task.deferLater(reactor, 0.05, lambda: None)
            if self.origin.bigSent == last and last > 0:
                still += 1
                if still >= 6:
                    break
            else:
                last, still = self.origin.bigSent, 0
        self.assertGreater(self.origin.bigSent, 0)
        self.assertLess(self.origin.bigSent, BIG // 8, "the backend was read although the browser read nothing")

        def readAll() -> int:
            sock.settimeout(30)
            data = b""
            while b"\r\n\r\n" not in data:
                data += sock.recv(1)
            got = 0
            while got < BIG:
                piece = sock.recv(1 << 20)
                if not piece:
                    break
                got += len(piece)
            return got

        got = yield threads.deferToThread(readAll)
        self.assertEqual(got, BIG)
        self.assertEqual(self.origin.bigSent, BIG)

    @defer.inlineCallbacks
    def test_noH2Upstream(self) -> Any:
        """
        With C{--no-h2-upstream} the backend is offered HTTP/1.1 alone and
        speaks it; the entry names no server version of its own.
        """
        running = self.proxy(h2Upstream=False)
        status, _, body, _ = yield self.get(running, "/hello")
        self.assertEqual((status, body), (200, b"hello over http/1.1"))
        self.assertEqual(self.origin.connections, ["http/1.1"])
        self.assertEqual(self.origin.requests[0][0], "HTTP/1.1")
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertNotIn("server_version", ended["response"])

    @defer.inlineCallbacks
    def test_upgradeKeepsHTTP11(self) -> Any:
        """
        A request that asks to upgrade (a WebSocket) goes on an HTTP/1.1
        connection of its own, even to a backend that speaks HTTP/2.
        """
        running = self.proxy()
        status, _, body, _ = yield self.get(running, "/hello")
        self.assertEqual(body, b"hello over h2")
        status, _, body, _ = yield self.get(running, "/socket", headers=[
            ("Connection", "Upgrade"), ("Upgrade", "websocket"), ("Sec-WebSocket-Version", "13"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")])
        self.assertEqual(body, b"hello over http/1.1")
        self.assertEqual(self.origin.connections, ["h2", "http/1.1"])
        [(version, fields)] = self.origin.requests[1:]
        self.assertEqual(version, "HTTP/1.1")
        self.assertIn((b"Upgrade", [b"websocket"]), fields)
