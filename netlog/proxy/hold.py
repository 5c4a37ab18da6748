"""
An exchange's hold on its answer source: getting one (the route's own
answers, an idle pooled connection, or a new connection, waiting its turn
while its upstream has as many open as it may), the backpressure
between it and the browser's side with the rules' bandwidth, handing the
request to a new connection, and letting the source go (closed, or back to
the pool).
"""

from __future__ import annotations

from typing import Callable, Protocol

from twisted.python.failure import Failure

from netlog.net.gate import BACKPRESSURE
from netlog.proxy.contracts import IAnswerSink, IAnswerSource, IBrowserStream, IEngine, IResendable, Taken
from netlog.proxy.mode import Answered, Route
from netlog.proxy.relaying import UNSHAPED, Shaping

class IHolder(IAnswerSink, Protocol):
    """
    The exchange a hold works for.
    """

    @property
    def done(self) -> bool: ...


class SourceHold:
    """
    One exchange's answer source, as the exchange holds it.

    @ivar source: the source, or L{None} while there is none.
    @ivar address: the address it connects to, once known.
    @ivar connectedAt: when a new connection was made for it (L{None} when
        reused or none was).
    @ivar shaping: the rules' bandwidth, each way.
    @ivar pending: while it waits its turn for a connection (or makes
        one), what to call once made, when it can't be, and on a crash.
    """

    __slots__ = ("proxy", "browser", "route", "holder", "shaping", "source", "address", "connectedAt", "pending")

    def __init__(self, proxy: IEngine, browser: IBrowserStream, route: Route, holder: IHolder,
                 shaping: Shaping) -> None:
        self.proxy = proxy
        self.browser = browser
        self.route = route
        self.holder: IHolder | None = holder
        self.shaping = shaping
        self.source: IAnswerSource | None = None
        self.address: str | None = None
        self.connectedAt: float | None = None
        self.pending: tuple[Callable[[], None], Callable[[Failure], None], Callable[[Failure], None]] | None = None

    def find(self, answers: Callable[[Answered], IAnswerSource], made: Callable[[], None],
             failed: Callable[[Failure], None], crashed: Callable[[Failure], None]) -> None:
        """
        Get a source; then C{made}, or C{failed} when no connection could
        be made.

        @param answers: the source an L{Answered} route's answers make.
        """
        route = self.route
        if isinstance(route, Answered):
            self._take((answers(route), False, None, None), made)
            return
        idle = self.proxy.takeIdle(route)
        if idle is not None:
            self._take(idle, made)
            return
        self._connect(made, failed, crashed)

    def _connect(self, made: Callable[[], None], failed: Callable[[Failure], None],
                 crashed: Callable[[Failure], None]) -> None:
        """
        A new connection, or a turn in the queue for one (L{slotFree} or
        L{handed} then).
        """
        self.pending = (made, failed, crashed)
        if self.proxy.claim(self.route, self):
            self.slotFree()

    @property
    def sharedStreams(self) -> bool:
        return not self.route.http1Only

    def slotFree(self) -> None:
        assert self.pending is not None
        made, failed, crashed = self.pending
        self.pending = None
        d = self.proxy.upstreamFor(self.route, resolved=self._resolvedTo)
        d.addCallbacks(lambda taken: self._take(taken, made), failed)
        d.addErrback(crashed)

    def handed(self, protocol: IAnswerSource) -> None:
        assert self.pending is not None
        made = self.pending[0]
        self.pending = None
        self._take((protocol, True, getattr(protocol, "address", None) or self.route.host, None), made)

    def _resolvedTo(self, address: str) -> None:
        self.address = address

    def _take(self, taken: Taken, made: Callable[[], None]) -> None:
        """
        Make C{taken} the exchange's source, then C{made}; or, when the
        exchange ended meanwhile (the browser left as we connected), give
        it back to the pool.
        """
        source, reused, address, connectedAt = taken
        holder = self.holder
        if holder is None or holder.done:
            self.proxy.pool.put(source)
            return
        self.source = source
        self.address = address
        self.connectedAt = None if reused else connectedAt
        source.exchange = holder
        source.raw = False
        made()

    def again(self, resend: IResendable, sent: Callable[[int], None], failed: Callable[[Failure], None],
              crashed: Callable[[Failure], None]) -> None:
        """
        Hand the request, as it was handed (C{resend}), to a new
        connection; C{sent} the bytes it took.
        """
        self.detach()
        self.source = None

        def sendAgain() -> None:
            assert self.source is not None
            sent(resend.sendTo(self.source))
            self.attach()

        self._connect(sendAgain, failed, crashed)

    def release(self) -> None:
        """
        The exchange has ended: the hold lets go of it, so that the two,
        which point at each other, are freed as soon as nothing else holds
        them (not by the cyclic collector, once per request); and waits
        its turn no more.
        """
        self.holder = None
        if self.pending is not None:
            self.pending = None
            self.proxy.pool.cancel(self.route.key, self)

    def attach(self) -> None:
        """
        Each side pauses the other's producer while it can't take more;
        the rules' bandwidth paces both.
        """
        source = self.source
        assert source is not None and source.gate is not None
        source.attachRequestProducer(self.browser.gate)
        self.browser.attachAnswerProducer(source.gate)
        if self.shaping is not UNSHAPED:
            self.shaping.attach(self.browser.gate, source.gate)

    def detach(self) -> None:
        if self.shaping is not UNSHAPED:
            self.shaping.stop()
        source = self.source
        if source is None:
            return
        source.detachRequestProducer()
        self.browser.detachAnswerProducer()
        if self.browser.gate.reasons:
            self.browser.gate.release(BACKPRESSURE)
        if source.gate is not None and source.gate.reasons:
            source.gate.release(BACKPRESSURE)

    def drop(self, gently: bool = False) -> None:
        """
        Close the source (after what is sent, when C{gently}).
        """
        source, self.source = self.source, None
        if source is not None:
            source.exchange = None
            source.close(gently)

    def giveBack(self) -> None:
        """
        The source is done with and reusable: back to the pool.
        """
        source, self.source = self.source, None
        if source is not None:
            source.exchange = None
            self.proxy.pool.put(source)
