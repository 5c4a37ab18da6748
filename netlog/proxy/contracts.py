"""
What the engine's parts ask of each other, declared once so that none of
them imports another to name it: the service that owns the listeners and the
pool (L{IEngine}), the browser's connection as a tunnel sees it
(L{IBrowserSide}), the browser's side of one exchange whatever protocol
carries it (L{IBrowserStream}: an HTTP/1.1 connection, or one stream of an
HTTP/2 connection), where an exchange's answer comes from (L{IAnswerSource}:
an upstream connection, or a recording), and the exchange as its answer
source feeds it (L{IAnswerSink}). The arrows then run one way: service, browser, exchange and
tunnel, upstream.
"""

from __future__ import annotations

from typing import Callable, Hashable, Protocol, Sequence, TypeVar

from twisted.internet import defer
from twisted.internet.interfaces import IProtocol, IPushProducer, ITransport
from twisted.python.failure import Failure
from zope.interface import Attribute, Interface

from netlog.core.http1 import Body, EndOfMessage, HeadFields, RequestHead, ResponseHead
from netlog.core.rules import Rules
from netlog.log.interfaces import ILogWriter
from netlog.net.gate import Gate
from netlog.net.policy import DestinationPolicy
from netlog.net.reactors import IProxyReactor
from netlog.proxy.mode import IMode, Route


#: A line's fields, or a record in one (JSON: L{netlog.core.records}).
Fields = dict[str, object]

#: A connection's protocol, as L{IEngine.connectRaw} makes it.
_P = TypeVar("_P", bound=IProtocol)


class IRawPeer(Protocol):
    """
    What a browser's connection is handed to once its bytes are relayed as
    they come (see L{IBrowserSide.enterRaw}): a blind tunnel, or an exchange
    relaying a WebSocket or an answer that isn't HTTP. The engine also
    aborts an exchange this way when it stops.
    """

    def browserRaw(self, data: bytes) -> None: ...

    def browserLost(self, reason: Failure) -> None: ...

    def abort(self) -> None: ...


class IBrowserConnection(Protocol):
    """
    A browser's connection, as the engine stops it: what it is busy with
    (L{IRawPeer.abort}), then closed.
    """

    @property
    def rawPeer(self) -> IRawPeer | None: ...

    @property
    def exchange(self) -> IRawPeer | None: ...

    def close(self) -> None: ...


class INamedSide(Protocol):
    """
    What an open line names of the connection that carries a request.
    """

    @property
    def client(self) -> str:
        """
        The browser's address, C{host:port}.
        """

    @property
    def connectionId(self) -> str:
        """
        The connection's id in the log.
        """


class IPool(Protocol):
    """
    The engine's idle upstream connections, as an exchange gives its
    source back.
    """

    def put(self, source: IAnswerSource) -> None:
        """
        Keep C{source} for reuse (a source that can't be reused is closed).
        """

    def cancel(self, key: Hashable, waiter: IWaiter) -> None:
        """
        C{waiter} waits its turn for a connection no more.
        """


#: What L{IEngine.upstreamFor} gives: the source, whether it was reused,
#: the address it goes to, and when it was connected.
Taken = tuple["IAnswerSource", bool, "str | None", "float | None"]


class IWaiter(Protocol):
    """
    What waits its turn for a connection to an upstream (an exchange's
    hold on its source) while the upstream's connections are at its cap
    (or, for an upstream that spoke HTTP/2, for a stream of a shared
    connection).
    """

    @property
    def sharedStreams(self) -> bool:
        """
        Whether it may take a stream of a shared (HTTP/2) connection; an
        upgrade needs an HTTP/1.1 connection of its own.
        """

    def slotFree(self) -> None:
        """
        A new connection may be opened for it now; it counts as one of its
        upstream's from now on.
        """

    def handed(self, protocol: IAnswerSource) -> None:
        """
        Take C{protocol}, done with by another exchange and reusable.
        """


class IEngine(Protocol):
    """
    The proxy service, as its connections use it.
    """

    reactor: IProxyReactor
    mode: IMode
    writer: ILogWriter
    policy: DestinationPolicy
    idleTimeout: float
    headerTimeout: float
    connections: set[IBrowserConnection]
    rules: Rules

    @property
    def pool(self) -> IPool: ...

    @property
    def logging(self) -> bool: ...

    def nextConnectionId(self) -> str: ...

    def openFields(self, side: INamedSide, kind: str, started: float, head: RequestHead, url: str,
                   host: str | None, port: int | None, address: str | None = None,
                   signIn: frozenset[str] = frozenset(), rules: Sequence[dict[str, str]] = (),
                   liveDecrypted: bool = False) -> Fields: ...

    def takeIdle(self, route: Route) -> Taken | None: ...

    def claim(self, route: Route, waiter: IWaiter) -> bool: ...

    def upstreamFor(self, route: Route, resolved: Callable[[str], None] | None = None) -> defer.Deferred[Taken]: ...

    def resolveFor(self, route: Route) -> defer.Deferred[str | None]: ...

    def connectRaw(self, route: Route, address: str | None, protocolClass: Callable[[], _P]) -> defer.Deferred[_P]: ...


