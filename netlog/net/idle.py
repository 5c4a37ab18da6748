"""
A connection's one timer, whatever it waits for: the HTTP/1.1 and the
HTTP/2 browser connections each keep one (for a request head to end, an
exchange to pass something, a head line to be due, a quiet connection to
close), and so does a blind relay (for its quiet to end it).
"""

from __future__ import annotations

from typing import Callable

from twisted.internet.interfaces import IDelayedCall, IReactorTime


class IdleTimer:
    """
    One timer, fired by the soonest time it was armed for. Activity moves
    nothing: the owner's C{deadline} says when there is next something to
    check, and its C{tick} checks (and arms the timer again while there is
    more to wait for).

    @ivar stopped: the owner is gone: the timer is not armed again.
    """

    __slots__ = ("_reactor", "_deadline", "_tick", "_call", "stopped")

    def __init__(self, reactor: IReactorTime, deadline: Callable[[], float | None],
                 tick: Callable[[], None]) -> None:
        """
        @param deadline: when the owner next has something to check, or
            L{None} when it waits for nothing.
        @param tick: called when that time has come.
        """
        self._reactor = reactor
        self._deadline = deadline
        self._tick = tick
        self._call: IDelayedCall | None = None
        self.stopped = False

    def arm(self, when: float | None = None) -> None:
        """
        Fire by C{when}, or by the owner's deadline when not given: an armed
        timer moves sooner, never later.
        """
        if self.stopped:
            return
        if when is None:
            when = self._deadline()
            if when is None:
                return
        call = self._call
        delay = max(0.0, when - self._reactor.seconds())
        if call is None or not call.active():
            self._call = self._reactor.callLater(delay, self._fire)
        elif call.getTime() > when:
            # A new call rather than reset(): the reactor finds a call
            # moved sooner by a search of its list of every timer (every
            # connection's), and pushes a new one in log time.
            call.cancel()
            self._call = self._reactor.callLater(delay, self._fire)

    def cancel(self) -> None:
        """
        Disarm the timer (until it is armed again).
        """
        call = self._call
        if call is not None and call.active():
            call.cancel()
        self._call = None

    def stop(self) -> None:
        """
        The owner is gone: disarm the timer for good.
        """
        self.stopped = True
        self.cancel()

    def _fire(self) -> None:
        self._call = None
        self._tick()
