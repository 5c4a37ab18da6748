"""
The loopback HTTP API: its parameters, its pages of the log, the streamed
HAR, the CA certificate, and its errors, over a real loopback socket.
"""

from __future__ import annotations

import json
import os
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.protocol import Protocol
from twisted.internet.task import deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase
from twisted.web.client import Agent, readBody
from twisted.web.http_headers import Headers
from twisted.web.server import Site

from netlog.api.params import BadParameter, parseQuery
from netlog.api.resource import MAX_LIMIT
from netlog.api.door import Door
from netlog.api.root import makeApiRoot
from netlog.log.reader import read
from netlog.log.writer import LogWriter

PAGE = {"after": (0, 0, 2**63 - 1), "limit": (100, 1, MAX_LIMIT)}


class ParseQueryTests(SynchronousTestCase):
    def test_good(self) -> None:
        """
        Whole numbers in range are read; missing ones take their default.
        """
        table = [
            (b"", {"after": 0, "limit": 100}),
            (b"after=7", {"after": 7, "limit": 100}),
            (b"after=0&limit=1", {"after": 0, "limit": 1}),
            (b"limit=5&after=12", {"after": 12, "limit": 5}),
            (b"after=0009", {"after": 9, "limit": 100}),
        ]
        for query, expected in table:
            self.assertEqual(parseQuery(query, PAGE), expected, query)

    def test_bad(self) -> None:
        """
        Each bad query names the parameter at fault and why.
        """
        table = [
            (b"after=x", "after", "whole number"),
            (b"after=-1", "after", "whole number"),
            (b"after=+1", "after", "whole number"),
            (b"after=1.5", "after", "whole number"),
            (b"after=", "after", "whole number"),
            (b"after=%D9%A1", "after", "whole number"),  # an Arabic-Indic one
            (b"after=99999999999999999999", "after", "from 0 to"),
            (b"limit=0", "limit", "from 1 to"),
            (b"limit=%d" % (MAX_LIMIT + 1), "limit", "from 1 to"),
            (b"after=1&after=2", "after", "more than once"),
            (b"since=3", "since", "unknown parameter"),
            (b"after", "query", "name=value"),
            (b"a" * 2000, "query", "longer than"),
            (b"after=1&&", "query", "name=value"),
            (b"after=%FF", "after", "whole number"),
        ]
        for query, name, reason in table:
            with self.assertRaises(BadParameter, msg=query) as caught:
                parseQuery(query, PAGE)
            self.assertEqual(caught.exception.name, name, query)
            self.assertIn(reason, caught.exception.reason, query)

    @given(st.binary(max_size=200))
    def test_anyBytes(self, query: bytes) -> None:
        """
        Any query string gives numbers in range or a BadParameter, nothing
        else.
        """
        try:
            values = parseQuery(query, PAGE)
        except BadParameter:
            return
        self.assertTrue(0 <= values["after"] and 1 <= values["limit"] <= MAX_LIMIT)


def writeLog(path: str, exchanges: int) -> None:
    writer = LogWriter(path)
    writer.startService()
    for i in range(exchanges):
        exchangeId = writer.open({"request": {"method": "GET", "url": f"http://a.test/{i}"}})
        writer.end(exchangeId, {"response": {"status": 200}})
    writer.stopService()


#: The token of the API under test.
TOKEN = "t" * 43