class IBrowserSide(Protocol):
    """
    The browser's connection, as a blind tunnel on it uses it.
    """

    transport: ITransport
    gate: Gate
    client: str
    connectionId: str
    gone: bool
    rawPeer: IRawPeer | None

    def enterRaw(self, peer: IRawPeer) -> bytes: ...

    def refuse(self, head: RequestHead, url: str, at: float, status: int, reason: str,
               server: tuple[str, int], kind: str = ...) -> None: ...

    def answer(self, status: int, text: str, headers: list[tuple[bytes, bytes]] = ...,
               close: bool = True) -> tuple[Fields, int]: ...

    def close(self) -> None: ...


class IBrowserStream(Interface):
    """
    The browser's side of one exchange: where its request comes from and
    where its answer goes, in protocol-neutral events (an answer's head, its
    body's pieces, its end, an abort). An HTTP/1.1 connection is one (it
    frames the answer in bytes: chunks, C{Connection}, whether the
    connection is kept); a stream of an HTTP/2 connection is another (it
    sends HEADERS and DATA frames under flow control). The exchange doesn't
    know which it has.

    Backpressure runs per stream: L{gate} pauses the reading of this
    exchange's request (a producer the upstream connection's transport is
    given), and L{attachAnswerProducer} hands the stream the upstream's gate
    to pause while the browser can't take more of the answer.
    """

    client = Attribute("The browser's address, C{host:port}.")
    connectionId = Attribute("The browser connection's id in the log (shared by an HTTP/2 connection's streams).")
    version = Attribute("The protocol toward the browser as the log names it: C{b'HTTP/1.1'} or C{b'HTTP/2'}.")
    gate = Attribute("The producer that pauses the reading of this stream's request (a L{Gate}).")

    def exchangeReady(exchange: IRawPeer) -> None:
        """
        The exchange's head has gone up: the request's body may follow.
        """

    def exchangeDone(exchange: IRawPeer, cut: bool) -> None:
        """
        The exchange has ended and its end line is written; C{cut}: its
        answer didn't end as it should (the stream can't carry more).
        """

    def discardRestOfRequest(exchange: IRawPeer) -> None:
        """
        The answer came before the request ended: the request's rest is read
        and dropped.
        """

    def enterRaw(peer: IRawPeer) -> bytes:
        """
        Hand the rest of the connection to C{peer} (a WebSocket, an answer
        that isn't HTTP); return what was read and not relayed yet.
        """

    def answer(status: int, text: str, headers: list[tuple[bytes, bytes]] = ...,
               close: bool = True) -> tuple[Fields, int]:
        """
        Answer with netlog's own C{status} and plain C{text}; return its
        C{response} record and the bytes it took.
        """

    def answerInterim(head: ResponseHead) -> int:
        """
        Send an interim (1xx) answer's head; return the bytes it took.
        """

    def answerHead(head: ResponseHead, fields: HeadFields, headers: list[tuple[bytes, bytes]],
                   upgraded: bool) -> tuple[list[tuple[bytes, bytes]], bytes, int]:
        """
        Send the answer's head: C{head} as the server sent it, C{fields} its
        fields read once, C{headers} what is relayed of them (hop-by-hop
        fields dropped, backend names rewritten). Return the fields and the
        reason phrase as the browser gets them (HTTP/2 has none), and the
        bytes the head took (-1 where its protocol
        compresses heads and the size isn't known, as HAR's C{headersSize}).
        """

    def answerData(data: bytes, raw: bytes) -> int:
        """
        Send a piece of the answer's body: C{data} with the transfer coding
        undone, C{raw} as the server framed it (a stream whose framing is the
        server's may send it as it came). Return the bytes it took.
        """

    def answerEnd(end: EndOfMessage) -> int:
        """
        The answer's body has ended (C{end}: its trailers, and the last of
        the server's framing); return the bytes it took.
        """

    def cutAnswer(raw: bytes) -> int | None:
        """
        The server left in the middle of the answer, C{raw} its framing read
        and not relayed. A stream that relays the server's framing as it
        came sends it (that framing tells the browser the answer is cut) and
        returns the bytes it took; otherwise L{None}, and the exchange
        aborts the answer.
        """

    def gather() -> None:
        """
        Hold what is sent until L{flush}: the pieces one read brought go in
        one write.
        """

    def flush() -> None:
        """
        Send what was gathered, and send at once again.
        """

    def abort() -> None:
        """
        Cut the answer: the browser must see it is incomplete (the
        connection aborted, or the stream reset).
        """

    def finishRaw() -> None:
        """
        A raw relay's server side closed: close the browser's side after
        what is sent.
        """

    def attachAnswerProducer(producer: IPushProducer) -> None:
        """
        Pause C{producer} (the upstream's gate) while the browser can't take
        more of the answer.
        """

    def detachAnswerProducer() -> None:
        """
        Stop pausing the producer L{attachAnswerProducer} gave.
        """

    def touch(now: float) -> None:
        """
        Something passed for the exchange at C{now}: its idle timeout starts
        again.
        """

    def wakeBy(when: float) -> None:
        """
        Have the exchange's timer fire by C{when} (its head line is due).
        """


