"""
One exchange through the engine: a request relayed to its upstream (a site's
backend or a live host) and the answer relayed back, both streamed with
backpressure, and kept in the network log as the mode says.

The browser side (an L{IBrowserStream}: an HTTP/1.1 connection, or one
stream of an HTTP/2 connection) hands the exchange the request's events and
carries the answer's events to the browser in its own protocol; the
answer's side (an L{IAnswerSource}: an upstream connection,
L{netlog.proxy.upstream.UpstreamProtocol}, or a recording when the mode
routes the request to one, an L{Answered} route) hands it the answer's
events (L{netlog.proxy.contracts.IAnswerSink}). The exchange parses no
bytes and writes none of its own toward the browser. Its state is one enum
per direction, moved as L{netlog.proxy.states}' table allows. Once an
answer is a C{101} (a WebSocket, on HTTP/1.1 only) or can't be read as
HTTP, both sides are relayed raw until one closes (L{RawRelay}); the rules'
bandwidth is kept by L{Shaping}.
"""

from __future__ import annotations

import ctypes
import gc
from dataclasses import replace
from typing import Any, Callable

from OpenSSL import SSL
from twisted.internet import error
from twisted.logger import Logger
from twisted.python.failure import Failure

from netlog.core.http1 import Body, EndOfMessage, Event, HeadFields, Incomplete, Refused, RequestHead, ResponseHead
from netlog.core.records import (
    EXCHANGE,
    REFUSED_TEXT,
    UNANSWERED_TEXT,
    UNREACHED_TEXT,
    endRecord,
    headRecord,
    isWebSocket,
    responseRecord,
)
from netlog.core.rules import PASS, Decision
from netlog.net.connect import describeFailure, failureMarks
from netlog.net.relay import CLIENT, PROXY, SERVER
from netlog.proxy.contracts import IAnswerSource, IBrowserStream, IEngine, IResendable
from netlog.proxy.mode import Answered, DestinationRefused, Route, remapRoute
from netlog.proxy.fields import answerFields, requestChanges
from netlog.proxy.hold import SourceHold
from netlog.proxy.kept import Kept
from netlog.proxy.relaying import RawKind, RawRelay, shapingFor
from netlog.proxy.states import (
    ANSWER_ENDED,
    ANSWER_MOVES,
    AWAITING,
    COMPLETE,
    CONNECTING,
    DUE,
    NOT_DUE,
    RELAYING,
    REQUEST_ENDED,
    REQUEST_MOVES,
    SENDING,
    SENT,
    STREAMING,
    WRITTEN,
    AnswerState,
    HeadLine,
    RequestState,
    move,
)
from netlog.proxy.h2upstream import StreamFailed
from netlog.proxy.upstream import MAX_RETRY_BYTES

_log = Logger()

#: Seconds after an answer's head its head line is written when its body
#: hasn't ended by then (an answer that ends sooner has two lines only).
HEAD_LINE_DELAY = 1.0
#: The status a browser gets when the server went silent before answering.
GATEWAY_TIMEOUT = 504


#: Seconds between two collections of unreachable cycles in
#: L{giveBackFreeMemory} (one takes some 25 ms on the site proxy's heap).
COLLECT_INTERVAL = 10.0
_mallocTrim: Any = None
_lastCollect: float | None = None


def giveBackFreeMemory(now: float) -> bool:
    """
    Hand the C heap's free pages back to the system (glibc's
    C{malloc_trim}, well under a millisecond; nothing where there is no such
    call), first freeing what unreachable cycles hold (closed TLS
    connections keep their C{SSL} buffers until then) at most once every
    L{COLLECT_INTERVAL} seconds.

    Called as a big request body starts being kept: what earlier bodies,
    bursts of connections and the start-up's imports left free in the heap
    is otherwise still counted in the process's memory, under the body's
    growth.

    @param now: the reactor's time.
    @return: whether cycles were collected too.
    """
    global _mallocTrim, _lastCollect
    collected = False
    if _lastCollect is None or not 0 <= now - _lastCollect < COLLECT_INTERVAL:
        _lastCollect = now
        gc.collect()
        collected = True
    if _mallocTrim is None:
        try:
            _mallocTrim = ctypes.CDLL(None).malloc_trim
        except (AttributeError, OSError):
            _mallocTrim = False
    if _mallocTrim:
        _mallocTrim(0)
    return collected


