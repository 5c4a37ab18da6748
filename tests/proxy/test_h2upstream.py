"""
HTTP/2 toward an upstream, in memory: the connection's streams are answer
sources (L{IAnswerSource}) driven against the C{h2} library's server side as
the peer, over a L{StringTransport}, with a clock. Each test says what the
exchange (a recording sink) hears and what the server sees.
"""

from __future__ import annotations

from typing import Any

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import DataReceived, RequestReceived, StreamEnded, StreamReset
from h2.settings import SettingCodes
from hyperframe.frame import GoAwayFrame
from twisted.internet import error
from twisted.internet.address import IPv4Address
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from netlog.core.http1 import Body, EndOfMessage, HeadFields, RequestHead, RequestReader
from netlog.proxy.contracts import IAnswerSource
from netlog.proxy.h2upstream import MAX_STREAMS, STREAM_WINDOW, H2Upstream, H2UpstreamStream, StreamFailed
from netlog.proxy.upstream import Pool, SentRequest

KEY = ("https", "shop.test", 443, None)


class Sink:
    """
    An exchange as a source feeds it: every event kept in order.
    """

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def named(self, name: str) -> list[tuple[Any, ...]]:
        return [e for e in self.events if e[0] == name]

    def answerArrived(self, source: Any, size: int) -> None:
        self.events.append(("arrived", size))

    def answerSettled(self, source: Any) -> None:
        self.events.append(("settled",))

    def answerInterim(self, source: Any, head: Any) -> None:
        self.events.append(("interim", head))

    def answerHead(self, source: Any, head: Any) -> None:
        self.events.append(("head", head))

    def answerData(self, source: Any, body: Body) -> None:
        self.events.append(("data", body))

    def answerEnd(self, source: Any, end: EndOfMessage) -> None:
        self.events.append(("end", end))

    def answerRaw(self, source: Any, data: bytes) -> None:
        self.events.append(("raw", data))

    def answerUnparsable(self, source: Any, raw: bytes) -> None:
        self.events.append(("unparsable", raw))

    def answerFailed(self, source: Any, reason: Failure, raw: bytes = b"", again: Any = None) -> None:
        self.events.append(("failed", reason, again))

    def answerMarks(self, source: Any, marks: Any, recorded: Any = None) -> None:
        self.events.append(("marks", marks))

    def forward(self, source: Any, sent: Any) -> None:
        self.events.append(("forward", sent))

    def body(self) -> bytes:
        return b"".join(e[1].data for e in self.named("data"))


class Producer:
    def __init__(self) -> None:
        self.paused = False

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False

    def stopProducing(self) -> None:
        pass


def requestHead(raw: bytes) -> tuple[RequestHead, HeadFields]:
    [head, *_] = RequestReader(forwardProxy=True).feed(raw)
    assert isinstance(head, RequestHead)
    return head, HeadFields(head.version, head.headers)


GET = b"GET https://shop.test/a?b=1 HTTP/1.1\r\nHost: shop.test\r\nConnection: keep-alive\r\nAccept: */*\r\n\r\n"


class Peer:
    """
    An L{H2Upstream} over a L{StringTransport}, and an C{h2} server as its
    peer; L{pump} passes bytes both ways until both are quiet.
    """

    def __init__(self, settings: dict[int, int] | None = None) -> None:
        self.clock = MemoryReactorClock()
        self.transport = StringTransport(peerAddress=IPv4Address("TCP", "127.0.0.1", 443))
        self.connection = H2Upstream(self.clock, KEY)
        self.server = H2Connection(config=H2Configuration(client_side=False, header_encoding=None))
        self.server.initiate_connection()
        if settings:
            self.server.update_settings(settings)
        self.serverEvents: list[Any] = []
        self.connection.makeConnection(self.transport)
        self.pump()

    def pump(self) -> list[Any]:
        new: list[Any] = []
        for _ in range(50):
            self.clock.advance(0)
            up = self.transport.value()
            self.transport.clear()
            if up:
                new.extend(self.server.receive_data(up))
            down = self.server.data_to_send()
            if down:
                self.connection.dataReceived(down)
            if not up and not down:
                break
        self.serverEvents.extend(new)
        return new

    def stream(self, raw: bytes = GET, ended: bool = True) -> tuple[H2UpstreamStream, Sink]:
        stream = self.connection.newStream()
        sink = Sink()
        stream.exchange = sink  # type: ignore[assignment]
        head, fields = requestHead(raw)
        stream.sendHead(head, fields, fields.relayDrop, [])
        if ended:
            stream.requestEnded(EndOfMessage())
        return stream, sink

    def answer(self, streamId: int, headers: list[tuple[bytes, bytes]], body: bytes = b"",
               trailers: list[tuple[bytes, bytes]] | None = None, end: bool = True) -> None:
        self.server.send_headers(streamId, headers, end_stream=end and not body and not trailers)
        while body:
            piece, body = body[:16384], body[16384:]
            self.server.send_data(streamId, piece, end_stream=end and not trailers and not body)
        if trailers:
            self.server.send_headers(streamId, trailers, end_stream=True)


