"""
The site proxy keeping a big request body: kept as base64 as it arrives and
written into its end line without copies, the line is exactly the line the
plain encoding of its fields gives; before a big body grows, free memory is
handed back.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from twisted.internet import defer, threads
from twisted.trial.unittest import SynchronousTestCase, TestCase

from netlog.core.logline import encodeLine
from netlog.proxy import exchange as exchangeModule
from tests.site.support import RunningProxy, listenWeb, openSocket, request
from tests.site.test_relay import Echo, sites


class BigBodyTests(TestCase):
    timeout = 60

    def setUp(self) -> None:
        self.port = listenWeb(self, Echo())
        self.running = RunningProxy(self, sites(self.port))
        self.gaveBack: list[float] = []
        self.patch(exchangeModule, "giveBackFreeMemory", self.gaveBack.append)

    def linesOfFile(self) -> list[bytes]:
        assert self.running.logPath is not None
        with open(self.running.logPath, "rb") as f:
            return f.read().splitlines()

    @defer.inlineCallbacks
    def test_bigUploadLine(self) -> Any:
        """
        A 3 MB upload (past the spill into a memory map) is kept whole; its
        end line is byte for byte the plain encoding of what it says, and
        free memory was handed back once as the body grew.
        """
        body = bytes(range(251)) * 12000
        running = self.running

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            with sock:
                return request(sock, "POST", "http://shop.test/up",
                               [("Host", "shop.test"), ("Content-Length", str(len(body)))], body)

        status, _, answer, _ = yield threads.deferToThread(client)
        self.assertEqual((status, len(answer)), (200, len(body) + 4))
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["request_body"]["size"], len(body))
        self.assertNotIn("_truncated", ended["request_body"])
        self.assertEqual(base64.b64decode(ended["request_body"]["data"]), body)
        self.assertEqual(len(self.gaveBack), 1)
        for line in self.linesOfFile():
            record = json.loads(line)
            fixed = [record.pop(k) for k in ("n", "type", "id", "open_from", "time")]
            self.assertEqual(encodeLine(*fixed, record), line + b"\n")

    @defer.inlineCallbacks
    def test_smallUploadNoGiveBack(self) -> Any:
        """
        A small body doesn't hand memory back.
        """
        running = self.running

        def client() -> Any:
            sock = openSocket(running.ports["forward"])
            with sock:
                return request(sock, "POST", "http://shop.test/up",
                               [("Host", "shop.test"), ("Content-Length", "5")], b"hello")

        status, _, answer, _ = yield threads.deferToThread(client)
        self.assertEqual(answer, b"got hello")
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(base64.b64decode(ended["request_body"]["data"]), b"hello")
        self.assertEqual(self.gaveBack, [])


class GiveBackTests(SynchronousTestCase):
    def test_collectAtMostOncePerInterval(self) -> None:
        """
        Free memory is handed back each time; unreachable cycles are
        collected at most once every C{COLLECT_INTERVAL} seconds, and a
        clock that went back doesn't stop that for good.
        """
        self.patch(exchangeModule, "_lastCollect", None)
        collections: list[None] = []
        self.patch(exchangeModule.gc, "collect", lambda: collections.append(None))
        interval = exchangeModule.COLLECT_INTERVAL
        give = exchangeModule.giveBackFreeMemory
        self.assertEqual(
            [give(100.0), give(100.0 + interval / 2), give(100.0 + interval), give(50.0)],
            [True, False, True, True],
        )
        self.assertEqual(len(collections), 3)
