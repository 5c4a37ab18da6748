"""
L{Coalesced}: many asking at once for one key ask once, and all get the
answer (or the failure).
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from netlog.net.coalesce import Coalesced
from netlog.proxy.mode import MintError


class CoalescedTests(SynchronousTestCase):
    def test_firstAsks(self) -> None:
        """
        The first to wait on a key is told to ask; those after it, until the
        answer, are not; every one of them gets the answer, and the next to
        wait asks again.
        """
        waiting: Coalesced[str, int] = Coalesced()
        a, firstA = waiting.join("a.test")
        b, firstB = waiting.join("a.test")
        c, firstC = waiting.join("b.test")
        self.assertEqual((firstA, firstB, firstC), (True, False, True))
        self.assertEqual(len(waiting), 2)
        waiting.answer("a.test", 1)
        self.assertEqual((self.successResultOf(a), self.successResultOf(b)), (1, 1))
        self.assertNoResult(c)
        d, again = waiting.join("a.test")
        self.assertTrue(again)
        self.assertNoResult(d)

    def test_refuse(self) -> None:
        """
        A refusal fails every caller waiting on that key, and only them;
        C{refuseAll} fails the rest.
        """
        waiting: Coalesced[str, int] = Coalesced()
        a, _ = waiting.join("a.test")
        b, _ = waiting.join("a.test")
        c, _ = waiting.join("b.test")
        waiting.refuse("a.test", MintError("no certificate for a.test"))
        for d in (a, b):
            self.assertEqual(str(self.failureResultOf(d, MintError).value), "no certificate for a.test")
        self.assertNoResult(c)
        waiting.refuseAll(MintError("gone"))
        self.failureResultOf(c, MintError)
        self.assertEqual(len(waiting), 0)
        # Answering a key no one waits on does nothing.
        waiting.answer("c.test", 3)
