"""
The API's readers by exchange id and line number (C{GET /exchange?id=N},
C{GET /exchanges/ID}, C{GET /exchanges?after=N}) find exchanges in closed,
compressed segments, over a real loopback listener, opening only the
segments that hold them.
"""

from __future__ import annotations

import json
import os
from typing import Any, cast

from twisted.internet import defer, reactor
from twisted.trial.unittest import TestCase
from twisted.web.client import Agent, readBody
from twisted.web.http_headers import Headers
from twisted.web.server import Site

from netlog.api.door import Door
from netlog.api.root import makeApiRoot
from netlog.core.segments import Rotation
from netlog.log.series import listing, segmentPath
from netlog.log.writer import LogWriter

from .test_rotation import WAIT
from .test_writer import publicTempDir


def opened(i: int) -> dict[str, Any]:
    return {
        "proxy": "site", "kind": "exchange", "started": 1796428800.0 + i, "client": "127.0.0.1:5000",
        "request": {"method": "GET", "url": f"https://shop.test/item/{i}", "version": "HTTP/1.1",
                    "headers": [["Host", "shop.test"]], "headers_size": 40},
        "server": {"host": "shop.test", "port": 443, "address": "127.0.0.1"},
    }


def ended(i: int, status: int = 200) -> dict[str, Any]:
    return {
        "ended": 1796428800.5 + i,
        "times": {"connected": None, "sent": None, "first_byte": None, "end": 1796428800.5 + i},
        "response": {"status": status, "reason": "OK", "version": "HTTP/1.1",
                     "headers": [["Content-Type", "text/plain"]], "headers_size": 30,
                     "body": {"size": 2, "data": "b2s="}},
        "bytes": {"up": 40, "down": 62},
    }


class ExchangeInSegmentsTests(TestCase):
    def setUp(self) -> None:
        folder = publicTempDir(self)
        self.path = os.path.join(folder, "network.jsonl")
        writer = LogWriter(self.path, rotation=Rotation(size=4000))
        writer.startService()
        self.addCleanup(lambda: writer.running and writer.stopService())
        self.long = writer.open(opened(-1))
        self.ids = []
        for i in range(120):
            self.ids.append(writer.open(opened(i)))
            writer.end(self.ids[-1], ended(i))
        writer.end(self.long, ended(-1, 206))
        self.longEnd = writer.nextNumber - 1
        for i in range(120, 130):
            self.ids.append(writer.open(opened(i)))
            writer.end(self.ids[-1], ended(i))
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        self.segments = listing(self.path).segments
        self.assertGreaterEqual(len(self.segments), 10)
        self.assertTrue(all(s.compressed for s in self.segments))
        root = makeApiRoot(reactor, reactor.getThreadPool(), self.path, lambda: None, door=Door("t" * 32))
        self.port = reactor.listenTCP(0, Site(root), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        self.agent = Agent(reactor)

    @defer.inlineCallbacks
    def get(self, path: str) -> Any:
        url = f"http://127.0.0.1:{self.port.getHost().port}{path}".encode()
        response = yield self.agent.request(b"GET", url, Headers())
        body = yield readBody(response)
        return response.code, json.loads(body)

    def spoilBefore(self, line: int) -> None:
        """
        Overwrite every closed segment that ends before line C{line}: a
        reader that opened one would fail.
        """
        for segment, following in zip(self.segments, self.segments[1:]):
            if following.first <= line:
                with open(segmentPath(self.path, segment), "wb") as f:
                    f.write(b"not zstandard\n")

    @defer.inlineCallbacks
    def test_detail(self) -> None:
        """
        GET /exchange?id=N answers an exchange whose lines are in compressed
        segments (its open and end in different ones, for the long one),
        with end=M too; segments before the one holding it are not opened.
        """
        inFirst = self.ids[2]
        self.assertLess(inFirst, self.segments[1].first)
        code, body = yield self.get(f"/exchange?id={inFirst}")
        self.assertEqual(code, 200, body)
        self.assertEqual(body["entry"]["request"]["url"], "https://shop.test/item/2")
        self.assertEqual(body["entry"]["response"]["status"], 200)
        code, body = yield self.get(f"/exchange?id={self.long}&end={self.longEnd}")
        self.assertEqual(code, 200, body)
        self.assertEqual(body["entry"]["response"]["status"], 206)
        code, body = yield self.get(f"/exchange?id={self.long}")
        self.assertEqual((code, body["entry"]["response"]["status"]), (200, 206))
        middle = self.ids[60]
        self.spoilBefore(middle)
        code, body = yield self.get(f"/exchange?id={middle}")
        self.assertEqual((code, body["entry"]["request"]["url"]), (200, "https://shop.test/item/60"))
        code, body = yield self.get(f"/exchange?id={middle + 1}")
        self.assertEqual(code, 404, body)

    @defer.inlineCallbacks
    def test_whole(self) -> None:
        """
        GET /exchanges/ID answers an exchange in a compressed segment whole.
        """
        code, body = yield self.get(f"/exchanges/{self.ids[5]}")
        self.assertEqual(code, 200, body)
        self.assertEqual(body["request"]["url"], "https://shop.test/item/5")
        self.assertEqual(body["response"]["status"], 200)
        code, body = yield self.get(f"/exchanges/{self.long}")
        self.assertEqual((code, body["response"]["status"]), (200, 206))

    @defer.inlineCallbacks
    def test_search(self) -> None:
        """
        GET /exchanges?after=N searches from the segment holding line N+1,
        compressed or not: after 0, every exchange of the series, in the
        order they ended.
        """
        code, body = yield self.get("/exchanges?filter=url:/item/&limit=500")
        self.assertEqual(code, 200, body)
        urls = [e["url"] for e in cast(list[dict[str, Any]], body["exchanges"])]
        expected = [f"https://shop.test/item/{i}" for i in range(120)] + ["https://shop.test/item/-1"]
        expected += [f"https://shop.test/item/{i}" for i in range(120, 130)]
        self.assertEqual(urls, expected)
        after = self.ids[40]
        code, body = yield self.get(f"/exchanges?filter=url:/item/&after={after}&limit=3")
        self.assertEqual([e["url"] for e in body["exchanges"]],
                         [f"https://shop.test/item/{i}" for i in (40, 41, 42)])
