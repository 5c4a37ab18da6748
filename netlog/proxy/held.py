"""
An answer source that answers from what netlog holds, not from a server: it
takes the whole request (its body kept, up to L{MAX_REQUEST_BODY}, to answer
by), tells a request that waits for it to go on (C{Expect: 100-continue}),
then hands the exchange its answer's events. A recording
(L{netlog.proxy.replay.RecordedSource}) and a rule's local answer
(L{netlog.proxy.local.LocalSource}) are two.
"""

from __future__ import annotations

from typing import Any, Sequence

from twisted.internet.interfaces import IDelayedCall, IReactorTime
from zope.interface import implementer

from netlog.core.capture import MAX_REQUEST_BODY
from netlog.core.http1 import Body, EndOfMessage, HeadFields, RequestHead, ResponseHead
from netlog.core.replay import CONTINUE_HEAD
from netlog.net.gate import Gate
from netlog.proxy.contracts import IAnswerSink, IAnswerSource
from netlog.proxy.upstream import SentRequest

#: An answer's events, as a held source hands them.
AnswerEvents = Sequence[ResponseHead | Body | EndOfMessage]


@implementer(IAnswerSource)
class HeldSource:
    """
    The shared part of a source that answers from what netlog holds (an
    L{netlog.proxy.contracts.IAnswerSource}); L{answerRequest} says what
    the answer is.

    @ivar exchange: the L{IAnswerSink} answered, or L{None} once done.
    @ivar gate: the answer's producer (nothing to pause: it is handed at once).
    @ivar raw: the exchange relays raw (a replayed WebSocket).
    @ivar head: the request's head.
    @ivar url: the request's URL.
    @ivar fields: the request's fields, read once.
    """

    #: Never pooled: each exchange gets its own.
    pooled = False
    #: Nothing of an answer is ever left pending.
    idle = True

    def __init__(self, reactor: IReactorTime, head: RequestHead, url: str) -> None:
        self.reactor = reactor
        self.head = head
        self.url = url
        self.exchange: IAnswerSink | None = None
        self.gate = Gate(self)
        self.raw = False
        self.fields = HeadFields(head.version, head.headers)
        self._body: list[bytes] = []
        self._bodySize = 0
        #: The request as handed, to forward when there is no answer.
        self._sent: SentRequest | None = None
        self._pending: IDelayedCall | None = None
        self._continuing: IDelayedCall | None = None
        self._ended = False

    # The gate's transport: nothing to pause, the answer is handed at once.
    def pauseProducing(self) -> None:
        pass

    def resumeProducing(self) -> None:
        pass

    def sendHead(self, head: RequestHead, fields: HeadFields, drop: frozenset[bytes] | set[bytes],
                 extra: list[tuple[bytes, bytes]]) -> int:
        """
        Nothing goes anywhere: the request is answered, not sent. A request
        that asks to be told to go on with its body (C{Expect:
        100-continue}) is told at once, unless it is whole by then.
        """
        self._sent = SentRequest(head, fields, drop, extra)
        expect = self.fields.first(b"expect")
        if head.version == b"HTTP/1.1" and expect is not None and expect.strip().lower() == b"100-continue":
            self._continuing = self.reactor.callLater(0, self._continue)
        return 0

    def _continue(self) -> None:
        self._continuing = None
        exchange = self.exchange
        if exchange is not None and not self._ended:
            exchange.answerArrived(self, 0)
            exchange.answerInterim(self, CONTINUE_HEAD)
            exchange.answerSettled(self)

    def _keep(self, event: Body | EndOfMessage) -> None:
        if self._sent is not None and not self._sent.keep(event):
            self._sent = None

    def requestData(self, body: Body) -> int:
        self._keep(body)
        self._bodySize += len(body.data)
        if self._bodySize <= MAX_REQUEST_BODY:
            self._body.append(body.data)
        return 0

    def requestEnded(self, end: EndOfMessage) -> int:
        self._keep(end)
        self._ended = True
        exchange = self.exchange
        if exchange is not None:
            body = b"".join(self._body) if self._bodySize <= MAX_REQUEST_BODY else None
            self._body = []
            self.answerRequest(exchange, body)
        return 0

    def answerRequest(self, exchange: IAnswerSink, body: bytes | None) -> None:
        """
        The whole request is here (C{body}: its body, L{None} when too big
        to keep): answer it (L{handAfter}).
        """
        raise NotImplementedError

    def handAfter(self, wait: float, events: AnswerEvents) -> None:
        """
        Hand the exchange C{events} in C{wait} seconds (0: as the reactor
        next turns).
        """
        self._pending = self.reactor.callLater(wait, self._hand, events)

    def _hand(self, events: AnswerEvents) -> None:
        self._pending = None
        exchange = self.exchange
        if exchange is None:
            return
        exchange.answerArrived(self, sum(len(event.raw) for event in events))
        try:
            for event in events:
                if isinstance(event, ResponseHead):
                    exchange.answerHead(self, event)
                elif isinstance(event, Body):
                    exchange.answerData(self, event)
                else:
                    exchange.answerEnd(self, event)
                if self.exchange is not exchange:
                    return
            self.handed()
        finally:
            exchange.answerSettled(self)

    def handed(self) -> None:
        """
        The events are handed and the exchange goes on (a WebSocket).
        """

    def sendRaw(self, data: bytes) -> None:
        pass

    def attachRequestProducer(self, producer: Any) -> None:
        """
        The request is taken as fast as it comes.
        """

    def detachRequestProducer(self) -> None:
        pass

    def close(self, gently: bool) -> None:
        self.exchange = None
        for pending in (self._pending, self._continuing):
            if pending is not None and pending.active():
                pending.cancel()
        self._pending = self._continuing = None
