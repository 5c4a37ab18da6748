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
from typing import Any, Callable

from OpenSSL import SSL
from twisted.internet import error
from twisted.logger import Logger
from twisted.python.failure import Failure

from netlog.core.capture import BodyCapture
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
from netlog.net.connect import describeFailure
from netlog.net.gate import BACKPRESSURE
from netlog.net.relay import CLIENT, PROXY, SERVER
from netlog.proxy.contracts import IAnswerSource, IBrowserStream, IEngine, IResendable
from netlog.proxy.mode import Answered, DestinationRefused, Route, remapRoute
from netlog.proxy.relaying import RawKind, RawRelay, Shaping
from netlog.proxy.states import ANSWER_MOVES, REQUEST_MOVES, AnswerState, HeadLine, RequestState, move
from netlog.proxy.upstream import MAX_RETRY_BYTES

_log = Logger()

#: What an exchange's captures become once their fields are written.
_SPENT = BodyCapture(0, keep=False, hashAll=False)
#: The answer's fields whose values may name a backend (the mode rewrites
#: them for a route to a configured upstream).
_REWRITTEN = frozenset({b"location", b"content-location", b"set-cookie"})
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
    @ivar upstream: the answer's source, or L{None} while there is none.
    @ivar address: the address its source connects to, once known.
    @ivar connectedAt: when a new connection for it was made (L{None} when
        reused or none was).
    @ivar sentAt: when the request had gone whole to the source.
    @ivar firstByteAt: when the answer's first byte came.
    @ivar requestBody: what of the request's body is kept (made when a
        body comes).
    @ivar responseBody: what of the answer's body is kept.
    @ivar response: the answer's record, once its head came.
    @ivar responseKeepAlive: the answer lets its connection be reused.
    @ivar interim: the statuses of the interim heads passed on.
    @ivar up: bytes passed toward the source.
    @ivar down: bytes passed toward the browser.
    @ivar closedBy: who closed a raw relay (or cut the exchange).
    @ivar cut: the browser's side can't carry another exchange.
    @ivar headDue: when the answer's head line is due (a second after its
        head, once its body didn't end in the same read); L{None} when
        not due or written.
    @ivar headLine: the head line's state.
    @ivar relay: the raw relay, once the sides are relayed raw.
    @ivar shaping: the rules' bandwidth, each way.
    @ivar marks: what the source says of the answer in the end line.
    @ivar recordedAs: for a recording, the end line's answer made the
        recorded one (a body the recording cut).
    @ivar trimmed: the heap was given back for a big request body.
    """

    __slots__ = (
        "proxy", "reactor", "browser", "head", "url", "rules", "route", "started", "signIn", "fields",
        "requestState", "answerState", "id", "upstream", "address", "connectedAt", "sentAt", "firstByteAt",
        "requestBody", "responseBody", "response", "responseKeepAlive", "interim", "up", "down", "closedBy",
        "cut", "headDue", "headLine", "relay", "shaping", "marks", "recordedAs", "trimmed",
    )

    def __init__(self, proxy: IEngine, browser: IBrowserStream, head: RequestHead, url: str, route: Route,
                 started: float, rules: Decision = PASS) -> None:
        self.proxy = proxy
        self.reactor = proxy.reactor
        self.browser = browser
        self.head = head
        self.url = url
        self.rules = rules
        self.route = route if rules.remap is None else remapRoute(route, rules.remap)
        self.started = started
        self.signIn = route.signIn
        self.fields = (HeadFields(head.version, head.headers) if head.relayed is None
                       else HeadFields(b"HTTP/1.1", head.relayed))
        self.requestState = RequestState.CONNECTING
        self.answerState = AnswerState.AWAITING
        self.id = 0
        self.upstream: IAnswerSource | None = None
        self.address: str | None = None
        self.connectedAt: float | None = None
        self.sentAt: float | None = None
        self.firstByteAt: float | None = None
        self.requestBody: BodyCapture | None = None
        self.responseBody: BodyCapture | None = None
        self.response: dict[str, Any] | None = None
        self.responseKeepAlive = False
        self.interim: list[int] = []
        self.up = 0
        self.down = 0
        self.closedBy: str | None = None
        self.cut = False
        self.headDue: float | None = None
        self.headLine = HeadLine.NOT_DUE
        self.relay: RawRelay | None = None
        self.shaping = Shaping(self.reactor, rules.bandwidth)
        self.marks: dict[str, object] | None = None
        self.recordedAs: Callable[[dict[str, object]], dict[str, object]] | None = None
        self.trimmed = False

    # -- the state, as the browser's side reads it ----------------------------------

    @property
    def ready(self) -> bool:
        """
        The request's head has gone to its source; its body may follow.
        """
        return self.requestState is RequestState.SENDING or self.requestState is RequestState.SENT

    @property
    def requestDone(self) -> bool:
        """
        The whole request has been read from the browser.
        """
        return self.requestState is RequestState.SENT or self.requestState is RequestState.ENDED

    @property
    def done(self) -> bool:
        """
        The exchange has ended.
        """
        return self.answerState is AnswerState.ENDED

    def _request(self, new: RequestState) -> None:
        self.requestState = move(REQUEST_MOVES, self.requestState, new)

    def _answer(self, new: AnswerState) -> None:
        self.answerState = move(ANSWER_MOVES, self.answerState, new)

    # -- starting ---------------------------------------------------------------

    def start(self) -> None:
        if self.rules.latency:
            # The rules' latency: the request waits before it goes up, so
            # the answer's first byte comes that much later.
            self.reactor.callLater(self.rules.latency, self._start)
        else:
            self._start()

    def _start(self) -> None:
        if self.done:
            return
        route = self.route
        if isinstance(route, Answered):
            # The mode answers this request itself (a recording, a rule).
            self._connected((route.answers.sourceFor(self.reactor, self.head, self.url), False, None, None))
            return
        idle = self.proxy.takeIdle(route)
        if idle is not None:
            self._connected(idle)
            return
        d = self.proxy.upstreamFor(self.route, fresh=True, resolved=self._resolvedTo)
        d.addCallbacks(self._connected, self._connectFailed)
        d.addErrback(self._crashed)

    def _resolvedTo(self, address: str) -> None:
        self.address = address

    def _crashed(self, failure: Failure) -> None:
        _log.failure("the exchange for {url} failed", failure, url=self.url)
        if not self.done:
            self.fail("the proxy failed: " + failure.getErrorMessage())

    def _use(self, result: tuple[IAnswerSource, bool, str | None, float | None]) -> bool:
        """
        Make the source C{result} names (as L{IEngine.upstreamFor} gives
        it) this exchange's; C{False}, and the source back to the pool,
        when the exchange ended meanwhile (the browser left as we connected).
        """
        upstream, reused, address, connectedAt = result
        if self.done:
            self.proxy.pool.put(upstream)
            return False
        self.upstream = upstream
        self.address = address
        self.connectedAt = None if reused else connectedAt
        upstream.exchange = self
        upstream.raw = False
        return True

    def _connected(self, result: tuple[IAnswerSource, bool, str | None, float | None]) -> None:
        if not self._use(result):
            return
        if not self.id:
            # Logged before it goes: the backend never has a request the
            # log doesn't.
            self.id = self.proxy.writer.open(self._openFields())
        head, fields, rules = self.head, self.fields, self.rules
        drop = fields.relayDrop
        extra: list[tuple[bytes, bytes]] = []
        if head.upgrade:
            drop = drop - {b"upgrade"}
            extra.append((b"Connection", b"Upgrade"))
        if rules.dropUp:
            drop = drop | rules.dropUp
            extra.extend(rules.setUp)
        assert self.upstream is not None
        self._passedUp(self.upstream.sendHead(head, fields, drop, extra))
        self._attach()
        self._request(RequestState.SENDING)
        self.browser.exchangeReady(self)

    def _passedUp(self, size: int) -> None:
        self.up += size
        self.shaping.up(size)

    def _connectFailed(self, failure: Failure) -> None:
        if self.done:
            return
        if failure.check(DestinationRefused):
            self._endUnopened(403, REFUSED_TEXT, str(failure.value), refused=True)
            return
        reason, status = describeFailure(failure, self.route.host, self.route.port)
        self._endUnopened(status, UNREACHED_TEXT, reason)

    def _openFields(self) -> dict[str, Any]:
        return self.proxy.openFields(self.browser, EXCHANGE, self.started, self.head, self.url, self.route.host,
                                     self.route.port, self.address, self.signIn, self.rules.entries)

    # -- backpressure -----------------------------------------------------------

    def _attach(self) -> None:
        upstream = self.upstream
        assert upstream is not None and upstream.gate is not None
        upstream.attachRequestProducer(self.browser.gate)
        self.browser.attachAnswerProducer(upstream.gate)
        self.shaping.attach(self.browser.gate, upstream.gate)

    def _detach(self) -> None:
        self.shaping.stop()
        upstream = self.upstream
        if upstream is None:
            return
        upstream.detachRequestProducer()
        self.browser.detachAnswerProducer()
        if self.browser.gate.reasons:
            self.browser.gate.release(BACKPRESSURE)
        if upstream.gate is not None and upstream.gate.reasons:
            upstream.gate.release(BACKPRESSURE)

    # -- the request, from the browser ------------------------------------------

    def fromBrowser(self, event: Event) -> None:
        if self.done:
            return
        if isinstance(event, Body):
            capture = self.requestBody
            if capture is None:
                capture = self.requestBody = self.proxy.mode.requestCapture(self.proxy.logging)
            capture.feed(event.data)
            if not self.trimmed and capture.spilled:
                self.trimmed = True
                giveBackFreeMemory(self.reactor.seconds())
            assert self.upstream is not None
            self._passedUp(self.upstream.requestData(event))
        elif isinstance(event, EndOfMessage):
            self._request(RequestState.SENT)
            self.sentAt = self.reactor.seconds()
            if self.upstream is not None:
                self._passedUp(self.upstream.requestEnded(event))
        elif isinstance(event, Incomplete):
            self.closedBy = CLIENT
            self.fail("the browser closed the connection in the middle of the request", abortBrowser=True)
        elif isinstance(event, Refused):
            # The body turned out malformed (a bad chunk): nothing more of
            # it can be read, so the exchange ends here.
            if self.answerState is not AnswerState.AWAITING:
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
        self.closedBy = CLIENT
        self.fail("the browser closed the connection before "
                  + ("the server was connected" if not self.id else "the answer was complete"))

    def cancelled(self) -> None:
        """
        The browser cancelled the request (an HTTP/2 stream's
        C{RST_STREAM}): the exchange ends, and its source is closed (the
        answer's rest can't be told apart from the next one's).
        """
        if not self.done:
            self.closedBy = CLIENT
            self.fail("the browser cancelled the request")

    # -- the answer, from its source (IAnswerSink) ---------------------------------

    def answerArrived(self, source: IAnswerSource, size: int) -> None:
        self.shaping.down(size)
        now = self.reactor.seconds()
        self.browser.touch(now)
        if self.firstByteAt is None:
            self.firstByteAt = now
        # What one read brings for the browser (a head, body pieces, the
        # end) goes in one write, not one per event.
        self.browser.gather()

    def answerSettled(self, source: IAnswerSource) -> None:
        self.browser.flush()
        if self.answerState is AnswerState.STREAMING and self.headLine is HeadLine.NOT_DUE and self.id:
            # The body didn't end in the read that brought the head: the
            # head line is due a second after it, if the body still runs.
            self.headLine = HeadLine.DUE
            self.headDue = self.reactor.seconds() + HEAD_LINE_DELAY
            self.browser.wakeBy(self.headDue)

    def answerInterim(self, source: IAnswerSource, head: ResponseHead) -> None:
        if self.answerState is AnswerState.AWAITING:
            self.interim.append(head.status)
            self.down += self.browser.answerInterim(head)

    def answerHead(self, source: IAnswerSource, head: ResponseHead) -> None:
        if self.done:
            return
        self._answer(AnswerState.STREAMING)
        upgraded = head.status == 101 and self.head.upgrade
        fields = HeadFields(head.version, head.headers)
        headers = self._relayedFields(head, fields, upgraded)
        contentType = fields.first(b"content-type")
        self.responseKeepAlive = fields.keepAlive and not head.eofFramed
        sent, reason, size = self.browser.answerHead(head, fields, headers, upgraded)
        if size > 0:
            self.down += size
        self.responseBody = self.proxy.mode.responseCapture(contentType, self.proxy.logging)
        self.response = responseRecord(head.status, reason, self.browser.version, sent, size, None, self.signIn)
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

    def _relayedFields(self, head: ResponseHead, fields: HeadFields, upgraded: bool) -> list[tuple[bytes, bytes]]:
        """
        The answer's fields as relayed, in one pass: the hop-by-hop ones
        dropped, what names a configured upstream rewritten by the mode,
        the rules' changes made.
        """
        drop = fields.relayDrop - {b"upgrade"} if upgraded else fields.relayDrop
        route, mode = self.route, self.proxy.mode
        if route.site is not None:
            headers = [(name, mode.rewrite(route, lower, value) if lower in _REWRITTEN else value)
                       for (name, value), lower in zip(head.headers, fields.lowered) if lower not in drop]
        else:
            headers = [field for field, lower in zip(head.headers, fields.lowered) if lower not in drop]
        if self.rules.dropDown:
            headers = [f for f in headers if f[0].lower() not in self.rules.dropDown]
            headers.extend(self.rules.setDown)
        return headers

    def answerData(self, source: IAnswerSource, body: Body) -> None:
        if self.answerState is AnswerState.STREAMING:
            assert self.responseBody is not None
            self.responseBody.feed(body.data)
            self.down += self.browser.answerData(body.data, body.raw)

    def answerEnd(self, source: IAnswerSource, end: EndOfMessage) -> None:
        if self.answerState is not AnswerState.STREAMING:
            return
        self.down += self.browser.answerEnd(end)
        self._answer(AnswerState.COMPLETE)
        upstream = self.upstream
        reuse = (upstream is not None and self.responseKeepAlive and self.requestDone and upstream.idle
                 and upstream.pooled)
        if not self.requestDone:
            # An early answer (a 413 before the upload ended): the rest of
            # the request is read and dropped, the connection closed.
            self.browser.discardRestOfRequest(self)
        self._finish(None, reuseUpstream=reuse)

    def answerMarks(self, source: IAnswerSource, marks: dict[str, object],
                    recorded: Callable[[dict[str, object]], dict[str, object]] | None = None) -> None:
        self.marks = dict(marks)
        self.recordedAs = recorded

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
            self.down += self.browser.answerData(data, data)

    def _enterRaw(self, kind: RawKind) -> None:
        self._answer(AnswerState.RELAYING)
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
        if self.answerState is AnswerState.AWAITING:
            if again is not None:
                self._retry(again)
            elif reason.check(SSL.Error):
                assert reason.value is not None
                self._noAnswer(f"TLS with {where} failed: {describeTLSError(reason.value)}")
            else:
                what = "reset" if not reason.check(error.ConnectionDone) else "closed"
                self._noAnswer(f"{where} {what} the connection before answering")
            return
        self.closedBy = SERVER
        why = f"{where} closed the connection in the middle of the answer"
        # Framing read and not yet relayed (a last chunk cut inside its
        # trailers): a browser side that relays the server's framing sends
        # it as it came (it tells the browser the answer is cut); otherwise
        # only an abort says so.
        sent = self.browser.cutAnswer(raw) if raw else None
        if sent is not None:
            self.down += sent
            self.cut = True
        self.fail(why, abortBrowser=sent is None)

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
        self._detach()
        self.upstream = None
        self.up = 0
        d = self.proxy.upstreamFor(self.route, fresh=True)

        def sendAgain(result: tuple[IAnswerSource, bool, str | None, float | None]) -> None:
            if self._use(result):
                assert self.upstream is not None
                self._passedUp(again.sendTo(self.upstream))
                self._attach()

        d.addCallbacks(sendAgain, lambda f: self._noAnswer(describeFailure(f, self.route.host, self.route.port)[0]))
        d.addErrback(self._crashed)

    # -- timers -------------------------------------------------------------------

    def logHead(self) -> None:
        """
        Write the answer's head line (once), for an answer still streaming.
        """
        self.headDue = None
        if self.headLine is HeadLine.WRITTEN or self.response is None or not self.id or self.done:
            return
        self.headLine = HeadLine.WRITTEN
        self.proxy.writer.head(self.id, headRecord(self.firstByteAt, self.response))

    def timedOut(self, reason: str) -> None:
        """
        Nothing passed for the idle timeout. Before any answer the browser
        gets a C{504}; after one began (or in a raw relay) both sides are
        cut. Either way the entry ends C{_failed}.
        """
        if self.done:
            return
        if self.answerState is not AnswerState.AWAITING:
            self.closedBy = PROXY
            # Nothing more is read from this browser connection.
            self.cut = True
            self.fail(reason, abortBrowser=True)
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
            self.closedBy = PROXY
            self.fail("the proxy stopped", abortBrowser=True)

    # -- ending -------------------------------------------------------------------

    def _ended(self) -> None:
        self._answer(AnswerState.ENDED)
        self._request(RequestState.ENDED)
        self.headDue = None

    def _endUnopened(self, status: int, text: str, reason: str, refused: bool = False) -> None:
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
                        failedStatus=None if refused else status)
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
        self._detach()
        self._dropUpstream()
        self._ended()
        response, size = self.browser.answer(status, (REFUSED_TEXT if refused else UNANSWERED_TEXT).format(reason))
        self.response = response
        self.responseBody = None
        self.down += size
        self.proxy.writer.end(self.id, self.endFields(refused=(reason, status)) if refused
                              else self.endFields(failed=reason, failedStatus=status))
        self.browser.exchangeDone(self, cut=True)

    def fail(self, reason: str, abortBrowser: bool = False) -> None:
        if self.done:
            return
        self._finish(reason, reuseUpstream=False)
        self._dropUpstream()
        if abortBrowser:
            self.browser.abort()

    def _rawEnded(self, closedBy: str, reason: Failure) -> None:
        self.closedBy = closedBy
        failed = None
        if not reason.check(error.ConnectionDone):
            failed = f"{'the browser' if closedBy == CLIENT else self.route.host} reset the connection"
        self._finish(failed, reuseUpstream=False)
        if closedBy == CLIENT:
            self._dropUpstream(gently=True)
        else:
            self.browser.finishRaw()

    def _dropUpstream(self, gently: bool = False) -> None:
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            upstream.exchange = None
            upstream.close(gently)

    def endFields(self, *, failed: str | None = None, failedStatus: int | None = None,
                  refused: tuple[str, int] | None = None) -> dict[str, Any]:
        relay = self.relay
        requestBody = None
        if self.requestBody is not None:
            requestBody = self.requestBody.record(splice=True)
        response = None
        if self.response is not None and (relay is None or relay.kind is RawKind.UPGRADED):
            response = dict(self.response)
            if self.responseBody is not None and relay is None:
                response["body"] = self.responseBody.record(splice=True)
            if self.recordedAs is not None:
                response = self.recordedAs(response)  # type: ignore[arg-type,assignment]
        fields = endRecord(
            self.reactor.seconds(), self.connectedAt, self.sentAt, self.firstByteAt,
            up=self.up, down=self.down, requestBody=requestBody, response=response, interim=self.interim,
            closedBy=self.closedBy if relay is not None else None,
            websocket=relay.record() if relay is not None else None,
            unparsed=relay is not None and relay.kind is RawKind.UNPARSED, refused=refused, failed=failed,
            failedStatus=failedStatus, marks=self.marks,
        )
        # The kept bodies are in the fields now, as the base64 the captures
        # kept (the LogWriter writes it into the line without a copy): let
        # the captures go before the line is encoded.
        self.requestBody = _SPENT if self.requestBody is not None else None
        self.responseBody = _SPENT if self.responseBody is not None else None
        return fields

    def _finish(self, failed: str | None, reuseUpstream: bool) -> None:
        if self.done:
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
        self._detach()
        upstream = self.upstream
        if upstream is not None:
            if reuseUpstream:
                self.upstream = None
                upstream.exchange = None
                self.proxy.pool.put(upstream)
            elif self.relay is None:
                self._dropUpstream(gently=True)
        self.browser.exchangeDone(self, cut=self.cut)


def describeTLSError(value: BaseException) -> str:
    """
    An OpenSSL error in words: C{certificate verify failed}.
    """
    parts = []
    for item in getattr(value, "args", [[]])[0] or []:
        if isinstance(item, tuple) and item:
            parts.append(str(item[-1]))
    return "; ".join(p for p in parts if p) or str(value) or "handshake failed"
