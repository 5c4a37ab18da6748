"""
HTTP/2 toward the browser: one connection (the C{h2} library's state machine,
sans I/O) whose streams are each the browser's side of an exchange
(L{IBrowserStream}), exactly as an HTTP/1.1 connection is for its one
exchange at a time.

A L{netlog.proxy.browser.BrowserConnection} whose TLS handshake chose C{h2}
by ALPN hands its bytes to an L{H2Connection}. Each request becomes an
L{H2Stream} and an L{netlog.proxy.exchange.Exchange}; the answer's events
come back as HEADERS and DATA frames under flow control. A stream is refused,
failed or cancelled alone (C{RST_STREAM}); only abuse of the connection
itself (a flood, a protocol error) ends the connection, with C{GOAWAY}.

Backpressure is per stream: the request's DATA is acknowledged (the
browser's window reopened) only as it goes up, and the answer's upstream is
paused while the stream's window (or the browser's socket) is full.
"""

from __future__ import annotations

from typing import Any, Sequence

from h2.config import H2Configuration
from h2.connection import H2Connection as _H2State
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    PingReceived,
    RemoteSettingsChanged,
    RequestReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import FlowControlError, ProtocolError, StreamClosedError
from h2.settings import SettingCodes
from twisted.internet import error
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from netlog.core.h2head import (
    MAX_HEADER_LIST_SIZE,
    Malformed,
    chunk,
    contentLength,
    lastChunk,
    readRequest,
    withChunkedBody,
)
from netlog.core.http1 import (
    Body,
    EndOfMessage,
    Event,
    HeadFields,
    Refused,
    RequestHead,
    ResponseHead,
)
from netlog.core.records import (
    EXCHANGE,
    REFUSED_TEXT,
    DEFAULT_PORTS,
    endRecord,
    openRecord,
    ownAnswerH2,
)
from netlog.core.ratelimit import TokenBucket
from netlog.net.gate import Gate, StreamsProducer
from netlog.net.idle import IdleTimer
from netlog.proxy.contracts import IBrowserStream, IEngine, IRawPeer
from netlog.proxy.dispatch import Turned, dispatch
from netlog.proxy.exchange import Exchange

_log = Logger()

#: The most streams a browser may have open at once (advertised).
MAX_CONCURRENT_STREAMS = 100
#: Each stream's receive window: what a browser may send of a request's body
#: before netlog has passed it on.
STREAM_WINDOW = 256 * 1024
#: Streams the browser may reset (before their answers ended) in a burst,
#: and how many a second it earns back: past that, the connection ends
#: with C{ENHANCE_YOUR_CALM} (the rapid-reset attack, CVE-2023-44487).
RESET_BURST = 200
RESETS_PER_SECOND = 100.0
#: PINGs and SETTINGS the browser may send in a burst, and how many a
#: second it earns back, before the connection ends the same way.
CONTROL_BURST = 100
CONTROLS_PER_SECOND = 50.0
#: Seconds a connection netlog ended (with C{GOAWAY}) has to close before
#: it is cut: a TLS close waits for the browser's own close, which a client
#: that goes on sending never gives.
CLOSE_GRACE = 2.0
#: The largest DATA frame netlog sends (HTTP/2's default maximum).
MAX_DATA_FRAME = 16384
#: Fields of an answer that are about one HTTP/1.1 connection: never sent
#: on a stream (RFC 9113 8.2.2).
_ANSWER_DROP = frozenset({b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade",
                          b"te"})


class _State(_H2State):
    """
    C{h2}'s connection, with one check moved out of it: a request whose
    DATA disagrees with its C{content-length} is malformed on its stream
    alone (RFC 9113 8.1.1), where C{h2} would end the whole connection.
    netlog counts the DATA itself (L{H2Stream.data}).
    """

    def _begin_new_stream(self, stream_id: int, allowed_ids: Any) -> Any:
        stream = super()._begin_new_stream(stream_id, allowed_ids)
        stream._initialize_content_length = _noLength  # type: ignore[method-assign]
        return stream


