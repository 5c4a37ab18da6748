"""
Sites are matched by origin (scheme, host and port) over real sockets: sites
that share a host on different ports each get their own requests, another
port of a site's host gets nothing, and a site's CONNECT carries plain HTTP
when the browser sends no TLS handshake (how browsers open C{ws://}).
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, threads
from twisted.trial.unittest import TestCase
from twisted.web import resource

from tests.site.support import RunningProxy, connectTunnel, listenScripted, listenWeb, openSocket, readAll, request

#: WebArena's sites, as its environment lays them out: all on localhost.
WEBARENA = {"shopping": 7770, "shopping_admin": 7780, "reddit": 9999, "gitlab": 8023,
            "wikipedia": 8888, "map": 3000}


class Named(resource.Resource):
    """
    A backend that answers with its own name and counts what it got.
    """

    isLeaf = True

    def __init__(self, name: str) -> None:
        resource.Resource.__init__(self)
        self.name = name
        self.paths: list[bytes] = []

    def render(self, request: Any) -> bytes:
        self.paths.append(request.uri)
        request.setHeader(b"content-type", b"text/plain")
        return self.name.encode()


class OriginTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_sitesShareAHost(self) -> Any:
        """
        WebArena's six sites on C{localhost}, each on its own port: a request
        for each origin reaches that site's backend and no other.
        """
        backends = {name: Named(name) for name in WEBARENA}
        toml = "".join(
            f'[[site]]\nname = "{name}"\norigins = ["http://localhost:{port}"]\n'
            f'backend = "http://127.0.0.1:{listenWeb(self, backends[name])}"\n'
            for name, port in WEBARENA.items()
        )
        running = RunningProxy(self, toml, routes=False)

        def browse() -> dict[str, bytes]:
            got = {}
            for name, port in WEBARENA.items():
                sock = openSocket(running.ports["forward"])
                got[name] = request(sock, "GET", f"http://localhost:{port}/page", [("Host", f"localhost:{port}")])[2]
                sock.close()
            return got

        got = yield threads.deferToThread(browse)
        self.assertEqual(got, {name: name.encode() for name in WEBARENA})
        self.assertEqual({name: b.paths for name, b in backends.items()}, {name: [b"/page"] for name in WEBARENA})
        ended = yield running.waitForEnds(len(WEBARENA))
        self.assertEqual([opened["request"]["url"] for opened, _ in ended],
                         [f"http://localhost:{port}/page" for port in WEBARENA.values()])

    @defer.inlineCallbacks
    def test_otherPortRefused(self) -> Any:
        """
        A site on port 8080 does not receive a request for port 9999 of the
        same host: it is refused (C{403}, C{_refused} naming the origin),
        and nothing reaches any backend.
        """
        backend, connections = listenScripted(self, lambda server, data: None)
        running = RunningProxy(self, f"""
[[site]]
name = "app"
origins = ["http://127.0.0.1:8080", "https://127.0.0.1:8443"]
backend = "http://127.0.0.1:{backend}"
""", routes=False)

        def browse() -> tuple[int, bytes]:
            sock = openSocket(running.ports["forward"])
            status, _, body, _ = request(sock, "POST", "http://127.0.0.1:9999/upload",
                                         [("Host", "127.0.0.1:9999"), ("Content-Length", "2")], b"hi")
            sock.close()
            return status, body

        status, body = yield threads.deferToThread(browse)
        self.assertEqual(status, 403)
        self.assertIn(b"http://127.0.0.1:9999 is not a site's origin", body)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["_refused"]["status"], 403)
        self.assertEqual(connections, [], "the backend got a connection")

    @defer.inlineCallbacks
    def test_plainHttpInsideConnect(self) -> Any:
        """
        A CONNECT to a site's C{http://} origin whose first bytes are not a
        TLS handshake is read as plain HTTP: the request reaches the site's
        backend and is kept as a plain-HTTP request to that origin is.
        """
        shop = Named("shop")
        running = RunningProxy(self, f"""
[[site]]
name = "shop"
origins = ["http://shop.test:7770"]
backend = "http://127.0.0.1:{listenWeb(self, shop)}"
""", routes=False)

        def browse() -> tuple[int, bytes, bytes]:
            sock = connectTunnel(running.ports["forward"], "shop.test:7770", None)
            status, _, body, _ = request(sock, "GET", "/inside?x=1", [("Host", "shop.test:7770")])
            sock.close()
            refused = openSocket(running.ports["forward"])
            refused.sendall(b"CONNECT shop.test:7771 HTTP/1.1\r\nHost: shop.test:7771\r\n\r\n")
            return status, body, readAll(refused)

        status, body, refused = yield threads.deferToThread(browse)
        self.assertEqual((status, body), (200, b"shop"))
        self.assertTrue(refused.startswith(b"HTTP/1.1 403 "), refused)
        ended = yield running.waitForEnds(2)
        urls = sorted(opened["request"]["url"] for opened, _ in ended)
        self.assertEqual(urls, ["http://shop.test:7770/inside?x=1", "https://shop.test:7771/"])
        self.assertEqual(shop.paths, [b"/inside?x=1"])
