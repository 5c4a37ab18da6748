"""
The restart policy: at once the first time, doubling delays while a worker
keeps dying quickly, for ever by default, or giving up after a number of
quick deaths in a row when asked to.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.supervise.policy import MAX_DELAY, RestartPolicy


class RestartPolicyTests(SynchronousTestCase):
    def test_longLivedAtOnce(self) -> None:
        """
        A worker that ran longer than the quick threshold is started again at
        once, however often that happens.
        """
        policy = RestartPolicy(quick=5, minDelay=0.25, maxDelay=8, maxQuickDeaths=3)
        for _ in range(10):
            decision = policy.died(60)
            self.assertEqual((decision.delay, decision.giveUp, decision.quickDeaths), (0.0, False, 0))

    def test_quickDeathsTable(self) -> None:
        """
        Quick deaths in a row: at once, then 0.25, 0.5, 1, 2 s (doubling),
        capped at the ceiling, then giving up at the limit.
        """
        policy = RestartPolicy(quick=5, minDelay=0.25, maxDelay=1.0, maxQuickDeaths=7)
        got = [(d.delay, d.giveUp) for d in (policy.died(0.1) for _ in range(7))]
        self.assertEqual(
            got,
            [(0.0, False), (0.25, False), (0.5, False), (1.0, False), (1.0, False), (1.0, False), (0.0, True)],
        )

    def test_longLifeResets(self) -> None:
        """
        A worker that lived long after quick deaths resets the count and the
        delay: its next quick death is again restarted at once.
        """
        policy = RestartPolicy(quick=5, minDelay=0.25, maxDelay=8, maxQuickDeaths=3)
        policy.died(1)
        self.assertEqual(policy.died(1).delay, 0.25)
        self.assertEqual(policy.died(100).quickDeaths, 0)
        self.assertEqual(policy.died(1).delay, 0.0)
        self.assertEqual(policy.died(1).delay, 0.25)
        self.assertTrue(policy.died(1).giveUp)

    def test_neverGivesUpByDefault(self) -> None:
        """
        By default quick deaths never make it give up: the delay doubles up
        to 30 s and stays there.
        """
        self.assertEqual(MAX_DELAY, 30.0)
        policy = RestartPolicy()
        decisions = [policy.died(0.0) for _ in range(200)]
        self.assertFalse(any(d.giveUp for d in decisions))
        self.assertEqual(
            [d.delay for d in decisions[:10]], [0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
        )
        self.assertEqual(max(d.delay for d in decisions), 30.0)
        self.assertEqual(decisions[-1].quickDeaths, 200)

    def test_refusesNoDeaths(self) -> None:
        """
        A policy that would give up before any death is a mistake.
        """
        self.assertRaises(ValueError, RestartPolicy, maxQuickDeaths=0)

    @given(st.lists(st.floats(min_value=0, max_value=100), max_size=50))
    def test_bounds(self, lifetimes: list[float]) -> None:
        """
        Whatever the lifetimes: delays stay within [0, ceiling], it gives up
        exactly when the quick deaths in a row reach the limit, and never
        after a long life.
        """
        policy = RestartPolicy(quick=5, minDelay=0.25, maxDelay=8, maxQuickDeaths=4)
        inRow = 0
        for lived in lifetimes:
            decision = policy.died(lived)
            inRow = 0 if lived >= 5 else inRow + 1
            self.assertTrue(0 <= decision.delay <= 8)
            self.assertEqual(decision.quickDeaths, inRow)
            self.assertEqual(decision.giveUp, inRow >= 4)
            if decision.giveUp:
                break
