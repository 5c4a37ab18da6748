"""
HTTP/2 toward an upstream: one connection (the C{h2} library's client side,
sans I/O) whose streams are each an exchange's answer source
(L{IAnswerSource}), exactly as an HTTP/1.1 upstream connection is for its
one exchange at a time.

A TLS connection to an upstream whose server chose C{h2} by ALPN becomes an
L{H2Upstream} (see L{netlog.proxy.upstream.connectUpstream}); the pool keeps
it while it carries streams and has room for more (within the server's
C{SETTINGS_MAX_CONCURRENT_STREAMS}), and hands each new exchange for its
origin a stream of it (L{H2UpstreamStream}). A stream frames the request as
HEADERS and DATA under the server's flow control, and turns the answer's
frames into the same answer events an HTTP/1.1 connection emits: interim
heads, the head, the body's pieces, the end with its trailers, a failure.
For an HTTP/1.1 browser the body of an answer without C{content-length} is
framed in chunks (the trailers in the last one), which a browser's HTTP/2
stream drops again.

Backpressure is per stream: the answer's DATA is acknowledged (the server's
window for the stream reopened) only while the browser's side takes more,
and the request's body pauses the browser's side while the server's window
for it is shut.

A stream the server refused (C{RST_STREAM} with C{REFUSED_STREAM}, or above
a C{GOAWAY}'s last stream) was never processed: its request is sent again on
a new stream, as a reused HTTP/1.1 connection's is. Any other reset, a
C{GOAWAY} with an error, or the connection lost ends its exchanges
C{_failed}, with the reason.
"""

from __future__ import annotations

import ipaddress
from typing import Any, Hashable

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    InformationalResponseReceived,
    RemoteSettingsChanged,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
    WindowUpdated,
)
from h2.exceptions import H2Error, ProtocolError
from h2.settings import SettingCodes
from twisted.internet import defer, error
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP6ClientEndpoint, wrapClientTLS
from twisted.internet.interfaces import IHandshakeListener, IOpenSSLClientConnectionCreator
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from netlog.core.h2head import chunk, lastChunk, readAnswer, upstreamRequest
from netlog.core.http1 import Body, EndOfMessage, HeadFields, RequestHead
from netlog.net.gate import Gate, StreamsProducer
from netlog.net.reactors import IProxyReactor
from netlog.net.send import noDelay
from netlog.proxy.contracts import IAnswerSink, IAnswerSource
from netlog.proxy.upstream import RETRIED_METHODS, SentRequest, UpstreamProtocol

_log = Logger()

#: Each stream's receive window: what a server may send of an answer before
#: the browser's side has taken it.
STREAM_WINDOW = 256 * 1024
#: The connection's receive window, over all its streams (enough for as
#: many full stream windows as a server usually allows streams).
CONNECTION_WINDOW = 32 * 1024 * 1024
#: The most streams netlog opens on one connection at once, whatever the
#: server allows.
MAX_STREAMS = 100
#: Seconds a connection being ended (after C{GOAWAY}) has to close before
#: it is cut.
CLOSE_GRACE = 2.0


class _State(H2Connection):
    """
    C{h2}'s client connection, with one rule changed: a C{GOAWAY} doesn't
    close the whole connection at once, so that the streams up to its last
    stream id still get their answers (RFC 9113 6.8); netlog opens no new
    stream on it (L{H2Upstream.lastStream}).
    """

    def _receive_goaway_frame(self, frame: Any) -> tuple[list[Any], list[Any]]:
        event = ConnectionTerminated()
        event.error_code = _errorCode(frame.error_code)
        event.last_stream_id = frame.last_stream_id
        event.additional_data = frame.additional_data or None
        return [], [event]


def _errorCode(code: int) -> ErrorCodes | int:
    try:
        return ErrorCodes(code)
    except ValueError:
        return code


class StreamFailed(Exception):
    """
    An upstream's HTTP/2 stream ended without its answer: the server reset
    it, or went away (C{GOAWAY}). C{what} says so in words (C{reset the
    stream (INTERNAL_ERROR)}).
    """

    def __init__(self, what: str) -> None:
        Exception.__init__(self, what)
        self.what = what


