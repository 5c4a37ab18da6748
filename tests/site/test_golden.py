"""
The golden test, in the spirit of the change netlog grew out of: a browser's
session through the real site proxy over real sockets and TLS, read back as
log lines and as HAR (checked against the HAR schema and WebArena-Verified's
own loader).
"""

from __future__ import annotations

import gzip
import json
import socket
from typing import Any

import pytest
from twisted.internet import defer, reactor, task, threads
from twisted.internet.protocol import Factory
from twisted.trial.unittest import TestCase
from twisted.web import resource, server
from wsproto import ConnectionType, WSConnection
from wsproto.events import AcceptConnection, CloseConnection, Message, Request, TextMessage

from tests.har.support import validate, wavLoad
from tests.site.support import (
    RunningProxy,
    ScriptedServer,
    connectTunnel,
    listenScripted,
    listenWeb,
    openSocket,
    readAll,
    readResponse,
    request,
)
from tests.site.test_websocket import EchoServer

BIG_TEXT = b"<p>" + b"a" * (1024 * 1024 + 100) + b"</p>"
IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 16
LATIN1 = "<html><body>Caf\xe9 cr\xe8me</body></html>".encode("latin-1")
NAVIGATION = [
    ("Accept", "text/html,application/xhtml+xml"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-Site", "same-origin"),
    ("Sec-Fetch-User", "?1"),
]


class Shop(resource.Resource):
    isLeaf = True

    def __init__(self) -> None:
        resource.Resource.__init__(self)
        self.port = 0

    def render_GET(self, request: Any) -> Any:
        path = request.path
        if path == b"/big":
            request.setHeader(b"content-type", b"text/html")
            return BIG_TEXT
        if path == b"/logo.png":
            request.setHeader(b"content-type", b"image/png")
            return IMAGE
        if path == b"/latin":
            request.setHeader(b"content-type", b"text/html; charset=iso-8859-1")
            request.setHeader(b"set-cookie", b"lang=fr; Path=/; Expires=Wed, 01 Jan 2031 00:00:00 GMT")
            return LATIN1
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        return b"<html>search results for " + request.args.get(b"q", [b""])[0] + b"</html>"

    def render_POST(self, request: Any) -> Any:
        path = request.path
        body = request.content.read()
        if path == b"/login":
            request.setResponseCode(303)
            request.setHeader(b"location", b"http://127.0.0.1:%d/account" % self.port)
            request.addCookie(b"session", b"s3cr3t", path=b"/", domain=b"127.0.0.1")
            return b""
        if path == b"/api/items":
            request.setHeader(b"content-type", b"application/json")
            request.setHeader(b"content-encoding", b"gzip")
            packed = gzip.compress(json.dumps({"saved": json.loads(body)}).encode())
            half = len(packed) // 2
            request.write(packed[:half])
            request.write(packed[half:])
            request.finish()
            return server.NOT_DONE_YET
        request.setHeader(b"content-type", b"application/json")
        return json.dumps({"size": len(body)}).encode()


@pytest.mark.slow
class GoldenTests(TestCase):
    timeout = 120

    @defer.inlineCallbacks
    def test_session(self) -> Any:
        """
        Each kind of exchange a browser makes through the site proxy comes
        out of the log and the HAR as a grader needs it.
        """
        shop = Shop()
        shop.port = listenWeb(self, shop)
        ws = reactor.listenTCP(0, Factory.forProtocol(EchoServer), interface="127.0.0.1")
        self.addCleanup(ws.stopListening)

        def liveServe(server: ScriptedServer, received: bytes) -> None:
            if received.startswith(b"GET") and received.endswith(b"\r\n\r\n"):
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nlive")
            elif not received.startswith(b"GET"):
                echoed = getattr(server, "echoed", 0)
                server.transport.write(received[echoed:])
                server.echoed = len(received)  # type: ignore[attr-defined]

        livePort, _ = listenScripted(self, liveServe)
        held: list[ScriptedServer] = []

        def slowServe(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n"):
                held.append(server)
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nwa")

        slowPort, _ = listenScripted(self, slowServe)
        running = RunningProxy(self, f"""
[[site]]
name = "shop"
origins = ["https://shop.test", "http://shop.test"]
backend = "http://127.0.0.1:{shop.port}"
sign_in_headers = ["Authorization"]

[[site]]
name = "chat"
origins = ["https://chat.test"]
backend = "http://127.0.0.1:{ws.getHost().port}"

[[site]]
name = "slow"
origins = ["https://slow.test", "http://slow.test"]
backend = "http://127.0.0.1:{slowPort}"

[live]
hosts = ["*.live.test"]
connect_ports = [443, {livePort}]
""", resolve={"www.live.test": "127.0.0.1"})
        forward = running.ports["forward"]

        def browse() -> dict[str, Any]:
            seen: dict[str, Any] = {}
            sock = connectTunnel(forward, "shop.test:443", running.sslContext())
            host = [("Host", "shop.test")]
            seen["search"] = request(sock, "GET", "/search?q=red+shoes&page=2", host + NAVIGATION + [
                ("Cookie", "sid=abc; theme=dark"), ("Authorization", "Bearer tok"),
                ("Referer", "https://shop.test/")])
            form = b"user=alice&password=pw+1"
            seen["login"] = request(sock, "POST", "/login", host + [
                ("Content-Type", "application/x-www-form-urlencoded"), ("Content-Length", str(len(form)))], form)
            item = json.dumps({"name": "hat", "qty": 2}).encode()
            half = len(item) // 2
            chunked = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (half, item[:half], len(item) - half, item[half:])
            seen["json"] = request(sock, "POST", "/api/items", host + [
                ("Content-Type", "application/json"), ("Transfer-Encoding", "chunked")], chunked)
            multipart = (b"--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nPhoto\r\n"
                         b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n"
                         b"Content-Type: text/plain\r\n\r\nhello file\r\n--XyZ--\r\n")
            seen["upload"] = request(sock, "POST", "/upload", host + [
                ("Content-Type", "multipart/form-data; boundary=XyZ"), ("Content-Length", str(len(multipart)))],
                multipart)
            seen["big"] = request(sock, "GET", "/big", host)
            seen["image"] = request(sock, "GET", "/logo.png", host)
            seen["latin"] = request(sock, "GET", "/latin", host + NAVIGATION)
            sock.close()
            sock = openSocket(running.ports["http-route"])
            seen["route"] = request(sock, "GET", "/search?q=x", [("Host", "shop.test")])
            sock.close()
            # A WebSocket.
            sock = connectTunnel(forward, "chat.test:443", running.sslContext())
            conn = WSConnection(ConnectionType.CLIENT)
            sock.sendall(conn.send(Request(host="chat.test", target="/live")))
            echoes = 0
            while echoes < 2:
                conn.receive_data(sock.recv(65536))
                for event in conn.events():
                    if isinstance(event, AcceptConnection):
                        sock.sendall(conn.send(TextMessage(data="one")) + conn.send(TextMessage(data="two")))
                    elif isinstance(event, Message):
                        echoes += 1
            sock.sendall(conn.send(CloseConnection(code=1000)))
            readAll(sock)
            sock.close()
            # A live host: a blind tunnel and a plain request.
            sock = connectTunnel(forward, f"www.live.test:{livePort}", None)
            sock.sendall(b"hello")
            seen["tunnel"] = b""
            while len(seen["tunnel"]) < 5:
                seen["tunnel"] += sock.recv(5)
            sock.close()
            sock = openSocket(forward)
            seen["livePlain"] = request(sock, "GET", f"http://www.live.test:{livePort}/page",
                                        [("Host", f"www.live.test:{livePort}")])
            sock.close()
            sock = openSocket(forward)
            sock.sendall(b"CONNECT nowhere.live.test:443 HTTP/1.1\r\nHost: nowhere.live.test:443\r\n\r\n")
            seen["unresolved"] = readAll(sock)
            sock = openSocket(forward)
            sock.sendall(b"CONNECT blocked.example:443 HTTP/1.1\r\nHost: blocked.example:443\r\n\r\n")
            seen["refused"] = readAll(sock)
            return seen

        seen = yield threads.deferToThread(browse)
        self.assertEqual(seen["search"][0], 200)
        self.assertEqual(seen["login"][1]["location"], "https://shop.test/account")
        self.assertEqual(json.loads(gzip.decompress(seen["json"][2])), {"saved": {"name": "hat", "qty": 2}})
        self.assertEqual(seen["big"][2], BIG_TEXT)
        self.assertEqual(seen["route"][1]["location"], "https://shop.test/search?q=x")
        self.assertEqual(seen["tunnel"], b"hello")
        self.assertEqual(seen["livePlain"][2], b"live")
        self.assertTrue(seen["unresolved"].startswith(b"HTTP/1.1 502"))
        self.assertTrue(seen["refused"].startswith(b"HTTP/1.1 403"))

        # An exchange whose answer hasn't ended is open in the log and the HAR.
        slow = socket.create_connection(("127.0.0.1", forward), timeout=10)
        self.addCleanup(slow.close)
        yield threads.deferToThread(slow.sendall, b"GET http://slow.test/wait HTTP/1.1\r\nHost: slow.test\r\n\r\n")
        for _ in range(500):
            if held:
                break
            yield task.deferLater(reactor, 0.01, lambda: None)
        yield task.deferLater(reactor, 0.05, lambda: None)
        har = yield threads.deferToThread(self.har, running)
        self.assertTrue(har["log"]["entries"][-1].get("_open"))
        held[0].transport.write(b"it")
        yield threads.deferToThread(readResponse, slow)
        yield running.waitForEnds(14)

        lines = running.lines()
        self.assertEqual([line["n"] for line in lines], list(range(1, len(lines) + 1)))
        entries = running.entries()
        urls = [opened["request"]["url"] for opened, _ in entries]
        self.assertEqual(urls, [
            "https://shop.test/search?q=red+shoes&page=2",
            "https://shop.test/login",
            "https://shop.test/api/items",
            "https://shop.test/upload",
            "https://shop.test/big",
            "https://shop.test/logo.png",
            "https://shop.test/latin",
            "http://shop.test/search?q=x",
            "wss://chat.test/live",
            f"https://www.live.test:{livePort}/",
            f"http://www.live.test:{livePort}/page",
            "https://nowhere.live.test:443/",
            "https://blocked.example:443/",
            "http://slow.test/wait",
        ])
        self.assertTrue(all(opened["proxy"] == "site" for opened, _ in entries))

        raw, har = yield threads.deferToThread(self.harBytes, running)
        byUrl = {e["request"]["url"]: e for e in har["log"]["entries"]}
        search = byUrl["https://shop.test/search?q=red+shoes&page=2"]
        headers = {h["name"].lower(): h["value"] for h in search["request"]["headers"]}
        self.assertEqual(headers["authorization"], "<removed>")
        self.assertEqual(headers["cookie"], "sid=abc; theme=dark")
        self.assertEqual(headers["referer"], "https://shop.test/")
        self.assertEqual(headers["sec-fetch-user"], "?1")
        self.assertIn({"name": "q", "value": "red shoes"}, search["request"]["queryString"])
        self.assertIn({"name": "sid", "value": "abc"}, [{"name": c["name"], "value": c["value"]}
                                                        for c in search["request"]["cookies"]])
        login = byUrl["https://shop.test/login"]
        self.assertEqual(login["response"]["status"], 303)
        self.assertEqual(login["response"]["redirectURL"], "https://shop.test/account")
        self.assertEqual(login["request"]["postData"]["text"], "user=alice&password=pw+1")
        self.assertIn({"name": "password", "value": "pw 1"},
                      [{"name": p["name"], "value": p["value"]} for p in login["request"]["postData"]["params"]])
        self.assertEqual([c["name"] for c in login["response"]["cookies"]], ["session"])
        items = byUrl["https://shop.test/api/items"]
        self.assertEqual(json.loads(items["request"]["postData"]["text"]), {"name": "hat", "qty": 2})
        self.assertEqual(json.loads(items["response"]["content"]["text"]), {"saved": {"name": "hat", "qty": 2}})
        upload = byUrl["https://shop.test/upload"]
        self.assertIn("boundary=XyZ", upload["request"]["postData"]["mimeType"])
        self.assertIn("hello file", upload["request"]["postData"]["text"])
        big = byUrl["https://shop.test/big"]
        self.assertEqual(big["response"]["content"]["size"], len(BIG_TEXT))
        self.assertTrue(big["response"]["content"].get("_truncated"))
        image = byUrl["https://shop.test/logo.png"]
        self.assertNotIn("text", image["response"]["content"])
        import hashlib

        self.assertEqual(image["response"]["content"]["_sha256"], hashlib.sha256(IMAGE).hexdigest())
        latin = byUrl["https://shop.test/latin"]
        self.assertEqual(latin["response"]["content"]["text"], LATIN1.decode("latin-1"))
        self.assertEqual(latin["response"]["cookies"][0]["name"], "lang")
        route = byUrl["http://shop.test/search?q=x"]
        self.assertEqual(route["response"]["status"], 308)
        chat = byUrl["wss://chat.test/live"]
        self.assertEqual(chat["response"]["status"], 101)
        self.assertEqual((chat["_websocket"]["messages_up"], chat["_websocket"]["messages_down"]), (2, 2))
        tunnel = byUrl[f"https://www.live.test:{livePort}/"]
        self.assertEqual((tunnel["_tunnel"]["bytes_up"], tunnel["_tunnel"]["bytes_down"]), (5, 5))
        self.assertEqual(byUrl[f"http://www.live.test:{livePort}/page"]["response"]["content"]["text"], "live")
        self.assertIn("doesn't resolve", byUrl["https://nowhere.live.test:443/"]["_failed"]["reason"])
        self.assertEqual((byUrl["https://nowhere.live.test:443/"]["response"]["status"],
                          byUrl["https://nowhere.live.test:443/"]["_failed"]["status"]), (-1, 502))
        self.assertEqual(byUrl["https://blocked.example:443/"]["_refused"]["status"], 403)
        self.assertEqual(byUrl["https://blocked.example:443/"]["response"]["status"], -1)
        self.assertNotIn("_open", byUrl["http://slow.test/wait"])

        self.assertEqual(validate(raw), [])
        loaded = yield threads.deferToThread(wavLoad, raw)
        self.assertTrue(loaded)

    @staticmethod
    def harBytes(running: RunningProxy) -> tuple[bytes, dict[str, Any]]:
        import io

        from netlog.har.export import writeHar

        out = io.BytesIO()
        assert running.logPath is not None
        writeHar(running.logPath, out)
        return out.getvalue(), json.loads(out.getvalue())

    def har(self, running: RunningProxy) -> dict[str, Any]:
        return self.harBytes(running)[1]
