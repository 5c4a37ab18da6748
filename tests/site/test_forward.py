"""
The site proxy's forward port and routes, end to end over loopback sockets and
real TLS: decrypted CONNECTs, plain requests, refusals, failures, the HTTPS and
HTTP routes, keep-alive and pooling, rewrites.
"""

from __future__ import annotations

import base64
import gzip
import json
import ssl
from typing import Any

from twisted.internet import defer, reactor, task, threads
from twisted.trial.unittest import TestCase
from twisted.web import resource

from tests.site.support import (
    RunningProxy,
    connectTunnel,
    listenWeb,
    openSocket,
    readAll,
    request,
)


class Shop(resource.Resource):
    """
    A backend that echoes what it got, sets cookies naming itself and
    redirects to itself, as a real app behind a proxy does.
    """

    isLeaf = True

    def __init__(self) -> None:
        resource.Resource.__init__(self)
        self.port = 0
        self.clients: set[Any] = set()
        self.seen: list[dict[str, Any]] = []

    def render(self, request: Any) -> bytes:
        self.clients.add(request.transport.getPeer().port)
        body = request.content.read()
        self.seen.append({"method": request.method, "uri": request.uri, "body": body,
                          "headers": dict(request.requestHeaders.getAllRawHeaders())})
        path = request.path
        if path == b"/redirect":
            request.setResponseCode(302)
            request.setHeader(b"location", b"http://127.0.0.1:%d/landed" % self.port)
            request.addCookie(b"sid", b"s1", domain=b"127.0.0.1", path=b"/")
            return b""
        if path == b"/gzip":
            request.setHeader(b"content-type", b"application/json")
            request.setHeader(b"content-encoding", b"gzip")
            return gzip.compress(b'{"ok": true}')
        if path == b"/image":
            request.setHeader(b"content-type", b"image/png")
            return b"\x89PNG" + bytes(range(256)) * 4
        request.setHeader(b"content-type", b"application/json")
        return json.dumps({"method": request.method.decode(), "uri": request.uri.decode(),
                           "body": body.decode("latin-1")}).encode()


def sites(port: int, extra: str = "") -> str:
    return f"""
[[site]]
name = "shop"
origins = ["https://shop.test", "http://shop.test"]
backend = "http://127.0.0.1:{port}"
sign_in_headers = ["X-Auth"]
{extra}
[live]
hosts = ["*.live.test"]
"""