def _codeName(code: Any) -> str:
    return getattr(code, "name", None) or str(code)


class _AnswerReading:
    """
    What a stream's L{Gate} pauses: nothing is read less (the connection's
    other streams go on), but while the gate holds, the stream's DATA is not
    acknowledged, so the server's window for it stays shut.
    """

    __slots__ = ("stream",)

    def __init__(self, stream: H2UpstreamStream) -> None:
        self.stream = stream

    def pauseProducing(self) -> None:
        """
        (L{H2UpstreamStream.acknowledge} looks at the gate.)
        """

    def resumeProducing(self) -> None:
        self.stream.acknowledge(0)


@implementer(IAnswerSource)
class H2UpstreamStream:
    """
    One stream of an HTTP/2 upstream connection: one exchange's answer
    source.

    @ivar connection: the connection it is a stream of.
    @ivar streamId: its id, once its head was sent (0 before).
    @ivar exchange: the L{IAnswerSink} it answers, or L{None}.
    @ivar gate: paused while the browser's side can't take more of the
        answer.
    @ivar sent: the request as sent, while small enough to send again.
    @ivar chunked: the answer's body is framed in chunks for HTTP/1.1.
    @ivar answered: the answer's head came.
    @ivar ended: the answer has ended.
    @ivar closed: the stream is over (ended both ways, reset, or dropped).
    @ivar out: the request's body not yet sent (the server's window was
        shut), and C{endPending} its end (its trailers) once all of it is.
    """

    #: Done with, the stream is let go (the pool keeps its connection).
    pooled = True
    raw = False

    def __init__(self, connection: H2Upstream, reused: bool) -> None:
        self.connection = connection
        self.reused = reused
        self.address = connection.address
        self.streamId = 0
        self.exchange: IAnswerSink | None = None
        self.gate = Gate(_AnswerReading(self))
        self.sent: SentRequest | None = None
        self.method = b"GET"
        self.chunked = False
        self.answered = False
        self.ended = False
        self.closed = False
        self.trailers: list[tuple[bytes, bytes]] = []
        self.unacknowledged = 0
        self.out: list[bytes] = []
        self.endPending: list[tuple[bytes, bytes]] | None = None
        self.producer: Any = None
        #: The request's header block until it goes (with the request's end
        #: when that comes first: one HEADERS frame for a bodiless request).
        self.block: list[tuple[bytes, bytes]] | None = None

    @property
    def idle(self) -> bool:
        return self.ended

    # -- the request (IAnswerSource) ------------------------------------------------

    def sendHead(self, head: RequestHead, fields: HeadFields, drop: frozenset[bytes] | set[bytes],
                 extra: list[tuple[bytes, bytes]]) -> int:
        self.sent = SentRequest(head, fields, drop, extra)
        self.method = head.method
        return self.connection.open(self, upstreamRequest(head, fields, drop, extra))

    def requestData(self, body: Body) -> int:
        sent = self.sent
        if sent is not None and not sent.keep(body):
            self.sent = None
        if not body.data or self.closed:
            return 0
        connection = self.connection
        head = connection.sendHead(self, False) if self.block is not None else 0
        self.out.append(body.data)
        return head + connection.pump(self)

    def requestEnded(self, end: EndOfMessage) -> int:
        sent = self.sent
        if sent is not None and not sent.keep(end):
            self.sent = None
        if self.closed:
            return 0
        connection = self.connection
        if self.block is not None and not self.out and not end.trailers:
            return connection.sendHead(self, True)
        head = connection.sendHead(self, False) if self.block is not None else 0
        self.endPending = list(end.trailers)
        return head + connection.pump(self)

    def sendRaw(self, data: bytes) -> None:
        """
        (A stream is never relayed raw: an upgrade never takes one.)
        """

    def attachRequestProducer(self, producer: Any) -> None:
        self.producer = producer
        if self.out or self.connection.paused:
            producer.pauseProducing()

    def detachRequestProducer(self) -> None:
        self.producer = None

    def close(self, gently: bool) -> None:
        """
        The exchange is done with the stream: reset it if its answer hasn't
        ended (the server stops sending it), and free its place.
        """
        self.sent = None
        self.exchange = None
        self.producer = None
        self.connection.release(self, ErrorCodes.CANCEL)

    # -- the answer, from the connection -------------------------------------------

    def acknowledge(self, size: int) -> None:
        """
        C{size} more bytes of the answer were handed on: the server's
        window reopens by all that waits, unless the browser's side is full.
        """
        self.unacknowledged += size
        if self.unacknowledged and not self.gate.paused and not self.closed:
            self.connection.acknowledge(self, self.unacknowledged)
            self.unacknowledged = 0


