"""
The site proxy's relay, end to end over loopback sockets: live hosts (blind
tunnels, plain requests relayed both ways at once, answers that aren't HTTP),
framing (chunked both ways, trailers, HEAD, 204, 304), WebSockets, https
backends, and an entry that stays open until its answer ends.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import time
from typing import Any

from twisted.internet import defer, reactor, task, threads
from twisted.trial.unittest import TestCase
from twisted.web import resource

from netlog.site.ca import CertificateAuthority
from netlog.site.tls import HostTLS
from tests.site.support import (
    RunningProxy,
    ScriptedServer,
    connectTunnel,
    listenScripted,
    listenWeb,
    openSocket,
    pingThrough,
    readAll,
    readHead,
    readResponse,
    request,
)


def sites(port: int, extra: str = "", connectPorts: tuple[int, ...] = (443,)) -> str:
    return f"""
[[site]]
name = "shop"
origins = ["https://shop.test", "http://shop.test"]
backend = "http://127.0.0.1:{port}"
{extra}
[live]
hosts = ["*.live.test"]
connect_ports = [{", ".join(str(p) for p in connectPorts)}]
"""


class Echo(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Any) -> bytes:
        if request.path == b"/empty":
            request.setResponseCode(204)
            return b""
        if request.path == b"/cached":
            request.setResponseCode(304)
            return b""
        request.setHeader(b"content-type", b"text/plain")
        return b"x" * 100

    def render_HEAD(self, request: Any) -> bytes:
        request.setHeader(b"content-type", b"text/plain")
        request.setHeader(b"content-length", b"100")
        return b""

    def render_POST(self, request: Any) -> bytes:
        request.setHeader(b"content-type", b"text/plain")
        return b"got " + request.content.read()


class LiveTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_tunnel(self) -> Any:
        """
        A live host's CONNECT is a blind tunnel, kept as a connection entry
        with its bytes each way and who closed it; its end line has the
        CONNECT's answer (the 200 the browser got) and C{times.sent} when the
        tunnel connected, as the stand-in writes them.
        """
        def echo(server: ScriptedServer, received: bytes) -> None:
            echoed = getattr(server, "echoed", 0)
            server.transport.write(received[echoed:])
            server.echoed = len(received)  # type: ignore[attr-defined]

        port, _ = listenScripted(self, echo)
        running = RunningProxy(self, sites(1, connectPorts=(port,)), resolve={"echo.live.test": "127.0.0.1"})

        got = yield threads.deferToThread(pingThrough, running.ports["forward"], f"echo.live.test:{port}")
        self.assertEqual(got, b"ping")
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["kind"], "tunnel")
        self.assertEqual(opened["request"]["url"], f"https://echo.live.test:{port}/")
        self.assertEqual(opened["server"]["address"], "127.0.0.1")
        self.assertEqual(ended["bytes"], {"up": 4, "down": 4})
        self.assertEqual(ended["closed_by"], "client")
        self.assertEqual(ended["response"], {
            "status": 200, "reason": "Connection established", "version": "HTTP/1.1",
            "headers": [], "headers_size": len(b"HTTP/1.1 200 Connection established\r\n\r\n"),
            "body": {"size": 0}})
        self.assertIsNotNone(ended["times"]["connected"])
        self.assertEqual(ended["times"]["sent"], ended["times"]["connected"])
        self.assertNotIn("_failed", ended)

    @defer.inlineCallbacks
    def test_tunnelInTheKernel(self) -> Any:
        """
        A live host's blind tunnel is relayed by the kernel (splice), not
        read into Python, and its entry counts the bytes it moved.
        """
        def echo(server: ScriptedServer, received: bytes) -> None:
            echoed = getattr(server, "echoed", 0)
            server.transport.write(received[echoed:])
            server.echoed = len(received)  # type: ignore[attr-defined]

        port, _ = listenScripted(self, echo)
        running = RunningProxy(self, sites(1, connectPorts=(port,)), resolve={"echo.live.test": "127.0.0.1"})
        payload = os.urandom(200_000)

        def open_() -> socket.socket:
            # Back and forth more often than a tunnel relays in Python.
            sock = connectTunnel(running.ports["forward"], f"echo.live.test:{port}", None)
            for i in range(0, len(payload), len(payload) // 20):
                piece = payload[i:i + len(payload) // 20]
                sock.sendall(piece)
                got = b""
                while len(got) < len(piece):
                    got += sock.recv(65536)
                self.assertEqual(got, piece)
            return sock

        sock = yield threads.deferToThread(open_)
        [browser] = running.proxy.connections
        relay = browser.rawPeer.relay
        self.assertTrue(relay.kernel is not None and relay.kernel.active)
        sock.close()
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["bytes"], {"up": len(payload), "down": len(payload)})
        self.assertEqual(ended["closed_by"], "client")
        self.assertFalse(relay.kernel.active)

    @defer.inlineCallbacks
    def test_plainContinue(self) -> Any:
        """
        A plain request to a live host goes both ways at once: the server's
        100 Continue reaches the browser before it sends the body; the entry
        is kept whole and counts the interim answer.
        """
        def serve(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n") and b"hello" not in received:
                server.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            elif received.endswith(b"hello"):
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                       b"Content-Length: 2\r\n\r\nok")

        port, _ = listenScripted(self, serve)
        running = RunningProxy(self, sites(1), resolve={"api.live.test": "127.0.0.1"})

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            sock.sendall(f"POST http://api.live.test:{port}/up HTTP/1.1\r\nHost: api.live.test:{port}\r\n"
                         f"Expect: 100-continue\r\nContent-Length: 5\r\n\r\n".encode())
            interim = readHead(sock)
            sock.sendall(b"hello")
            return interim, readResponse(sock, "POST")

        interim, (status, _, body, _) = yield threads.deferToThread(client)
        self.assertTrue(interim.startswith(b"HTTP/1.1 100"), interim)
        self.assertEqual((status, body), (200, b"ok"))
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["request"]["url"], f"http://api.live.test:{port}/up")
        self.assertEqual(ended["interim"], [100])
        self.assertEqual(base64.b64decode(ended["request_body"]["data"]), b"hello")
        self.assertEqual(base64.b64decode(ended["response"]["body"]["data"]), b"ok")

    @defer.inlineCallbacks
    def test_plainEarlyAnswer(self) -> Any:
        """
        A live host's early 413 reaches the browser while its upload is still
        going; the entry ends with that answer.
        """
        def serve(server: ScriptedServer, received: bytes) -> None:
            if b"\r\n\r\n" in received and not getattr(server, "answered", False):
                server.answered = True  # type: ignore[attr-defined]
                server.transport.write(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 3\r\n"
                                       b"Connection: close\r\n\r\nbig")
                server.transport.loseConnection()

        port, _ = listenScripted(self, serve)
        running = RunningProxy(self, sites(1), resolve={"api.live.test": "127.0.0.1"})

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            sock.sendall(f"POST http://api.live.test:{port}/up HTTP/1.1\r\nHost: api.live.test:{port}\r\n"
                         f"Content-Length: 100000000\r\n\r\n".encode() + b"a" * 1000)
            return readResponse(sock, "POST")

        status, _, body, _ = yield threads.deferToThread(client)
        self.assertEqual((status, body), (413, b"big"))
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["response"]["status"], 413)

    @defer.inlineCallbacks
    def test_unparsed(self) -> Any:
        """
        An answer that isn't HTTP is relayed as it came, and its entry is
        marked C{_unparsed} with the bytes that passed.
        """
        garbage = b"SSH-2.0-OpenSSH_9.0\r\nnot http at all\n"

        def serve(server: ScriptedServer, received: bytes) -> None:
            if b"\r\n\r\n" in received:
                server.transport.write(garbage)
                server.transport.loseConnection()

        port, _ = listenScripted(self, serve)
        running = RunningProxy(self, sites(1), resolve={"odd.live.test": "127.0.0.1"})

        def client() -> bytes:
            sock = openSocket(running.ports["forward"])
            sock.sendall(f"GET http://odd.live.test:{port}/ HTTP/1.1\r\nHost: odd.live.test:{port}\r\n\r\n"
                         .encode())
            return readAll(sock)

        self.assertEqual((yield threads.deferToThread(client)), garbage)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertTrue(ended["_unparsed"])
        self.assertNotIn("response", ended)
        self.assertEqual(ended["bytes"]["down"], len(garbage))


class FramingTests(TestCase):
    timeout = 60

    def setUp(self) -> None:
        self.port = listenWeb(self, Echo())
        self.running = RunningProxy(self, sites(self.port))

    @defer.inlineCallbacks
    def test_chunkedUp(self) -> Any:
        """
        A chunked request body reaches the backend whole and is kept with the
        transfer coding undone.
        """
        running = self.running

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            sock.sendall(b"POST /up HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
            return readResponse(sock, "POST")

        status, _, body, _ = yield threads.deferToThread(client)
        self.assertEqual(body, b"got hello world")
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["request_body"]["size"], 11)
        self.assertEqual(base64.b64decode(ended["request_body"]["data"]), b"hello world")

    @defer.inlineCallbacks
    def test_badChunk(self) -> Any:
        """
        A chunked request body that turns out malformed after its head went
        up (the bad chunk comes in a later read) is answered 400 and its
        entry ends C{_refused}, with the body read before it kept.
        """
        running = self.running

        def client() -> bytes:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            sock.sendall(b"POST /up HTTP/1.1\r\nHost: shop.test\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"5\r\nhello\r\n")
            time.sleep(0.3)
            sock.sendall(b"zz\r\n")
            return readAll(sock)

        answer = yield threads.deferToThread(client)
        self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["_refused"]["status"], 400)
        self.assertEqual(ended["request_body"]["size"], 5)

    @defer.inlineCallbacks
    def test_pipelined(self) -> Any:
        """
        Requests sent back to back on one connection are answered in order.
        """
        running = self.running

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            sock.sendall(b"POST /a HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 1\r\n\r\n1"
                         b"POST /b HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 1\r\n\r\n2")
            return readResponse(sock, "POST"), readResponse(sock, "POST")

        first, second = yield threads.deferToThread(client)
        self.assertEqual((first[2], second[2]), (b"got 1", b"got 2"))
        entries = yield running.waitForEnds(2)
        self.assertEqual([o["request"]["url"] for o, _ in entries],
                         ["https://shop.test/a", "https://shop.test/b"])

    @defer.inlineCallbacks
    def test_headNoContentNotModified(self) -> Any:
        """
        HEAD, 204 and 304 answers carry no body, and the connection goes on
        to the next request.
        """
        running = self.running

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            out = [request(sock, "HEAD", "/h", [("Host", "shop.test")])]
            out.append(request(sock, "GET", "/empty", [("Host", "shop.test")]))
            out.append(request(sock, "GET", "/cached", [("Host", "shop.test")]))
            out.append(request(sock, "GET", "/after", [("Host", "shop.test")]))
            return out

        results = yield threads.deferToThread(client)
        self.assertEqual([r[0] for r in results], [200, 204, 304, 200])
        self.assertEqual([r[2] for r in results], [b"", b"", b"", b"x" * 100])
        entries = yield running.waitForEnds(4)
        self.assertEqual(entries[0][1]["response"]["body"]["size"], 0)

    @defer.inlineCallbacks
    def test_chunkedDownWithTrailers(self) -> Any:
        """
        A chunked answer with trailers reaches the browser with its trailers;
        the entry keeps the body with the transfer coding undone.
        """
        def serve(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n"):
                server.transport.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                    b"Trailer: X-Sum\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\nX-Sum: 7\r\n\r\n")

        port, _ = listenScripted(self, serve)
        running = RunningProxy(self, sites(port))

        def client() -> bytes:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            sock.sendall(b"GET /t HTTP/1.1\r\nHost: shop.test\r\n\r\n")
            return readResponse(sock)[3]

        raw = yield threads.deferToThread(client)
        self.assertIn(b"0\r\nX-Sum: 7\r\n\r\n", raw)
        self.assertIn(b"Transfer-Encoding: chunked", raw)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(base64.b64decode(ended["response"]["body"]["data"]), b'{"a":1}')

    @defer.inlineCallbacks
    def test_chunkedToHTTP10(self) -> Any:
        """
        An HTTP/1.0 browser, which knows no chunks, gets a chunked answer as
        its bytes ended by the close: no Transfer-Encoding, Connection:
        close, the body exactly; the entry keeps the answer as it got it.
        (netlog asks the backend in HTTP/1.1, so the backend may chunk.)
        """
        def serve(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n"):
                server.transport.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                    b"\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")

        port, _ = listenScripted(self, serve)
        running = RunningProxy(self, sites(port))

        def client() -> bytes:
            sock = openSocket(running.ports["forward"])
            sock.sendall(b"GET http://shop.test/old HTTP/1.0\r\nHost: shop.test\r\n\r\n")
            return readAll(sock)

        raw = yield threads.deferToThread(client)
        head, _, body = raw.partition(b"\r\n\r\n")
        self.assertTrue(head.startswith(b"HTTP/1.1 200 OK"), head)
        self.assertNotIn(b"transfer-encoding", head.lower())
        self.assertIn(b"Connection: close", head)
        self.assertEqual(body, b"hello world")
        [(_, ended)] = yield running.waitForEnds(1)
        names = [name.lower() for name, _ in ended["response"]["headers"]]
        self.assertNotIn("transfer-encoding", names)
        self.assertIn("connection", names)
        self.assertEqual(base64.b64decode(ended["response"]["body"]["data"]), b"hello world")
        self.assertEqual(ended["bytes"]["down"], len(raw))

    @defer.inlineCallbacks
    def test_answerCutInTrailers(self) -> Any:
        """
        A backend that closes inside its answer's trailer section: the bytes
        it sent (the last chunk and the trailer cut short) still reach the
        browser as they came before the connection closes, are counted, and
        the entry ends C{_failed}.
        """
        cut = b"0\r\nX-Sum: 7\r\nX-Mo"

        def serve(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n"):
                server.transport.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                    b"\r\n5\r\nhello\r\n" + cut)
                server.transport.loseConnection()

        port, _ = listenScripted(self, serve)
        running = RunningProxy(self, sites(port))

        def client() -> bytes:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            sock.sendall(b"GET /t HTTP/1.1\r\nHost: shop.test\r\n\r\n")
            got = readAll(sock)
            sock.close()
            return got

        raw = yield threads.deferToThread(client)
        self.assertTrue(raw.endswith(b"\r\n\r\n5\r\nhello\r\n" + cut), raw)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertIn("in the middle of the answer", ended["_failed"]["reason"])
        self.assertEqual(ended["bytes"]["down"], len(raw))
        self.assertEqual(base64.b64decode(ended["response"]["body"]["data"]), b"hello")

    @defer.inlineCallbacks
    def test_staleConnectionRetried(self) -> Any:
        """
        A pooled backend connection that turns out closed when the next
        request goes up (the backend closed it as the request was sent) is
        replaced: the request, having no body, is sent again once on a new
        connection and answered.
        """
        def serve(server: ScriptedServer, received: bytes) -> None:
            count = received.count(b"\r\n\r\n")
            if not received.endswith(b"\r\n\r\n"):
                return
            if count == 1:
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                       b"Content-Length: 5\r\n\r\nfirst")
            else:
                server.transport.loseConnection()

        port, servers = listenScripted(self, serve)
        running = RunningProxy(self, sites(port))

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            first = request(sock, "GET", "/1", [("Host", "shop.test")])
            second = request(sock, "GET", "/2", [("Host", "shop.test")])
            return first, second

        first, second = yield threads.deferToThread(client)
        self.assertEqual((first[2], second[2]), (b"first", b"first"))
        self.assertEqual(len(servers), 2)
        (_, end1), (_, end2) = yield running.waitForEnds(2)
        self.assertNotIn("_failed", end2)
        self.assertIsNotNone(end2["times"]["connected"])

    @defer.inlineCallbacks
    def test_openUntilEnded(self) -> Any:
        """
        An exchange's open line is written once its request has gone up; its
        end line only when the answer has ended.
        """
        servers: list[ScriptedServer] = []

        def serve(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n"):
                servers.append(server)
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                       b"Content-Length: 4\r\n\r\nsl")

        port, _ = listenScripted(self, serve)
        running = RunningProxy(self, sites(port))
        sock = socket.socket()

        def client() -> None:
            sock.connect(("127.0.0.1", running.ports["forward"]))
            sock.settimeout(10)
            sock.sendall(b"GET http://shop.test/slow HTTP/1.1\r\nHost: shop.test\r\n\r\n")

        yield threads.deferToThread(client)
        for _ in range(500):
            if servers:
                break
            yield task.deferLater(reactor, 0.01, lambda: None)
        yield task.deferLater(reactor, 0.05, lambda: None)
        [(opened, ended)] = running.entries()
        self.assertIsNone(ended)
        servers[0].transport.write(b"ow")
        result = yield threads.deferToThread(readResponse, sock)
        sock.close()
        self.assertEqual(result[2], b"slow")
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["response"]["body"]["size"], 4)


class HTTPSBackendTests(TestCase):
    timeout = 60

    def setUp(self) -> None:
        folder = os.path.abspath(self.mktemp())
        self.backendCA = CertificateAuthority.loadOrCreate(os.path.join(folder, "backend-ca"))
        self.otherCA = CertificateAuthority.loadOrCreate(os.path.join(folder, "other-ca"))
        # The scripted backend speaks HTTP/1.1 only, and its ALPN says so.
        self.backendCA.protocols = (b"http/1.1",)

        def serve(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n"):
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                       b"Content-Length: 6\r\n\r\nsecure")

        self.port, _ = listenScripted(self, serve, HostTLS(self.backendCA, "backend.test"))

    def _through(self, extra: str) -> Any:
        running = RunningProxy(
            self,
            f"""
