"""
Bandwidth shaping for the rules' C{bandwidth} (L{netlog.core.rules}): the
reading of the side the bytes come from is paused, by its L{Gate}, until
the time the bytes already passed take at the rate is up. Nothing is held
back in netlog beyond one read (what the kernel's buffers hold waits
there), and a timer, not a loop, resumes the reading.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IDelayedCall, IReactorTime

from netlog.net.gate import Gate


#: The reason a shaped side's gate holds (see L{Gate}).
SHAPING = "shaping"


class Shaper:
    """
    One direction of one exchange, at C{rate} bytes a second: after each
    read of C{n} bytes passed on, its source is paused until C{n / rate}
    seconds after the bytes before it were paid for.
    """

    def __init__(self, reactor: IReactorTime, rate: int, gate: Gate) -> None:
        self._reactor = reactor
        self._rate = float(rate)
        self._gate = gate
        #: When the bytes passed so far have taken their time.
        self._paidUntil: float | None = None
        self._resume: IDelayedCall | None = None

    def passed(self, size: int) -> None:
        """
        C{size} bytes went on: pause the source while they take their time.
        """
        now = self._reactor.seconds()
        start = now if self._paidUntil is None or self._paidUntil < now else self._paidUntil
        self._paidUntil = start + size / self._rate
        wait = self._paidUntil - now
        if wait <= 0 or self._resume is not None:
            return
        self._gate.hold(SHAPING)
        self._resume = self._reactor.callLater(wait, self._resumed)

    def _resumed(self) -> None:
        self._resume = None
        wait = (self._paidUntil or 0.0) - self._reactor.seconds()
        if wait > 0:
            self._resume = self._reactor.callLater(wait, self._resumed)
            return
        self._gate.release(SHAPING)

    def stop(self) -> None:
        """
        The exchange is over: its source reads freely again (a pooled
        connection carries the next one).
        """
        if self._resume is not None:
            self._resume.cancel()
            self._resume = None
        self._gate.release(SHAPING)


def shaperFor(reactor: IReactorTime, rate: int | None, gate: Any) -> Shaper | None:
    """
    A L{Shaper} for C{gate} at C{rate}, or L{None} for no limit.
    """
    return None if rate is None or gate is None else Shaper(reactor, rate, gate)