class ApiTests(TestCase):
    def setUp(self) -> None:
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        self.logPath = os.path.join(folder, "network.jsonl")
        self.caPath = os.path.join(folder, "ca.pem")
        writeLog(self.logPath, 5)
        self.caFile: str | None = self.caPath
        root = makeApiRoot(reactor, reactor.getThreadPool(), self.logPath, lambda: self.caFile,
                           door=Door(TOKEN))
        self.port = reactor.listenTCP(0, Site(root), interface="127.0.0.1")
        self.addCleanup(self.port.stopListening)
        noLog = makeApiRoot(reactor, reactor.getThreadPool(), None)
        self.noLogPort = reactor.listenTCP(0, Site(noLog), interface="127.0.0.1")
        self.addCleanup(self.noLogPort.stopListening)
        self.agent = Agent(reactor)

    @defer.inlineCallbacks
    def get(self, path: str, method: bytes = b"GET", port: Any = None, headers: Headers | None = None) -> Any:
        port = port or self.port
        url = f"http://127.0.0.1:{port.getHost().port}{path}".encode()
        response = yield self.agent.request(method, url, headers or Headers())
        body = yield readBody(response)
        kind = response.headers.getRawHeaders(b"content-type", [b""])[0]
        return response.code, kind, body

    @defer.inlineCallbacks
    def test_pages(self) -> None:
        """
        GET /network serves the reader's envelope for after and limit: the
        same lines and cursor as netlog.log.reader.read.
        """
        for after, limit in [(0, 1 << 20), (3, 1 << 20), (0, 1), (4, 200), (10, 1 << 20)]:
            code, kind, body = yield self.get(f"/network?after={after}&limit={limit}")
            self.assertEqual((code, kind), (200, b"application/json"))
            self.assertEqual(json.loads(body), json.loads(read(self.logPath, after, limit).envelope()))
        code, _, body = yield self.get("/network?after=8")
        page = json.loads(body)
        self.assertEqual(([line["n"] for line in page["lines"]], page["next"], page["begun_again"]), ([9, 10], 10, False))

    @defer.inlineCallbacks
    def test_pollSeesEveryLineOnce(self) -> None:
        """
        Following the cursor page by page, with a small limit, yields every
        line once and in order.
        """
        seen = []
        cursor = 0
        for _ in range(20):
            code, _, body = yield self.get(f"/network?after={cursor}&limit=50")
            page = json.loads(body)
            seen.extend(line["n"] for line in page["lines"])
            if page["next"] == cursor:
                break
            cursor = page["next"]
        self.assertEqual(seen, list(range(1, 11)))

    @defer.inlineCallbacks
    def test_badParameter(self) -> None:
        """
        A bad parameter gets 400 and JSON naming it and saying why.
        """
        code, kind, body = yield self.get("/network?after=-3")
        self.assertEqual((code, kind), (400, b"application/json"))
        error = json.loads(body)
        self.assertEqual((error["error"], error["parameter"]), ("bad parameter", "after"))
        self.assertIn("whole number", error["reason"])
        code, _, body = yield self.get("/network.har?x=1")
        self.assertEqual((code, json.loads(body)["parameter"]), (400, "x"))

    @defer.inlineCallbacks
    def test_notFoundAndMethod(self) -> None:
        """
        Unknown paths get 404 JSON; anything but GET gets 401 without the
        token (the door answers before any resource), 405 with it. (C{/} is
        the live view's page.)
        """
        for path in ["/nothing", "/network/extra", "/view.html", "/view.js/extra"]:
            code, kind, body = yield self.get(path)
            self.assertEqual((code, kind), (404, b"application/json"), path)
            self.assertIn("error", json.loads(body))
        code, _, _ = yield self.get("/network", method=b"POST")
        self.assertEqual(code, 401)
        authorized = Headers({b"authorization": [b"Bearer " + TOKEN.encode()]})
        code, _, _ = yield self.get("/network", method=b"POST", headers=authorized)
        self.assertEqual(code, 405)

    @defer.inlineCallbacks
    def test_har(self) -> None:
        """
        GET /network.har streams the HAR export: valid JSON, an entry per
        exchange, in order.
        """
        code, kind, body = yield self.get("/network.har")
        self.assertEqual((code, kind), (200, b"application/json"))
        har = json.loads(body)
        self.assertEqual([e["request"]["url"] for e in har["log"]["entries"]], [f"http://a.test/{i}" for i in range(5)])

    @defer.inlineCallbacks
    def test_bigHarStreams(self) -> None:
        """
        A HAR much larger than one write comes whole.
        """
        writeLog(self.logPath, 3000)
        code, _, body = yield self.get("/network.har")
        self.assertEqual(code, 200)
        self.assertEqual(len(json.loads(body)["log"]["entries"]), 3005)

    @defer.inlineCallbacks
    def test_clientGoesAway(self) -> None:
        """
        A client that stops reading a large HAR and goes away ends the
        export's thread; the API serves on.
        """
        writeLog(self.logPath, 20000)
        endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", self.port.getHost().port)
        received = defer.Deferred()

        class Quitter(Protocol):
            def connectionMade(self) -> None:
                self.transport.write(b"GET /network.har HTTP/1.1\r\nHost: api\r\n\r\n")

            def dataReceived(self, data: bytes) -> None:
                if not received.called:
                    received.callback(None)
                    self.transport.pauseProducing()  # stop reading...

        protocol = yield connectProtocol(endpoint, Quitter())
        yield received
        pool = reactor.getThreadPool()
        yield deferLater(reactor, 0.3, lambda: None)
        protocol.transport.abortConnection()  # ...and go away
        for _ in range(200):
            if not pool.working:
                break
            yield deferLater(reactor, 0.05, lambda: None)
        self.assertEqual(pool.working, [])
        code, _, _ = yield self.get("/network?after=0&limit=1")
        self.assertEqual(code, 200)

    @defer.inlineCallbacks
    def test_ca(self) -> None:
        """
        GET /ca.pem serves the CA certificate file; 404 JSON while there is
        none.
        """
        code, kind, body = yield self.get("/ca.pem")
        self.assertEqual((code, kind), (404, b"application/json"))
        with open(self.caPath, "wb") as f:
            f.write(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        code, kind, body = yield self.get("/ca.pem")
        self.assertEqual((code, kind), (200, b"application/x-pem-file"))
        self.assertTrue(body.startswith(b"-----BEGIN CERTIFICATE-----"))

    @defer.inlineCallbacks
    def test_noCaResource(self) -> None:
        """
        A proxy with no CA (the stand-in) has no /ca.pem.
        """
        code, _, _ = yield self.get("/ca.pem", port=self.noLogPort)
        self.assertEqual(code, 404)

    @defer.inlineCallbacks
    def test_noLog(self) -> None:
        """
        With --no-log, the log's resources say there is none.
        """
        for path in ["/network", "/network.har"]:
            code, _, body = yield self.get(path, port=self.noLogPort)
            self.assertEqual(code, 404)
            self.assertIn("no log", json.loads(body)["error"])

    @defer.inlineCallbacks
    def test_logGone(self) -> None:
        """
        A log that is not there (yet) gets 503 JSON saying so.
        """
        os.unlink(self.logPath)
        for path in ["/network", "/network.har"]:
            code, kind, body = yield self.get(path)
            self.assertEqual((code, kind), (503, b"application/json"), path)
            self.assertIn("can't be read", json.loads(body)["error"])


class _HeldReactor:
    """
    A reactor whose event loop never gets round to what threads hand it.
    """

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def callFromThread(self, f: Any, *args: Any) -> None:
        self.calls.append((f, args))


class _Request:
    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.finished: defer.Deferred[None] = defer.Deferred()

    def registerProducer(self, producer: Any, streaming: bool) -> None:
        pass

    def notifyFinish(self) -> defer.Deferred[None]:
        return self.finished

    def write(self, data: bytes) -> None:
        self.written.append(data)


class ThreadStreamTests(SynchronousTestCase):
    def test_boundedWhileEventLoopBusy(self) -> None:
        """
        An export thread hands the event loop at most C{CHUNKS_IN_FLIGHT}
        chunks it hasn't written yet, then waits; once they are written it
        goes on, and a client that leaves releases it.
        """
        import threading
        import time

        from netlog.api.resource import CHUNKS_IN_FLIGHT, _ThreadStream

        held = _HeldReactor()
        request = _Request()
        stream = _ThreadStream(held, request)  # type: ignore[arg-type]
        outcome: list[str] = []

        def export() -> None:
            try:
                for i in range(CHUNKS_IN_FLIGHT * 3):
                    stream.write(b"%d," % i)
            except Exception as e:
                outcome.append(type(e).__name__)
            else:
                outcome.append("done")

        thread = threading.Thread(target=export, daemon=True)
        thread.start()
        limit = time.monotonic() + 10
        while len(held.calls) < CHUNKS_IN_FLIGHT and time.monotonic() < limit:
            time.sleep(0.01)
        time.sleep(0.2)
        self.assertEqual(len(held.calls), CHUNKS_IN_FLIGHT)
        self.assertTrue(thread.is_alive())
        # The event loop writes what it was handed: the thread goes on.
        for f, args in held.calls[:]:
            f(*args)
        limit = time.monotonic() + 10
        while len(held.calls) < CHUNKS_IN_FLIGHT * 2 and time.monotonic() < limit:
            time.sleep(0.01)
        self.assertEqual(len(request.written), CHUNKS_IN_FLIGHT)
        self.assertEqual(len(held.calls), CHUNKS_IN_FLIGHT * 2)
        # The client leaves: the thread stops instead of waiting.
        request.finished.errback(Exception("gone"))
        thread.join(10)
        self.assertFalse(thread.is_alive())
        self.assertEqual(outcome, ["_ClientGone"])
