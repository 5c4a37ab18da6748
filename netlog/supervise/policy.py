"""
When to start a dead worker again: supervisord's policy as pure logic.

A worker that served a while and died is started again at once. One that dies
quickly (having served less than L{RestartPolicy.quick} seconds, or not at
all) again and again is started after a delay that doubles each time, up to a
ceiling, for ever by default: workers killed from outside in quick succession
are no crash loop, and a proxy whose supervisor gave up refuses every browser.
With L{RestartPolicy.maxQuickDeaths} (C{--give-up-after N}) the supervisor
gives up after that many quick deaths in a row, so that an outer supervisor
(systemd) sees it fail and can fail over.

No clock and no I/O here: the shell says how long each worker served.
"""

from __future__ import annotations

from dataclasses import dataclass

#: A worker that served less than this many seconds died quickly (as
#: supervisord's C{startsecs}).
QUICK_DEATH = 1.0
#: The first delay after a quick death, in seconds.
MIN_DELAY = 0.25
#: The longest delay between starts, in seconds.
MAX_DELAY = 30.0


@dataclass(frozen=True)
class Decision:
    """
    What to do about a dead worker.

    @ivar delay: seconds to wait before starting it again (0: at once).
    @ivar giveUp: start no more workers.
    @ivar quickDeaths: quick deaths in a row so far, this one included.
    """

    delay: float
    giveUp: bool
    quickDeaths: int


class RestartPolicy:
    """
    Decides, death by death, when the next worker starts.
    """

    def __init__(
        self,
        quick: float = QUICK_DEATH,
        minDelay: float = MIN_DELAY,
        maxDelay: float = MAX_DELAY,
        maxQuickDeaths: int | None = None,
    ) -> None:
        """
        @param maxQuickDeaths: quick deaths in a row after which to give up;
            None to never give up.
        """
        if maxQuickDeaths is not None and maxQuickDeaths < 1:
            raise ValueError("maxQuickDeaths must be at least 1")
        self.quick = quick
        self.minDelay = minDelay
        self.maxDelay = maxDelay
        self.maxQuickDeaths = maxQuickDeaths
        self.quickDeaths = 0
        self._delay = 0.0

    def like(self) -> RestartPolicy:
        """
        A policy with the same limits and no deaths yet: each worker slot
        counts its own (see L{netlog.supervise.supervisor.WorkerSlot}).
        """
        return RestartPolicy(self.quick, self.minDelay, self.maxDelay, self.maxQuickDeaths)

    def died(self, lived: float) -> Decision:
        """
        A worker died after serving C{lived} seconds; say when to start the
        next.
        """
        if lived >= self.quick:
            self.quickDeaths = 0
            self._delay = 0.0
            return Decision(0.0, False, 0)
        self.quickDeaths += 1
        if self.maxQuickDeaths is not None and self.quickDeaths >= self.maxQuickDeaths:
            return Decision(0.0, True, self.quickDeaths)
        if self.quickDeaths == 1:
            # At once the first time: one crash is no pattern.
            self._delay = 0.0
        else:
            self._delay = min(max(self._delay * 2, self.minDelay), self.maxDelay)
        return Decision(self._delay, False, self.quickDeaths)