class StreamTests(SynchronousTestCase):
    def test_provides(self) -> None:
        """
        A stream of an HTTP/2 upstream connection is an answer source.
        """
        peer = Peer()
        self.assertTrue(verifyObject(IAnswerSource, peer.connection.newStream()))

    def test_request(self) -> None:
        """
        The request goes as one stream: pseudo-fields from the request's
        head and C{Host}, no connection-specific field, then its end.
        """
        peer = Peer()
        stream, _ = peer.stream()
        peer.pump()
        [received] = [e for e in peer.serverEvents if isinstance(e, RequestReceived)]
        self.assertEqual(received.headers, [(b":method", b"GET"), (b":scheme", b"https"),
                                            (b":authority", b"shop.test"), (b":path", b"/a?b=1"),
                                            (b"accept", b"*/*")])
        self.assertEqual([e.stream_id for e in peer.serverEvents if isinstance(e, StreamEnded)], [stream.streamId])

    def test_answer(self) -> None:
        """
        The answer comes as the events an HTTP/1.1 connection emits: the
        head (C{HTTP/2}, the usual reason, chunked for an HTTP/1.1 browser
        when it has no length), the body's pieces (framed as chunks), the
        end with its trailers (in the last chunk), each read's events
        between an arrival and a settling.
        """
        peer = Peer()
        stream, sink = peer.stream()
        peer.pump()
        peer.answer(stream.streamId, [(b":status", b"200"), (b"content-type", b"text/plain")], b"hello",
                    [(b"grpc-status", b"0")])
        peer.pump()
        kinds = [e[0] for e in sink.events]
        self.assertEqual(kinds, ["arrived", "head", "data", "end", "settled"])
        head = sink.named("head")[0][1]
        self.assertEqual((head.status, head.reason, head.version), (200, b"OK", b"HTTP/2"))
        self.assertIn((b"transfer-encoding", b"chunked"), head.headers)
        self.assertEqual(sink.named("data")[0][1], Body(b"hello", b"5\r\nhello\r\n"))
        end = sink.named("end")[0][1]
        self.assertEqual(end, EndOfMessage([(b"grpc-status", b"0")], b"0\r\ngrpc-status: 0\r\n\r\n"))
        self.assertTrue(stream.idle)
        self.assertEqual(peer.connection.handed, set(), "a stream over both ways frees its place")
        stream.close(True)
        peer.pump()
        self.assertEqual([e for e in peer.serverEvents if isinstance(e, StreamReset)], [],
                         "a stream over both ways is let go without a reset")

    def test_interimAndLength(self) -> None:
        """
        An interim head comes as one; an answer with C{content-length}
        keeps its bytes as they came.
        """
        peer = Peer()
        stream, sink = peer.stream()
        peer.pump()
        peer.server.send_headers(stream.streamId, [(b":status", b"103"), (b"link", b"</a.css>")])
        peer.answer(stream.streamId, [(b":status", b"200"), (b"content-length", b"2")], b"ok")
        peer.pump()
        self.assertEqual([e[0] for e in sink.events if e[0] not in ("arrived", "settled")],
                         ["interim", "head", "data", "end"])
        self.assertEqual(sink.named("data")[0][1], Body(b"ok", b"ok"))
        self.assertEqual(sink.named("end")[0][1], EndOfMessage([], b""))

    def test_multiplexed(self) -> None:
        """
        Many exchanges' streams share the connection, each answer reaching
        its own exchange whatever the order the server answers in.
        """
        peer = Peer()
        pairs = [peer.stream() for _ in range(5)]
        peer.pump()
        for stream, _ in reversed(pairs):
            peer.answer(stream.streamId, [(b":status", b"200")], b"for %d" % stream.streamId)
        peer.pump()
        for stream, sink in pairs:
            self.assertEqual(sink.body(), b"for %d" % stream.streamId)
            self.assertEqual(len(sink.named("end")), 1)
        self.assertEqual(len({stream.streamId for stream, _ in pairs}), 5)

    def test_room(self) -> None:
        """
        The connection has room for as many streams as the server allows
        (and netlog's own limit); a stream let go frees its place, and the
        pool is offered it.
        """
        peer = Peer({SettingCodes.MAX_CONCURRENT_STREAMS: 2})
        self.assertEqual(peer.connection.room, 2)
        offered: list[Any] = []

        class FakePool:
            def offer(self, connection: Any) -> None:
                offered.append(connection)

            def unshare(self, connection: Any) -> None:
                pass

        peer.connection.pool = FakePool()
        first, _ = peer.stream()
        second, _ = peer.stream()
        self.assertEqual(peer.connection.room, 0)
        peer.pump()
        peer.answer(first.streamId, [(b":status", b"204")])
        peer.pump()
        first.close(True)
        self.assertEqual(peer.connection.room, 1)
        self.assertIn(peer.connection, offered)
        self.assertEqual(Peer().connection.room, MAX_STREAMS)

    def test_requestFlowControl(self) -> None:
        """
        A request's body goes as far as the server's window allows; the
        rest waits with the browser's side paused, and goes (then the end)
        as the window reopens.
        """
        peer = Peer({SettingCodes.INITIAL_WINDOW_SIZE: 100})
        stream, _ = peer.stream(b"POST https://shop.test/up HTTP/1.1\r\nHost: shop.test\r\n"
                                b"Content-Length: 300\r\n\r\n", ended=False)
        producer = Producer()
        stream.attachRequestProducer(producer)
        peer.pump()
        stream.requestData(Body(b"x" * 300, b"x" * 300))
        stream.requestEnded(EndOfMessage())
        self.assertTrue(producer.paused)
        peer.pump()
        got = sum(len(e.data) for e in peer.serverEvents if isinstance(e, DataReceived))
        self.assertEqual(got, 100)
        self.assertFalse([e for e in peer.serverEvents if isinstance(e, StreamEnded)])
        peer.server.increment_flow_control_window(200, stream.streamId)
        peer.pump()
        got = sum(len(e.data) for e in peer.serverEvents if isinstance(e, DataReceived))
        self.assertEqual(got, 300)
        self.assertFalse(producer.paused)
        self.assertEqual(len([e for e in peer.serverEvents if isinstance(e, StreamEnded)]), 1)

    def test_answerFlowControl(self) -> None:
        """
        While the browser's side can't take more (the stream's gate held),
        the answer's DATA is not acknowledged, so the server's window stays
        shut; released, the window reopens.
        """
        peer = Peer()
        stream, sink = peer.stream()
        peer.pump()
        stream.gate.pauseProducing()
        peer.answer(stream.streamId, [(b":status", b"200")], b"y" * 200000, end=False)
        peer.pump()
        self.assertEqual(len(sink.body()), 200000)
        self.assertEqual(peer.server.local_flow_control_window(stream.streamId), STREAM_WINDOW - 200000)
        stream.gate.resumeProducing()
        peer.pump()
        self.assertEqual(peer.server.local_flow_control_window(stream.streamId), STREAM_WINDOW)

    def test_refused(self) -> None:
        """
        A stream the server refused (C{REFUSED_STREAM}) fails with the
        request as sent, to go again on a new stream.
        """
        peer = Peer()
        stream, sink = peer.stream()
        peer.pump()
        peer.server.reset_stream(stream.streamId, ErrorCodes.REFUSED_STREAM)
        peer.pump()
        [(_, reason, again)] = sink.named("failed")
        self.assertIsInstance(reason.value, StreamFailed)
        self.assertEqual(reason.value.what, "refused the stream")
        self.assertIsInstance(again, SentRequest)
        self.assertEqual(again.head.method, b"GET")
        self.assertEqual(peer.connection.handed, set())

    def test_resetMidAnswer(self) -> None:
        """
        A stream reset in the middle of its answer fails with the reset's
        code, and is not sent again.
        """
        peer = Peer()
        stream, sink = peer.stream()
        peer.pump()
        peer.answer(stream.streamId, [(b":status", b"200")], b"part", end=False)
        peer.server.reset_stream(stream.streamId, ErrorCodes.INTERNAL_ERROR)
        peer.pump()
        [(_, reason, again)] = sink.named("failed")
        self.assertEqual(reason.value.what, "reset the stream (INTERNAL_ERROR)")
        self.assertIsNone(again)
        self.assertEqual(sink.body(), b"part")

    def test_goaway(self) -> None:
        """
        After C{GOAWAY}, the streams above its last stream go again; those
        below it end as they will; the connection takes no new stream, and
        closes once its last stream is over.
        """
        peer = Peer()
        (first, firstSink), (second, secondSink) = peer.stream(), peer.stream()
        peer.pump()
        # (C{h2}'s server closes itself on its own GOAWAY: the frame is
        # made here, so that it can still answer the first stream.)
        goaway = GoAwayFrame(0)
        goaway.last_stream_id = first.streamId
        peer.connection.dataReceived(goaway.serialize())
        peer.pump()
        [(_, reason, again)] = secondSink.named("failed")
        self.assertEqual(reason.value.what, "went away (GOAWAY, NO_ERROR)")
        self.assertIsNotNone(again)
        self.assertEqual(peer.connection.room, 0)
        self.assertFalse(firstSink.named("failed"))
        self.assertFalse(peer.transport.disconnecting)
        peer.answer(first.streamId, [(b":status", b"200")], b"done")
        peer.pump()
        self.assertEqual(firstSink.body(), b"done")
        first.close(True)
        self.assertTrue(peer.transport.disconnecting)

    def test_lost(self) -> None:
        """
        The connection lost fails each of its streams; the request of a
        stream of a reused connection not answered yet (a bodiless C{GET})
        is sent again, as a reused HTTP/1.1 connection's is, an answered
        one's never.
        """
        peer = Peer()
        (first, firstSink), (second, secondSink) = peer.stream(), peer.stream()
        peer.pump()
        peer.answer(first.streamId, [(b":status", b"200")], b"part", end=False)
        peer.pump()
        peer.connection.connectionLost(Failure(error.ConnectionLost()))
        agains = []
        for sink in (firstSink, secondSink):
            [(_, reason, again)] = sink.named("failed")
            self.assertTrue(reason.check(error.ConnectionLost))
            agains.append(again)
        self.assertIsNone(agains[0])
        self.assertIsInstance(agains[1], SentRequest)

    def test_cancelled(self) -> None:
        """
        An exchange that lets its stream go before the answer ended resets
        it (C{CANCEL}): the server stops sending it.
        """
        peer = Peer()
        stream, sink = peer.stream()
        peer.pump()
        peer.answer(stream.streamId, [(b":status", b"200")], b"part", end=False)
        peer.pump()
        stream.close(False)
        peer.pump()
        [reset] = [e for e in peer.serverEvents if isinstance(e, StreamReset)]
        self.assertEqual((reset.stream_id, reset.error_code), (stream.streamId, ErrorCodes.CANCEL))
        self.assertEqual(peer.connection.room, MAX_STREAMS)


