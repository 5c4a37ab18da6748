"""
Fakes for driving an L{Exchange} in memory, as mitmproxy tests its layers
with playbooks: a browser stream, an answer source and an engine that
record what the exchange asks of them, a log writer that keeps its lines,
and a L{Clock} for time. No socket is opened and nothing sleeps.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer
from twisted.internet.task import Clock
from zope.interface import implementer

from netlog.core.capture import BodyCapture
from netlog.core.http1 import (
    Body,
    EndOfMessage,
    Event,
    HeadFields,
    RequestHead,
    RequestReader,
    ResponseHead,
    ResponseReader,
)
from netlog.core.rules import PASS, Decision
from netlog.net.gate import Gate
from netlog.proxy.contracts import IAnswerSource, IBrowserStream
from netlog.proxy.exchange import Exchange
from netlog.proxy.mode import Route
from netlog.proxy.relaying import RawRelay
from netlog.proxy.upstream import SentRequest
from tests.standin.test_memory import RecordingWriter

#: Where the playbook's requests go.
ROUTE = Route("http", "backend.test", 8080, "http://shop.test", "shop.test")
#: A configured site's route (its answers' backend names are rewritten).
SITE_ROUTE = Route("http", "backend.test", 8080, "http://shop.test", "shop.test", site="shop")
#: The address a new connection goes to.
ADDRESS = "192.0.2.10"


class Producer:
    """
    A transport's producer side: counts its pauses and resumes.
    """

    def __init__(self) -> None:
        self.paused = 0
        self.resumed = 0

    def pauseProducing(self) -> None:
        self.paused += 1

    def resumeProducing(self) -> None:
        self.resumed += 1


@implementer(IBrowserStream)
class FakeBrowser:
    """
    The browser's side of one exchange: keeps every call, in order, in
    L{calls}.

    @ivar relaysFraming: whether it relays a server's cut framing
        (L{cutAnswer}), as an HTTP/1.1 connection that doesn't dechunk does.
    @ivar pending: what L{enterRaw} says was read and not relayed yet.
    """

    client = "127.0.0.1:50000"
    connectionId = "c1"
    version = b"HTTP/1.1"

    def __init__(self) -> None:
        self.gate = Gate(Producer())
        self.calls: list[tuple[Any, ...]] = []
        self.relaysFraming = True
        self.pending = b""
        self.answerProducer: Any = None
        self.gathered = 0
        self.flushed = 0

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [call for call in self.calls if call[0] == name]

    def exchangeReady(self, exchange: Any) -> None:
        self.calls.append(("ready",))

    def exchangeDone(self, exchange: Any, cut: bool) -> None:
        self.calls.append(("done", cut))

    def discardRestOfRequest(self, exchange: Any) -> None:
        self.calls.append(("discard",))

    def enterRaw(self, peer: Any) -> bytes:
        self.calls.append(("raw",))
        return self.pending

    def answer(self, status: int, text: str, headers: Any = (), close: bool = True) -> tuple[dict[str, Any], int]:
        self.calls.append(("answer", status, text))
        return {"status": status, "headers": []}, 100

    def answerInterim(self, head: ResponseHead) -> int:
        self.calls.append(("interim", head.status))
        return len(head.raw)

    def answerHead(self, head: ResponseHead, fields: HeadFields, headers: list[tuple[bytes, bytes]],
                   upgraded: bool) -> tuple[list[tuple[bytes, bytes]], bytes, int]:
        self.calls.append(("head", head.status, headers, upgraded))
        return headers, head.reason, len(head.raw)

    def answerData(self, data: bytes, raw: bytes) -> int:
        self.calls.append(("data", data))
        return len(raw)

    def answerEnd(self, end: EndOfMessage) -> int:
        self.calls.append(("end", end.trailers))
        return len(end.raw)

    def cutAnswer(self, raw: bytes) -> int | None:
        self.calls.append(("cut", raw))
        return len(raw) if self.relaysFraming else None

    def gather(self) -> None:
        self.gathered += 1

    def flush(self) -> None:
        self.flushed += 1

    def abort(self) -> None:
        self.calls.append(("abort",))

    def finishRaw(self) -> None:
        self.calls.append(("finishRaw",))

    def attachAnswerProducer(self, producer: Any) -> None:
        self.answerProducer = producer

    def detachAnswerProducer(self) -> None:
        self.answerProducer = None

    def touch(self, now: float) -> None:
        self.calls.append(("touch", now))

    def wakeBy(self, when: float) -> None:
        self.calls.append(("wake", when))


@implementer(IAnswerSource)
class FakeSource:
    """
    An answer source that keeps what the exchange hands it, and answers only
    when the test says (through the exchange's L{IAnswerSink} methods).

    @ivar closed: L{None} while open, else C{"gently"} or C{"aborted"}.
    """

    def __init__(self, pooled: bool = True) -> None:
        self.exchange: Any = None
        self.gate = Gate(Producer())
        self.raw = False
        self.pooled = pooled
        self.idle = True
        self.heads: list[tuple[RequestHead, frozenset[bytes] | set[bytes], list[tuple[bytes, bytes]]]] = []
        self.body: list[bytes] = []
        self.ended = 0
        self.rawSent: list[bytes] = []
        self.requestProducer: Any = None
        self.closed: str | None = None

    def sendHead(self, head: RequestHead, fields: HeadFields, drop: frozenset[bytes] | set[bytes],
                 extra: list[tuple[bytes, bytes]]) -> int:
        self.heads.append((head, drop, extra))
        return len(head.raw)

    def requestData(self, body: Body) -> int:
        self.body.append(body.data)
        return len(body.raw)

    def requestEnded(self, end: EndOfMessage) -> int:
        self.ended += 1
        return len(end.raw)

    def sendRaw(self, data: bytes) -> None:
        self.rawSent.append(data)

    def attachRequestProducer(self, producer: Any) -> None:
        self.requestProducer = producer

    def detachRequestProducer(self) -> None:
        self.requestProducer = None

    def close(self, gently: bool) -> None:
        self.closed = "gently" if gently else "aborted"


class KeepingMode:
    """
    A mode that keeps every body whole and rewrites what names the backend.
    """

    def requestCapture(self, logging: bool) -> BodyCapture:
        return BodyCapture(1 << 20, keep=True, hashAll=False)

    def responseCapture(self, contentType: bytes | None, logging: bool) -> BodyCapture:
        return BodyCapture(1 << 20, keep=True, hashAll=False)

    def rewrite(self, route: Route, name: bytes, value: bytes) -> bytes:
        return value.replace(b"backend.test:8080", b"shop.test")


class MemoryWriter(RecordingWriter):
    """
    A log writer that keeps its lines, C{(type, id, fields)}, head and
    message lines among them.
    """

    def types(self) -> list[str]:
        return [kind for kind, _, _ in self.lines]

    def ends(self) -> list[dict[str, Any]]:
        return [fields for kind, _, fields in self.lines if kind == "end"]


class Pool:
    """
    The sources given back, and the holds waiting their turn for a
    connection.
    """

    def __init__(self) -> None:
        self.kept: list[Any] = []
        self.waiting: list[Any] = []

    def put(self, source: Any) -> None:
        self.kept.append(source)

    def cancel(self, key: Any, waiter: Any) -> None:
        self.waiting.remove(waiter)


class FakeEngine:
    """
    The engine as an exchange uses it: a L{Clock}, the connections asked
    for (each a L{defer.Deferred} the test fires), the idle ones to take.

    @ivar room: the new connections it may still open (L{None}: any); with
        none left, a hold that claims one waits in C{pool.waiting}.
    """

    logging = True

    def __init__(self) -> None:
        self.reactor = Clock()
        self.mode = KeepingMode()
        self.writer = MemoryWriter()
        self.pool = Pool()
        self.idle: list[FakeSource] = []
        self.asked: list[defer.Deferred[Any]] = []
        self.room: int | None = None

    def openFields(self, side: Any, kind: str, started: float, head: RequestHead, url: str, host: str | None,
                   port: int | None, address: str | None = None, signIn: frozenset[str] = frozenset(),
                   rules: Any = (), liveDecrypted: bool = False) -> dict[str, Any]:
        fields = {"kind": kind, "url": url, "server": f"{host}:{port}", "address": address}
        if liveDecrypted:
            fields["_liveDecrypted"] = True
        return fields

    def takeIdle(self, route: Route) -> tuple[FakeSource, bool, str, None] | None:
        if not self.idle:
            return None
        return (self.idle.pop(), True, ADDRESS, None)

    def claim(self, route: Route, waiter: Any) -> bool:
        if self.room is None:
            return True
        if self.room:
            self.room -= 1
            return True
        self.pool.waiting.append(waiter)
        return False

    def upstreamFor(self, route: Route, resolved: Callable[[str], None] | None = None) -> defer.Deferred[Any]:
        d: defer.Deferred[Any] = defer.Deferred()
        if resolved is not None:
            resolved(ADDRESS)
        self.asked.append(d)
        return d

    def connect(self, source: FakeSource | None = None) -> FakeSource:
        """
        Make the connection asked for last: C{source}, or a new one.
        """
        source = source or FakeSource()
        d = self.asked.pop()
        d.callback((source, False, ADDRESS, self.reactor.seconds()))
        return source


def requestEvents(data: bytes) -> tuple[RequestHead, list[Event]]:
    """
    A request's head and the events after it, read as a forward proxy does.
    """
    head, *rest = RequestReader(forwardProxy=True).feed(data)
    assert isinstance(head, RequestHead)
    return head, rest


def answerEvents(data: bytes, method: bytes = b"GET") -> list[Event]:
    """
    An answer's events, read as an upstream connection reads them.
    """
    reader = ResponseReader()
    reader.expectResponseTo(method)
    return reader.feed(data)


#: A request with a body.
POST_FORM = (b"POST http://shop.test/form HTTP/1.1\r\nHost: shop.test\r\nContent-Length: 7\r\n"
             b"Content-Type: text/plain\r\n\r\npayload")
GET = b"GET http://shop.test/page HTTP/1.1\r\nHost: shop.test\r\n\r\n"
OK = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello"


class Play:
    """
    One exchange between a L{FakeBrowser} and its source, driven step by
    step.
    """

    def __init__(self, request: bytes = GET, route: Route = ROUTE, rules: Decision = PASS) -> None:
        self.engine = FakeEngine()
        self.clock = self.engine.reactor
        self.writer = self.engine.writer
        self.browser = FakeBrowser()
        self.head, self.rest = requestEvents(request)
        self.exchange = Exchange(self.engine, self.browser, self.head,  # type: ignore[arg-type]
                                 self.head.url or "http://shop.test/", route, self.clock.seconds(), rules)
        self.source: FakeSource | None = None

    def connected(self, source: FakeSource | None = None) -> FakeSource:
        """
        Start the exchange and make its connection.
        """
        self.exchange.start()
        self.source = self.engine.connect(source)
        return self.source

    def answered(self) -> FakeSource:
        """
        Start the exchange, send its request and answer it whole (L{OK}).
        """
        source = self.connected()
        self.sendRequest()
        self.answer(OK)
        return source

    def sendRequest(self) -> None:
        """
        Hand the exchange the rest of the request (its body, its end).
        """
        for event in self.rest:
            self.exchange.fromBrowser(event)

    def answer(self, data: bytes, method: bytes = b"GET", source: FakeSource | None = None) -> None:
        """
        The source's read of C{data}, as events.
        """
        source = source or self.source
        assert source is not None
        sink = self.exchange
        sink.answerArrived(source, len(data))
        for event in answerEvents(data, method):
            if isinstance(event, ResponseHead):
                (sink.answerInterim if event.interim else sink.answerHead)(source, event)
            elif isinstance(event, Body):
                sink.answerData(source, event)
            elif isinstance(event, EndOfMessage):
                sink.answerEnd(source, event)
        sink.answerSettled(source)

    def end(self) -> dict[str, Any]:
        [end] = self.writer.ends()
        return end

    def relay(self) -> RawRelay:
        assert self.exchange.relay is not None
        return self.exchange.relay


def resendable(head: RequestHead) -> SentRequest:
    """
    C{head}, bodiless and whole, as a source kept it to send again.
    """
    sent = SentRequest(head, HeadFields(head.version, head.headers), frozenset(), [])
    sent.keep(EndOfMessage())
    return sent