def _noLength(headers: Any) -> None:
    """
    (L{_State}: no content-length tracking in C{h2}.)
    """


class _RequestReading:
    """
    What a L{Gate} pauses for one stream's request: nothing is read less
    (the connection's other streams go on), but while the gate holds, the
    stream's DATA is not acknowledged, so the browser's window for it stays
    shut; released, what waited goes on and is acknowledged.
    """

    __slots__ = ("stream",)

    def __init__(self, stream: H2Stream) -> None:
        self.stream = stream

    def pauseProducing(self) -> None:
        """
        (L{H2Stream.deliver} looks at the gate before acknowledging.)
        """

    def resumeProducing(self) -> None:
        self.stream.resumeRequest()


@implementer(IBrowserStream)
class H2Stream:
    """
    One stream of an HTTP/2 connection: the browser's side of one exchange.

    @ivar pending: the request's events not yet handed to the exchange,
        each with the flow-controlled bytes to acknowledge once it is.
    @ivar out: the answer's body not yet sent (the stream's window was
        shut).
    """

    version = b"HTTP/2"

    def __init__(self, connection: H2Connection, streamId: int) -> None:
        self.connection = connection
        self.streamId = streamId
        self.client = connection.client
        self.connectionId = connection.connectionId
        self.gate = Gate(_RequestReading(self))
        self.exchange: Exchange | None = None
        self.pending: list[tuple[Event, int]] = []
        self.unacknowledged = 0
        self.out: list[bytes] = []
        self.outSize = 0
        self.endPending: list[tuple[bytes, bytes]] | None = None
        self.answerStarted = False
        self.answerEnded = False
        self.requestEnded = False
        self.reset = False
        self.discarding = False
        #: The request turned out malformed: the stream is reset with
        #: C{PROTOCOL_ERROR} instead of answered.
        self.malformed = False
        self.chunked = False
        self.expectedLength: int | None = None
        self.received = 0
        self.producer: Any = None
        self.lastActive = connection.reactor.seconds()

    # -- the request --------------------------------------------------------------

    def request(self, head: RequestHead, at: float, ended: bool) -> None:
        """
        The request's head came (C{ended}: with no body): route it, and
        start its exchange or refuse it on this stream.
        """
        connection = self.connection
        length = contentLength(head)
        if isinstance(length, Malformed):
            connection.refuseMalformed(self, length, head, at)
            return
        self.expectedLength = length
        if not ended and length is None:
            head = withChunkedBody(head)
            self.chunked = True
        proxy = connection.proxy
        assert head.host is not None
        port = head.port or DEFAULT_PORTS["https"]
        url = "https://" + _authority(head) + head.target.decode("latin-1")
        dispatched = dispatch(proxy, "https", head.host, port, url, head.method, True)
        if isinstance(dispatched, Turned):
            connection.refuse(self, head, url, at, dispatched.status, dispatched.reason, (head.host, port),
                              dispatched.entries)
            return
        routed, rules = dispatched
        exchange = Exchange(proxy, self, head, url, routed, at, rules)
        self.exchange = exchange
        if ended:
            self.requestEnded = True
            self.pending.append((EndOfMessage(), 0))
        exchange.start()

    def data(self, data: bytes, flowed: int) -> None:
        self.received += len(data)
        if self.expectedLength is not None and self.received > self.expectedLength:
            self._malformedBody("the DATA is longer than the content-length")
            return
        raw = chunk(data) if self.chunked and data else data
        self.pending.append((Body(data, raw), flowed))
        self.deliver()

    def ended(self, trailers: list[tuple[bytes, bytes]] | None = None) -> None:
        if self.requestEnded:
            return
        self.requestEnded = True
        if self.expectedLength is not None and self.received != self.expectedLength:
            self._malformedBody("the DATA is shorter than the content-length")
            return
        raw = b""
        if self.chunked:
            raw = lastChunk(trailers or [])
        self.pending.append((EndOfMessage(list(trailers or ()), raw), 0))
        self.deliver()

    def _malformedBody(self, reason: str) -> None:
        self.requestEnded = True
        self.malformed = True
        self.pending.append((Refused(400, reason), 0))
        self.deliver()
        if self.exchange is None and not self.reset:
            self.connection.resetStream(self, ErrorCodes.PROTOCOL_ERROR)

    def deliver(self) -> None:
        """
        Hand the exchange what it can take now, acknowledging the DATA that
        went (the browser's window reopens as the request goes up).
        """
        exchange = self.exchange
        if exchange is None:
            if self.discarding:
                self._acknowledgeAll()
            return
        while self.pending and exchange.ready and not exchange.done:
            event, flowed = self.pending.pop(0)
            exchange.fromBrowser(event)
            self.unacknowledged += flowed
        if exchange.done or self.discarding:
            for _, flowed in self.pending:
                self.unacknowledged += flowed
            self.pending.clear()
        if not self.gate.paused:
            self._acknowledgeAll()

    def _acknowledgeAll(self) -> None:
        if self.unacknowledged and not self.reset:
            self.connection.acknowledge(self, self.unacknowledged)
        self.unacknowledged = 0

    def resumeRequest(self) -> None:
        self.deliver()

    def cancelled(self) -> None:
        """
        The browser reset the stream.
        """
        self.reset = True
        self.pending.clear()
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.cancelled()

    def lost(self, reason: Failure) -> None:
        self.reset = True
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            exchange.browserLost(reason)

    # -- IBrowserStream -------------------------------------------------------------

    def exchangeReady(self, exchange: IRawPeer) -> None:
        if exchange is self.exchange:
            self.deliver()

    def exchangeDone(self, exchange: IRawPeer, cut: bool) -> None:
        if exchange is not self.exchange:
            return
        self.exchange = None
        self.producer = None
        if self.reset:
            return
        if not self.answerEnded and self.endPending is None:
            self.connection.resetStream(self, ErrorCodes.INTERNAL_ERROR if cut else ErrorCodes.CANCEL)
        elif not self.requestEnded:
            # The answer came whole before the request ended: the rest of
            # the request is not wanted (RFC 9113 8.1).
            self.discarding = True
            if self.answerEnded:
                self.connection.resetStream(self, ErrorCodes.NO_ERROR)
        self.connection.streamIdle(self)

    def discardRestOfRequest(self, exchange: IRawPeer) -> None:
        self.discarding = True

    def enterRaw(self, peer: Any) -> bytes:
        """
        An answer that can't be read as HTTP can't be carried on a stream:
        the browser gets netlog's C{502} (the exchange goes on relaying the
        server's bytes, which go nowhere, until the server closes).
        """
        if not self.answerStarted:
            self.answer(502, "netlog got no answer: the server's answer could not be read as HTTP.\n")
        self.answerEnded = True
        self.discarding = True
        return b""

    def answer(self, status: int, text: str, headers: list[tuple[bytes, bytes]] = [],  # noqa: B006
               close: bool = True) -> tuple[dict[str, Any], int]:
        proxy = self.connection.proxy
        capture = proxy.mode.responseCapture(b"text/plain", proxy.logging)
        capture.feed(text.encode("utf-8"))
        fields, data, record = ownAnswerH2(status, text, headers, body=capture.record())
        if self.malformed and not self.reset:
            self.connection.resetStream(self, ErrorCodes.PROTOCOL_ERROR)
        if not self.reset and not self.answerStarted:
            self.answerStarted = True
            self.connection.sendHeaders(self, fields, end=False)
            self.answerData(data, data)
            self.answerEnd(EndOfMessage())
        return record, len(data)

    def answerInterim(self, head: ResponseHead) -> int:
        if not self.reset:
            self.connection.sendHeaders(self, [(b":status", b"%d" % head.status)] + _answerFields(head.headers),
                                        end=False)
        return 0

    def answerHead(self, head: ResponseHead, fields: HeadFields, headers: list[tuple[bytes, bytes]],
                   upgraded: bool) -> tuple[list[tuple[bytes, bytes]], bytes, int]:
        sent = _answerFields(headers)
        self.answerStarted = True
        if not self.reset:
            self.connection.sendHeaders(self, [(b":status", b"%d" % head.status)] + sent, end=False)
        return sent, b"", -1

    def answerData(self, data: bytes, raw: bytes) -> int:
        if self.reset or self.discarding and self.answerEnded or not data:
            return 0
        self.out.append(data)
        self.outSize += len(data)
        self.connection.pumpStream(self)
        return len(data)

    def answerEnd(self, end: EndOfMessage) -> int:
        if self.reset or self.answerEnded:
            return 0
        self.endPending = _answerFields(end.trailers) if end.trailers else []
        self.connection.pumpStream(self)
        return 0

    def cutAnswer(self, raw: bytes) -> int | None:
        return None

    def gather(self) -> None:
        self.connection.gathering += 1

    def flush(self) -> None:
        connection = self.connection
        if connection.gathering:
            connection.gathering -= 1
        connection.send()

    def abort(self) -> None:
        if not self.reset:
            self.connection.resetStream(self, ErrorCodes.CANCEL)

    def finishRaw(self) -> None:
        """
        Nothing to close: the stream already has netlog's answer.
        """

    def attachAnswerProducer(self, producer: Any) -> None:
        self.producer = producer
        if self.outSize or self.connection.paused:
            producer.pauseProducing()

    def detachAnswerProducer(self) -> None:
        self.producer = None

    def touch(self, now: float) -> None:
        self.lastActive = now

    def wakeBy(self, when: float) -> None:
        self.connection.idleTimer.arm(when)


