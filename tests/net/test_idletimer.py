"""
Tests of L{netlog.net.idle.IdleTimer}, the one timer of a browser
connection (HTTP/1.1 or HTTP/2), driven by a L{Clock}.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from netlog.net.idle import IdleTimer


class Owner:
    """
    What owns a timer: a deadline it may change, and the times it ticked.
    """

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.deadline: float | None = None
        self.ticks: list[float] = []
        self.timer = IdleTimer(clock, lambda: self.deadline, self.tick)

    def tick(self) -> None:
        self.ticks.append(self.clock.seconds())


class IdleTimerTests(SynchronousTestCase):
    """
    The timer fires by the soonest time it was armed for, never later, and
    not at all once stopped.
    """

    def setUp(self) -> None:
        self.clock = Clock()
        self.owner = Owner(self.clock)

    def test_firesByTheDeadline(self) -> None:
        """
        Armed, the timer fires at the owner's deadline, once.
        """
        self.owner.deadline = 5.0
        self.owner.timer.arm()
        self.clock.advance(4.9)
        self.assertEqual(self.owner.ticks, [])
        self.clock.advance(0.1)
        self.assertEqual(self.owner.ticks, [5.0])
        self.clock.advance(100)
        self.assertEqual(self.owner.ticks, [5.0])

    def test_noDeadline(self) -> None:
        """
        An owner that waits for nothing arms nothing.
        """
        self.owner.timer.arm()
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_soonerNeverLater(self) -> None:
        """
        Armed again, the timer moves to a sooner time, never to a later one
        (activity only moves the deadline; the owner looks again when it
        fires).
        """
        self.owner.deadline = 10.0
        self.owner.timer.arm()
        self.owner.deadline = 20.0
        self.owner.timer.arm()
        self.owner.timer.arm(3.0)
        self.clock.advance(3)
        self.assertEqual(self.owner.ticks, [3.0])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_pastIsNow(self) -> None:
        """
        A time already past fires at once (at the next turn).
        """
        self.clock.advance(10)
        self.owner.timer.arm(4.0)
        self.clock.advance(0)
        self.assertEqual(self.owner.ticks, [10.0])

    def test_cancelThenArm(self) -> None:
        """
        Cancelled, the timer doesn't fire, and can be armed again.
        """
        self.owner.deadline = 5.0
        self.owner.timer.arm()
        self.owner.timer.cancel()
        self.clock.advance(6)
        self.assertEqual(self.owner.ticks, [])
        self.owner.timer.arm()
        self.clock.advance(0)
        self.assertEqual(self.owner.ticks, [6.0])

    def test_stopped(self) -> None:
        """
        Stopped (its owner gone), the timer is disarmed for good.
        """
        self.owner.deadline = 5.0
        self.owner.timer.arm()
        self.owner.timer.stop()
        self.owner.timer.arm()
        self.owner.timer.arm(1.0)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.clock.advance(10)
        self.assertEqual(self.owner.ticks, [])