class H2Upstream(StreamsProducer, Protocol):
    """
    One HTTP/2 connection to an upstream: frames in, answer events out to
    each stream's exchange.

    @ivar key: the pool key of its upstream.
    @ivar state: C{h2}'s connection.
    @ivar streams: the streams by id, once their heads went.
    @ivar handed: the streams handed out and not yet closed (with or
        without an id).
    @ivar lastStream: the last stream the server will answer, once it said
        C{GOAWAY}.
    @ivar pool: the pool that shares it among exchanges, while it does.
    @ivar counted: the pool that counts it among its upstream's open
        connections, until it is lost.
    @ivar idleSince: when its last stream closed.
    @ivar paused: the transport's buffer is full (the requests' bodies wait).
    """

    transport: Any

    def __init__(self, reactor: IProxyReactor, key: Hashable) -> None:
        self.reactor = reactor
        self.key = key
        # (netlog's own header blocks are lowercase and checked already.)
        self.state = _State(config=H2Configuration(client_side=True, header_encoding=None,
                                                   validate_outbound_headers=False,
                                                   normalize_outbound_headers=False))
        self.streams: dict[int, H2UpstreamStream] = {}
        self.handed: set[H2UpstreamStream] = set()
        self.connected = False
        self.address: str | None = None
        self.lastStream: int | None = None
        self.pool: Any = None
        self.counted: Any = None
        self.idleSince = reactor.seconds()
        self.paused = False
        self.lostReason: Failure | None = None
        self._closing: Any = None
        #: The streams whose heads wait for the end of the reactor's turn
        #: (their request's end or body may come in it).
        self.heads: list[H2UpstreamStream] = []
        #: Frames made and not written yet: written together once a turn.
        self.buffer: list[bytes] = []
        self._soon: Any = None

    # -- the connection ---------------------------------------------------------------

    def connectionMade(self) -> None:
        self.connected = True
        noDelay(self.transport)
        self.address = getattr(self.transport.getPeer(), "host", None)
        state = self.state
        # (Set whole before the first SETTINGS, as the browser side does:
        # an update would wait for the server's acknowledgement.)
        state.local_settings = state.local_settings.__class__(client=True, initial_values={
            SettingCodes.ENABLE_PUSH: 0,
            SettingCodes.INITIAL_WINDOW_SIZE: STREAM_WINDOW,
            SettingCodes.MAX_CONCURRENT_STREAMS: MAX_STREAMS,
        })
        state.initiate_connection()
        state.increment_flow_control_window(CONNECTION_WINDOW - state.inbound_flow_control_window)
        self.transport.registerProducer(self, True)
        self.send()

    @property
    def room(self) -> int:
        """
        How many more streams it may carry now.
        """
        if not self.connected or self.lastStream is not None:
            return 0
        allowed = min(self.state.remote_settings.max_concurrent_streams, MAX_STREAMS)
        return max(allowed - len(self.handed), 0)

    @property
    def busy(self) -> bool:
        return bool(self.handed)

    def newStream(self, reused: bool = True) -> H2UpstreamStream:
        """
        A stream for a new exchange (there is L{room}).
        """
        stream = H2UpstreamStream(self, reused)
        self.handed.add(stream)
        return stream

    def send(self) -> None:
        """
        Write what is made, now.
        """
        if self._soon is not None and self._soon.active():
            self._soon.cancel()
        self._soon = None
        for stream in self.heads[:]:
            self.sendHead(stream, False)
        data = self.state.data_to_send()
        if self.buffer:
            data = b"".join(self.buffer) + data
            self.buffer.clear()
        if data and self.connected:
            self.transport.write(data)

    def made(self) -> int:
        """
        Take the frames C{h2} made, to be written at the end of this turn
        (with those of the other streams' in one write); their bytes.
        """
        data = self.state.data_to_send()
        if data:
            self.buffer.append(data)
        if self._soon is None:
            self._soon = self.reactor.callLater(0, self.send)
        return len(data)

    def dataReceived(self, data: bytes) -> None:
        try:
            events = self.state.receive_data(data)
        except (ProtocolError, H2Error) as e:
            self._abandon(f"broke HTTP/2 ({e})")
            return
        # What one read brings for each exchange goes to its browser in one
        # write: each exchange is told of the read once, then its events,
        # then that the read is over.
        sizes: dict[int, int] = {}
        for event in events:
            streamId = getattr(event, "stream_id", 0)
            if streamId:
                sizes[streamId] = sizes.get(streamId, 0) + (getattr(event, "flow_controlled_length", 0) or 0)
        arrived: dict[H2UpstreamStream, IAnswerSink] = {}
        for streamId, size in sizes.items():
            stream = self.streams.get(streamId)
            if stream is not None and stream.exchange is not None:
                arrived[stream] = stream.exchange
                stream.exchange.answerArrived(stream, size)
        try:
            for event in events:
                self._event(event)
        finally:
            for stream, exchange in arrived.items():
                exchange.answerSettled(stream)
            self.send()

    def _event(self, event: Any) -> None:
        kind = type(event)
        if kind is DataReceived:
            stream = self.streams.get(event.stream_id)
            if stream is None or stream.exchange is None:
                # A stream already let go: its window is given back at once.
                if event.flow_controlled_length:
                    self._acknowledgeGone(event.stream_id, event.flow_controlled_length)
                return
            data = event.data
            if data:
                stream.exchange.answerData(stream, Body(data, chunk(data) if stream.chunked else data))
            stream.acknowledge(event.flow_controlled_length)
        elif kind is ResponseReceived or kind is InformationalResponseReceived:
            stream = self.streams.get(event.stream_id)
            if stream is None or stream.exchange is None:
                return
            read = readAnswer(event.headers, stream.method)
            if isinstance(read, str):
                self._failStream(stream, read, ErrorCodes.PROTOCOL_ERROR)
                return
            head, chunked = read
            stream.sent = None
            if head.interim:
                stream.exchange.answerInterim(stream, head)
            else:
                stream.answered = True
                stream.chunked = chunked
                stream.exchange.answerHead(stream, head)
        elif kind is TrailersReceived:
            stream = self.streams.get(event.stream_id)
            if stream is not None:
                stream.trailers = [(n, v) for n, v in event.headers if n[:1] != b":"]
        elif kind is StreamEnded:
            stream = self.streams.get(event.stream_id)
            if stream is None:
                return
            stream.ended = True
            exchange = stream.exchange
            if exchange is not None:
                if not stream.answered:
                    self._failStream(stream, "ended the stream without an answer", ErrorCodes.PROTOCOL_ERROR)
                    return
                trailers = stream.trailers
                exchange.answerEnd(stream, EndOfMessage(trailers, lastChunk(trailers) if stream.chunked else b""))
            self._maybeClosed(stream)
        elif kind is StreamReset:
            stream = self.streams.get(event.stream_id)
            if stream is None:
                return
            stream.closed = True
            self._forget(stream)
            code = event.error_code
            if stream.ended or stream.exchange is None:
                return
            if code == ErrorCodes.REFUSED_STREAM and not stream.answered:
                self._refused(stream, "refused the stream")
            else:
                self._failed(stream, f"reset the stream ({_codeName(code)})")
        elif kind is WindowUpdated:
            streams = self.streams.values() if not event.stream_id else (
                [self.streams[event.stream_id]] if event.stream_id in self.streams else [])
            for stream in list(streams):
                if stream.out or stream.endPending is not None:
                    self.pump(stream)
        elif kind is RemoteSettingsChanged:
            if SettingCodes.INITIAL_WINDOW_SIZE in event.changed_settings:
                for stream in list(self.streams.values()):
                    if stream.out:
                        self.pump(stream)
            if self.pool is not None:
                self.pool.offer(self)
        elif kind is ConnectionTerminated:
            self._goneAway(event.error_code, event.last_stream_id)

    def _goneAway(self, code: Any, lastStream: int | None) -> None:
        """
        The server said C{GOAWAY}: streams above C{lastStream} were never
        processed and go again on a new connection; those below it end as
        they will (with an error, they fail now).
        """
        self.lastStream = lastStream if lastStream is not None else 0
        if self.pool is not None:
            self.pool.unshare(self)
        what = f"went away (GOAWAY, {_codeName(code)})"
        for stream in list(self.handed):
            if stream.streamId == 0 or stream.streamId > self.lastStream:
                if stream.exchange is not None and (stream.streamId or stream.block is not None):
                    stream.closed = True
                    self._forget(stream)
                    self._refused(stream, what)
            elif code != ErrorCodes.NO_ERROR and stream.exchange is not None and not stream.ended:
                stream.closed = True
                self._forget(stream)
                self._failed(stream, what)
        self._closeIfDone()

    def _refused(self, stream: H2UpstreamStream, what: str) -> None:
        """
        The server never processed C{stream}'s request: sent again on a
        new stream when it was kept whole, else the exchange fails.
        """
        exchange, stream.exchange = stream.exchange, None
        if exchange is None:
            return
        sent = stream.sent
        again = sent if sent is not None and sent.ended else None
        exchange.answerFailed(stream, Failure(StreamFailed(what)), again=again)

    def _failed(self, stream: H2UpstreamStream, what: str) -> None:
        exchange, stream.exchange = stream.exchange, None
        if exchange is not None:
            exchange.answerFailed(stream, Failure(StreamFailed(what)))

    def _failStream(self, stream: H2UpstreamStream, what: str, code: ErrorCodes) -> None:
        self._reset(stream, code)
        self._failed(stream, what)

    def _abandon(self, what: str) -> None:
        """
        The connection can't go on: every stream fails with C{what}.
        """
        if self.pool is not None:
            self.pool.unshare(self)
        self.lastStream = 0
        for stream in list(self.handed):
            stream.closed = True
            self._forget(stream)
            self._failed(stream, what)
        if self.connected:
            self.transport.abortConnection()

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        self.connected = False
        self.lostReason = reason
        if self._closing is not None and self._closing.active():
            self._closing.cancel()
        if self._soon is not None and self._soon.active():
            self._soon.cancel()
        if self.pool is not None:
            self.pool.unshare(self)
        counted, self.counted = self.counted, None
        if counted is not None:
            counted.released(self.key)
        for stream in list(self.handed):
            stream.closed = True
            self._forget(stream)
            exchange, stream.exchange = stream.exchange, None
            if exchange is None or stream.ended:
                continue
            sent = stream.sent
            again = None
            if (sent is not None and stream.reused and not stream.answered and sent.ended and not sent.hadBody
                    and sent.head.method in RETRIED_METHODS):
                again = sent
            exchange.answerFailed(stream, reason, again=again)

    # -- streams' requests -----------------------------------------------------------

    def open(self, stream: H2UpstreamStream, block: list[tuple[bytes, bytes]]) -> int:
        """
        C{stream}'s head goes at the latest at the end of this turn (with
        its request's end, when that comes first); the bytes it takes are
        counted when it goes.
        """
        if not self.connected or self.lastStream is not None:
            # Gone away between the stream's handing and its head: the
            # exchange hears of it at once, and sends the request again.
            self.reactor.callLater(0, self._refusedLate, stream)
            return 0
        stream.block = block
        self.heads.append(stream)
        if self._soon is None:
            self._soon = self.reactor.callLater(0, self.send)
        return 0

    def sendHead(self, stream: H2UpstreamStream, end: bool) -> int:
        """
        Send C{stream}'s head on a new stream id (C{end}: the whole
        request); return the bytes it took.
        """
        block, stream.block = stream.block, None
        if stream in self.heads:
            self.heads.remove(stream)
        if block is None or stream.closed or not self.connected:
            return 0
        state = self.state
        streamId = state.get_next_available_stream_id()
        stream.streamId = streamId
        self.streams[streamId] = stream
        state.send_headers(streamId, block, end_stream=end)
        return self.made()

    def _refusedLate(self, stream: H2UpstreamStream) -> None:
        self._forget(stream)
        stream.closed = True
        self._refused(stream, "went away (GOAWAY)")

    def pump(self, stream: H2UpstreamStream) -> int:
        """
        Send what the server's window lets of C{stream}'s request body (and
        its end once all of it went); pause the browser's side while some
        waits. Return the bytes sent.
        """
        if stream.closed or not stream.streamId or not self.connected:
            return 0
        state = self.state
        streamId = stream.streamId
        sent = 0
        try:
            while stream.out:
                window = min(state.local_flow_control_window(streamId), state.max_outbound_frame_size)
                if window <= 0:
                    break
                piece = stream.out[0]
                if len(piece) > window:
                    stream.out[0] = piece[window:]
                    piece = piece[:window]
                else:
                    stream.out.pop(0)
                state.send_data(streamId, piece)
                sent += len(piece)
            if not stream.out and stream.endPending is not None:
                trailers, stream.endPending = stream.endPending, None
                if trailers:
                    state.send_headers(streamId, trailers, end_stream=True)
                else:
                    state.end_stream(streamId)
        except H2Error:
            # The stream closed meanwhile (the server reset it, or answered
            # whole): what is left of the request isn't wanted.
            stream.out.clear()
            stream.endPending = None
        producer = stream.producer
        if producer is not None:
            if stream.out:
                producer.pauseProducing()
            elif not self.paused:
                producer.resumeProducing()
        self.made()
        self._maybeClosed(stream)
        return sent

    def acknowledge(self, stream: H2UpstreamStream, size: int) -> None:
        try:
            self.state.acknowledge_received_data(size, stream.streamId)
        except H2Error:
            return
        self.send()

    def _acknowledgeGone(self, streamId: int, size: int) -> None:
        try:
            self.state.acknowledge_received_data(size, streamId)
        except H2Error:
            pass

    def _reset(self, stream: H2UpstreamStream, code: ErrorCodes) -> None:
        if stream.streamId and not stream.closed and self.connected:
            try:
                self.state.reset_stream(stream.streamId, code)
            except H2Error:
                pass
            self.send()
        stream.closed = True
        self._forget(stream)

    def release(self, stream: H2UpstreamStream, code: ErrorCodes) -> None:
        """
        The exchange let C{stream} go: reset it unless it is over both ways
        (C{NO_ERROR} when only its answer is: the rest of the request isn't
        wanted, RFC 9113 8.1), and free its place.
        """
        if not stream.closed and stream.streamId:
            self._maybeClosed(stream)
            if not stream.closed:
                self._reset(stream, ErrorCodes.NO_ERROR if stream.ended else code)
        stream.closed = True
        self._forget(stream)

    def _maybeClosed(self, stream: H2UpstreamStream) -> None:
        """
        Forget C{stream} once it is over both ways.
        """
        if stream.closed:
            return
        try:
            closed = self.state.streams[stream.streamId].closed
        except KeyError:
            closed = True
        if closed:
            stream.closed = True
            self._forget(stream)

    def _forget(self, stream: H2UpstreamStream) -> None:
        self.streams.pop(stream.streamId, None)
        if stream.block is not None:
            stream.block = None
            self.heads.remove(stream)
        if stream in self.handed:
            self.handed.discard(stream)
            if not self.handed:
                self.idleSince = self.reactor.seconds()
            if self.pool is not None:
                self.pool.offer(self)
            self._closeIfDone()

    def _closeIfDone(self) -> None:
        if self.lastStream is not None and not self.handed and self.connected and self._closing is None:
            self.close()

    def close(self, gently: bool = True) -> None:
        """
        End the connection: C{GOAWAY}, then closed (cut after
        L{CLOSE_GRACE} seconds); cut at once unless C{gently} (the proxy
        stops).
        """
        if not self.connected:
            return
        if self.lastStream is None:
            self.lastStream = 0
        try:
            self.state.close_connection()
        except H2Error:
            pass
        self.send()
        if not gently:
            self.transport.abortConnection()
            return
        self.transport.loseConnection()
        self._closing = self.reactor.callLater(CLOSE_GRACE, self.transport.abortConnection)

    def streamWaits(self, stream: Any) -> bool:
        return bool(stream.out)


