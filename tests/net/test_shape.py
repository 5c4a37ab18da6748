"""
Bandwidth shaping (L{netlog.net.shape}): the source's reading is paused by
a timer, never a loop, for the time the bytes passed take at the rate.
"""

from __future__ import annotations

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from netlog.net.gate import BACKPRESSURE, Gate
from netlog.net.shape import SHAPING, Shaper, shaperFor


class _Transport:
    def __init__(self) -> None:
        self.paused = False
        self.pauses = 0

    def pauseProducing(self) -> None:
        self.paused = True
        self.pauses += 1

    def resumeProducing(self) -> None:
        self.paused = False


class ShaperTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.clock = Clock()
        self.transport = _Transport()
        self.gate = Gate(self.transport)
        self.shaper = Shaper(self.clock, 1000, self.gate)

    def test_pausesForTheBytesTime(self) -> None:
        """
        After 500 bytes at 1000 a second the source is paused half a second,
        by one timer.
        """
        self.shaper.passed(500)
        self.assertTrue(self.transport.paused)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)
        self.clock.advance(0.499)
        self.assertTrue(self.transport.paused)
        self.clock.advance(0.001)
        self.assertFalse(self.transport.paused)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_rateOverManyReads(self) -> None:
        """
        Reads that come while paused (already read) are paid for after the
        ones before: 10 reads of 1000 bytes at 1000 a second take 10 s
        (9 s until the last read is passed on, and a second for it).
        """
        times = []
        for _ in range(10):
            self.untilResumed()
            times.append(self.clock.seconds())
            self.shaper.passed(1000)
        self.untilResumed()
        self.assertAlmostEqual(times[-1], 9.0)
        self.assertAlmostEqual(self.clock.seconds(), 10.0)
        self.assertEqual(self.transport.pauses, 10)

    def untilResumed(self) -> None:
        while self.transport.paused:
            [call] = self.clock.getDelayedCalls()
            self.clock.advance(call.getTime() - self.clock.seconds())

    def test_idleTimeIsNotCredit(self) -> None:
        """
        Time the source sent nothing is not saved up for a burst beyond one
        read.
        """
        self.shaper.passed(1000)
        self.clock.advance(30)
        self.assertFalse(self.transport.paused)
        self.shaper.passed(1000)
        self.assertTrue(self.transport.paused)

    def test_otherReasonsKept(self) -> None:
        """
        Backpressure that holds when the shaping ends keeps the source
        paused.
        """
        self.shaper.passed(1000)
        self.gate.hold(BACKPRESSURE)
        self.clock.advance(1)
        self.assertTrue(self.transport.paused)
        self.gate.release(BACKPRESSURE)
        self.assertFalse(self.transport.paused)

    def test_stop(self) -> None:
        """
        Stopping releases the source at once and cancels the timer.
        """
        self.shaper.passed(5000)
        self.shaper.stop()
        self.assertFalse(self.transport.paused)
        self.assertNotIn(SHAPING, self.gate.reasons)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_noLimit(self) -> None:
        """
        No rate, no shaper.
        """
        self.assertIsNone(shaperFor(self.clock, None, self.gate))
        self.assertIsInstance(shaperFor(self.clock, 1024, self.gate), Shaper)
