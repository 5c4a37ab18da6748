"""
Answers still streaming, seen through the API while they stream: an
event stream's head line comes with its head, a slow download's a second
after it; a quick exchange stays at two lines.
"""

from __future__ import annotations

import json
import time
from typing import Any

from twisted.internet import defer, reactor, threads
from twisted.internet.task import deferLater
from twisted.trial.unittest import TestCase
from twisted.web import resource, server
from twisted.web.client import Agent, readBody
from twisted.web.http_headers import Headers
from twisted.web.server import Site

from netlog.api.root import makeApiRoot
from netlog.proxy.exchange import HEAD_LINE_DELAY
from tests.site.support import RunningProxy, listenWeb, openSocket, readHead

#: Seconds the tests poll for a line before giving up.
POLL_LIMIT = 5.0


class Streams(resource.Resource):
    """
    C{/events}: an event stream that stays open; C{/slow}: a download that
    sends its head and a part, then waits; C{/quick}: a whole answer.
    """

    isLeaf = True

    def __init__(self) -> None:
        super().__init__()
        self.held: list[Any] = []

    def render_GET(self, request: Any) -> Any:
        if request.path == b"/quick":
            request.setHeader(b"content-type", b"text/plain")
            return b"done"
        if request.path == b"/events":
            request.setHeader(b"content-type", b"text/event-stream")
            request.write(b"data: hello\n\n")
        else:
            request.setHeader(b"content-type", b"application/octet-stream")
            request.setHeader(b"content-length", b"100000")
            request.write(b"x" * 1000)
        self.held.append(request)
        return server.NOT_DONE_YET

    def release(self) -> None:
        for request in self.held:
            if not request.finished and not request._disconnected:
                request.loseConnection()


class StreamingTests(TestCase):
    timeout = 30

    def setUp(self) -> None:
        self.streams = Streams()
        port = listenWeb(self, self.streams)
        self.addCleanup(self.streams.release)
        self.running = RunningProxy(self, f"""
[[site]]
name = "stream"
origins = ["http://stream.test"]
backend = "http://127.0.0.1:{port}"
""")
        root = makeApiRoot(reactor, reactor.getThreadPool(), self.running.logPath)
        api = reactor.listenTCP(0, Site(root), interface="127.0.0.1")
        self.addCleanup(api.stopListening)
        self.api = f"http://127.0.0.1:{api.getHost().port}"
        self.agent = Agent(reactor)

    @defer.inlineCallbacks
    def get(self, path: str) -> Any:
        response = yield self.agent.request(b"GET", (self.api + path).encode(), Headers())
        body = yield readBody(response)
        return json.loads(body)

    def startStream(self, path: str) -> Any:
        """
        Ask for C{path} through the forward port; return the socket once
        the answer's head has come, and when it came.
        """
        def ask() -> tuple[Any, float]:
            sock = openSocket(self.running.ports["forward"])
            sock.sendall(f"GET http://stream.test{path} HTTP/1.1\r\nHost: stream.test\r\n\r\n".encode())
            head = readHead(sock)
            assert head.startswith(b"HTTP/1.1 200"), head
            return sock, time.time()

        return threads.deferToThread(ask)

    @defer.inlineCallbacks
    def pollForHead(self) -> Any:
        for _ in range(int(POLL_LIMIT / 0.05)):
            page = yield self.get("/network?after=0")
            heads = [line for line in page["lines"] if line["type"] == "head"]
            if heads:
                return page["lines"], time.time()
            yield deferLater(reactor, 0.05, lambda: None)
        raise AssertionError("no head line")

    @defer.inlineCallbacks
    def test_eventStream(self) -> Any:
        """
        Polling GET /network while an event stream is open shows its status
        and headers within a second of its head; a HAR exported mid-stream
        has them, the entry still open.
        """
        sock, headAt = yield self.startStream("/events")
        self.addCleanup(sock.close)
        lines, seenAt = yield self.pollForHead()
        self.assertLess(seenAt - headAt, 1.0)
        self.assertEqual([line["type"] for line in lines], ["open", "head"])
        head = lines[1]
        self.assertEqual(head["id"], lines[0]["id"])
        self.assertEqual(head["response"]["status"], 200)
        self.assertIn(["Content-Type", "text/event-stream"], head["response"]["headers"])
        response = yield self.agent.request(b"GET", (self.api + "/network.har").encode(), Headers())
        har = json.loads((yield readBody(response)))
        [entry] = har["log"]["entries"]
        self.assertIs(entry["_open"], True)
        self.assertEqual(entry["response"]["status"], 200)
        self.assertIn({"name": "Content-Type", "value": "text/event-stream"}, entry["response"]["headers"])
        self.assertNotIn("_webSocketMessages", entry)

    @defer.inlineCallbacks
    def test_slowDownload(self) -> Any:
        """
        An answer whose body hasn't ended a second after its head gets its
        head line then, not before.
        """
        sock, headAt = yield self.startStream("/slow")
        self.addCleanup(sock.close)
        page = yield self.get("/network?after=0")
        self.assertEqual([line["type"] for line in page["lines"]], ["open"])
        lines, seenAt = yield self.pollForHead()
        self.assertGreaterEqual(seenAt - headAt, HEAD_LINE_DELAY - 0.1)
        self.assertLess(seenAt - headAt, HEAD_LINE_DELAY + 1.0)
        self.assertEqual(lines[1]["response"]["status"], 200)

    @defer.inlineCallbacks
    def test_quickStaysTwoLines(self) -> Any:
        """
        A quick exchange is an open line and an end line, no head line,
        even well past a second.
        """
        def ask() -> bytes:
            sock = openSocket(self.running.ports["forward"])
            sock.sendall(b"GET http://stream.test/quick HTTP/1.1\r\nHost: stream.test\r\n\r\n")
            head = readHead(sock)
            sock.close()
            return head

        head = yield threads.deferToThread(ask)
        self.assertTrue(head.startswith(b"HTTP/1.1 200"))
        yield self.running.waitForEnds(1)
        yield deferLater(reactor, HEAD_LINE_DELAY + 0.3, lambda: None)
        self.assertEqual([line["type"] for line in self.running.lines()], ["open", "end"])
