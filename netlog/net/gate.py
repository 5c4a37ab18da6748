"""
The gate on a transport's reading: paused while any reason holds (the peer
can't take more, a connection is being made, an answer is awaited). The relay,
the kernel relay and the engine's connections all hold it.
"""

from __future__ import annotations

from typing import Any

from zope.interface import implementer
from twisted.internet.interfaces import IPushProducer


#: Why a producer is paused for backpressure (see L{Gate}).
BACKPRESSURE = "backpressure"


@implementer(IPushProducer)
class Gate:
    """
    Pauses a transport's reading while any reason holds: the peer's write
    buffer is full (C{backpressure}, through L{IPushProducer}), a connection is
    being made, an answer is awaited. A transport's own pause is not counted,
    so two reasons must not pause and resume it behind each other's back.
    """

    def __init__(self, transport: Any) -> None:
        self.transport = transport
        self.reasons: set[str] = set()

    def hold(self, reason: str) -> None:
        if not self.reasons:
            self.transport.pauseProducing()
        self.reasons.add(reason)

    def release(self, *reasons: str) -> None:
        """
        These reasons hold no more; reading resumes once none does.
        """
        held = self.reasons
        if not held:
            return
        held.difference_update(reasons)
        if not held:
            self.transport.resumeProducing()

    @property
    def paused(self) -> bool:
        return bool(self.reasons)

    # IPushProducer, for the peer transport's backpressure.
    def pauseProducing(self) -> None:
        self.hold(BACKPRESSURE)

    def resumeProducing(self) -> None:
        self.release(BACKPRESSURE)

    def stopProducing(self) -> None:
        """
        The consumer is going away; whoever owns the relay closes this side.
        """


class StreamsProducer:
    """
    A connection that carries many streams, as its transport's producer:
    the transport's buffer full pauses every stream's producer (what feeds
    it); emptied, resumes those with nothing of their own waiting.

    @ivar streams: the streams, each with a C{producer} (or L{None}).
    @ivar paused: the transport's buffer is full.
    """

    streams: dict[int, Any]
    paused: bool

    def streamWaits(self, stream: Any) -> bool:
        """
        Whether C{stream} has bytes of its own waiting (its producer stays
        paused).
        """
        raise NotImplementedError

    def pauseProducing(self) -> None:
        self.paused = True
        for stream in self.streams.values():
            if stream.producer is not None:
                stream.producer.pauseProducing()

    def resumeProducing(self) -> None:
        self.paused = False
        for stream in list(self.streams.values()):
            if stream.producer is not None and not self.streamWaits(stream):
                stream.producer.resumeProducing()

    def stopProducing(self) -> None:
        """
        The transport is going away; its C{connectionLost} ends the streams.
        """
