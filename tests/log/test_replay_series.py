"""
Replay reads a rotated recording whole: C{--replay} given the live log's
name indexes and serves the exchanges of every segment, compressed or not.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.replay import MatchRules, requestKey
from netlog.core.segments import Rotation
from netlog.log.series import listing
from netlog.log.writer import LogWriter
from netlog.proxy.replay import Replay
from tests.core.test_replay import onTheWire

from .test_exchange_segments import ended, opened
from .test_rotation import WAIT
from .test_writer import publicTempDir


class ReplaySeriesTests(SynchronousTestCase):
    def test_wholeSeries(self) -> None:
        """
        Every exchange of a log in ten compressed segments and the live file
        is indexed and answered with its recorded body, the oldest segment's
        first exchange among them.
        """
        path = os.path.join(publicTempDir(self), "network.jsonl")
        writer = LogWriter(path, rotation=Rotation(size=4000))
        writer.startService()
        self.addCleanup(lambda: writer.running and writer.stopService())
        for i in range(100):
            exchangeId = writer.open(opened(i))
            writer.end(exchangeId, ended(i))
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        writer.stopService()
        segments = listing(path).segments
        self.assertGreaterEqual(len(segments), 10)
        self.assertTrue(all(s.compressed for s in segments))
        rules = MatchRules()
        replay = Replay(path, rules)
        self.assertEqual(len(replay.index), 100)
        for i in (0, 1, 50, 99):
            found = replay.index.match(requestKey("GET", f"https://shop.test/item/{i}", rules), None,
                                       replay.answerFor)
            assert found is not None, i
            page = onTheWire(found[1], b"GET")
            self.assertTrue(page.startswith(b"HTTP/1.1 200 OK\r\n"), page)
            self.assertTrue(page.endswith(b"\r\n\r\n2\r\nok\r\n0\r\n\r\n"), page)