#: What ALPN offers an upstream: HTTP/2 first.
OFFERED = [b"h2", b"http/1.1"]


@implementer(IOpenSSLClientConnectionCreator)
class HTTP11Only:
    """
    A TLS client side that offers only C{http/1.1} by ALPN, over another
    (which may offer C{h2} too): for C{--no-h2-upstream}, for an upgrade (a
    WebSocket needs a connection of its own), and for a connection whose
    protocol can't be swapped after the handshake.
    """

    def __init__(self, creator: Any) -> None:
        self.creator = creator

    def clientConnectionForTLS(self, protocol: Any) -> Any:
        connection = self.creator.clientConnectionForTLS(protocol)
        connection.set_alpn_protos([b"http/1.1"])
        return connection


@implementer(IHandshakeListener)
class _Negotiating(Protocol):
    """
    A TLS connection to an upstream until its handshake is done: then the
    protocol the server chose by ALPN takes the connection over (an
    L{H2Upstream} for C{h2}, else an L{UpstreamProtocol}), as
    C{twisted.web.http} swaps its channel after ALPN.

    @ivar chosen: fires with that protocol, or fails with why the handshake
        didn't complete.
    """

    transport: Any

    def __init__(self, reactor: IProxyReactor, key: Hashable, timeout: float) -> None:
        self.reactor = reactor
        self.key = key
        self.timeout = timeout
        self.chosen: defer.Deferred[UpstreamProtocol | H2Upstream] | None = defer.Deferred()
        self._timer: Any = None

    def connectionMade(self) -> None:
        # The handshake has as long as the connection had.
        self._timer = self.reactor.callLater(self.timeout, self.transport.abortConnection)

    def handshakeCompleted(self) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        transport = self.transport
        inner: UpstreamProtocol | H2Upstream
        if getattr(transport, "negotiatedProtocol", None) == b"h2":
            inner = H2Upstream(self.reactor, self.key)
        else:
            inner = UpstreamProtocol(self.reactor, self.key)
        transport.wrappedProtocol = inner
        inner.makeConnection(transport)
        chosen, self.chosen = self.chosen, None
        if chosen is not None:
            chosen.callback(inner)

    def dataReceived(self, data: bytes) -> None:
        """
        (Nothing comes before the handshake's end.)
        """

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        chosen, self.chosen = self.chosen, None
        if chosen is not None:
            if reason.check(error.ConnectionDone):
                reason = Failure(error.ConnectionLost("the connection closed during the TLS handshake"))
            chosen.errback(reason)


def connectNegotiated(reactor: IProxyReactor, address: str, port: int, tlsCreator: Any, timeout: float,
                      key: Hashable) -> defer.Deferred[UpstreamProtocol | H2Upstream]:
    """
    A new TLS connection to C{address:port} whose C{tlsCreator} offers
    L{OFFERED} by ALPN: once the handshake is done, the protocol the server
    chose; a failed handshake fails it (C{OpenSSL.SSL.Error}: a
    certificate that doesn't verify), before any request went.
    """
    endpointClass = TCP6ClientEndpoint if ipaddress.ip_address(address).version == 6 else TCP4ClientEndpoint
    endpoint = wrapClientTLS(tlsCreator, endpointClass(reactor, address, port, timeout=timeout))  # type: ignore[arg-type]
    factory: Any = Factory.forProtocol(lambda: _Negotiating(reactor, key, timeout))  # type: ignore[arg-type]
    factory.noisy = False
    made: defer.Deferred[Any] = endpoint.connect(factory)
    return made.addCallback(lambda negotiating: negotiating.chosen)
