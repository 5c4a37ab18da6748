"""
The site proxy when things go wrong, end to end over loopback sockets: a
server that goes silent (the idle timeout), a request on a stale pooled
connection that must not be sent twice, a request the strict reader refuses,
a browser that never finishes its head or leaves while netlog connects, and
what the end lines say about each (C{_failed.status} when netlog answered
itself, a tunnel's C{200}).
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet import defer, reactor, task, threads
from twisted.trial.unittest import TestCase

from netlog.net.resolve import Resolution
from tests.site.support import (
    RunningProxy,
    ScriptedServer,
    connectTunnel,
    listenScripted,
    openSocket,
    readAll,
    request,
)

#: The idle and header timeouts these tests give the proxy (seconds).
SHORT = 1.0


def sites(port: int, connectPorts: tuple[int, ...] = (443,)) -> str:
    return f"""
[[site]]
name = "shop"
origins = ["https://shop.test", "http://shop.test"]
backend = "http://127.0.0.1:{port}"

[live]
hosts = ["*.live.test"]
connect_ports = [{", ".join(str(p) for p in connectPorts)}]
"""


def silent(server: ScriptedServer, received: bytes) -> None:
    """
    A backend that reads and never answers.
    """


class IdleTimeoutTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_silentBeforeAnswer(self) -> Any:
        """
        A backend that accepts the request and never answers: after the idle
        timeout the browser gets a 504 naming it, and the entry ends
        C{_failed} with that reason and C{status} 504; the logged response is
        the 504 the browser got.
        """
        port, servers = listenScripted(self, silent)
        running = RunningProxy(self, sites(port), idleTimeout=SHORT)

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            return request(sock, "GET", "http://shop.test/slow", [("Host", "shop.test")])

        status, _, body, _ = yield threads.deferToThread(client)
        self.assertEqual(status, 504)
        self.assertIn(b"--idle-timeout", body)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["request"]["url"], "http://shop.test/slow")
        self.assertEqual(ended["_failed"], {
            "reason": "the server sent nothing for 1 seconds (see --idle-timeout)", "status": 504})
        self.assertEqual(ended["response"]["status"], 504)
        self.assertEqual(len(servers), 1)

    @defer.inlineCallbacks
    def test_silentAfterAnswerBegan(self) -> Any:
        """
        A backend that sends a head and part of its body, then nothing: after
        the idle timeout the browser's connection is cut (it gets no more than
        the server sent) and the entry ends C{_failed}, without a C{status}
        (the answer was the server's).
        """
        def partial(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n"):
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                       b"Content-Length: 100\r\n\r\n0123456789")

        port, _ = listenScripted(self, partial)
        running = RunningProxy(self, sites(port), idleTimeout=SHORT)

        def client() -> bytes:
            sock = openSocket(running.ports["forward"])
            sock.sendall(b"GET http://shop.test/ HTTP/1.1\r\nHost: shop.test\r\n\r\n")
            return readAll(sock)

        answer = yield threads.deferToThread(client)
        self.assertTrue(answer.startswith(b"HTTP/1.1 200 OK"), answer)
        self.assertTrue(answer.endswith(b"\r\n\r\n0123456789"), answer)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["_failed"], {
            "reason": "the server sent nothing for 1 seconds (see --idle-timeout)"})
        self.assertEqual(ended["response"]["status"], 200)

    @defer.inlineCallbacks
    def test_silentWebSocket(self) -> Any:
        """
        A WebSocket where nothing passes either way for the idle timeout is
        cut, and its entry ends C{_failed} (closed by the proxy), without a
        C{status}.
        """
        def upgrade(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n") and not getattr(server, "upgraded", False):
                server.upgraded = True  # type: ignore[attr-defined]
                server.transport.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                       b"Connection: Upgrade\r\nSec-WebSocket-Accept: x\r\n\r\n")

        port, _ = listenScripted(self, upgrade)
        running = RunningProxy(self, sites(port), idleTimeout=SHORT)

        def client() -> bytes:
            sock = openSocket(running.ports["forward"])
            sock.sendall(b"GET http://shop.test/ws HTTP/1.1\r\nHost: shop.test\r\nUpgrade: websocket\r\n"
                         b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                         b"Sec-WebSocket-Version: 13\r\n\r\n")
            return readAll(sock)

        answer = yield threads.deferToThread(client)
        self.assertTrue(answer.startswith(b"HTTP/1.1 101"), answer)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["_failed"], {
            "reason": "the server sent nothing for 1 seconds (see --idle-timeout)"})
        self.assertEqual(ended["closed_by"], "proxy")
        self.assertEqual(ended["response"]["status"], 101)


class RetryTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_postNotRetried(self) -> Any:
        """
        A POST sent on a pooled connection that the backend closes without
        answering is not sent again: the backend sees it once, the browser
        gets a 502 and the entry ends C{_failed} with C{status} 502.
        """
        posts: list[bytes] = []

        def serve(server: ScriptedServer, received: bytes) -> None:
            if received.startswith(b"GET ") and received.endswith(b"\r\n\r\n"):
                server.received = b""
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            elif received.startswith(b"POST ") and received.endswith(b"item=42"):
                posts.append(received)
                server.transport.loseConnection()

        port, servers = listenScripted(self, serve)
        running = RunningProxy(self, sites(port))

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            first = request(sock, "GET", "http://shop.test/", [("Host", "shop.test")])
            second = request(sock, "POST", "http://shop.test/cart",
                             [("Host", "shop.test"), ("Content-Length", "7")], b"item=42")
            return first, second

        first, second = yield threads.deferToThread(client)
        self.assertEqual(first[0], 200)
        self.assertEqual(second[0], 502)
        self.assertEqual(len(posts), 1, "the POST reached the backend once")
        entries = yield running.waitForEnds(2)
        (_, end1), (open2, end2) = entries
        self.assertEqual(open2["request"]["method"], "POST")
        self.assertIsNone(end2["times"]["connected"], "the POST went on the pooled connection")
        self.assertEqual(end2["_failed"]["status"], 502)
        self.assertIn("closed the connection before answering", end2["_failed"]["reason"])
        self.assertEqual(end2["response"]["status"], 502)

    @defer.inlineCallbacks
    def test_getRetried(self) -> Any:
        """
        A bodiless GET on a pooled connection that the backend closes without
        answering is still sent again, once, on a new connection, and answered.
        """
        def serve(server: ScriptedServer, received: bytes) -> None:
            if not received.endswith(b"\r\n\r\n"):
                return
            if server is servers[0] and received.count(b"\r\n\r\n") >= 2:
                server.transport.loseConnection()
                return
            server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

        port, servers = listenScripted(self, serve)
        running = RunningProxy(self, sites(port))

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            first = request(sock, "GET", "http://shop.test/1", [("Host", "shop.test")])
            second = request(sock, "GET", "http://shop.test/2", [("Host", "shop.test")])
            return first, second

        first, second = yield threads.deferToThread(client)
        self.assertEqual((first[0], second[0]), (200, 200))
        self.assertEqual(len(servers), 2, "sent again on a new connection")
        entries = yield running.waitForEnds(2)
        self.assertNotIn("_failed", entries[1][1])


class RefusedRequestTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_malformedKeepsRequestLine(self) -> Any:
        """
        A request the strict reader refuses is logged with the method, URL,
        version and host its request line gives, not empty ones.
        """
        running = RunningProxy(self, sites(1))

        def client() -> bytes:
            sock = openSocket(running.ports["forward"])
            sock.sendall(b"GET http://shop.test/cart?x=1 HTTP/1.1\r\nHost: shop.test\r\n"
                         b"Content-Length: x\r\n\r\n")
            return readAll(sock)

        answer = yield threads.deferToThread(client)
        self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["request"]["method"], "GET")
        self.assertEqual(opened["request"]["url"], "http://shop.test/cart?x=1")
        self.assertEqual(opened["request"]["version"], "HTTP/1.1")
        self.assertEqual(opened["server"]["host"], "shop.test")
        self.assertEqual(opened["server"]["port"], 80)
        self.assertEqual(ended["_refused"]["status"], 400)

    @defer.inlineCallbacks
    def test_malformedDecrypted(self) -> Any:
        """
        Inside a decrypted CONNECT, a refused request's origin-form target is
        logged as an https URL on the tunnel's host.
        """
        running = RunningProxy(self, sites(1))

        def client() -> bytes:
            sock = connectTunnel(running.ports["forward"], "shop.test:443", running.sslContext())
            sock.sendall(b"GET /a HTTP/1.1\r\nHost: shop.test\r\nContent-Length: x\r\n\r\n")
            return readAll(sock)

        answer = yield threads.deferToThread(client)
        self.assertTrue(answer.startswith(b"HTTP/1.1 400"), answer)
        [(opened, _)] = yield running.waitForEnds(1)
        self.assertEqual(opened["request"]["method"], "GET")
        self.assertEqual(opened["request"]["url"], "https://shop.test/a")
        self.assertEqual(opened["server"]["host"], "shop.test")

    @defer.inlineCallbacks
    def test_headerTimeout(self) -> Any:
        """
        A browser that begins a request head and doesn't finish it within the
        header timeout gets a 408, logged C{_refused} with what of the request
        line came.
        """
        running = RunningProxy(self, sites(1), headerTimeout=SHORT)

        def client() -> bytes:
            sock = openSocket(running.ports["forward"])
            sock.sendall(b"GET http://shop.test/slow HTTP/1.1\r\nHost: sh")
            return readAll(sock)

        answer = yield threads.deferToThread(client)
        self.assertTrue(answer.startswith(b"HTTP/1.1 408 Request Timeout"), answer)
        self.assertIn(b"--header-timeout", answer)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["request"]["method"], "GET")
        self.assertEqual(opened["request"]["url"], "http://shop.test/slow")
        self.assertEqual(ended["_refused"], {
            "reason": "the request head did not arrive whole within 1 seconds (see --header-timeout)",
            "status": 408})
        self.assertEqual(ended["response"]["status"], 408)

    @defer.inlineCallbacks
    def test_headerTimeoutNotBetweenRequests(self) -> Any:
        """
        The header timeout counts only once a head has begun: a keep-alive
        connection quiet between requests for longer is still served.
        """
        from twisted.web import resource

        from tests.site.support import listenWeb

        class Ok(resource.Resource):
            isLeaf = True

            def render_GET(self, request: Any) -> bytes:
                return b"ok"

        port = listenWeb(self, Ok())
        running = RunningProxy(self, sites(port), headerTimeout=SHORT)
        sock = yield threads.deferToThread(openSocket, running.ports["forward"])
        self.addCleanup(sock.close)
        first = yield threads.deferToThread(request, sock, "GET", "http://shop.test/", [("Host", "shop.test")])
        yield task.deferLater(reactor, SHORT * 1.5, lambda: None)
        second = yield threads.deferToThread(request, sock, "GET", "http://shop.test/", [("Host", "shop.test")])
        self.assertEqual((first[0], second[0]), (200, 200))


class HeldResolver:
    """
    A resolver whose answers wait until the test releases them.
    """

    def __init__(self) -> None:
        self.waiting: list[defer.Deferred[Resolution]] = []

    def resolve(self, host: str) -> defer.Deferred[Resolution]:
        d: defer.Deferred[Resolution] = defer.Deferred()
        self.waiting.append(d)
        return d

    def release(self) -> None:
        waiting, self.waiting = self.waiting, []
        for d in waiting:
            d.callback(Resolution("127.0.0.1", ("127.0.0.1",), named=True))


class TunnelTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_browserLeavesMidConnect(self) -> Any:
        """
        A browser that closes its connection while netlog is still resolving
        or connecting (a CONNECT to a live host, a plain request to one)
        leaves an entry each, ended C{_failed} saying the browser left; the
        connection made afterwards is let go.
        """
        port, servers = listenScripted(self, silent)
        running = RunningProxy(self, sites(1, connectPorts=(port,)))
        held = HeldResolver()
        running.proxy.resolver = held  # type: ignore[assignment]

        def send(data: bytes) -> None:
            sock = openSocket(running.ports["forward"])
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
            readAll(sock)
            sock.close()

        tunnel = threads.deferToThread(
            send, f"CONNECT slow.live.test:{port} HTTP/1.1\r\nHost: slow.live.test:{port}\r\n\r\n".encode())
        plain = threads.deferToThread(
            send, f"GET http://slow.live.test:{port}/ HTTP/1.1\r\nHost: slow.live.test:{port}\r\n\r\n".encode())
        for _ in range(500):
            if len(held.waiting) == 2:
                break
            yield task.deferLater(reactor, 0.01, lambda: None)
        self.assertEqual(len(held.waiting), 2, running.lines())
        yield defer.gatherResults([tunnel, plain])
        entries = yield running.waitForEnds(2)
        kinds = sorted(opened["kind"] for opened, _ in entries)
        self.assertEqual(kinds, ["exchange", "tunnel"])
        for opened, ended in entries:
            self.assertTrue(ended["_failed"]["reason"].startswith("the browser closed the connection before"),
                            ended)
            self.assertNotIn("status", ended["_failed"])
            self.assertEqual(opened["request"]["url"].split("/")[2], f"slow.live.test:{port}")
        held.release()
        for _ in range(500):
            if len(servers) == 2:
                break
            yield task.deferLater(reactor, 0.01, lambda: None)
        yield task.deferLater(reactor, 0.1, lambda: None)
        self.assertEqual(len(running.entries()), 2, "nothing more is logged once it connects")


class SilentResolverTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_timeoutWhileConnecting(self) -> Any:
        """
        A request whose server can't be reached within the idle timeout (here
        its name never resolves) gets a 504; its entry is written whole,
        C{_failed} with C{status} 504.
        """
        running = RunningProxy(self, sites(1), idleTimeout=SHORT)
        held = HeldResolver()
        running.proxy.resolver = held  # type: ignore[assignment]

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            return request(sock, "GET", "http://slow.live.test/", [("Host", "slow.live.test")])

        status, _, _, _ = yield threads.deferToThread(client)
        self.assertEqual(status, 504)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["request"]["url"], "http://slow.live.test/")
        self.assertEqual(ended["_failed"], {
            "reason": "the server sent nothing for 1 seconds (see --idle-timeout)", "status": 504})
        held.release()
        yield task.deferLater(reactor, 0.1, lambda: None)
        self.assertEqual(len(running.lines()), 2, "nothing more is logged once it resolves")