class ForwardTests(TestCase):
    timeout = 60

    def setUp(self) -> None:
        self.shop = Shop()
        self.shop.port = listenWeb(self, self.shop)
        self.running = RunningProxy(self, sites(self.shop.port), resolve={})

    @defer.inlineCallbacks
    def test_connectDecrypted(self) -> Any:
        """
        A site's CONNECT is decrypted with a certificate minted by netlog's CA;
        each request in it goes to the backend, over one pooled connection,
        and is kept whole: URL, headers (sign-in values removed, cookies
        kept), body, answer.
        """
        running = self.running

        def client() -> list[Any]:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            first = request(sock, "GET", "/search?q=shoes&page=2",
                            [("Host", "shop.test"), ("Cookie", "sid=abc"), ("X-Auth", "secret"),
                             ("Referer", "https://shop.test/")])
            second = request(sock, "POST", "/cart", [("Host", "shop.test"),
                                                     ("Content-Type", "application/x-www-form-urlencoded"),
                                                     ("Content-Length", "9")], b"item=42&n")
            sock.close()
            return [first, second]

        first, second = yield threads.deferToThread(client)
        self.assertEqual(first[0], 200)
        self.assertEqual(json.loads(first[2])["uri"], "/search?q=shoes&page=2")
        self.assertEqual(json.loads(second[2])["body"], "item=42&n")
        self.assertEqual(len(self.shop.clients), 1, "both requests went over one backend connection")
        entries = yield running.waitForEnds(2)
        (open1, end1), (open2, end2) = entries
        self.assertEqual(open1["proxy"], "site")
        self.assertEqual(open1["kind"], "exchange")
        self.assertEqual(open1["request"]["url"], "https://shop.test/search?q=shoes&page=2")
        self.assertIn(["X-Auth", "<removed>"], open1["request"]["headers"])
        self.assertIn(["Cookie", "sid=abc"], open1["request"]["headers"])
        self.assertEqual(open1["connection"], open2["connection"])
        self.assertEqual(open1["server"], {"host": "127.0.0.1", "port": self.shop.port, "address": "127.0.0.1"})
        self.assertEqual(end1["response"]["status"], 200)
        self.assertEqual(json.loads(base64.b64decode(end1["response"]["body"]["data"]))["uri"],
                         "/search?q=shoes&page=2")
        self.assertIsNotNone(end1["times"]["connected"])
        self.assertIsNone(end2["times"]["connected"], "the second reused the pooled connection")
        for key in ("sent", "first_byte", "end"):
            self.assertIsNotNone(end2["times"][key])
        self.assertEqual(end2["request_body"], {"size": 9, "data": base64.b64encode(b"item=42&n").decode()})
        self.assertGreater(end2["bytes"]["up"], 9)
        self.assertGreater(end2["bytes"]["down"], 0)

    @defer.inlineCallbacks
    def test_plainToSite(self) -> Any:
        """
        A plain-HTTP request to a site on the forward port goes to its backend
        with an origin-form target and is kept whole.
        """
        running = self.running

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            return request(sock, "GET", "http://shop.test/plain?x=1", [("Host", "shop.test")])

        status, _, body, _ = yield threads.deferToThread(client)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["uri"], "/plain?x=1")
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["request"]["url"], "http://shop.test/plain?x=1")
        self.assertEqual(ended["response"]["status"], 200)

    @defer.inlineCallbacks
    def test_rewrites(self) -> Any:
        """
        A Location and a cookie's Domain naming the backend name the site's
        public origin; the log keeps the answer as the browser got it.
        """
        running = self.running

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            return request(sock, "GET", "/redirect", [("Host", "shop.test")])

        status, headers, _, _ = yield threads.deferToThread(client)
        self.assertEqual(status, 302)
        self.assertEqual(headers["location"], "https://shop.test/landed")
        self.assertIn("Domain=shop.test", headers["set-cookie"])
        [(_, ended)] = yield running.waitForEnds(1)
        logged = dict((k.lower(), v) for k, v in ended["response"]["headers"])
        self.assertEqual(logged["location"], "https://shop.test/landed")
        self.assertIn("Domain=shop.test", logged["set-cookie"])

    @defer.inlineCallbacks
    def test_bodiesKept(self) -> Any:
        """
        A gzipped JSON answer is kept as it came (content coding kept); an
        image keeps only its size and sha256.
        """
        running = self.running

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            a = request(sock, "GET", "/gzip", [("Host", "shop.test")])
            b = request(sock, "GET", "/image", [("Host", "shop.test")])
            return a, b

        (_, _, gz, _), (_, _, image, _) = yield threads.deferToThread(client)
        (_, gzEnd), (_, imageEnd) = yield running.waitForEnds(2)
        self.assertEqual(base64.b64decode(gzEnd["response"]["body"]["data"]), gz)
        self.assertEqual(gzip.decompress(gz), b'{"ok": true}')
        import hashlib

        self.assertEqual(imageEnd["response"]["body"],
                         {"size": len(image), "sha256": hashlib.sha256(image).hexdigest()})

    @defer.inlineCallbacks
    def test_refused(self) -> Any:
        """
        A host that is neither a site nor an allowed live host is refused with
        a 403 naming it, on CONNECT and plain requests alike; the log has an
        open and an end line marked C{_refused}.
        """
        running = self.running

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            plain = request(sock, "GET", "http://elsewhere.test/x", [("Host", "elsewhere.test")])
            sock = openSocket(running.ports["forward"])
            sock.sendall(b"CONNECT elsewhere.test:443 HTTP/1.1\r\nHost: elsewhere.test:443\r\n\r\n")
            connect = readAll(sock)
            return plain, connect

        plain, connect = yield threads.deferToThread(client)
        self.assertEqual(plain[0], 403)
        self.assertIn(b"elsewhere.test", plain[2])
        self.assertTrue(connect.startswith(b"HTTP/1.1 403"), connect)
        entries = yield running.waitForEnds(2)
        for (opened, ended), kind in zip(entries, ["exchange", "tunnel"]):
            self.assertEqual(opened["kind"], kind)
            self.assertEqual(ended["_refused"]["status"], 403)
            self.assertIn("elsewhere.test", ended["_refused"]["reason"])
        self.assertEqual(entries[1][0]["request"]["url"], "https://elsewhere.test:443/")

    @defer.inlineCallbacks
    def test_untrustedCA(self) -> Any:
        """
        A browser that doesn't trust netlog's CA ends the TLS handshake of a
        site's CONNECT: the log has a tunnel entry saying so (the alert, and
        what to do), where before it had nothing. A handshake that finishes
        and carries no request leaves no entry.
        """
        running = self.running

        def client() -> str:
            distrusting = ssl.create_default_context()  # the system's CAs only
            try:
                connectTunnel(running.ports["forward"], "shop.test:443", distrusting)
            except ssl.SSLError as e:
                failed = str(e)
            else:
                raise AssertionError("the handshake succeeded without trusting netlog's CA")
            trusting = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            trusting.close()
            return failed

        failed = yield threads.deferToThread(client)
        self.assertIn("CERTIFICATE_VERIFY_FAILED", failed)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["kind"], "tunnel")
        self.assertEqual(opened["request"]["method"], "CONNECT")
        self.assertEqual(opened["request"]["url"], "https://shop.test:443/")
        self.assertEqual(opened["server"]["host"], "shop.test")
        reason = ended["_failed"]["reason"]
        self.assertIn("the TLS handshake with the browser failed", reason)
        self.assertIn("unknown ca", reason.lower())
        self.assertIn("doesn't trust netlog's CA", reason)
        self.assertEqual(ended["response"]["status"], 200)
        yield task.deferLater(reactor, 0.3, lambda: None)
        self.assertEqual(len(running.lines()), 2, "the trusted, empty tunnel leaves no entry")

    @defer.inlineCallbacks
    def test_closedInHandshake(self) -> Any:
        """
        A browser that closes a site's tunnel before sending anything into it
        (no TLS handshake, no request) leaves an entry saying so.
        """
        running = self.running

        def client() -> None:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", None)
            sock.close()

        yield threads.deferToThread(client)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["kind"], "tunnel")
        self.assertEqual(ended["_failed"], {"reason": "the browser closed the tunnel before sending anything into it"})

    @defer.inlineCallbacks
    def test_liveConnectPort(self) -> Any:
        """
        A live host's CONNECT to a port C{[live] connect_ports} doesn't list
        (443 by default) is refused with a 403 naming the port, before
        anything is resolved; the entry is a C{_refused} tunnel.
        """
        running = self.running

        def client() -> bytes:
            sock = openSocket(running.ports["forward"])
            sock.sendall(b"CONNECT mail.live.test:25 HTTP/1.1\r\nHost: mail.live.test:25\r\n\r\n")
            return readAll(sock)

        answer = yield threads.deferToThread(client)
        self.assertTrue(answer.startswith(b"HTTP/1.1 403"), answer)
        self.assertIn(b"port 25", answer)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["kind"], "tunnel")
        self.assertEqual(opened["server"], {"host": "mail.live.test", "port": 25, "address": None})
        self.assertEqual(ended["_refused"]["status"], 403)
        self.assertIn("connect_ports", ended["_refused"]["reason"])

    @defer.inlineCallbacks
    def test_doesNotResolve(self) -> Any:
        """
        A live host that doesn't resolve is answered 502, for a plain request
        and for a CONNECT; each entry is C{_failed} with the reason and that
        C{status}.
        """
        running = self.running

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            plain = request(sock, "GET", "http://gone.live.test/", [("Host", "gone.live.test")])
            sock = openSocket(running.ports["forward"])
            sock.sendall(b"CONNECT gone.live.test:443 HTTP/1.1\r\nHost: gone.live.test:443\r\n\r\n")
            return plain, readAll(sock)

        plain, connect = yield threads.deferToThread(client)
        self.assertEqual(plain[0], 502)
        self.assertTrue(connect.startswith(b"HTTP/1.1 502"), connect)
        entries = yield running.waitForEnds(2)
        for opened, ended in entries:
            self.assertEqual(ended["_failed"], {"reason": "gone.live.test doesn't resolve", "status": 502})
            self.assertEqual(ended["response"]["status"], 502)
        self.assertEqual([o["kind"] for o, _ in entries], ["exchange", "tunnel"])

    @defer.inlineCallbacks
    def test_backendDown(self) -> Any:
        """
        A site whose backend refuses connections is answered 502, C{_failed}.
        """
        from tests.support import freePort

        running = RunningProxy(self, sites(freePort()))

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            return request(sock, "GET", "/", [("Host", "shop.test")])

        status, _, body, _ = yield threads.deferToThread(client)
        self.assertEqual(status, 502)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertIn("refused the connection", ended["_failed"]["reason"])

    @defer.inlineCallbacks
    def test_malformed(self) -> Any:
        """
        A malformed request is turned down with the reader's status before
        anything is connected, and logged C{_refused}.
        """
        running = self.running

        def client() -> bytes:
            sock = openSocket(running.ports["forward"])
            sock.sendall(b"GET http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\nContent-Length: x\r\n\r\n")
            return readAll(sock)

        answer = yield threads.deferToThread(client)
        self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["_refused"]["status"], 400)
        self.assertEqual(self.shop.seen, [])


