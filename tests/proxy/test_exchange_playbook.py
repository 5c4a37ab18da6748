"""
The exchange driven in memory (L{tests.proxy.playbook}): a fake browser
stream, a fake answer source, a log writer that keeps its lines and a
L{Clock}, through every state move and every way an exchange fails. No
socket, no sleeping.
"""

from __future__ import annotations

from OpenSSL import SSL
from twisted.internet import error
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.http1 import Body, EndOfMessage, Incomplete, Refused, ResponseHead
from netlog.core.rules import Bandwidth, Decision
from netlog.proxy.exchange import HEAD_LINE_DELAY
from netlog.proxy.mode import DestinationRefused
from netlog.proxy.relaying import RawKind
from netlog.proxy.states import (
    ANSWER_MOVES,
    REQUEST_MOVES,
    AnswerState,
    RequestState,
    WrongTransition,
    move,
)
from netlog.proxy.upstream import MAX_RETRY_BYTES, UpstreamProtocol
from tests.proxy.playbook import ADDRESS, GET, OK, POST_FORM as POST, SITE_ROUTE, FakeSource, Play, requestEvents, resendable

UPGRADE = (b"GET http://shop.test/socket HTTP/1.1\r\nHost: shop.test\r\nConnection: Upgrade\r\n"
           b"Upgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
SWITCHED = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n"


def closed() -> Failure:
    return Failure(error.ConnectionDone())


def reset() -> Failure:
    return Failure(error.ConnectionLost())


class TransitionTableTests(SynchronousTestCase):
    """
    The table of moves each direction may make.
    """

    def test_requestAllowed(self) -> None:
        """
        A request goes connecting, sending, sent, ended; and may end from
        any state but ended.
        """
        path = [RequestState.CONNECTING, RequestState.SENDING, RequestState.SENT, RequestState.ENDED]
        for old, new in zip(path, path[1:]):
            self.assertIs(move(REQUEST_MOVES, old, new), new)
        for old in path[:-1]:
            self.assertIs(move(REQUEST_MOVES, old, RequestState.ENDED), RequestState.ENDED)

    def test_requestRefused(self) -> None:
        """
        Every move the table doesn't hold raises, backwards and skipping.
        """
        wrong = [(RequestState.SENT, RequestState.SENDING), (RequestState.CONNECTING, RequestState.SENT),
                 (RequestState.ENDED, RequestState.ENDED), (RequestState.ENDED, RequestState.CONNECTING),
                 (RequestState.SENDING, RequestState.SENDING)]
        for old, new in wrong:
            self.assertRaises(WrongTransition, move, REQUEST_MOVES, old, new)

    def test_answerAllowed(self) -> None:
        """
        An answer streams then completes, or is relayed raw from its head
        (a C{101}) or before one (not HTTP); any live state may end.
        """
        for old, new in [(AnswerState.AWAITING, AnswerState.STREAMING), (AnswerState.STREAMING, AnswerState.COMPLETE),
                         (AnswerState.STREAMING, AnswerState.RELAYING), (AnswerState.AWAITING, AnswerState.RELAYING),
                         (AnswerState.COMPLETE, AnswerState.ENDED), (AnswerState.RELAYING, AnswerState.ENDED)]:
            self.assertIs(move(ANSWER_MOVES, old, new), new)

    def test_answerRefused(self) -> None:
        """
        An answer can't complete before it streams, stream again once
        relayed, or come back after it ended.
        """
        for old, new in [(AnswerState.AWAITING, AnswerState.COMPLETE), (AnswerState.RELAYING, AnswerState.STREAMING),
                         (AnswerState.COMPLETE, AnswerState.STREAMING), (AnswerState.ENDED, AnswerState.AWAITING),
                         (AnswerState.STREAMING, AnswerState.STREAMING)]:
            self.assertRaises(WrongTransition, move, ANSWER_MOVES, old, new)

    def test_message(self) -> None:
        """
        The error names the direction and both states.
        """
        e = self.assertRaises(WrongTransition, move, ANSWER_MOVES, AnswerState.ENDED, AnswerState.STREAMING)
        self.assertEqual(str(e), "AnswerState: ENDED can't become STREAMING")

    def test_everyStateHasARow(self) -> None:
        """
        The tables name every state, so no state is a dead end by omission.
        """
        self.assertEqual(set(REQUEST_MOVES), set(RequestState))
        self.assertEqual(set(ANSWER_MOVES), set(AnswerState))


class StartTests(SynchronousTestCase):
    def test_connecting(self) -> None:
        """
        Until its connection is made, an exchange is connecting: nothing is
        logged and nothing is ready.
        """
        play = Play()
        play.exchange.start()
        self.assertIs(play.exchange.requestState, RequestState.CONNECTING)
        self.assertFalse(play.exchange.ready)
        self.assertEqual(play.writer.lines, [])
        self.assertEqual(len(play.engine.asked), 1)

    def test_connected(self) -> None:
        """
        Once connected, the open line is written, then the head goes to the
        source (hop-by-hop fields dropped), and the browser is told.
        """
        play = Play(GET.replace(b"\r\n\r\n", b"\r\nProxy-Connection: keep-alive\r\n\r\n"))
        source = play.connected()
        self.assertEqual(play.writer.types(), ["open"])
        [(head, drop, extra)] = source.heads
        self.assertIs(head, play.head)
        self.assertIn(b"proxy-connection", drop)
        self.assertEqual(extra, [])
        self.assertIs(play.exchange.requestState, RequestState.SENDING)
        self.assertEqual(play.browser.named("ready"), [("ready",)])
        self.assertEqual(play.exchange.kept.up, len(play.head.raw))

    def test_addressLogged(self) -> None:
        """
        The open line names the address the connection went to.
        """
        play = Play()
        play.connected()
        self.assertEqual(play.writer.lines[0][2]["address"], ADDRESS)

    def test_backpressureAttached(self) -> None:
        """
        Each side pauses the other's producer: the browser the source's
        gate, the source the browser's.
        """
        play = Play()
        source = play.connected()
        self.assertIs(play.browser.answerProducer, source.gate)
        self.assertIs(source.requestProducer, play.browser.gate)

    def test_idleConnection(self) -> None:
        """
        An idle pooled connection is taken at once: no new one is asked
        for, and no connect time is logged.
        """
        play = Play()
        idle = FakeSource()
        play.engine.idle.append(idle)
        play.exchange.start()
        self.assertEqual(play.engine.asked, [])
        self.assertIs(play.exchange.upstream, idle)
        self.assertIsNone(play.exchange.kept.connectedAt)

    def test_latency(self) -> None:
        """
        The rules' latency holds the request back that long before it asks
        for a connection.
        """
        play = Play(rules=Decision(latency=0.5))
        play.exchange.start()
        self.assertEqual(play.engine.asked, [])
        play.clock.advance(0.5)
        self.assertEqual(len(play.engine.asked), 1)

    def test_upgradeHead(self) -> None:
        """
        An upgrade request keeps its C{Upgrade} field and says
        C{Connection: Upgrade} upstream.
        """
        play = Play(UPGRADE)
        source = play.connected()
        [(_, drop, extra)] = source.heads
        self.assertNotIn(b"upgrade", drop)
        self.assertEqual(extra, [(b"Connection", b"Upgrade")])

    def test_rulesChangeRequest(self) -> None:
        """
        The rules' request fields go up in place of the browser's.
        """
        play = Play(rules=Decision(setUp=((b"X-Test", b"1"),), dropUp=frozenset({b"x-test", b"host"})))
        source = play.connected()
        [(_, drop, extra)] = source.heads
        self.assertIn(b"host", drop)
        self.assertIn((b"X-Test", b"1"), extra)


class ConnectFailureTests(SynchronousTestCase):
    def test_refused(self) -> None:
        """
        A connection that can't be made: the browser gets a 502, the log an
        open and an end at once, C{_failed} with the reason.
        """
        play = Play()
        play.exchange.start()
        play.engine.asked.pop().errback(Failure(error.ConnectionRefusedError()))
        self.assertEqual(play.browser.named("answer")[0][1], 502)
        self.assertEqual(play.writer.types(), ["open", "end"])
        self.assertEqual(play.end()["_failed"]["reason"], "backend.test:8080 refused the connection")
        self.assertEqual(play.browser.named("done"), [("done", True)])
        self.assertIs(play.exchange.requestState, RequestState.ENDED)
        self.assertTrue(play.exchange.done)

    def test_destinationRefused(self) -> None:
        """
        A destination the policy refuses: a 403, C{_refused}.
        """
        play = Play()
        play.exchange.start()
        play.engine.asked.pop().errback(Failure(DestinationRefused("192.0.2.10 is not allowed")))
        self.assertEqual(play.browser.named("answer")[0][1], 403)
        self.assertEqual(play.end()["_refused"], {"reason": "192.0.2.10 is not allowed", "status": 403})

    def test_browserLeftWhileConnecting(self) -> None:
        """
        A browser that leaves while the connection is made ends the
        exchange (open and end at once); the connection, once made, goes
        back to the pool unused.
        """
        play = Play()
        play.exchange.start()
        play.exchange.browserLost(closed())
        self.assertEqual(play.end()["_failed"]["reason"],
                         "the browser closed the connection before the server was connected")
        source = play.engine.connect()
        self.assertEqual(play.engine.pool.kept, [source])
        self.assertEqual(source.heads, [])
        self.assertEqual(play.writer.types(), ["open", "end"])

    def test_timeoutWhileConnecting(self) -> None:
        """
        A timeout before any connection: a 504, open and end at once.
        """
        play = Play()
        play.exchange.start()
        play.exchange.timedOut("the server sent nothing for 5 seconds")
        self.assertEqual(play.browser.named("answer")[0][1], 504)
        self.assertEqual(play.end()["_failed"], {"reason": "the server sent nothing for 5 seconds", "status": 504})

    def test_connectErrorAfterEnd(self) -> None:
        """
        A connection failure after the exchange ended writes nothing more.
        """
        play = Play()
        play.exchange.start()
        play.exchange.abort()
        play.engine.asked.pop().errback(Failure(error.ConnectionRefusedError()))
        self.assertEqual(play.writer.types(), ["open", "end"])


class RequestTests(SynchronousTestCase):
    def test_body(self) -> None:
        """
        The request's body goes to the source and is kept for the end line.
        """
        play = Play(POST)
        source = play.connected()
        play.sendRequest()
        self.assertEqual(source.body, [b"payload"])
        self.assertEqual(source.ended, 1)
        play.answer(OK, b"POST")
        self.assertEqual(play.end()["request_body"]["size"], 7)

    def test_sent(self) -> None:
        """
        The request's end makes it sent and notes when.
        """
        play = Play()
        play.connected()
        play.clock.advance(2)
        play.sendRequest()
        self.assertIs(play.exchange.requestState, RequestState.SENT)
        self.assertTrue(play.exchange.requestDone)
        self.assertEqual(play.exchange.kept.sentAt, 2)

    def test_endTwice(self) -> None:
        """
        A second end of the same request is a wrong move, said loudly.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        self.assertRaises(WrongTransition, play.exchange.fromBrowser, EndOfMessage())

    def test_browserCutRequest(self) -> None:
        """
        A browser that leaves in the middle of its request: the exchange
        fails, the browser's side is aborted, the source closed at once.
        """
        play = Play(POST)
        source = play.connected()
        play.exchange.fromBrowser(Incomplete("cut"))
        self.assertEqual(play.end()["_failed"]["reason"],
                         "the browser closed the connection in the middle of the request")
        self.assertEqual(play.browser.named("abort"), [("abort",)])
        self.assertEqual(source.closed, "gently")

    def test_malformedBodyBeforeAnswer(self) -> None:
        """
        A body found malformed before any answer: netlog's own 400, the
        entry C{_refused}, the source closed.
        """
        play = Play(POST)
        source = play.connected()
        play.exchange.fromBrowser(Refused(400, "a bad chunk"))
        self.assertEqual(play.browser.named("answer")[0][1], 400)
        self.assertEqual(play.end()["_refused"], {"reason": "a bad chunk", "status": 400})
        self.assertEqual(source.closed, "aborted")

    def test_malformedBodyAfterHead(self) -> None:
        """
        A body found malformed once the answer began: the exchange fails and
        the browser's side is aborted (no second answer can be sent).
        """
        play = Play(POST)
        play.connected()
        play.answer(CHUNKED_HEAD, b"POST")
        play.exchange.fromBrowser(Refused(400, "a bad chunk"))
        self.assertEqual(play.end()["_failed"]["reason"], "the request was malformed: a bad chunk")
        self.assertEqual(play.browser.named("abort"), [("abort",)])
        self.assertEqual(play.browser.named("answer"), [])

    def test_eventsAfterEndIgnored(self) -> None:
        """
        The browser's events after the exchange ended change nothing.
        """
        play = Play(POST)
        source = play.connected()
        play.exchange.abort()
        play.sendRequest()
        self.assertEqual(source.body, [])


class AnswerTests(SynchronousTestCase):
    def test_whole(self) -> None:
        """
        A head, a body and an end: the browser gets each, the end line the
        status and body, and the connection goes back to the pool.
        """
        play = Play()
        source = play.answered()
        self.assertEqual([call[0] for call in play.browser.calls if call[0] in ("head", "data", "end", "done")],
                         ["head", "data", "end", "done"])
        end = play.end()
        self.assertEqual(end["response"]["status"], 200)
        self.assertEqual(str(end["response"]["body"]["data"]), "aGVsbG8=")
        self.assertEqual(play.engine.pool.kept, [source])
        self.assertIsNone(source.exchange)
        self.assertTrue(play.exchange.done)

    def test_streaming(self) -> None:
        """
        Between its head and its end, the answer is streaming.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD)
        self.assertIs(play.exchange.answerState, AnswerState.STREAMING)
        self.assertEqual(play.writer.types(), ["open"])

    def test_closeAnswer(self) -> None:
        """
        An answer that says C{Connection: close}: its connection is closed
        after it, not pooled.
        """
        play = Play()
        source = play.connected()
        play.sendRequest()
        play.answer(OK.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n"))
        self.assertEqual(play.engine.pool.kept, [])
        self.assertEqual(source.closed, "gently")

    def test_eofFramed(self) -> None:
        """
        An answer framed by the server's close can't leave its connection
        reusable.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        head = ResponseHead(200, b"OK", b"HTTP/1.1", [], b"HTTP/1.1 200 OK\r\n\r\n", eofFramed=True)
        play.exchange.answerHead(play.source, head)  # type: ignore[arg-type]
        play.exchange.answerEnd(play.source, EndOfMessage())  # type: ignore[arg-type]
        self.assertEqual(play.engine.pool.kept, [])

    def test_notPooled(self) -> None:
        """
        A source that is never pooled (a recording) is closed when done.
        """
        play = Play()
        source = play.connected(FakeSource(pooled=False))
        play.sendRequest()
        play.answer(OK)
        self.assertEqual(play.engine.pool.kept, [])
        self.assertEqual(source.closed, "gently")

    def test_sourceNotIdle(self) -> None:
        """
        A source with part of an answer still pending isn't pooled.
        """
        play = Play()
        source = play.connected()
        source.idle = False
        play.sendRequest()
        play.answer(OK)
        self.assertEqual(play.engine.pool.kept, [])

    def test_continue(self) -> None:
        """
        A C{100 Continue} goes to the browser and is kept among the
        interim statuses.
        """
        play = Play(POST.replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n"))
        play.connected()
        play.answer(b"HTTP/1.1 100 Continue\r\n\r\n", b"POST")
        self.assertEqual(play.browser.named("interim"), [("interim", 100)])
        self.assertIs(play.exchange.answerState, AnswerState.AWAITING)
        play.sendRequest()
        play.answer(OK, b"POST")
        self.assertEqual(play.end()["interim"], [100])

    def test_earlyHints(self) -> None:
        """
        A C{103 Early Hints} before the answer: relayed, kept, counted.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        hints = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n"
        play.answer(hints + OK)
        self.assertEqual(play.browser.named("interim"), [("interim", 103)])
        self.assertEqual(play.end()["interim"], [103])
        self.assertEqual(play.exchange.kept.down, len(hints) + len(OK))

    def test_interimAfterHeadIgnored(self) -> None:
        """
        An interim head after the answer's head isn't passed on.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD)
        play.exchange.answerInterim(play.source, ResponseHead(  # type: ignore[arg-type]
            103, b"Early Hints", b"HTTP/1.1", [], b"HTTP/1.1 103 Early Hints\r\n\r\n", interim=True))
        self.assertEqual(play.browser.named("interim"), [])

    def test_trailers(self) -> None:
        """
        A chunked answer's trailers reach the browser with its end.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD + b"5\r\nhello\r\n0\r\nServer-Timing: db;dur=53\r\n\r\n")
        self.assertEqual(play.browser.named("end"), [("end", [(b"Server-Timing", b"db;dur=53")])])
        self.assertEqual(play.end()["response"]["body"]["size"], 5)

    def test_head(self) -> None:
        """
        A C{HEAD}'s answer has a length but no body: it ends at its head.
        """
        play = Play(GET.replace(b"GET ", b"HEAD ", 1))
        play.connected()
        play.sendRequest()
        play.answer(b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n", b"HEAD")
        self.assertEqual(play.end()["response"]["body"]["size"], 0)
        self.assertEqual(play.browser.named("data"), [])

    def test_noContent(self) -> None:
        """
        A C{204} ends at its head.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(b"HTTP/1.1 204 No Content\r\n\r\n")
        self.assertEqual(play.end()["response"]["status"], 204)
        self.assertEqual(len(play.engine.pool.kept), 1)

    def test_notModified(self) -> None:
        """
        A C{304} ends at its head, whatever length it names.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(b"HTTP/1.1 304 Not Modified\r\nContent-Length: 99\r\n\r\n")
        self.assertEqual(play.end()["response"]["status"], 304)
        self.assertEqual(play.browser.named("data"), [])

    def test_earlyAnswer(self) -> None:
        """
        An answer that ends before the request did (a 413 mid-upload): the
        rest of the request is dropped, the connection not reused.
        """
        play = Play(POST)
        source = play.connected()
        play.answer(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\n\r\n", b"POST")
        self.assertEqual(play.browser.named("discard"), [("discard",)])
        self.assertEqual(play.engine.pool.kept, [])
        self.assertEqual(source.closed, "gently")

    def test_rewritten(self) -> None:
        """
        For a configured site, a C{Location} naming the backend is
        rewritten to the public origin; hop-by-hop fields are dropped.
        """
        play = Play(route=SITE_ROUTE)
        play.connected()
        play.sendRequest()
        play.answer(b"HTTP/1.1 302 Found\r\nLocation: http://backend.test:8080/next\r\nKeep-Alive: timeout=5\r\n"
                    b"Content-Length: 0\r\n\r\n")
        [(_, _, headers, _)] = play.browser.named("head")
        self.assertEqual(headers, [(b"Location", b"http://shop.test/next"), (b"Content-Length", b"0")])

    def test_rulesChangeAnswer(self) -> None:
        """
        The rules' answer fields replace the server's.
        """
        play = Play(rules=Decision(setDown=((b"Cache-Control", b"no-store"),),
                                   dropDown=frozenset({b"cache-control"})))
        play.connected()
        play.sendRequest()
        play.answer(OK.replace(b"\r\n\r\n", b"\r\nCache-Control: max-age=60\r\n\r\n"))
        [(_, _, headers, _)] = play.browser.named("head")
        self.assertIn((b"Cache-Control", b"no-store"), headers)
        self.assertNotIn((b"Cache-Control", b"max-age=60"), headers)

    def test_oneWritePerRead(self) -> None:
        """
        What one read brings goes to the browser in one write: gathered
        then flushed once.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(OK)
        self.assertEqual(play.browser.gathered, 1)
        self.assertGreaterEqual(play.browser.flushed, 1)

    def test_firstByte(self) -> None:
        """
        The first byte's time is the first read's; each read touches the
        browser's idle timer.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.clock.advance(3)
        play.answer(CHUNKED_HEAD)
        play.clock.advance(1)
        play.answer(b"5\r\nhello\r\n")
        self.assertEqual(play.exchange.kept.firstByteAt, 3)
        self.assertEqual(play.browser.named("touch"), [("touch", 3), ("touch", 4)])

    def test_secondHead(self) -> None:
        """
        A second head while the first answer streams is a wrong move.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD)
        head = ResponseHead(200, b"OK", b"HTTP/1.1", [], b"HTTP/1.1 200 OK\r\n\r\n")
        self.assertRaises(WrongTransition, play.exchange.answerHead, play.source, head)

    def test_marks(self) -> None:
        """
        What the source says of its answer is in the end line, and a
        recording's own record of it replaces the answer's.
        """
        play = Play()
        source = play.connected()
        play.exchange.answerMarks(source, {"_replayed": 7}, lambda response: {**response, "status": 299})
        play.sendRequest()
        play.answer(OK)
        self.assertEqual(play.end()["_replayed"], 7)
        self.assertEqual(play.end()["response"]["status"], 299)


class HeadLineTests(SynchronousTestCase):
    def test_due(self) -> None:
        """
        An answer whose body didn't end in the read that brought its head:
        its head line is due a second later, and the browser's timer is
        asked to fire by then.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.clock.advance(5)
        play.answer(CHUNKED_HEAD)
        self.assertEqual(play.exchange.headDue, 5 + HEAD_LINE_DELAY)
        self.assertEqual(play.browser.named("wake"), [("wake", 5 + HEAD_LINE_DELAY)])

    def test_writtenOnce(self) -> None:
        """
        The head line is written once, however often asked.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD)
        play.exchange.logHead()
        play.exchange.logHead()
        play.exchange.answerEnd(play.source, EndOfMessage())  # type: ignore[arg-type]
        self.assertEqual(play.writer.types(), ["open", "head", "end"])

    def test_notDueWhenWhole(self) -> None:
        """
        An answer whole in one read has no head line.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(OK)
        self.assertIsNone(play.exchange.headDue)
        self.assertEqual(play.writer.types(), ["open", "end"])

    def test_eventStream(self) -> None:
        """
        An event stream's head line is written at its head.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD.replace(b"text/plain", b"text/event-stream"))
        self.assertEqual(play.writer.types(), ["open", "head"])
        self.assertIsNone(play.exchange.headDue)


class SourceFailureTests(SynchronousTestCase):
    def test_closedBeforeHead(self) -> None:
        """
        A source that closes before answering: a 502, C{_failed} saying so.
        """
        play = Play()
        source = play.connected()
        play.sendRequest()
        play.exchange.answerFailed(source, closed())
        self.assertEqual(play.browser.named("answer")[0][1], 502)
        self.assertEqual(play.end()["_failed"]["reason"], "backend.test:8080 closed the connection before answering")
        self.assertIs(play.exchange.answerState, AnswerState.ENDED)

    def test_resetBeforeHead(self) -> None:
        """
        A reset before answering says reset.
        """
        play = Play()
        source = play.connected()
        play.sendRequest()
        play.exchange.answerFailed(source, reset())
        self.assertEqual(play.end()["_failed"]["reason"], "backend.test:8080 reset the connection before answering")

    def test_tlsBeforeHead(self) -> None:
        """
        A TLS failure says what OpenSSL said.
        """
        play = Play()
        source = play.connected()
        play.sendRequest()
        failure = Failure(SSL.Error([("SSL routines", "", "certificate verify failed")]))
        play.exchange.answerFailed(source, failure)
        self.assertEqual(play.end()["_failed"]["reason"],
                         "TLS with backend.test:8080 failed: certificate verify failed")

    def test_midBody(self) -> None:
        """
        A source gone in the middle of the body: the browser's side is
        aborted (it must see the answer is cut), closed by the server.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD + b"5\r\nhello\r\n")
        play.exchange.answerFailed(play.source, closed())  # type: ignore[arg-type]
        end = play.end()
        self.assertEqual(end["_failed"]["reason"], "backend.test:8080 closed the connection in the middle of the answer")
        self.assertEqual(end["closed_by"] if "closed_by" in end else None, None)
        self.assertEqual(play.browser.named("abort"), [("abort",)])
        self.assertEqual(end["response"]["body"]["size"], 5)

    def test_midBodyFramingRelayed(self) -> None:
        """
        Cut framing read and not relayed goes to a browser side that relays
        it, which then can't carry more; no abort.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD)
        play.exchange.answerFailed(play.source, closed(), b"5\r\nhel")  # type: ignore[arg-type]
        self.assertEqual(play.browser.named("cut"), [("cut", b"5\r\nhel")])
        self.assertEqual(play.browser.named("abort"), [])
        self.assertEqual(play.browser.named("done"), [("done", True)])

    def test_midBodyFramingNotRelayed(self) -> None:
        """
        A browser side that can't relay the cut framing (it dechunks, or is
        HTTP/2) is aborted.
        """
        play = Play()
        play.browser.relaysFraming = False
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD)
        play.exchange.answerFailed(play.source, closed(), b"5\r\nhel")  # type: ignore[arg-type]
        self.assertEqual(play.browser.named("abort"), [("abort",)])

    def test_afterEnd(self) -> None:
        """
        A source that closes after its answer ended changes nothing.
        """
        play = Play()
        source = play.answered()
        play.exchange.answerFailed(source, reset())
        self.assertEqual(play.writer.types(), ["open", "end"])
        self.assertNotIn("_failed", play.end())

    def test_eventsAfterEnd(self) -> None:
        """
        Answer events after the end pass nothing to the browser.
        """
        play = Play()
        source = play.answered()
        before = list(play.browser.calls)
        play.exchange.answerData(source, Body(b"x", b"x"))
        play.exchange.answerEnd(source, EndOfMessage())
        self.assertEqual(play.browser.calls, before)

    def test_staleSource(self) -> None:
        """
        A failure from a source that isn't the exchange's is ignored.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.exchange.answerFailed(FakeSource(), closed())
        self.assertEqual(play.writer.types(), ["open"])


class BrowserLeavesTests(SynchronousTestCase):
    def test_afterHeadUp(self) -> None:
        """
        A browser that leaves before any answer: the exchange fails, its
        source is closed (its answer can't serve another request).
        """
        play = Play()
        source = play.connected()
        play.sendRequest()
        play.exchange.browserLost(closed())
        self.assertEqual(play.end()["_failed"]["reason"],
                         "the browser closed the connection before the answer was complete")
        self.assertEqual(source.closed, "gently")

    def test_midAnswer(self) -> None:
        """
        A browser that leaves mid-answer: the same, with what it got kept.
        """
        play = Play()
        source = play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD + b"5\r\nhello\r\n")
        play.exchange.browserLost(reset())
        end = play.end()
        self.assertEqual(end["response"]["body"]["size"], 5)
        self.assertEqual(source.closed, "gently")
        self.assertIs(play.exchange.requestState, RequestState.ENDED)

    def test_afterEnd(self) -> None:
        """
        A browser that leaves after its answer changes nothing.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(OK)
        play.exchange.browserLost(closed())
        self.assertEqual(play.writer.types(), ["open", "end"])

    def test_cancelled(self) -> None:
        """
        A cancelled stream (C{RST_STREAM}) ends its exchange without
        touching its connection's others.
        """
        play = Play()
        source = play.connected()
        play.sendRequest()
        play.exchange.cancelled()
        self.assertEqual(play.end()["_failed"]["reason"], "the browser cancelled the request")
        self.assertEqual(play.browser.named("abort"), [])
        self.assertEqual(source.closed, "gently")

    def test_proxyStops(self) -> None:
        """
        The proxy stopping ends the exchange and aborts the browser's side.
        """
        play = Play()
        play.connected()
        play.exchange.abort()
        self.assertEqual(play.end()["_failed"]["reason"], "the proxy stopped")
        self.assertEqual(play.browser.named("abort"), [("abort",)])


class TimeoutTests(SynchronousTestCase):
    def test_beforeAnswer(self) -> None:
        """
        Silence before any answer: a 504, C{_failed} with its status.
        """
        play = Play()
        source = play.connected()
        play.sendRequest()
        play.exchange.timedOut("the server sent nothing for 60 seconds")
        self.assertEqual(play.browser.named("answer")[0][1], 504)
        self.assertEqual(play.end()["_failed"]["status"], 504)
        self.assertEqual(source.closed, "aborted")

    def test_midAnswer(self) -> None:
        """
        Silence mid-answer: both sides cut, the browser's can't carry more.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD)
        play.exchange.timedOut("the server sent nothing for 60 seconds")
        self.assertEqual(play.browser.named("abort"), [("abort",)])
        self.assertEqual(play.browser.named("done"), [("done", True)])
        self.assertEqual(play.browser.named("answer"), [])

    def test_afterEnd(self) -> None:
        """
        A timeout after the end does nothing.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.answer(OK)
        play.exchange.timedOut("late")
        self.assertEqual(play.writer.types(), ["open", "end"])


class RetryTests(SynchronousTestCase):
    def test_again(self) -> None:
        """
        A source that hands the request back to send again: a fresh
        connection gets it, and the answer it brings is the exchange's one
        entry.
        """
        play = Play()
        first = play.connected()
        play.sendRequest()
        play.exchange.answerFailed(first, closed(), again=resendable(play.head))
        self.assertEqual(len(play.engine.asked), 1)
        second = play.engine.connect()
        self.assertEqual([head for head, _, _ in second.heads], [play.head])
        self.assertEqual(second.ended, 1)
        self.assertEqual(play.exchange.kept.connectedAt, play.clock.seconds())
        play.answer(OK, source=second)
        self.assertEqual(play.writer.types(), ["open", "end"])
        self.assertEqual(play.end()["response"]["status"], 200)

    def test_againFails(self) -> None:
        """
        The new connection can't be made: a 502 that says why.
        """
        play = Play()
        first = play.connected()
        play.sendRequest()
        play.exchange.answerFailed(first, closed(), again=resendable(play.head))
        play.engine.asked.pop().errback(Failure(error.ConnectionRefusedError()))
        self.assertEqual(play.end()["_failed"]["reason"], "backend.test:8080 refused the connection")

    def test_browserLeftDuringRetry(self) -> None:
        """
        A browser that leaves while the retry connects: one end line, and
        the new connection goes back to the pool.
        """
        play = Play()
        first = play.connected()
        play.sendRequest()
        play.exchange.answerFailed(first, closed(), again=resendable(play.head))
        play.exchange.browserLost(closed())
        second = play.engine.connect()
        self.assertEqual(play.engine.pool.kept, [second])
        self.assertEqual(play.writer.types(), ["open", "end"])

    def test_afterHeadNoRetry(self) -> None:
        """
        Once the answer began, a failure is never retried.
        """
        play = Play()
        source = play.connected()
        play.sendRequest()
        play.answer(CHUNKED_HEAD)
        play.exchange.answerFailed(source, closed(), again=resendable(play.head))
        self.assertEqual(play.engine.asked, [])
        self.assertIn("_failed", play.end())

    def test_forward(self) -> None:
        """
        A source with no answer forwards the request to a new connection.
        """
        play = Play()
        source = play.connected(FakeSource(pooled=False))
        play.sendRequest()
        play.exchange.forward(source, resendable(play.head))
        second = play.engine.connect()
        self.assertEqual(len(second.heads), 1)

    def test_forwardTooBig(self) -> None:
        """
        A request too big to keep can't be forwarded: a 502 says so.
        """
        play = Play()
        source = play.connected(FakeSource(pooled=False))
        play.sendRequest()
        play.exchange.forward(source, None)
        self.assertEqual(play.end()["_failed"]["reason"],
                         f"the request is over {MAX_RETRY_BYTES} bytes, too big to forward unanswered")


class UpstreamRetryTests(SynchronousTestCase):
    """
    When an upstream connection hands its request back to be sent again.
    """

    def served(self, request: bytes, heads: int) -> tuple[UpstreamProtocol, list[object]]:
        upstream = UpstreamProtocol(None, "key")  # type: ignore[arg-type]
        upstream.makeConnection(StringTransport())
        failures: list[object] = []

        class Sink:
            def __getattr__(self, name: str) -> object:
                return lambda *args, **kwargs: None

            def answerFailed(self, source: object, reason: Failure, raw: bytes = b"", again: object = None) -> None:
                failures.append(again)

        head, rest = requestEvents(request)
        from netlog.core.http1 import HeadFields

        for _ in range(heads):
            upstream.exchange = Sink()  # type: ignore[assignment]
            upstream.sendHead(head, HeadFields(head.version, head.headers), frozenset(), [])
            for event in rest:
                if isinstance(event, Body):
                    upstream.requestData(event)
                elif isinstance(event, EndOfMessage):
                    upstream.requestEnded(event)
        return upstream, failures

    def test_reusedClosed(self) -> None:
        """
        A reused connection that closes before any answer to a whole GET
        hands it back.
        """
        upstream, failures = self.served(GET, 2)
        upstream.connectionLost(closed())
        [again] = failures
        self.assertIsNotNone(again)

    def test_freshClosed(self) -> None:
        """
        A fresh connection that closes is a failure: nothing to retry.
        """
        upstream, failures = self.served(GET, 1)
        upstream.connectionLost(closed())
        self.assertEqual(failures, [None])

    def test_post(self) -> None:
        """
        A POST is never sent twice.
        """
        upstream, failures = self.served(POST, 2)
        upstream.connectionLost(closed())
        self.assertEqual(failures, [None])

    def test_answered(self) -> None:
        """
        A connection that brought part of an answer doesn't hand back.
        """
        upstream, failures = self.served(GET, 2)
        upstream.dataReceived(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhe")
        upstream.connectionLost(closed())
        self.assertEqual(failures, [None])


class WebSocketTests(SynchronousTestCase):
    def upgraded(self) -> Play:
        play = Play(UPGRADE)
        play.connected()
        play.sendRequest()
        play.answer(SWITCHED)
        return play

    def test_upgrade(self) -> None:
        """
        A C{101} to an upgrade request: the sides are relayed raw, the
        source too, and the head line is written at once.
        """
        play = self.upgraded()
        self.assertIs(play.exchange.answerState, AnswerState.RELAYING)
        self.assertIs(play.relay().kind, RawKind.UPGRADED)
        self.assertTrue(play.source is not None and play.source.raw)
        self.assertEqual(play.browser.named("raw"), [("raw",)])
        self.assertEqual(play.writer.types(), ["open", "head"])
        [(_, status, _, upgraded)] = play.browser.named("head")
        self.assertEqual((status, upgraded), (101, True))

    def test_messages(self) -> None:
        """
        Each way, each message is logged as it passes, and the bytes go on.
        """
        play = self.upgraded()
        play.exchange.answerRaw(play.source, b"\x81\x05hello")  # type: ignore[arg-type]
        play.exchange.browserRaw(b"\x81\x82abcd" + bytes(a ^ b for a, b in zip(b"hi", b"ab")))
        messages = [fields for kind, _, fields in play.writer.lines if kind == "message"]
        self.assertEqual([m["direction"] for m in messages], ["down", "up"])
        assert play.source is not None
        self.assertEqual(len(play.source.rawSent), 1)
        self.assertEqual(play.browser.named("data")[-1], ("data", b"\x81\x05hello"))

    def test_pending(self) -> None:
        """
        What the browser's side had read past the request goes up at once.
        """
        play = Play(UPGRADE)
        play.browser.pending = b"\x81\x80abcd"
        play.connected()
        play.sendRequest()
        play.answer(SWITCHED)
        assert play.source is not None
        self.assertEqual(play.source.rawSent, [b"\x81\x80abcd"])

    def test_serverCloses(self) -> None:
        """
        The server closing ends the relay: the end line has the WebSocket's
        counts, closed by the server, and the browser's side is finished.
        """
        play = self.upgraded()
        play.exchange.answerRaw(play.source, b"\x81\x05hello")  # type: ignore[arg-type]
        play.exchange.answerFailed(play.source, closed())  # type: ignore[arg-type]
        end = play.end()
        self.assertEqual((end["_websocket"]["messages_up"], end["_websocket"]["messages_down"]), (0, 1))
        self.assertEqual(end["closed_by"], "server")
        self.assertNotIn("_failed", end)
        self.assertEqual(play.browser.named("finishRaw"), [("finishRaw",)])

    def test_browserResets(self) -> None:
        """
        The browser resetting the relay: C{_failed}, the source closed gently.
        """
        play = self.upgraded()
        play.exchange.browserLost(reset())
        self.assertEqual(play.end()["_failed"]["reason"], "the browser reset the connection")
        assert play.source is not None
        self.assertEqual(play.source.closed, "gently")

    def test_timeout(self) -> None:
        """
        A silent relay is cut by the timeout, closed by the proxy.
        """
        play = self.upgraded()
        play.exchange.timedOut("silent")
        self.assertEqual(play.end()["closed_by"], "proxy")

    def test_endIgnored(self) -> None:
        """
        An end event after the upgrade (the reader's end of the C{101})
        doesn't end the relay.
        """
        play = self.upgraded()
        play.exchange.answerEnd(play.source, EndOfMessage())  # type: ignore[arg-type]
        self.assertIs(play.exchange.answerState, AnswerState.RELAYING)

    def test_unparsable(self) -> None:
        """
        An answer that can't be read as HTTP is relayed raw from its first
        byte; its entry is C{_unparsed}, with no response.
        """
        play = Play()
        play.connected()
        play.sendRequest()
        play.exchange.answerUnparsable(play.source, b"SSH-2.0-OpenSSH\r\n")  # type: ignore[arg-type]
        self.assertIs(play.relay().kind, RawKind.UNPARSED)
        self.assertEqual(play.browser.named("data"), [("data", b"SSH-2.0-OpenSSH\r\n")])
        play.exchange.answerFailed(play.source, closed())  # type: ignore[arg-type]
        end = play.end()
        self.assertTrue(end["_unparsed"])
        self.assertNotIn("response", end)


class ShapingTests(SynchronousTestCase):
    def test_down(self) -> None:
        """
        At 1000 bytes a second, a read of 500 holds the source's reading
        half a second.
        """
        play = Play(rules=Decision(bandwidth=Bandwidth(down=1000)))
        source = play.connected()
        play.sendRequest()
        play.exchange.answerArrived(source, 500)
        self.assertTrue(source.gate.paused)
        play.clock.advance(0.5)
        self.assertFalse(source.gate.paused)

    def test_up(self) -> None:
        """
        The request's body holds the browser's reading likewise.
        """
        play = Play(POST, rules=Decision(bandwidth=Bandwidth(up=7)))
        play.connected()
        self.assertFalse(play.browser.gate.paused)
        play.sendRequest()
        self.assertTrue(play.browser.gate.paused)
        play.clock.advance(1)
        self.assertFalse(play.browser.gate.paused)

    def test_stoppedAtEnd(self) -> None:
        """
        The end releases what shaping held, so a pooled connection reads
        freely for the next exchange.
        """
        play = Play(rules=Decision(bandwidth=Bandwidth(down=10)))
        source = play.connected()
        play.sendRequest()
        play.answer(OK)
        self.assertFalse(source.gate.paused)
        self.assertEqual(play.clock.getDelayedCalls(), [])
