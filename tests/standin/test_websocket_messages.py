"""
WebSocket messages through the stand-in (a real C{twistd netlog-standin}):
on a plain C{ws://} it relays with an C{Upgrade}, each message is a line,
as through the site proxy.
"""

from __future__ import annotations

import socket
from typing import Any

from twisted.internet import defer, reactor
from twisted.internet.protocol import Factory
from twisted.trial import unittest

from netlog.core.wsmessages import MESSAGE_CAP
from tests.site.support import CLIENT_TIMEOUT
from tests.site.test_websocket_messages import BIG, WHOLE, DeflateEcho, talk
from tests.standin.support import Standin, inThread, tempDirectory


class StandinMessageTests(unittest.TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_plainWs(self) -> Any:
        """
        A ws:// WebSocket with permessage-deflate through the stand-in: the
        101's head line, one message line per message each way (inflated,
        the big one cut at 1 MB), the close codes on the end line.
        """
        listening = reactor.listenTCP(0, Factory.forProtocol(DeflateEcho), interface="127.0.0.1")
        self.addCleanup(listening.stopListening)
        port = listening.getHost().port
        standin = Standin(self, tempDirectory(self), ["--resolve", "echo.test=127.0.0.1"])
        yield standin.start()

        def client() -> dict[str, Any]:
            sock = socket.create_connection(("127.0.0.1", standin.port), timeout=CLIENT_TIMEOUT)
            return talk(sock, f"echo.test:{port}", f"http://echo.test:{port}/socket")

        result = yield inThread(client)
        self.assertEqual(result["got"], WHOLE)
        yield standin.waitEnded(1)
        lines = standin.lines()
        self.assertEqual([line["type"] for line in lines[:2]], ["open", "head"])
        self.assertEqual(lines[0]["request"]["url"], f"ws://echo.test:{port}/socket")
        messages = [line for line in lines if line["type"] == "message"]
        for direction in ("up", "down"):
            side = [m for m in messages if m["direction"] == direction]
            self.assertEqual([m.get("data") for m in side[:1] + side[2:3]], ["hello", "fragmented"])
            self.assertEqual((side[3]["size"], len(side[3]["data"]), side[3]["_truncated"]),
                             (len(BIG), MESSAGE_CAP, True))
        end = lines[-1]
        self.assertEqual(end["type"], "end")
        self.assertEqual(end["_websocket"]["close_up"], {"code": 1000, "reason": "done"})