class RouteTests(TestCase):
    timeout = 60

    def setUp(self) -> None:
        self.shop = Shop()
        self.shop.port = listenWeb(self, self.shop)
        self.running = RunningProxy(self, sites(self.shop.port))

    @defer.inlineCallbacks
    def test_httpsRoute(self) -> Any:
        """
        The HTTPS route serves a site by SNI (a certificate for its name) and
        Host; a Host that isn't a site is refused.
        """
        running = self.running

        def client() -> Any:
            raw = openSocket(running.ports["https-route"])
            sock = running.sslContext().wrap_socket(raw, server_hostname="shop.test")
            peer = sock.getpeercert()
            good = request(sock, "GET", "/routed", [("Host", "shop.test")])
            bad = request(sock, "GET", "/", [("Host", "other.test")])
            return peer, good, bad, sock.selected_alpn_protocol()

        peer, good, bad, alpn = yield threads.deferToThread(client)
        self.assertIn(("DNS", "shop.test"), peer["subjectAltName"])
        self.assertEqual(alpn, "http/1.1")
        self.assertEqual(good[0], 200)
        self.assertEqual(bad[0], 403)
        entries = yield running.waitForEnds(2)
        self.assertEqual(entries[0][0]["request"]["url"], "https://shop.test/routed")

    @defer.inlineCallbacks
    def test_httpRoute(self) -> Any:
        """
        The HTTP route answers 308 to the site's HTTPS origin, path and query
        kept, and logs that answer.
        """
        running = self.running

        def client() -> Any:
            sock = openSocket(running.ports["http-route"])
            first = request(sock, "GET", "/a/b?c=d", [("Host", "shop.test")])
            second = request(sock, "GET", "/again", [("Host", "shop.test")])
            return first, second

        first, second = yield threads.deferToThread(client)
        self.assertEqual(first[0], 308)
        self.assertEqual(first[1]["location"], "https://shop.test/a/b?c=d")
        self.assertEqual(second[1]["location"], "https://shop.test/again", "kept alive")
        entries = yield running.waitForEnds(2)
        opened, ended = entries[0]
        self.assertEqual(opened["request"]["url"], "http://shop.test/a/b?c=d")
        self.assertEqual(ended["response"]["status"], 308)
        self.assertIn(["Location", "https://shop.test/a/b?c=d"], ended["response"]["headers"])

    @defer.inlineCallbacks
    def test_noLog(self) -> Any:
        """
        With no log, the proxy serves all the same.
        """
        running = RunningProxy(self, sites(self.shop.port), logging=False)

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            return request(sock, "POST", "/x", [("Host", "shop.test"), ("Content-Length", "3")], b"abc")

        status, _, body, _ = yield threads.deferToThread(client)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["body"], "abc")
        self.assertFalse(running.proxy.logging)

    @defer.inlineCallbacks
    def test_untrusted(self) -> Any:
        """
        The minted certificate is refused by a client that doesn't trust
        netlog's CA (it is really netlog's own).
        """
        running = self.running

        def client() -> Any:
            context = ssl.create_default_context()
            try:
                connectTunnel(running.ports["forward"], "shop.test:443", context)
            except ssl.SSLCertVerificationError:
                return True
            return False

        self.assertTrue((yield threads.deferToThread(client)))