class H2Connection(StreamsProducer):
    """
    The HTTP/2 side of one browser connection: frames in, streams out.

    @ivar browser: the connection's protocol (it owns the transport, the
        TLS and the connection's id).
    """

    def __init__(self, browser: Any, proxy: IEngine, idleBetween: float) -> None:
        """
        @param idleBetween: seconds the connection may carry no stream
            before it is closed (as an HTTP/1.1 connection between
            requests).
        """
        self.browser = browser
        self.idleBetween = idleBetween
        self.proxy = proxy
        self.reactor = proxy.reactor
        self.transport = browser.transport
        self.client = browser.client
        self.connectionId = browser.connectionId
        self.defaultAuthority = browser.tunnelAuthority
        self.streams: dict[int, H2Stream] = {}
        self.gathering = 0
        self.paused = False
        self.closing = False
        #: No more frames are read (the connection is ending or ended).
        self.gone = False
        #: The transport has closed.
        self.lost = False
        self.lastActive = self.reactor.seconds()
        #: The connection's one timer (see L{_deadline}).
        self.idleTimer = IdleTimer(self.reactor, self._deadline, self._tick)
        self._graceCall: Any = None
        now = self.reactor.seconds()
        self._resets = TokenBucket(RESETS_PER_SECOND, RESET_BURST, now)
        self._controls = TokenBucket(CONTROLS_PER_SECOND, CONTROL_BURST, now)
        config = H2Configuration(client_side=False, header_encoding=None, validate_inbound_headers=False,
                                 normalize_inbound_headers=False, validate_outbound_headers=False,
                                 normalize_outbound_headers=False)
        self.h2 = _State(config)
        self.h2.local_settings = self.h2.local_settings.__class__(client=False, initial_values={
            SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS,
            SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
            SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
            SettingCodes.ENABLE_PUSH: 0,
        })
        self.h2.max_inbound_frame_size = self.h2.local_settings.max_frame_size

    # -- the connection -------------------------------------------------------------

    def start(self) -> None:
        self.h2.initiate_connection()
        # The connection's window, shared by its streams, as wide as a few
        # of theirs (the default 64 KiB would throttle parallel uploads).
        self.h2.increment_flow_control_window(4 * STREAM_WINDOW)
        self.transport.registerProducer(self, True)
        self.send()
        self.idleTimer.arm()

    def dataReceived(self, data: bytes) -> None:
        if self.gone:
            return
        now = self.reactor.seconds()
        self.lastActive = now
        try:
            events = self.h2.receive_data(data)
        except ProtocolError as e:
            self._terminate(_errorCode(e), f"the browser broke HTTP/2: {e}")
            return
        self.gathering += 1
        try:
            for event in events:
                self._event(event, now)
                if self.gone:
                    return
        finally:
            self.gathering -= 1
            self.send()

    def _event(self, event: Any, now: float) -> None:
        if isinstance(event, DataReceived):
            stream = self.streams.get(event.stream_id)
            if stream is None:
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                return
            stream.touch(now)
            stream.data(event.data, event.flow_controlled_length)
            if event.stream_ended is not None:
                stream.ended()
        elif isinstance(event, RequestReceived):
            self._request(event, now)
        elif isinstance(event, StreamEnded):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                stream.ended()
        elif isinstance(event, TrailersReceived):
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                stream.ended(list(event.headers))
        elif isinstance(event, StreamReset):
            stream = self.streams.pop(event.stream_id, None)
            if stream is not None:
                if not stream.answerEnded and not self._resets.allow(now):
                    self._terminate(ErrorCodes.ENHANCE_YOUR_CALM, "the browser reset too many streams")
                    stream.cancelled()
                    return
                stream.cancelled()
        elif isinstance(event, WindowUpdated):
            if event.stream_id:
                stream = self.streams.get(event.stream_id)
                if stream is not None:
                    stream.touch(now)
                    self.pumpStream(stream)
            else:
                for stream in list(self.streams.values()):
                    self.pumpStream(stream)
        elif isinstance(event, (PingReceived, RemoteSettingsChanged)):
            if not self._controls.allow(now):
                self._terminate(ErrorCodes.ENHANCE_YOUR_CALM, "the browser sent too many PING or SETTINGS frames")
                return
            if isinstance(event, RemoteSettingsChanged):
                for stream in list(self.streams.values()):
                    self.pumpStream(stream)
        elif isinstance(event, ConnectionTerminated):
            self.closing = True
            self.transport.loseConnection()

    def _request(self, event: RequestReceived, now: float) -> None:
        streamId = event.stream_id
        stream = H2Stream(self, streamId)
        self.streams[streamId] = stream
        read = readRequest(list(event.headers), self.defaultAuthority)
        if isinstance(read, Malformed):
            self.refuseMalformed(stream, read, None, now)
            return
        stream.request(read, now, event.stream_ended is not None)

    def connectionLost(self, reason: Failure) -> None:
        self.gone = True
        self.lost = True
        if self._graceCall is not None and self._graceCall.active():
            self._graceCall.cancel()
        self._graceCall = None
        self.idleTimer.stop()
        streams, self.streams = list(self.streams.values()), {}
        for stream in streams:
            stream.lost(reason)

    def close(self) -> None:
        """
        The proxy is stopping: C{GOAWAY}, the exchanges in flight end as
        stopped (as an HTTP/1.1 connection's does), then the connection
        closes.
        """
        if self.gone or self.closing:
            return
        self.closing = True
        for stream in list(self.streams.values()):
            if stream.exchange is not None:
                stream.exchange.abort()
        try:
            self.h2.close_connection(ErrorCodes.NO_ERROR)
        except ProtocolError:
            pass
        self.send()
        self._closeTransport()

    def _closeTransport(self) -> None:
        """
        Close the browser's connection after what is written (the
        C{GOAWAY}), and cut it if it hasn't closed within L{CLOSE_GRACE}.
        """
        # (Reading goes on meanwhile: a socket closed with the browser's
        # bytes unread would be reset, and the GOAWAY lost with it.)
        self.transport.loseConnection()
        if self._graceCall is None and not self.lost:
            self._graceCall = self.reactor.callLater(CLOSE_GRACE, self._cut)

    def _cut(self) -> None:
        self._graceCall = None
        if not self.lost:
            self.transport.abortConnection()

    def _terminate(self, code: int, why: str) -> None:
        _log.info("Closing an HTTP/2 connection from {client}: {why}", client=self.client, why=why)
        try:
            self.h2.close_connection(code)
        except ProtocolError:
            pass
        self.send()
        self.gone = True
        self.closing = True
        self.idleTimer.stop()
        streams, self.streams = list(self.streams.values()), {}
        for stream in streams:
            stream.lost(Failure(error.ConnectionLost(why)))
        self._closeTransport()

    # -- sending ----------------------------------------------------------------------

    def send(self) -> None:
        if self.gathering:
            return
        data = self.h2.data_to_send()
        if data:
            self.transport.write(data)

    def sendHeaders(self, stream: H2Stream, fields: list[tuple[bytes, bytes]], end: bool) -> None:
        try:
            self.h2.send_headers(stream.streamId, fields, end_stream=end)
        except (StreamClosedError, ProtocolError):
            stream.reset = True
        self.send()

    def pumpStream(self, stream: H2Stream) -> None:
        """
        Send what the stream's window (and the connection's) lets go of its
        answer's body, then its end once all has gone; pause its upstream
        while anything waits.
        """
        h2 = self.h2
        sid = stream.streamId
        try:
            while stream.out:
                window = min(h2.local_flow_control_window(sid), h2.max_outbound_frame_size)
                if window <= 0:
                    break
                piece = stream.out[0]
                if len(piece) > window:
                    h2.send_data(sid, piece[:window])
                    stream.out[0] = piece[window:]
                    stream.outSize -= window
                else:
                    h2.send_data(sid, piece)
                    stream.out.pop(0)
                    stream.outSize -= len(piece)
            if not stream.out and stream.endPending is not None:
                trailers, stream.endPending = stream.endPending, None
                if trailers:
                    h2.send_headers(sid, trailers, end_stream=True)
                else:
                    h2.end_stream(sid)
                stream.answerEnded = True
                if stream.exchange is None:
                    self.streamIdle(stream)
        except (StreamClosedError, ProtocolError, FlowControlError):
            stream.reset = True
            stream.out.clear()
            stream.outSize = 0
        producer = stream.producer
        if producer is not None:
            if stream.outSize or self.paused:
                producer.pauseProducing()
            else:
                producer.resumeProducing()
        self.send()

    def acknowledge(self, stream: H2Stream, size: int) -> None:
        try:
            self.h2.acknowledge_received_data(size, stream.streamId)
        except (StreamClosedError, ProtocolError):
            pass
        self.send()

    def resetStream(self, stream: H2Stream, code: int) -> None:
        stream.reset = True
        stream.out.clear()
        stream.outSize = 0
        try:
            self.h2.reset_stream(stream.streamId, code)
        except (StreamClosedError, ProtocolError):
            pass
        self.send()
        self.streamIdle(stream)

    def streamIdle(self, stream: H2Stream) -> None:
        """
        Forget a stream once its exchange has ended and its answer has gone
        (or it was reset).
        """
        if stream.exchange is None and (stream.reset or stream.answerEnded and not stream.out):
            if self.streams.get(stream.streamId) is stream:
                del self.streams[stream.streamId]
            self.idleTimer.arm()

    # (IPushProducer, for the browser's transport: its buffer is full.)
    def streamWaits(self, stream: Any) -> bool:
        return bool(stream.outSize)

    # -- refusals on one stream ------------------------------------------------------

    def refuse(self, stream: H2Stream, head: RequestHead, url: str, at: float, status: int, reason: str,
               server: tuple[str, int], rules: Sequence[dict[str, str]] = ()) -> None:
        """
        Answer a request netlog turns down (the mode or the rules refused
        it) with C{status} on its stream, logged C{_refused} (and the
        C{rules} entries, when they did).
        """
        response, size = stream.answer(status, REFUSED_TEXT.format(reason))
        self.proxy.writer.refuse(
            self.proxy.openFields(self, EXCHANGE, at, head, url, server[0], server[1], rules=rules),
            endRecord(self.reactor.seconds(), up=0, down=size, response=response, refused=(reason, status)),
        )
        self.streamIdle(stream)

    def refuseMalformed(self, stream: H2Stream, malformed: Malformed, head: RequestHead | None,
                        at: float) -> None:
        """
        A request RFC 9113 makes malformed: its stream is reset with
        C{PROTOCOL_ERROR}, and it is logged C{_refused} with what could be
        read of it.
        """
        self.resetStream(stream, ErrorCodes.PROTOCOL_ERROR)
        if head is not None:
            url = "https://" + _authority(head) + head.target.decode("latin-1")
            request = {"method": head.method.decode("latin-1"), "url": url, "version": "HTTP/2",
                       "headers": [[n.decode("latin-1"), v.decode("latin-1")] for n, v in head.headers],
                       "headers_size": -1}
            server = (head.host, head.port)
        else:
            authority = malformed.authority or self.defaultAuthority or None
            url = None
            if authority is not None and malformed.path is not None:
                url = "https://" + authority + malformed.path
            request = {"method": malformed.method, "url": url, "version": "HTTP/2", "headers": [],
                       "headers_size": -1}
            server = (None, None)
        self.proxy.writer.refuse(
            openRecord(self.proxy.mode.name, EXCHANGE, at, self.client, self.connectionId, request,
                       server[0], server[1]),
            endRecord(self.reactor.seconds(), up=0, down=0, refused=(malformed.reason, 400)),
        )

    # -- time ---------------------------------------------------------------------------

    def _deadline(self) -> float | None:
        idle = self.proxy.idleTimeout
        if not self.streams:
            return self.lastActive + min(self.idleBetween, idle)
        soonest: float | None = None
        for stream in self.streams.values():
            exchange = stream.exchange
            when = stream.lastActive + idle
            if exchange is not None and exchange.headDue is not None:
                when = min(when, exchange.headDue)
            if soonest is None or when < soonest:
                soonest = when
        return soonest

    def _tick(self) -> None:
        if self.gone:
            return
        now = self.reactor.seconds()
        idle = self.proxy.idleTimeout
        if not self.streams:
            deadline = self._deadline()
            if deadline is not None and now >= deadline:
                self.close()
                return
        for stream in list(self.streams.values()):
            exchange = stream.exchange
            if exchange is None:
                if now >= stream.lastActive + idle:
                    # A stream whose answer waits on a shut window.
                    self.resetStream(stream, ErrorCodes.CANCEL)
                continue
            if exchange.headDue is not None and now >= exchange.headDue:
                exchange.logHead()
            if now >= stream.lastActive + idle:
                exchange.timedOut(f"the server sent nothing for {idle:g} seconds (see --idle-timeout)"
                                  if not stream.outSize else
                                  f"the browser took nothing for {idle:g} seconds (see --idle-timeout)")
        self.send()
        self.idleTimer.arm()


def _answerFields(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """
    An answer's fields as a stream carries them: lowercase names, no fields
    about an HTTP/1.1 connection (nor those its C{Connection} names).
    """
    named: set[bytes] = set()
    for name, value in headers:
        if name.lower() == b"connection":
            named.update(token.strip().lower() for token in value.split(b","))
    drop = _ANSWER_DROP | named
    out = []
    for name, value in headers:
        lower = name.lower()
        if lower not in drop:
            out.append((lower, value))
    return out


def _authority(head: RequestHead) -> str:
    assert head.relayed is not None
    return head.relayed[0][1].decode("latin-1")


def _errorCode(e: ProtocolError) -> int:
    code = getattr(e, "error_code", None)
    return int(code) if code is not None else int(ErrorCodes.PROTOCOL_ERROR)