def latin1(value: bytes) -> str:
    return value.decode("latin-1")


class Exchange:
    """
    One request and its answer, relayed and logged: an L{IAnswerSink} for
    its source. Its state is one enum per direction (L{RequestState},
    L{AnswerState}), moved only as L{netlog.proxy.states} allows.

    @ivar proxy: the engine.
    @ivar reactor: the engine's reactor.
    @ivar browser: the browser's side of the exchange.
    @ivar head: the request's head as the browser sent it.
    @ivar url: the request's absolute URL.
    @ivar rules: what the rules do to it (L{netlog.core.rules}).
    @ivar route: where it goes (remapped by the rules).
    @ivar started: when its first byte came.
    @ivar signIn: the fields whose values are kept as C{<removed>}.
    @ivar fields: the request's fields, read once.
    @ivar requestState: where the request is.
    @ivar answerState: where the answer is.
    @ivar id: the exchange's id in the log (its open line's C{n}); 0 until
        the open line is written.
    @ivar hold: the exchange's hold on its answer source (L{SourceHold}).
    @ivar headDue: when the answer's head line is due (a second after its
        head, once its body didn't end in the same read); L{None} when
        not due or written.
    @ivar headLine: the head line's state.
    @ivar relay: the raw relay, once the sides are relayed raw.
    @ivar shaping: the rules' bandwidth, each way.
    @ivar kept: what is kept for the log lines (L{Kept}).
    """

    __slots__ = (
        "proxy", "reactor", "browser", "head", "url", "rules", "route", "started", "signIn", "fields",
        "requestState", "answerState", "id", "hold", "headDue", "headLine", "relay", "shaping",
        "kept",
    )

    def __init__(self, proxy: IEngine, browser: IBrowserStream, head: RequestHead, url: str, route: Route,
                 started: float, rules: Decision = PASS) -> None:
        self.proxy = proxy
        self.reactor = proxy.reactor
        self.browser = browser
        self.head = head
        self.url = url
        self.rules = rules
        route = route if rules.remap is None else remapRoute(route, rules.remap)
        if head.upgrade and route.scheme == "https":
            # An upgrade (a WebSocket) keeps to HTTP/1.1 on a connection
            # of its own, whatever its upstream speaks.
            route = replace(route, http1Only=True)
        self.route = route
        self.started = started
        self.signIn = route.signIn
        self.fields = (HeadFields(head.version, head.headers) if head.relayed is None
                       else HeadFields(b"HTTP/1.1", head.relayed))
        self.requestState = CONNECTING
        self.answerState = AWAITING
        self.id = 0
        self.headDue: float | None = None
        self.headLine = NOT_DUE
        self.relay: RawRelay | None = None
        self.kept = Kept()
        self.shaping = shapingFor(self.reactor, rules.bandwidth)
        self.hold = SourceHold(proxy, browser, self.route, self, self.shaping)

    # -- the state, as the browser's side reads it ----------------------------------

    @property
    def ready(self) -> bool:
        """
        The request's head has gone to its source; its body may follow.
        """
        return self.requestState is SENDING or self.requestState is SENT

    @property
    def requestDone(self) -> bool:
        """
        The whole request has been read from the browser.
        """
        return self.requestState is SENT or self.requestState is REQUEST_ENDED

    @property
    def upstream(self) -> IAnswerSource | None:
        """
        The answer's source, or L{None} while there is none.
        """
        return self.hold.source

    @property
    def done(self) -> bool:
        """
        The exchange has ended.
        """
        return self.answerState is ANSWER_ENDED

    def _request(self, new: RequestState) -> None:
        # The table's check is a lookup; L{move} is called only to refuse.
        if new not in REQUEST_MOVES[self.requestState]:
            move(REQUEST_MOVES, self.requestState, new)
        self.requestState = new

    def _answer(self, new: AnswerState) -> None:
        if new not in ANSWER_MOVES[self.answerState]:
            move(ANSWER_MOVES, self.answerState, new)
        self.answerState = new

    # -- starting ---------------------------------------------------------------

    def start(self) -> None:
        if self.rules.latency:
            # The rules' latency: the request waits before it goes up, so
            # the answer's first byte comes that much later.
            self.reactor.callLater(self.rules.latency, self._start)
        else:
            self._start()

    def _start(self) -> None:
        if self.answerState is ANSWER_ENDED:
            return
        self.hold.find(self._sourceFor, self._connected, self._connectFailed, self._crashed)

    def _sourceFor(self, route: Answered) -> IAnswerSource:
        return route.answers.sourceFor(self.reactor, self.head, self.url)

    def _crashed(self, failure: Failure) -> None:
        _log.failure("the exchange for {url} failed", failure, url=self.url)
        if not self.done:
            self.fail("the proxy failed: " + failure.getErrorMessage())

    def _connected(self) -> None:
        self.kept.connectedAt = self.hold.connectedAt
        if not self.id:
            # Logged before it goes: the backend never has a request the
            # log doesn't.
            self.id = self.proxy.writer.open(self._openFields())
        drop, extra = requestChanges(self.head, self.fields, self.rules)
        source = self.hold.source
        assert source is not None
        self._passedUp(source.sendHead(self.head, self.fields, drop, extra))
        self.hold.attach()
        self._request(SENDING)
        self.browser.exchangeReady(self)

    def _passedUp(self, size: int) -> None:
        self.kept.up += size
        shaper = self.shaping.upShaper
        if shaper is not None:
            shaper.passed(size)

    def _connectFailed(self, failure: Failure) -> None:
        if self.done:
            return
        if failure.check(DestinationRefused):
            self._endUnopened(403, REFUSED_TEXT, str(failure.value), refused=True)
            return
        if failure.check(SSL.Error):
            # The TLS handshake failed before any request went (a server
            # offered HTTP/2 is spoken to once it is done).
            assert failure.value is not None
            self._endUnopened(502, UNREACHED_TEXT,
                              f"TLS with {self.route.host}:{self.route.port} failed: {describeTLSError(failure.value)}")
            return
        reason, status = describeFailure(failure, self.route.host, self.route.port)
        self._endUnopened(status, UNREACHED_TEXT, reason, marks=failureMarks(failure))

    def _openFields(self) -> dict[str, Any]:
        return self.proxy.openFields(self.browser, EXCHANGE, self.started, self.head, self.url, self.route.host,
                                     self.route.port, self.hold.address, self.signIn, self.rules.entries,
                                     self.route.decrypted)

    # -- the request, from the browser ------------------------------------------

    def fromBrowser(self, event: Event) -> None:
        if self.answerState is ANSWER_ENDED:
            return
        if isinstance(event, Body):
            capture = self.kept.requestBody
            if capture is None:
                capture = self.kept.requestBody = self.proxy.mode.requestCapture(self.proxy.logging)
            spilled = capture.spilled
            capture.feed(event.data)
            if capture.spilled and not spilled:
                # The body began to spill to disk: the heap is given back,
                # once, as it starts.
                giveBackFreeMemory(self.reactor.seconds())
            source = self.hold.source
            assert source is not None
            self._passedUp(source.requestData(event))
        elif isinstance(event, EndOfMessage):
            self._request(SENT)
            self.kept.sentAt = self.reactor.seconds()
            source = self.hold.source
            if source is not None:
                self._passedUp(source.requestEnded(event))
        elif isinstance(event, Incomplete):
            self.kept.closedBy = CLIENT
            self.fail("the browser closed the connection in the middle of the request", abortBrowser=True)
        elif isinstance(event, Refused):
            # The body turned out malformed (a bad chunk): nothing more of
            # it can be read, so the exchange ends here.
            if self.answerState is not AWAITING:
                self.fail(f"the request was malformed: {event.reason}", abortBrowser=True)
            else:
                self._noAnswer(event.reason, event.status, refused=True)

    def browserRaw(self, data: bytes) -> None:
        if self.done or self.upstream is None or self.relay is None:
            return
        self.relay.passed("up", data)
        self._passedUp(len(data))
        self.upstream.sendRaw(data)

    def browserLost(self, reason: Failure) -> None:
        if self.done:
            return
        if self.relay is not None:
            self._rawEnded(CLIENT, reason)
            return
        self.kept.closedBy = CLIENT
        self.fail("the browser closed the connection before "
                  + ("the server was connected" if not self.id else "the answer was complete"))

    def cancelled(self) -> None:
        """
        The browser cancelled the request (an HTTP/2 stream's
        C{RST_STREAM}): the exchange ends, and its source is closed (the
        answer's rest can't be told apart from the next one's).
        """
        if not self.done:
            self.kept.closedBy = CLIENT
            self.fail("the browser cancelled the request")

    # -- the answer, from its source (IAnswerSink) ---------------------------------

    def answerArrived(self, source: IAnswerSource, size: int) -> None:
        shaper = self.shaping.downShaper
        if shaper is not None:
            shaper.passed(size)
        now = self.reactor.seconds()
        self.browser.touch(now)
        kept = self.kept
        if kept.firstByteAt is None:
            kept.firstByteAt = now
        # What one read brings for the browser (a head, body pieces, the
        # end) goes in one write, not one per event.
        self.browser.gather()

    def answerSettled(self, source: IAnswerSource) -> None:
        self.browser.flush()
        if self.answerState is STREAMING and self.headLine is NOT_DUE and self.id:
            # The body didn't end in the read that brought the head: the
            # head line is due a second after it, if the body still runs.
            self.headLine = DUE
            self.headDue = self.reactor.seconds() + HEAD_LINE_DELAY
            self.browser.wakeBy(self.headDue)

    def answerInterim(self, source: IAnswerSource, head: ResponseHead) -> None:
        if self.answerState is AWAITING:
            self.kept.interim.append(head.status)
            self.kept.down += self.browser.answerInterim(head)

    def answerHead(self, source: IAnswerSource, head: ResponseHead) -> None:
        if self.answerState is ANSWER_ENDED:
            return
        self._answer(STREAMING)
        upgraded = head.status == 101 and self.head.upgrade
        fields = HeadFields(head.version, head.headers)
        headers = answerFields(head, fields, upgraded, self.route, self.proxy.mode, self.rules)
        contentType = fields.first(b"content-type")
        if source.pooled and (not fields.keepAlive or head.eofFramed):
            # The answer closes its connection: it won't go back to the pool.
            source.pooled = False
        browser = self.browser
        sent, reason, size = browser.answerHead(head, fields, headers, upgraded)
        kept = self.kept
        if size > 0:
            kept.down += size
        proxy = self.proxy
        kept.responseBody = proxy.mode.responseCapture(contentType, proxy.logging)
        kept.response = responseRecord(head.status, reason, browser.version, sent, size, None, self.signIn)
        if head.version == b"HTTP/2":
            # The server spoke HTTP/2 (the record's version is the browser's).
            kept.response["server_version"] = "HTTP/2"
        if upgraded or (contentType is not None and contentType[:17].lower() == b"text/event-stream"):
            # An answer that goes on streaming: its head is logged now,
            # before its bytes go to the browser.
            self.logHead()
        if upgraded:
            # Both connections now carry the new protocol, relayed as it
            # comes; a WebSocket's messages are read and logged.
            self._enterRaw(RawKind.UPGRADED)
            if isWebSocket(self.head) and self.relay is not None:
                extensions = fields.first(b"sec-websocket-extensions")
                self.relay.readWebSocket(extensions.decode("latin-1") if extensions is not None else None)
            pending = self.browser.enterRaw(self)
            if pending:
                self.browserRaw(pending)

    def answerData(self, source: IAnswerSource, body: Body) -> None:
        if self.answerState is STREAMING:
            kept = self.kept
            assert kept.responseBody is not None
            kept.responseBody.feed(body.data)
            kept.down += self.browser.answerData(body.data, body.raw)

    def answerEnd(self, source: IAnswerSource, end: EndOfMessage) -> None:
        if self.answerState is not STREAMING:
            return
        self.kept.down += self.browser.answerEnd(end)
        self._answer(COMPLETE)
        upstream = self.hold.source
        requestDone = self.requestState is SENT or self.requestState is REQUEST_ENDED
        reuse = upstream is not None and requestDone and upstream.idle and upstream.pooled
        if not requestDone:
            # An early answer (a 413 before the upload ended): the rest of
            # the request is read and dropped, the connection closed.
            self.browser.discardRestOfRequest(self)
        self._finish(None, reuseUpstream=reuse)

    def answerMarks(self, source: IAnswerSource, marks: dict[str, object],
                    recorded: Callable[[dict[str, object]], dict[str, object]] | None = None) -> None:
        self.kept.marks = dict(marks)
        self.kept.recordedAs = recorded

    def answerUnparsable(self, source: IAnswerSource, raw: bytes) -> None:
        if self.done:
            return
        self._enterRaw(RawKind.UNPARSED)
        pending = self.browser.enterRaw(self)
        if pending:
            self.browserRaw(pending)
        if raw:
            self.answerRaw(source, raw)

    def answerRaw(self, source: IAnswerSource, data: bytes) -> None:
        if self.relay is not None and not self.done:
            self.relay.passed("down", data)
            self.kept.down += self.browser.answerData(data, data)

    def _enterRaw(self, kind: RawKind) -> None:
        self._answer(RELAYING)
        self.relay = RawRelay(kind, self.proxy.writer, self.id)
        assert self.upstream is not None
        self.upstream.raw = True

    def answerFailed(self, source: IAnswerSource, reason: Failure, raw: bytes = b"",
                     again: IResendable | None = None) -> None:
        if self.done or source is not self.upstream:
            return
        if self.relay is not None:
            self._rawEnded(SERVER, reason)
            return
        where = f"{self.route.host}:{self.route.port}"
        if self.answerState is AWAITING:
            if again is not None:
                self._retry(again)
            elif reason.check(SSL.Error):
                assert reason.value is not None
                self._noAnswer(f"TLS with {where} failed: {describeTLSError(reason.value)}")
            elif isinstance(reason.value, StreamFailed):
                self._noAnswer(f"{where} {reason.value.what} before answering")
            else:
                what = "reset" if not reason.check(error.ConnectionDone) else "closed"
                self._noAnswer(f"{where} {what} the connection before answering")
            return
        self.kept.closedBy = SERVER
        if isinstance(reason.value, StreamFailed):
            why = f"{where} {reason.value.what} in the middle of the answer"
        else:
            why = f"{where} closed the connection in the middle of the answer"
        # Framing read and not yet relayed (a last chunk cut inside its
        # trailers): a browser side that relays the server's framing sends
        # it as it came (it tells the browser the answer is cut); otherwise
        # only an abort says so.
        sent = self.browser.cutAnswer(raw) if raw else None
        if sent is not None:
            self.kept.down += sent
        self.fail(why, abortBrowser=sent is None, cut=sent is not None)

    def forward(self, source: IAnswerSource, sent: IResendable | None) -> None:
        """
        C{source} has no answer (a replay's unmatched request, with
        C{--replay-unmatched forward}): the request goes up on a new
        connection, as a retry's does.
        """
        if self.done or source is not self.upstream:
            return
        if sent is None:
            self._noAnswer(f"the request is over {MAX_RETRY_BYTES} bytes, too big to forward unanswered")
            return
        self._retry(sent)

    def _retry(self, again: IResendable) -> None:
        """
        Hand the request, as it was handed, to a new connection.
        """
        self.kept.up = 0
        self.hold.again(again, self._resent,
                        lambda f: self._noAnswer(describeFailure(f, self.route.host, self.route.port)[0]),
                        self._crashed)

    def _resent(self, size: int) -> None:
        self.kept.connectedAt = self.hold.connectedAt
        self._passedUp(size)

    # -- timers -------------------------------------------------------------------

    def logHead(self) -> None:
        """
        Write the answer's head line (once), for an answer still streaming.
        """
        self.headDue = None
        if self.headLine is WRITTEN or self.kept.response is None or not self.id or self.done:
            return
        self.headLine = WRITTEN
        self.proxy.writer.head(self.id, headRecord(self.kept.firstByteAt, self.kept.response))

    def timedOut(self, reason: str) -> None:
        """
        Nothing passed for the idle timeout. Before any answer the browser
        gets a C{504}; after one began (or in a raw relay) both sides are
        cut. Either way the entry ends C{_failed}.
        """
        if self.done:
            return
        if self.answerState is not AWAITING:
            self.kept.closedBy = PROXY
            # Nothing more is read from this browser connection.
            self.fail(reason, abortBrowser=True, cut=True)
        elif not self.id:
            # Still connecting (and no entry open yet).
            self._endUnopened(GATEWAY_TIMEOUT, UNREACHED_TEXT, reason)
        else:
            self._noAnswer(reason, GATEWAY_TIMEOUT)

    def abort(self) -> None:
        """
        The proxy is stopping: end this exchange now.
        """
        if not self.done:
            self.kept.closedBy = PROXY
            self.fail("the proxy stopped", abortBrowser=True)

    # -- ending -------------------------------------------------------------------

    def _ended(self) -> None:
        self._answer(ANSWER_ENDED)
        self._request(REQUEST_ENDED)
        self.hold.release()
        self.headDue = None

    def _endUnopened(self, status: int, text: str, reason: str, refused: bool = False,
                     marks: dict[str, object] | None = None) -> None:
        """
        End an exchange whose request never went up (its destination was
        refused, no connection could be made, a timeout while connecting):
        the browser gets netlog's own C{status}, and the open line is
        written with the end, C{_refused} or C{_failed}.
        """
        self._ended()
        response, size = self.browser.answer(status, text.format(reason))
        end = endRecord(self.reactor.seconds(), up=len(self.head.raw), down=size, response=response,
                        refused=(reason, status) if refused else None, failed=None if refused else reason,
                        failedStatus=None if refused else status, marks=marks)
        self.proxy.writer.refuse(self._openFields(), end)
        self.browser.exchangeDone(self, cut=True)

    def _noAnswer(self, reason: str, status: int = 502, refused: bool = False) -> None:
        """
        End an open exchange that got no answer (its source went away
        before answering, a timeout, or the request's body turned out
        malformed, C{refused}): the browser gets netlog's own C{status}
        (502, or 504 on a timeout), the entry ends C{_failed} (or C{_refused}).
        """
        if self.done:
            return
        self.browser.flush()
        self.hold.detach()
        self.hold.drop()
        self._ended()
        response, size = self.browser.answer(status, (REFUSED_TEXT if refused else UNANSWERED_TEXT).format(reason))
        self.kept.response = response
        self.kept.responseBody = None
        self.kept.down += size
        self.proxy.writer.end(self.id, self.endFields(refused=(reason, status)) if refused
                              else self.endFields(failed=reason, failedStatus=status))
        self.browser.exchangeDone(self, cut=True)

    def fail(self, reason: str, abortBrowser: bool = False, cut: bool = False) -> None:
        """
        End the exchange C{_failed} with C{reason}; its source is closed.

        @param abortBrowser: the browser's connection is aborted too.
        @param cut: the browser's side can't carry another exchange.
        """
        if self.done:
            return
        self._finish(reason, reuseUpstream=False, cut=cut)
        self.hold.drop()
        if abortBrowser:
            self.browser.abort()

    def _rawEnded(self, closedBy: str, reason: Failure) -> None:
        self.kept.closedBy = closedBy
        failed = None
        if not reason.check(error.ConnectionDone):
            failed = f"{'the browser' if closedBy == CLIENT else self.route.host} reset the connection"
        self._finish(failed, reuseUpstream=False)
        if closedBy == CLIENT:
            self.hold.drop(gently=True)
        else:
            self.browser.finishRaw()

    def endFields(self, *, failed: str | None = None, failedStatus: int | None = None,
                  refused: tuple[str, int] | None = None) -> dict[str, Any]:
        return self.kept.endFields(self.reactor.seconds(), self.relay, failed=failed, failedStatus=failedStatus,
                                   refused=refused)

    def _finish(self, failed: str | None, reuseUpstream: bool, cut: bool = False) -> None:
        if self.answerState is ANSWER_ENDED:
            return
        self._ended()
        if self.id:
            self.proxy.writer.end(self.id, self.endFields(failed=failed))
        else:
            # Ended before its source was made (the browser left, a
            # timeout): its open line goes with its end.
            self.id = self.proxy.writer.refuse(self._openFields(), self.endFields(failed=failed))
        # The answer's last bytes go after its end line is written, and
        # before anything the browser's next request brings.
        self.browser.flush()
        self.hold.detach()
        if self.hold.source is not None:
            if reuseUpstream:
                self.hold.giveBack()
            elif self.relay is None:
                self.hold.drop(gently=True)
        self.browser.exchangeDone(self, cut=cut)


def describeTLSError(value: BaseException) -> str:
    """
    An OpenSSL error in words: C{certificate verify failed}.
    """
    parts = []
    for item in getattr(value, "args", [[]])[0] or []:
        if isinstance(item, tuple) and item:
            parts.append(str(item[-1]))
    return "; ".join(p for p in parts if p) or str(value) or "handshake failed"