class Waiter:
    def __init__(self, shared: bool = True) -> None:
        self.sharedStreams = shared
        self.got: list[Any] = []

    def slotFree(self) -> None:
        self.got.append("slot")

    def handed(self, source: Any) -> None:
        self.got.append(source)


class PoolTests(SynchronousTestCase):
    """
    The pool shares an HTTP/2 connection among its upstream's exchanges.
    """

    def test_shared(self) -> None:
        """
        Once shared, the connection gives a stream to each new exchange
        while it has room, and the exchanges waiting for its upstream get
        streams first; an upgrade (not C{sharedStreams}) gets none.
        """
        peer = Peer({SettingCodes.MAX_CONCURRENT_STREAMS: 3})
        pool = Pool(peer.clock)
        self.assertTrue(pool.claim(KEY, 6, Waiter()))
        waiting, upgrade = Waiter(), Waiter(shared=False)
        pool._waiting[KEY] = {upgrade: None, waiting: None}  # type: ignore[index]
        pool.opened(peer.connection)  # type: ignore[arg-type]
        own = peer.connection.newStream()
        pool.share(peer.connection, 6)
        self.assertEqual(len(waiting.got), 1)
        self.assertIsInstance(waiting.got[0], H2UpstreamStream)
        self.assertEqual(upgrade.got, [])
        taken = pool.take(KEY)
        self.assertIsInstance(taken, H2UpstreamStream)
        self.assertIsNone(pool.take(KEY), "no room left")
        self.assertIsNone(pool.take(KEY, shared=False))
        own.close(True)
        self.assertIsInstance(pool.take(KEY), H2UpstreamStream)

    def test_waitForFirstHandshake(self) -> None:
        """
        While the first handshake offering HTTP/2 to an upstream is under
        way, the other exchanges for it wait for its outcome rather than
        open connections; an upstream known to speak HTTP/1.1 isn't waited
        for.
        """
        pool = Pool(MemoryReactorClock())
        self.assertTrue(pool.claim(KEY, 6, Waiter()))
        pool.negotiating(KEY)
        waiters = [Waiter(), Waiter()]
        self.assertEqual([pool.claim(KEY, 6, w) for w in waiters], [False, False])
        pool.negotiated(KEY, "http/1.1")
        self.assertEqual([w.got for w in waiters], [["slot"], ["slot"]])
        pool.negotiating(KEY)
        self.assertTrue(pool.claim(KEY, 6, Waiter()))

    def test_waitForStream(self) -> None:
        """
        An exchange for an upstream that spoke HTTP/2 waits for a stream
        while a connection is being made, rather than opening another; once
        the upstream speaks HTTP/1.1 again, it may open one.
        """
        peer = Peer()
        pool = Pool(peer.clock)
        first = Waiter()
        self.assertTrue(pool.claim(KEY, 6, first))
        pool.opened(peer.connection)  # type: ignore[arg-type]
        peer.connection.newStream()
        pool.share(peer.connection, 6)
        peer.connection.connectionLost(Failure(error.ConnectionDone()))
        self.assertTrue(pool.claim(KEY, 6, Waiter()), "a new connection once none is left")
        pool.negotiating(KEY)
        waiter = Waiter()
        self.assertFalse(pool.claim(KEY, 6, waiter), "waits while that one is being made")
        self.assertTrue(pool.claim(KEY, 6, Waiter(shared=False)), "an upgrade doesn't wait")
        pool.negotiated(KEY, "http/1.1")
        self.assertEqual(waiter.got, ["slot"])

    def test_idleClosed(self) -> None:
        """
        A shared connection that carries nothing is closed (C{GOAWAY}) once
        idle as long as the pool keeps idle connections, and shared no more.
        """
        peer = Peer()
        pool = Pool(peer.clock, idleTimeout=30.0)
        self.assertTrue(pool.claim(KEY, 6, Waiter()))
        pool.opened(peer.connection)  # type: ignore[arg-type]
        stream = peer.connection.newStream()
        pool.share(peer.connection, 6)
        peer.clock.advance(40)
        self.assertFalse(peer.transport.disconnecting, "busy: kept")
        stream.close(False)
        peer.clock.advance(29)
        self.assertFalse(peer.transport.disconnecting)
        peer.clock.advance(2)
        self.assertTrue(peer.transport.disconnecting)
        self.assertIsNone(pool.take(KEY))
        peer.pump()
        self.assertTrue([e for e in peer.serverEvents if type(e).__name__ == "ConnectionTerminated"])

    def test_goneAwayDoesntHold(self) -> None:
        """
        A connection that went away (C{GOAWAY}) and still finishes its
        streams holds no exchange back: the next one opens a new connection.
        """
        peer = Peer()
        pool = Pool(peer.clock)
        self.assertTrue(pool.claim(KEY, 6, Waiter()))
        pool.negotiating(KEY)
        pool.opened(peer.connection)  # type: ignore[arg-type]
        pool.negotiated(KEY, "h2")
        peer.connection.newStream()
        pool.share(peer.connection, 6)
        goaway = GoAwayFrame(0)
        goaway.last_stream_id = 1
        peer.connection.dataReceived(goaway.serialize())
        self.assertTrue(peer.connection.connected)
        self.assertIsNone(pool.take(KEY))
        self.assertTrue(pool.claim(KEY, 6, Waiter()))
