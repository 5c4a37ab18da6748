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
bytes and writes none of its own toward the browser.
Once an answer is a C{101} (a WebSocket, on HTTP/1.1 only) or can't be read
as HTTP, both sides are relayed raw until one closes.
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
from netlog.core.http1 import (
    Body,
    EndOfMessage,
    Event,
    Incomplete,
    Refused,
    RequestHead,
    ResponseHead,
    Unparsable,
    HeadFields,
)
from netlog.core.records import (
    EXCHANGE,
    REFUSED_TEXT,
    UNANSWERED_TEXT,
    UNREACHED_TEXT,
    endRecord,
    headRecord,
    isWebSocket,
    messageRecord,
    originForm,
    responseRecord,
    websocketRecord,
)
from netlog.core.rules import PASS, Decision
from netlog.core.websocket import FrameCounter
from netlog.core.wsmessages import KeptBudget, Message, MessageAssembler, parseDeflate
from netlog.net.connect import describeFailure
from netlog.net.gate import BACKPRESSURE
from netlog.net.relay import CLIENT, PROXY, SERVER
from netlog.net.shape import Shaper, shaperFor
from netlog.proxy.contracts import IAnswerSource, IBrowserStream, IEngine, IResendable
from netlog.proxy.upstream import MAX_RETRY_BYTES
from netlog.proxy.mode import Answered, DestinationRefused, Route, remapRoute

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
    One request and its answer, relayed and logged.

    @ivar ready: the upstream connection is made and the head has gone up;
        the request's body may follow.
    @ivar requestDone: the whole request has been read from the browser.
    """

    __slots__ = (
        "_trimmed",
        "address",
        "recordedAs",
        "browser",
        "closedBy",
        "cut",
        "done",
        "down",
        "downShaper",
        "fields",
        "hadBody",
        "head",
        "headDue",
        "headLogged",
        "id",
        "interim",
        "marks",
        "proxy",
        "raw",
        "reactor",
        "ready",
        "requestBody",
        "requestDone",
        "response",
        "responseBody",
        "responseComplete",
        "responseKeepAlive",
        "responseStarted",
        "reused",
        "route",
        "rules",
        "signIn",
        "started",
        "connectedAt",
        "sentAt",
        "firstByteAt",
        "unparsed",
        "up",
        "upShaper",
        "upgraded",
        "upstream",
        "url",
        "wsDown",
        "wsUp",
    )

    def __init__(
        self,
        proxy: IEngine,
        browser: IBrowserStream,
        head: RequestHead,
        url: str,
        route: Route,
        started: float,
        rules: Decision = PASS,
    ) -> None:
        """
        @param rules: what the rules do to it (L{netlog.core.rules}).
        """
        self.proxy = proxy
        self.reactor = proxy.reactor
        self.browser = browser
        self.head = head
        self.url = url
        self.rules = rules
        self.route = route if rules.remap is None else remapRoute(route, rules.remap)
        #: The rules' bandwidth, each way, while connected.
        self.upShaper: Shaper | None = None
        self.downShaper: Shaper | None = None
        self.started = started
        self.signIn = route.signIn
        self.id = 0
        self.upstream: IAnswerSource | None = None
        self.address: str | None = None
        self.reused = False
        self.ready = False
        self.requestDone = False
        #: The answer has come whole (the request may still be coming).
        self.responseComplete = False
        self.responseStarted = False
        self.done = False
        self.raw = False
        self.unparsed = False
        #: The request's fields, read once.
        self.fields = (HeadFields(head.version, head.headers) if head.relayed is None
                       else HeadFields(b"HTTP/1.1", head.relayed))
        #: The answer was cut (the server left in its middle, a timeout):
        #: the browser's side can't carry another exchange.
        self.cut = False
        #: When the upstream connection was made (None when reused), the
        #: request had gone up whole, and the answer's first byte came.
        self.connectedAt: float | None = None
        self.sentAt: float | None = None
        self.firstByteAt: float | None = None
        #: What of the request's body is kept, made when a body comes.
        self.requestBody: BodyCapture | None = None
        self.hadBody = False
        self.responseBody: BodyCapture | None = None
        self.response: dict[str, Any] | None = None
        self.responseKeepAlive = False
        self.interim: list[int] = []
        self.up = 0
        self.down = 0
        self.closedBy: str | None = None
        #: The answer was a C{101}: the connections carry another protocol.
        self.upgraded = False
        #: The answer's head line is written (an answer still streaming).
        self.headLogged = False
        #: When the head line is due: a second after the answer's head came,
        #: set once its body hasn't ended in the read that brought the head.
        self.headDue: float | None = None
        #: A WebSocket's directions: their messages read and logged when a
        #: log is kept, only counted when not.
        self.wsUp: MessageAssembler | FrameCounter | None = None
        self.wsDown: MessageAssembler | FrameCounter | None = None
        self._trimmed = False
        #: What the answer's source says of it in the end line.
        self.marks: dict[str, Any] | None = None
        #: For a recording: the end line's answer as recorded, where the
        #: browser was sent it framed otherwise (a body the recording cut).
        self.recordedAs: Callable[[dict[str, object]], dict[str, object]] | None = None

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
            # The mode answers this request itself (from a recording).
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
        Make the connection C{result} names (as L{IEngine.upstreamFor}
        gives it) this exchange's; C{False}, and the connection back to the
        pool, when the exchange ended meanwhile (the browser went away while
        we connected).
        """
        upstream, reused, address, connectedAt = result
        if self.done:
            self.proxy.pool.put(upstream)
            return False
        self.upstream = upstream
        self.reused = reused
        self.address = address
        self.connectedAt = None if reused else connectedAt
        upstream.exchange = self
        upstream.raw = False
        return True

    def _connected(self, result: tuple[IAnswerSource, bool, str | None, float | None]) -> None:
        if not self._use(result):
            return
        if not self.id:
            # Logged before it goes: the backend never has a request the log
            # doesn't.
            self.id = self.proxy.writer.open(self._openFields())
        self._sendHead()
        self._attach()
        self.ready = True
        self.browser.exchangeReady(self)

    def _sendHead(self) -> None:
        head = self.head
        fields = self.fields
        drop = fields.relayDrop
        extra: list[tuple[bytes, bytes]] = []
        if head.upgrade:
            drop = drop - {b"upgrade"}
            extra.append((b"Connection", b"Upgrade"))
        if self.rules.dropUp:
            drop = drop | self.rules.dropUp
            extra.extend(self.rules.setUp)
        assert self.upstream is not None
        self._passedUp(self.upstream.sendHead(head, fields, drop, extra))

    def _passedUp(self, size: int) -> None:
        self.up += size
        if self.upShaper is not None:
            self.upShaper.passed(size)

    def _connectFailed(self, failure: Failure) -> None:
        if self.done:
            return
        if failure.check(DestinationRefused):
            self._endUnopened(403, REFUSED_TEXT, str(failure.value), refused=True)
            return
        reason, status = describeFailure(failure, self.route.host, self.route.port)
        self._endUnopened(status, UNREACHED_TEXT, reason)

    def _endUnopened(self, status: int, text: str, reason: str, refused: bool = False) -> None:
        """
        End an exchange whose request never went up (its destination was
        refused, no connection could be made, a timeout while connecting):
        the browser gets netlog's own C{status}, and the open line is
        written with the end, C{_refused} or C{_failed}.
        """
        self.done = True
        response, size = self.browser.answer(status, text.format(reason))
        if refused:
            end = endRecord(self.reactor.seconds(), up=len(self.head.raw), down=size, response=response,
                            refused=(reason, status))
        else:
            end = endRecord(self.reactor.seconds(), up=len(self.head.raw), down=size, response=response,
                            failed=reason, failedStatus=status)
        self.proxy.writer.refuse(self._openFields(), end)
        self.browser.exchangeDone(self, cut=True)

    def _endUnanswered(self, status: int, reason: str, refused: bool = False) -> None:
        """
        End an open exchange that got no answer (the upstream went away
        before answering, or the request's body turned out malformed,
        C{refused}): the browser gets netlog's own C{status}, the entry ends
        C{_failed} (or C{_refused}).
        """
        self.done = True
        response, size = self.browser.answer(status, (REFUSED_TEXT if refused else UNANSWERED_TEXT).format(reason))
        self.response = response
        self.responseBody = None
        self.down += size
        if refused:
            fields = self.endFields(refused=(reason, status))
        else:
            fields = self.endFields(failed=reason, failedStatus=status)
        self.proxy.writer.end(self.id, fields)
        self.browser.exchangeDone(self, cut=True)

    def _openFields(self) -> dict[str, Any]:
        return self.proxy.openFields(self.browser, EXCHANGE, self.started, self.head, self.url, self.route.host,
                                     self.route.port, self.address, self.signIn, self.rules.entries)

    # -- backpressure -----------------------------------------------------------

    def _attach(self) -> None:
        upstream = self.upstream
        assert upstream is not None and upstream.gate is not None
        upstream.attachRequestProducer(self.browser.gate)
        self.browser.attachAnswerProducer(upstream.gate)
        bandwidth = self.rules.bandwidth
        self.downShaper = shaperFor(self.reactor, bandwidth.down, upstream.gate)
        self.upShaper = shaperFor(self.reactor, bandwidth.up, self.browser.gate)

    def _detach(self) -> None:
        for shaper in (self.upShaper, self.downShaper):
            if shaper is not None:
                shaper.stop()
        self.upShaper = self.downShaper = None
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
            self.hadBody = True
            capture = self.requestBody
            if capture is None:
                capture = self.requestBody = self.proxy.mode.requestCapture(self.proxy.logging)
            capture.feed(event.data)
            if not self._trimmed and capture.spilled:
                self._trimmed = True
                giveBackFreeMemory(self.reactor.seconds())
            if not self.responseComplete:
                assert self.upstream is not None
                self._passedUp(self.upstream.requestData(event))
        elif isinstance(event, EndOfMessage):
            self.requestDone = True
            self.sentAt = self.reactor.seconds()
            if self.upstream is not None and not self.responseComplete:
                self._passedUp(self.upstream.requestEnded(event))
        elif isinstance(event, Incomplete):
            self.requestDone = True
            self.closedBy = CLIENT
            self.fail("the browser closed the connection in the middle of the request", abortBrowser=True)
        elif isinstance(event, Refused):
            # The body turned out malformed (a bad chunk): nothing more of it
            # can be read, so the exchange ends here.
            self.requestDone = True
            if self.responseStarted:
                self.fail(f"the request was malformed: {event.reason}", abortBrowser=True)
            else:
                self._detach()
                self._dropUpstream()
                self._endUnanswered(event.status, event.reason, refused=True)

    def browserLost(self, reason: Failure) -> None:
        if self.done:
            return
        if self.raw:
            self._rawEnded(CLIENT, reason)
            return
        self.closedBy = CLIENT
        if not self.id:
            self.fail("the browser closed the connection before the server was connected")
        else:
            self.fail("the browser closed the connection before the answer was complete")

    # -- the answer, from upstream ------------------------------------------------

    def answerArrived(self, source: IAnswerSource, size: int) -> None:
        if self.downShaper is not None:
            self.downShaper.passed(size)
        now = self.reactor.seconds()
        self.browser.touch(now)
        if self.firstByteAt is None:
            self.firstByteAt = now
        # What one read brings for the browser (a head, body pieces, the
        # end) goes in one write, not one per event.
        self.browser.gather()

    def answerSettled(self, source: IAnswerSource) -> None:
        self.browser.flush()
        if self.done or self.raw:
            return
        if self.responseStarted and self.headDue is None and not self.headLogged and self.id:
            # The body didn't end in the read that brought the head: the
            # head line is due a second after it, if the body still runs.
            self.headDue = self.reactor.seconds() + HEAD_LINE_DELAY
            self.browser.wakeBy(self.headDue)

    def answerInterim(self, source: IAnswerSource, head: ResponseHead) -> None:
        if self.done or self.upgraded:
            return
        self.interim.append(head.status)
        self.down += self.browser.answerInterim(head)

    def answerHead(self, source: IAnswerSource, head: ResponseHead) -> None:
        if not self.done:
            self._responseHead(head)

    def answerData(self, source: IAnswerSource, body: Body) -> None:
        if self.done:
            return
        assert self.responseBody is not None
        self.responseBody.feed(body.data)
        self.down += self.browser.answerData(body.data, body.raw)

    def answerEnd(self, source: IAnswerSource, end: EndOfMessage) -> None:
        if self.done or self.upgraded:
            return
        self.down += self.browser.answerEnd(end)
        self._responseEnded()

    def answerMarks(self, source: IAnswerSource, marks: dict[str, object],
                    recorded: Callable[[dict[str, object]], dict[str, object]] | None = None) -> None:
        self.marks = dict(marks)
        self.recordedAs = recorded

    def _responseHead(self, event: ResponseHead) -> None:
        self.responseStarted = True
        head = self.head
        upgraded = event.status == 101 and head.upgrade
        fields = HeadFields(event.version, event.headers)
        drop = fields.relayDrop
        if upgraded:
            drop = drop - {b"upgrade"}
        # One pass: drop the hop-by-hop fields, have the mode rewrite what
        # names a configured upstream.
        route = self.route
        mode = self.proxy.mode
        if route.site is not None:
            headers = [
                (name, mode.rewrite(route, lower, value) if lower in _REWRITTEN else value)
                for (name, value), lower in zip(event.headers, fields.lowered) if lower not in drop
            ]
        else:
            headers = [field for field, lower in zip(event.headers, fields.lowered) if lower not in drop]
        if self.rules.dropDown:
            headers = [f for f in headers if f[0].lower() not in self.rules.dropDown]
            headers.extend(self.rules.setDown)
        contentType = fields.first(b"content-type")
        self.responseKeepAlive = fields.keepAlive and not event.eofFramed
        sent, reason, size = self.browser.answerHead(event, fields, headers, upgraded)
        if size > 0:
            self.down += size
        self.responseBody = mode.responseCapture(contentType, self.proxy.logging)
        self.response = responseRecord(event.status, reason, self.browser.version, sent, size, None, self.signIn)
        if upgraded or (contentType is not None and contentType[:17].lower() == b"text/event-stream"):
            # An answer that goes on streaming: its head is logged now,
            # before its bytes go to the browser.
            self.logHead()
        if upgraded:
            # Both connections now carry the new protocol, relayed as it
            # comes; a WebSocket's messages are read and logged.
            self.upgraded = True
            if isWebSocket(head):
                extensions = fields.first(b"sec-websocket-extensions")
                self._startWebSocket(extensions.decode("latin-1") if extensions is not None else None)
            else:
                self._enterRaw()

    def _responseEnded(self) -> None:
        self.responseComplete = True
        upstream = self.upstream
        reuse = (
            upstream is not None
            and self.responseKeepAlive
            and self.requestDone
            and upstream.idle
            and upstream.pooled
        )
        if not self.requestDone:
            # An early answer (a 413 before the upload ended): the rest of the
            # request is read and dropped, the backend connection closed.
            self.browser.discardRestOfRequest(self)
        self._finish(None, reuseUpstream=reuse)

    def answerFailed(self, source: IAnswerSource, reason: Failure, raw: bytes = b"",
                     again: IResendable | None = None) -> None:
        if self.done or source is not self.upstream:
            return
        if self.raw:
            self._rawEnded(SERVER, reason)
            return
        where = f"{self.route.host}:{self.route.port}"
        if not self.responseStarted:
            if again is not None:
                self._retry(again)
            elif reason.check(SSL.Error):
                error_ = reason.value
                assert error_ is not None
                self._noAnswer(f"TLS with {where} failed: {describeTLSError(error_)}")
            else:
                what = "reset" if not reason.check(error.ConnectionDone) else "closed"
                self._noAnswer(f"{where} {what} the connection before answering")
            return
        self.closedBy = SERVER
        why = f"{where} closed the connection in the middle of the answer"
        # Bytes read and not yet relayed (a last chunk cut inside its
        # trailers): a browser side that relays the server's framing sends
        # them as they came, then closes; their framing tells it the answer
        # is cut. An abort would drop them with the rest of the write
        # buffer. Otherwise only the abort says the answer is cut.
        sent = self.browser.cutAnswer(raw) if raw else None
        if sent is not None:
            self.down += sent
            self.cut = True
            self.fail(why)
        else:
            self.fail(why, abortBrowser=True)

    def forward(self, source: IAnswerSource, sent: IResendable | None) -> None:
        """
        C{source} has no answer for this request and sends it on to the
        route's upstream (a replay's unmatched request, with
        C{--replay-unmatched forward}): the request as it was sent so far
        goes up on a new connection, as a retry's does.
        """
        if self.done or source is not self.upstream:
            return
        if sent is None:
            self._noAnswer(f"the request is over {MAX_RETRY_BYTES} bytes, too big to forward unanswered")
            return
        self._retry(sent)

    def _retry(self, again: IResendable) -> None:
        """
        Send the request again, once, on a new connection (a reused one was
        already closed, or the source had no answer).
        """
        self._detach()
        self.upstream = None
        self.up = 0
        d = self.proxy.upstreamFor(self.route, fresh=True)

        def sendAgain(result: tuple[IAnswerSource, bool, str | None, float | None]) -> None:
            if not self._use(result):
                return
            assert self.upstream is not None
            self._passedUp(again.sendTo(self.upstream))
            self._attach()

        d.addCallbacks(sendAgain, lambda f: self._noAnswer(describeFailure(f, self.route.host, self.route.port)[0]))
        d.addErrback(self._crashed)

    def _noAnswer(self, reason: str, status: int = 502) -> None:
        """
        No answer came: the browser gets a C{status} (502, or 504 on a
        timeout), the entry C{_failed}.
        """
        self.browser.flush()
        self._detach()
        self._dropUpstream()
        self._endUnanswered(status, reason)

    def timedOut(self, reason: str) -> None:
        """
        Nothing passed for the idle timeout. Before any answer the browser
        gets a C{504}; after one began (or in a raw relay) both connections
        are cut. Either way the entry ends C{_failed}.
        """
        if self.done:
            return
        if self.raw or self.responseStarted:
            self.closedBy = PROXY
            # Nothing more is read from this browser connection.
            self.cut = True
            self.fail(reason, abortBrowser=True)
        elif not self.id:
            # Still connecting (and no entry open yet).
            self._endUnopened(GATEWAY_TIMEOUT, UNREACHED_TEXT, reason)
        else:
            self._noAnswer(reason, GATEWAY_TIMEOUT)

    # -- raw relays: WebSockets and answers that aren't HTTP ---------------------

    def logHead(self) -> None:
        """
        Write the answer's head line (once), for an answer still streaming.
        """
        self.headDue = None
        if self.headLogged or self.response is None or not self.id or self.done:
            return
        self.headLogged = True
        self.proxy.writer.head(self.id, headRecord(self.firstByteAt, self.response))

    def _startWebSocket(self, extensions: str | None) -> None:
        if self.id and self.proxy.writer.enabled:
            deflate = parseDeflate(extensions)
            budget = KeptBudget()
            self.wsUp = MessageAssembler(budget, deflate is not None,
                                         deflate is not None and deflate.clientNoContext)
            self.wsDown = MessageAssembler(budget, deflate is not None,
                                           deflate is not None and deflate.serverNoContext)
        else:
            self.wsUp = FrameCounter()
            self.wsDown = FrameCounter()
        self._enterRaw()

    def _logMessages(self, direction: str, messages: list[Message]) -> None:
        write = self.proxy.writer.message
        for m in messages:
            write(self.id, messageRecord(direction, m.opcode, m.size, m.data, m.truncated, m.compressed,
                                         m.undecodable, m.frames))

    def answerUnparsable(self, source: IAnswerSource, raw: bytes) -> None:
        if self.done:
            return
        self.unparsed = True
        self._enterRaw()
        if raw:
            self._rawDown(raw)

    def answerRaw(self, source: IAnswerSource, data: bytes) -> None:
        if not self.done:
            self._rawDown(data)

    def _enterRaw(self) -> None:
        self.raw = True
        assert self.upstream is not None
        self.upstream.raw = True
        pending = self.browser.enterRaw(self)
        if pending:
            self.browserRaw(pending)

    def browserRaw(self, data: bytes) -> None:
        if self.done or self.upstream is None:
            return
        ws = self.wsUp
        if ws is not None:
            messages = ws.feed(data)
            if messages:
                # Logged before the message's last bytes go on.
                self._logMessages("up", messages)
        self._passedUp(len(data))
        self.upstream.sendRaw(data)

    def _rawDown(self, data: bytes) -> None:
        ws = self.wsDown
        if ws is not None:
            messages = ws.feed(data)
            if messages:
                self._logMessages("down", messages)
        self.down += self.browser.answerData(data, data)

    def _rawEnded(self, closedBy: str, reason: Failure) -> None:
        self.closedBy = closedBy
        failed = None
        if not reason.check(error.ConnectionDone):
            who = "the browser" if closedBy == CLIENT else self.route.host
            failed = f"{who} reset the connection"
        self._finish(failed, reuseUpstream=False)
        if closedBy == CLIENT:
            self._dropUpstream(gently=True)
        else:
            self.browser.finishRaw()

    def cancelled(self) -> None:
        """
        The browser cancelled the request (an HTTP/2 stream's C{RST_STREAM}):
        the exchange ends, and its upstream connection is closed (the
        answer's rest can't be told apart from the next one's).
        """
        if self.done:
            return
        self.closedBy = CLIENT
        self.fail("the browser cancelled the request")

    def abort(self) -> None:
        """
        The proxy is stopping: end this exchange now.
        """
        if self.done:
            return
        self.closedBy = PROXY
        self.fail("the proxy stopped", abortBrowser=True)

    # -- ending -------------------------------------------------------------------

    def fail(self, reason: str, abortBrowser: bool = False) -> None:
        if self.done:
            return
        self._finish(reason, reuseUpstream=False)
        self._dropUpstream()
        if abortBrowser:
            self.browser.abort()

    def _dropUpstream(self, gently: bool = False) -> None:
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            upstream.exchange = None
            upstream.close(gently)

    def endFields(self, *, failed: str | None = None, failedStatus: int | None = None,
                  refused: tuple[str, int] | None = None) -> dict[str, Any]:
        now = self.reactor.seconds()
        requestBody = None
        if self.hadBody:
            capture = self.requestBody or self.proxy.mode.requestCapture(self.proxy.logging)
            requestBody = capture.record(splice=True)
        response = None
        if self.response is not None and not self.unparsed:
            response = dict(self.response)
            if self.responseBody is not None and not self.upgraded:
                response["body"] = self.responseBody.record(splice=True)
            if self.recordedAs is not None:
                response = self.recordedAs(response)  # type: ignore[arg-type,assignment]
        websocket: dict[str, Any] | None = None
        wsUp, wsDown = self.wsUp, self.wsDown
        if wsUp is not None and wsDown is not None:
            websocket = websocketRecord(wsUp.messages, wsDown.messages, wsUp.bytes, wsDown.bytes,
                                        _closeOf(wsUp), _closeOf(wsDown))
        fields = endRecord(
            now, self.connectedAt, self.sentAt, self.firstByteAt,
            up=self.up, down=self.down, requestBody=requestBody, response=response, interim=self.interim,
            closedBy=self.closedBy if self.wsUp is not None or self.raw else None,
            websocket=websocket, unparsed=self.unparsed, refused=refused, failed=failed,
            failedStatus=failedStatus, marks=self.marks,
        )
        # The kept bodies are in the fields now, as the base64 the captures
        # kept (the LogWriter writes it into the line without a copy): let
        # the captures go before the line is encoded.
        self.requestBody = _SPENT
        self.responseBody = _SPENT if self.responseBody is not None else None
        return fields

    def _finish(self, failed: str | None, reuseUpstream: bool) -> None:
        if self.done:
            return
        self.done = True
        self.headDue = None
        if self.id:
            self.proxy.writer.end(self.id, self.endFields(failed=failed))
        else:
            # Ended before its upstream connection was made (the browser
            # left, a timeout): its open line goes with its end.
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
            elif not self.raw:
                self._dropUpstream(gently=True)
        self.browser.exchangeDone(self, cut=self.cut)


def _closeOf(side: MessageAssembler | FrameCounter) -> tuple[int | None, str] | None:
    """
    The close frame a WebSocket's side sent (its code and reason), if read.
    """
    if isinstance(side, MessageAssembler) and side.closed:
        return side.closeCode, side.closeReason or ""
    return None


def describeTLSError(value: BaseException) -> str:
    """
    An OpenSSL error in words: C{certificate verify failed}.
    """
    parts = []
    for item in getattr(value, "args", [[]])[0] or []:
        if isinstance(item, tuple) and item:
            parts.append(str(item[-1]))
    return "; ".join(p for p in parts if p) or str(value) or "handshake failed"
