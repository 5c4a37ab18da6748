"""
Recording for replay and replaying, through the site proxy over loopback
sockets: C{--keep-bodies all} keeps every answer's body, and a proxy
replaying that log answers the same requests with the same bytes without
its backend.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from twisted.internet import defer, threads
from twisted.trial.unittest import TestCase
from twisted.web import resource

from netlog.core.capture import MAX_RESPONSE_BODY
from netlog.core.replay import MatchRules
from netlog.proxy.replay import Replay
from tests.site.support import RunningProxy, listenWeb, openSocket, request

#: A binary answer past the answers' limit.
BIG = bytes(range(256)) * (MAX_RESPONSE_BODY // 256 + 100)
IMAGE = b"\x89PNG" + bytes(range(256)) * 4


class Backend(resource.Resource):
    """
    A backend with a page, an image, a big binary, a JSON API that echoes
    what it got, and a counter of the requests that reached it.
    """

    isLeaf = True

    def __init__(self) -> None:
        resource.Resource.__init__(self)
        self.requests = 0

    def render(self, request: Any) -> bytes:
        self.requests += 1
        path = request.path
        if path == b"/image":
            request.setHeader(b"content-type", b"image/png")
            return IMAGE
        if path == b"/big":
            request.setHeader(b"content-type", b"application/octet-stream")
            return BIG
        if path == b"/api":
            request.setHeader(b"content-type", b"application/json")
            body = request.content.read()
            return json.dumps({"n": self.requests, "got": body.decode("latin-1")}).encode()
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        request.setHeader(b"x-served", str(self.requests).encode())
        return b"<p>page %d</p>" % self.requests


def sites(port: int, extra: str = "") -> str:
    return f"""
[[site]]
name = "shop"
origins = ["http://shop.test"]
backend = "http://127.0.0.1:{port}"
{extra}
"""


def get(port: int, path: str, method: str = "GET", body: bytes = b"",
        headers: list[tuple[str, str]] | None = None) -> tuple[int, dict[str, str], bytes, bytes]:
    sock = openSocket(port)
    try:
        extra = list(headers or [])
        if body:
            extra.append(("Content-Length", str(len(body))))
        return request(sock, method, "http://shop.test" + path, [("Host", "shop.test"), *extra], body)
    finally:
        sock.close()


class KeepBodiesTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_keepAll(self) -> Any:
        """
        With C{--keep-bodies all} a binary answer's body is kept (with its
        sha256, as without); one past the limit is kept to the limit and
        marked C{_truncated}. Without it, a binary answer keeps its size
        and sha256 only.
        """
        backend = Backend()
        port = listenWeb(self, backend)
        keeping = RunningProxy(self, sites(port), modeOptions={"keepAll": True})
        plain = RunningProxy(self, sites(port))
        for proxy in (keeping, plain):
            yield threads.deferToThread(get, proxy.ports["forward"], "/image")
            yield threads.deferToThread(get, proxy.ports["forward"], "/big")
        (_, image), (_, big) = yield keeping.waitForEnds(2)
        body = image["response"]["body"]
        self.assertEqual(base64.b64decode(body["data"]), IMAGE)
        self.assertEqual(body["sha256"], hashlib.sha256(IMAGE).hexdigest())
        body = big["response"]["body"]
        self.assertEqual(base64.b64decode(body["data"]), BIG[:MAX_RESPONSE_BODY])
        self.assertTrue(body["_truncated"])
        self.assertEqual(body["size"], len(BIG))
        (_, image), (_, big) = yield plain.waitForEnds(2)
        self.assertNotIn("data", image["response"]["body"])
        self.assertNotIn("data", big["response"]["body"])