class IAnswerSink(Protocol):
    """
    The exchange as its answer source (an upstream connection, a recording,
    a rule's local answer) feeds it: the answer in protocol-neutral events,
    the same vocabulary the browser's side is written (an interim head, the
    head, pieces of the body, the end with its trailers, a failure), and
    what the source says of the answer in the end line (L{answerMarks}).
    The events of one read of the source come between L{answerArrived} and
    L{answerSettled}, so what they bring goes to the browser in one write.
    """

    def answerArrived(self, source: IAnswerSource, size: int) -> None:
        """
        C{size} bytes of the answer came (the events they bring follow).
        """

    def answerInterim(self, source: IAnswerSource, head: ResponseHead) -> None:
        """
        An interim (1xx) head: C{100 Continue}, C{103 Early Hints}.
        """

    def answerHead(self, source: IAnswerSource, head: ResponseHead) -> None:
        """
        The answer's head.
        """

    def answerData(self, source: IAnswerSource, body: Body) -> None:
        """
        A piece of the answer's body.
        """

    def answerEnd(self, source: IAnswerSource, end: EndOfMessage) -> None:
        """
        The answer has ended; C{end.trailers} are its trailer fields.
        """

    def answerSettled(self, source: IAnswerSource) -> None:
        """
        The events of one read are over.
        """

    def answerRaw(self, source: IAnswerSource, data: bytes) -> None:
        """
        Bytes relayed as they come (a WebSocket, or an answer that isn't
        HTTP, after L{answerUnparsable}).
        """

    def answerUnparsable(self, source: IAnswerSource, raw: bytes) -> None:
        """
        The answer can't be read as HTTP: it is relayed raw from C{raw} on.
        """

    def answerFailed(self, source: IAnswerSource, reason: Failure, raw: bytes = b"",
                     again: IResendable | None = None) -> None:
        """
        The source ended without ending the answer: C{reason} why, C{raw}
        framing read and not relayed, C{again} the request as sent when it
        may be sent again on a new connection (a reused connection turned
        out closed before answering). In a raw relay, this is its end.
        """

    def answerMarks(self, source: IAnswerSource, marks: dict[str, object],
                    recorded: Callable[[dict[str, object]], dict[str, object]] | None = None) -> None:
        """
        What the source says of its answer in the end line (C{_replayed},
        C{_answeredBy}), and, for a recording whose body was cut,
        C{recorded}: the end line's answer made the recorded one.
        """

    def forward(self, source: IAnswerSource, sent: IResendable | None) -> None:
        """
        C{source} has no answer and sends the request on to the route's
        upstream (C{sent}: the request as it was handed, L{None} when too
        big to keep).
        """


class IResendable(Protocol):
    """
    A request as it was handed to an answer source, kept so that it can be
    handed to another.
    """

    def sendTo(self, source: IAnswerSource) -> int:
        """
        Hand the request to C{source}; return the bytes it took.
        """


class IAnswerSource(Interface):
    """
    Where one exchange's answer comes from: an upstream connection to a
    backend or a live host (L{netlog.proxy.upstream.UpstreamProtocol},
    which frames the request as HTTP/1.1 and reads the answer), a recording
    (L{netlog.proxy.replay.RecordedSource}), or a rule's local answer. The
    exchange hands it the request's events and it answers with events into
    the exchange's L{IAnswerSink}; the log record, the capture and the
    timers don't know which source they got.
    """

    exchange = Attribute("The L{IAnswerSink} this source answers now, or L{None}.")
    gate = Attribute("The producer the browser's side pauses while it can't take more of the answer.")
    raw = Attribute("The answer is relayed as it comes, not read as HTTP (a WebSocket).")
    pooled = Attribute("Whether the source, done with and reusable, goes back to the engine's pool.")
    idle = Attribute("Whether the answer has been read whole (nothing of it is pending).")

    def sendHead(head: RequestHead, fields: HeadFields, drop: frozenset[bytes] | set[bytes],
                 extra: list[tuple[bytes, bytes]]) -> int:
        """
        The request's head: C{fields} less C{drop}, plus C{extra}. Return
        the bytes it took toward the server.
        """

    def requestData(body: Body) -> int:
        """
        A piece of the request's body (C{body.raw} as the browser's side
        framed it); return the bytes it took.
        """

    def requestEnded(end: EndOfMessage) -> int:
        """
        The whole request has been handed over; return the bytes its end
        took.
        """

    def sendRaw(data: bytes) -> None:
        """
        Bytes of a raw relay's browser side.
        """

    def attachRequestProducer(producer: IPushProducer) -> None:
        """
        Pause C{producer} (the browser's gate) while the source can't take
        more of the request.
        """

    def detachRequestProducer() -> None:
        """
        Stop pausing the producer L{attachRequestProducer} gave.
        """

    def close(gently: bool) -> None:
        """
        The exchange is done with the source: close it (after what is sent,
        when C{gently}).
        """