[[site]]
name = "vault"
origins = ["https://vault.test"]
backend = "https://backend.test:{self.port}"
{extra}
""",
            resolve={"backend.test": "127.0.0.1"},
        )

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "vault.test:443", running.sslContext())
            return request(sock, "GET", "/", [("Host", "vault.test")])

        return running, threads.deferToThread(client)

    @defer.inlineCallbacks
    def test_verified(self) -> Any:
        """
        An https backend is reached over TLS, verified against the site's
        C{ca_file}.
        """
        running, d = self._through(f'ca_file = "{self.backendCA_path()}"')
        status, _, body, _ = yield d
        self.assertEqual((status, body), (200, b"secure"))

    def backendCA_path(self) -> str:
        path = os.path.abspath(self.mktemp())
        with open(path, "wb") as f:
            f.write(self.backendCA.certPEM())
        return path

    @defer.inlineCallbacks
    def test_notVerified(self) -> Any:
        """
        A backend whose certificate doesn't verify is answered 502, the entry
        C{_failed}.
        """
        path = os.path.abspath(self.mktemp())
        with open(path, "wb") as f:
            f.write(self.otherCA.certPEM())
        running, d = self._through(f'ca_file = "{path}"')
        status, _, _, _ = yield d
        self.assertEqual(status, 502)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertIn("certificate", ended["_failed"]["reason"])

    @defer.inlineCallbacks
    def test_verifyFalse(self) -> Any:
        """
        C{verify = false} reaches a backend whatever its certificate.
        """
        running, d = self._through("verify = false")
        status, _, body, _ = yield d
        self.assertEqual((status, body), (200, b"secure"))


class BackpressureTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_slowBrowserPausesBackend(self) -> Any:
        """
        While the browser reads nothing, the proxy stops reading the backend:
        the backend's sending stalls far short of the body (nothing is
        buffered without bound); when the browser reads, the whole body comes.
        """
        import threading

        total = 64 * 1024 * 1024
        sent = [0]
        block = b"z" * 65536
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        self.addCleanup(listener.close)

        def backend() -> None:
            conn, _ = listener.accept()
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"Content-Length: %d\r\n\r\n" % total)
                try:
                    while sent[0] < total:
                        conn.sendall(block)
                        sent[0] += len(block)
                except OSError:
                    pass

        thread = threading.Thread(target=backend, daemon=True)
        thread.start()
        running = RunningProxy(self, sites(listener.getsockname()[1]))
        sock = openSocket(running.ports["forward"])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        self.addCleanup(sock.close)
        sock.sendall(b"GET http://shop.test/big HTTP/1.1\r\nHost: shop.test\r\n\r\n")
        last, still = -1, 0
        for _ in range(200):
            yield task.deferLater(reactor, 0.05, lambda: None)
            if sent[0] == last and sent[0] > 0:
                still += 1
                if still >= 6:
                    break
            else:
                last, still = sent[0], 0
        self.assertGreater(sent[0], 0)
        self.assertLess(sent[0], total // 4, "the backend was read although the browser read nothing")

        sock.settimeout(30)
        got = yield threads.deferToThread(self._readBody, sock, total)
        self.assertEqual(got, total)
        thread.join(10)

    @staticmethod
    def _readBody(sock: socket.socket, total: int) -> int:
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(1)
        got = 0
        while got < total:
            piece = sock.recv(1 << 20)
            if not piece:
                break
            got += len(piece)
        return got

    @defer.inlineCallbacks
    def test_slowBackendPausesBrowser(self) -> Any:
        """
        While the backend reads nothing, the proxy stops reading the browser's
        upload: the browser's sending stalls far short of the body; when the
        backend reads, the whole upload arrives and is answered.
        """
        import threading

        total = 64 * 1024 * 1024
        sent = [0]
        release = threading.Event()
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        self.addCleanup(listener.close)
        received = [0]

        def backend() -> None:
            conn, _ = listener.accept()
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(1)
                release.wait(30)
                while received[0] < total:
                    piece = conn.recv(1 << 20)
                    if not piece:
                        return
                    received[0] += len(piece)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

        thread = threading.Thread(target=backend, daemon=True)
        thread.start()
        running = RunningProxy(self, sites(listener.getsockname()[1]))
        sock = openSocket(running.ports["forward"])
        sock.settimeout(30)
        self.addCleanup(sock.close)

        def upload() -> bytes:
            sock.sendall(b"POST http://shop.test/up HTTP/1.1\r\nHost: shop.test\r\n"
                         b"Content-Length: %d\r\n\r\n" % total)
            block = b"u" * 65536
            while sent[0] < total:
                sock.sendall(block)
                sent[0] += len(block)
            return readResponse(sock, "POST")[3]

        d = threads.deferToThread(upload)
        last, still = -1, 0
        for _ in range(200):
            yield task.deferLater(reactor, 0.05, lambda: None)
            if sent[0] == last and sent[0] > 0:
                still += 1
                if still >= 6:
                    break
            else:
                last, still = sent[0], 0
        self.assertLess(sent[0], total // 4, "the browser was read although the backend read nothing")
        release.set()
        answer = yield d
        self.assertEqual(received[0], total)
        self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer[:100])
