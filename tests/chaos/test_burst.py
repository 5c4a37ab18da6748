"""
Chaos with real processes: 4,096 requests, 16 at a time, through a
supervised proxy whose worker is killed with SIGKILL mid-burst, while a
poller reads the log over the API (see L{tests.chaos.burst}).
"""

from __future__ import annotations

import os
import pwd
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.chaos.burst import Burst
from tests.supervise.running import interpreterFor

REQUESTS = 4096
CONCURRENCY = 16


@pytest.mark.slow
class BurstTests(SynchronousTestCase):
    def burst(self, proxy: str, asNobody: bool = False) -> Any:
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        if asNobody:
            # mktemp's folder is made 0700; the log must be readable by nobody.
            os.chmod(os.path.dirname(folder), 0o755)
        burst = Burst(proxy, REQUESTS, CONCURRENCY, kills=1, folder=folder, asNobody=asNobody)
        self.addCleanup(burst.stop)
        report = burst.run()
        self.assertEqual(report.problems, [])
        self.assertEqual(report.errors, [])
        self.assertEqual(report.refused, 0)
        self.assertEqual(report.ok, REQUESTS)
        self.assertEqual(report.polled, report.lines)
        self.assertEqual(len(report.kills), 1)
        return report

    def test_dummy(self) -> None:
        """
        Through the dummy proxy: every line whole JSON, numbers without gap
        or repeat, every open ended, no client refused, every request
        answered (a request cut by the kill is asked once more), and the
        poller saw every line once, in order.
        """
        self.burst("dummy")

    def test_standin(self) -> None:
        """
        The same through the stand-in, with a loopback origin: also, every
        request the origin received is in the log.
        """
        self.burst("standin")

    def test_siteProxy(self) -> None:
        """
        The same through the site proxy, relaying plain HTTP to a live host.
        """
        self.burst("proxy")

    def test_standinAsNobody(self) -> None:
        """
        The same through the stand-in started as root with --uid nobody
        --gid nogroup: the workers run as nobody.
        """
        if os.geteuid() != 0:
            raise self.skipTest("needs root to drop privileges")  # type: ignore[misc]
        nobody = pwd.getpwnam("nobody")
        if interpreterFor(nobody.pw_uid, nobody.pw_gid) is None:
            raise self.skipTest("no Python with this tree's packages that nobody can run")  # type: ignore[misc]
        report = self.burst("standin", asNobody=True)
        self.assertEqual(report.workerUids, [pwd.getpwnam("nobody").pw_uid])
