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

from twisted.internet import defer, reactor, threads
from twisted.trial.unittest import TestCase
from twisted.web import resource, server

from netlog.core.capture import MAX_RESPONSE_BODY
from netlog.core.replay import MatchRules
from netlog.proxy.replay import UNMATCHED_404, UNMATCHED_FORWARD, Replay
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


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


#: The steps a replay test takes: method, path, body, content type.
STEPS: list[tuple[str, str, bytes, str | None]] = [
    ("GET", "/", b"", None),
    ("GET", "/image", b"", None),
    ("GET", "/big", b"", None),
    ("POST", "/api", b'{"q":"cart"}', "application/json"),
    ("POST", "/api", b'{"q":"user"}', "application/json"),
    ("GET", "/", b"", None),
    ("HEAD", "/", b"", None),
]


def runSteps(port: int) -> list[tuple[int, dict[str, str], bytes, bytes]]:
    out = []
    for method, path, body, contentType in STEPS:
        headers = [("Content-Type", contentType)] if contentType else []
        out.append(get(port, path, method, body, headers))
    return out


class ReplayTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def record(self) -> Any:
        """
        Browse L{STEPS} through a site proxy keeping every body; return its
        log's path and the answers got.
        """
        self.backend = Backend()
        self.backendPort = reactor.listenTCP(0, server.Site(self.backend), interface="127.0.0.1")
        port = self.port = self.backendPort.getHost().port
        recording = RunningProxy(self, sites(port).replace("127.0.0.1", "backend.test"),
                                 resolve={"backend.test": "127.0.0.1"}, modeOptions={"keepAll": True})
        answers = yield threads.deferToThread(runSteps, recording.ports["forward"])
        yield recording.waitForEnds(len(STEPS))
        yield recording.stop()
        return recording, answers

    def replaying(self, path: str, unmatched: str = UNMATCHED_404, rules: MatchRules = MatchRules()) -> RunningProxy:
        """
        A proxy replaying C{path}; the names its resolver is asked for are
        in C{self.lookedUp}.
        """
        port = self.port
        running = RunningProxy(self, sites(port).replace("127.0.0.1", "backend.test"), resolve={},
                               modeOptions={"replays": {"shop": Replay(path, rules, unmatched)}})
        self.lookedUp: list[str] = []
        resolve = running.proxy.resolver.resolve

        def counted(host: str) -> Any:
            self.lookedUp.append(host)
            return resolve(host)

        running.proxy.resolver.resolve = counted  # type: ignore[method-assign]
        return running

    @defer.inlineCallbacks
    def test_sameAnswers(self) -> Any:
        """
        A proxy replaying the log answers every step as the backend did
        (status, the fields that aren't about the connection, the body's
        sha256) with the backend gone and no name looked up for it; each
        entry names the recorded exchange it came from.
        """
        recording, recorded = yield self.record()
        yield self.backendPort.stopListening()
        served = self.backend.requests
        replay = self.replaying(recording.logPath)
        answers = yield threads.deferToThread(runSteps, replay.ports["forward"])
        self.assertEqual(self.backend.requests, served)
        for (method, path, _, _), before, after in zip(STEPS, recorded, answers):
            self.assertEqual(after[0], before[0], (method, path))
            self.assertEqual(sha(after[2]), sha(before[2][:MAX_RESPONSE_BODY]), (method, path))
            for name in ("content-type", "x-served", "content-length"):
                if path != "/big" or name != "content-length":
                    self.assertEqual(after[1].get(name), before[1].get(name), (method, path, name))
        self.assertEqual(answers[2][1]["content-length"], str(MAX_RESPONSE_BODY))
        self.assertEqual([json.loads(a[2])["got"] for a in answers[3:5]], ['{"q":"cart"}', '{"q":"user"}'])
        ends = yield replay.waitForEnds(len(STEPS))
        recordedIds = [opened["id"] for opened, _ in recording.ended()]
        self.assertEqual([ended.get("_replayed") for _, ended in ends], recordedIds)
        self.assertEqual([bool(ended.get("_replayedCut")) for _, ended in ends],
                         [path == "/big" for _, path, _, _ in STEPS])
        for opened, ended in ends:
            self.assertEqual(opened["server"]["address"], None)
            self.assertNotIn("_failed", ended)
        self.assertEqual(self.lookedUp, [])

    @defer.inlineCallbacks
    def test_unmatchedNeverReachesServer(self) -> Any:
        """
        With unmatched requests answered C{404}, a request the recording
        has no answer for gets a 404 saying so, marked C{_unmatched}, and
        nothing reaches the backend although it still listens (mitmproxy
        #5024).
        """
        recording, _ = yield self.record()
        served = self.backend.requests
        replay = self.replaying(recording.logPath)
        status, _, body, _ = yield threads.deferToThread(get, replay.ports["forward"], "/never-recorded")
        self.assertEqual(status, 404)
        self.assertIn("no recording for GET http://shop.test/never-recorded", json.loads(body)["error"])
        [(_, ended)] = yield replay.waitForEnds(1)
        self.assertTrue(ended["_unmatched"])
        self.assertEqual(ended["response"]["status"], 404)
        self.assertEqual(self.backend.requests, served)
        self.assertEqual(self.lookedUp, [], "no name looked up for the backend")
        yield self.backendPort.stopListening()

    @defer.inlineCallbacks
    def test_unmatchedForwarded(self) -> Any:
        """
        With C{forward}, an unmatched request goes to the backend (named
        and connected to only then), marked C{_forwarded}; a matched one
        is still replayed.
        """
        recording, _ = yield self.record()
        served = self.backend.requests
        port = self.port
        replay = RunningProxy(self, sites(port).replace("127.0.0.1", "backend.test"),
                              resolve={"backend.test": "127.0.0.1"},
                              modeOptions={"replays": {"shop": Replay(recording.logPath, MatchRules(),
                                                                      UNMATCHED_FORWARD)}})
        status, _, body, _ = yield threads.deferToThread(get, replay.ports["forward"], "/api?new=1", "POST",
                                                         b"fresh", [("Content-Type", "text/plain")])
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["got"], "fresh")
        self.assertEqual(self.backend.requests, served + 1)
        status, _, _, _ = yield threads.deferToThread(get, replay.ports["forward"], "/image")
        self.assertEqual(self.backend.requests, served + 1)
        (_, forwarded), (_, replayed) = yield replay.waitForEnds(2)
        self.assertTrue(forwarded["_forwarded"])
        self.assertEqual(forwarded["request_body"]["size"], 5)
        self.assertIn("_replayed", replayed)
        yield self.backendPort.stopListening()
