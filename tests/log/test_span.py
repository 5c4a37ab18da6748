"""
Exporting part of a rotated series: C{netlog har --from/--to} by line
number or by time, each exchange whole, reading only the segments that
hold the lines asked for.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
from datetime import datetime, timezone
from typing import Any, cast

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.linerange import Bound, numberOf, parseBound, pastLast
from netlog.core.segments import Rotation
from netlog.har.export import writeHar
from netlog.log.series import listing, segmentPath
from netlog.log.span import lineAtTime, openSeriesRange, resolveRange
from netlog.log.writer import LogWriter

from tests.support import netlogArgv, sourceEnv

from .test_rotation import WAIT, seriesLines
from .test_writer import publicTempDir

#: When the test logs' first line is written (2026-12-05T00:00:00Z).
T0 = 1796428800.0


class BoundTests(SynchronousTestCase):
    def test_parse(self) -> None:
        """
        Digits are a line number; anything else is read as an ISO 8601 time,
        with its offset, or in local time when it names none.
        """
        self.assertEqual(parseBound("41823"), Bound(line=41823))
        self.assertEqual(parseBound(" 7 "), Bound(line=7))
        self.assertEqual(parseBound("2026-12-05T00:00:00Z"), Bound(time=T0))
        self.assertEqual(parseBound("2026-12-05T01:00+01:00"), Bound(time=T0))
        self.assertEqual(parseBound("2026-12-05 00:00:30.5+00:00"), Bound(time=T0 + 30.5))
        local = datetime(2026, 12, 5, 10, 0).astimezone().timestamp()
        self.assertEqual(parseBound("2026-12-05T10:00"), Bound(time=local))
        for bad in ("", "-3", "yesterday", "12h", "2026-13-01"):
            self.assertRaises(ValueError, parseBound, bad)

    def test_numberOf(self) -> None:
        """
        A line's number from the start netlog writes it with; None for any
        other start.
        """
        self.assertEqual(numberOf(b'{"n":42,"type":"open"}\n'), 42)
        self.assertEqual(numberOf(b'{"n":42}\n'), 42)
        self.assertIsNone(numberOf(b'{"type":"open","n":42}\n'))
        self.assertIsNone(numberOf(b'{"n":"42"}\n'))

    def test_pastLast(self) -> None:
        """
        Past the range's last line, the later lines of exchanges opened in
        it are kept, nothing else; the first line written once all of them
        ended is the last one read.
        """
        table: list[tuple[dict[str, Any], tuple[bool, bool]]] = [
            ({"n": 11, "type": "end", "id": 9, "open_from": 10}, (True, False)),
            ({"n": 11, "type": "message", "id": 9, "open_from": 9}, (True, False)),
            ({"n": 11, "type": "end", "id": 9, "open_from": 12}, (True, True)),
            ({"n": 12, "type": "open", "id": 12, "open_from": 12}, (False, True)),
            ({"n": 12, "type": "open", "id": 12, "open_from": 3}, (False, False)),
            ({"n": 13, "type": "end", "id": 12, "open_from": 3}, (False, False)),
            ({"n": 13, "type": "end", "id": 10}, (True, False)),
            ({"n": 13, "type": "end", "id": True, "open_from": True}, (False, False)),
        ]
        for record, expected in table:
            self.assertEqual(pastLast(record, 10), expected, record)


class _Series(SynchronousTestCase):
    """
    A rotated log written with a clock that says one second per line from
    L{T0}; each closed segment's file is dated when its last line was
    written, as the writer leaves it.
    """

    def setUp(self) -> None:
        self.folder = publicTempDir(self)
        self.path = os.path.join(self.folder, "network.jsonl")
        self.now = T0 - 1
        self.log = LogWriter(self.path, rotation=Rotation(size=4000), clock=self.tick)
        self.log.startService()
        self.addCleanup(lambda: self.log.running and self.log.stopService())
        self.addCleanup(self.log.waitForHousekeeping, WAIT)

    def tick(self) -> float:
        self.now += 1
        return self.now

    def exchange(self, i: int) -> int:
        exchangeId = self.log.open({"url": f"http://a.test/{i}", "pad": "p" * 100})
        self.log.end(exchangeId, {"status": 200})
        return exchangeId

    def closed(self) -> list[tuple[Any, int]]:
        """
        Each closed segment with its last line (the next one's first less
        one, or the live file's).
        """
        segments = listing(self.path).segments
        with open(self.path, "rb") as f:
            liveFirst = int(json.loads(f.readline())["n"])
        nexts = [s.first for s in segments[1:]] + [liveFirst]
        return [(segment, following - 1) for segment, following in zip(segments, nexts)]

    def settle(self) -> list[dict[str, Any]]:
        """
        Wait for compression, date the closed segments, and return every
        line of the series.
        """
        self.assertTrue(self.log.waitForHousekeeping(WAIT))
        lines = seriesLines(self.path)
        times = {r["n"]: r["time"] for r in lines}
        for segment, last in self.closed():
            os.utime(segmentPath(self.path, segment), (times[last], times[last]))
        return lines

    def spoil(self, keep: range) -> list[str]:
        """
        Overwrite every closed segment holding no line of C{keep} with
        bytes no reader can use: an export that opened one would fail.
        """
        spoiled = []
        for segment, last in self.closed():
            if last < keep.start or segment.first >= keep.stop:
                where = segmentPath(self.path, segment)
                stat = os.stat(where)
                with open(where, "wb") as f:
                    f.write(b"not zstandard at all\n")
                os.utime(where, ns=(stat.st_atime_ns, stat.st_mtime_ns))
                spoiled.append(segment.name)
        return spoiled

    def har(self, *args: str) -> dict[str, Any]:
        done = subprocess.run(netlogArgv() + ["har", self.path, *args], capture_output=True, env=sourceEnv(),
                              timeout=WAIT)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.stderr = done.stderr
        return cast(dict[str, Any], json.loads(done.stdout))

    def entries(self, lines: tuple[int, int | None] | None) -> list[dict[str, Any]]:
        out = io.BytesIO()
        writeHar(self.path, out, lines=lines)
        return cast(list[dict[str, Any]], json.loads(out.getvalue())["log"]["entries"])


class LineRangeTests(_Series):
    def test_range(self) -> None:
        """
        --from N --to M exports the exchanges whose open line is within
        N..M, each whole, equal to those entries of the whole series'
        HAR; only the segments holding lines N to M (and the line after
        them that says all had ended) are opened: the others are spoiled
        and the export still succeeds.
        """
        for i in range(200):
            self.exchange(i)
        lines = self.settle()
        self.assertEqual([r["n"] for r in lines], list(range(1, 401)))
        whole = self.har()["log"]["entries"]
        self.assertEqual(len(whole), 200)
        spoiled = self.spoil(range(101, 202))
        self.assertGreaterEqual(len(spoiled), 6)
        part = self.har("--from", "101", "--to", "200")["log"]
        self.assertEqual(part["entries"], [e for e in whole if 101 <= e["_id"] <= 200])
        self.assertEqual(len(part["entries"]), 50)
        self.assertEqual(part["_unreadable"], 0)

    def test_wholeExchanges(self) -> None:
        """
        An exchange opened in the range and ended segments later comes
        whole (not _open); one opened before --from, or after --to even
        while the range's exchange is still going, is not in the export.
        """
        before = self.log.open({"url": "http://a.test/before"})
        first = self.exchange(0)
        long = self.log.open({"url": "http://a.test/long"})
        for i in range(60):
            self.exchange(i)
        self.log.end(before, {"status": 204})
        last = self.exchange(61)
        for i in range(60):
            self.exchange(i)
        self.log.end(long, {"status": 201})
        after = self.exchange(99)
        self.settle()
        self.assertGreaterEqual(len(listing(self.path).segments), 5)
        whole = self.entries(None)
        part = self.entries((first, last + 1))
        ids = [e["_id"] for e in part]
        self.assertIn(long, ids)
        self.assertNotIn(before, ids)
        self.assertNotIn(after, ids)
        self.assertEqual(ids, [e["_id"] for e in whole if first <= e["_id"] <= last + 1])
        self.assertEqual(part, [e for e in whole if e["_id"] in ids])
        (longEntry,) = [e for e in part if e["_id"] == long]
        self.assertNotIn("_open", longEntry)

    def test_openEnded(self) -> None:
        """
        --from alone runs to the series' end, live file included; --to
        alone starts at its first line; a --from older than the oldest
        line kept starts there and says so; --from after --to is refused.
        """
        for i in range(150):
            self.exchange(i)
        self.settle()
        whole = self.entries(None)
        self.assertEqual(self.entries((251, None)), [e for e in whole if e["_id"] >= 251])
        self.assertEqual(self.har("--to", "40")["log"]["entries"], [e for e in whole if e["_id"] <= 40])
        os.unlink(segmentPath(self.path, listing(self.path).segments[0]))
        oldest = listing(self.path).segments[0].first
        self.assertEqual(self.har("--from", "3", "--to", "200")["log"]["entries"],
                         [e for e in whole if oldest <= e["_id"] <= 200])
        self.assertIn(f"lines 3 to {oldest - 1} are no longer kept".encode(), self.stderr)
        done = subprocess.run(netlogArgv() + ["har", self.path, "--from", "9", "--to", "5"], capture_output=True,
                              env=sourceEnv(), timeout=WAIT)
        self.assertEqual((done.returncode, done.stdout), (1, b""))
        self.assertIn(b"--from 9 is after --to 5", done.stderr)
        done = subprocess.run(netlogArgv() + ["har", self.path, "--from", "noon"], capture_output=True,
                              env=sourceEnv(), timeout=WAIT)
        self.assertEqual(done.returncode, 1)
        self.assertIn(b"neither a line number", done.stderr)


def iso(when: float) -> str:
    return datetime.fromtimestamp(when, timezone.utc).isoformat()


class TimeRangeTests(_Series):
    def test_times(self) -> None:
        """
        --from and --to as ISO 8601 times export the exchanges whose open
        line was written then (inclusive), reading no segment that ended
        before --from.
        """
        for i in range(200):
            self.exchange(i)
        lines = self.settle()
        times = {r["n"]: r["time"] for r in lines}
        whole = self.entries(None)
        self.assertEqual(lineAtTime(self.path, times[121], True), 121)
        self.assertEqual(lineAtTime(self.path, times[121] - 0.5, True), 121)
        self.assertEqual(lineAtTime(self.path, times[300] + 0.5, False), 300)
        self.assertEqual(lineAtTime(self.path, times[400] + 5, True), None)
        self.assertEqual(lineAtTime(self.path, T0 - 5, False), None)
        self.assertEqual(resolveRange(self.path, Bound(time=times[121]), Bound(time=times[299])), (121, 299))
        self.spoil(range(121, 400))
        part = self.har("--from", iso(times[121]), "--to", iso(times[299]))["log"]["entries"]
        self.assertEqual(part, [e for e in whole if 121 <= e["_id"] <= 299])
        # no line written in the times asked: no entry
        self.assertEqual(self.har("--from", iso(times[400] + 60))["log"]["entries"], [])

    def test_rangeFileStartsAtFirst(self) -> None:
        """
        The file an export reads begins at line --from, wherever in its
        segment that is.
        """
        for i in range(100):
            self.exchange(i)
        self.settle()
        fd = openSeriesRange(self.path, 77, 90)
        with os.fdopen(fd, "rb") as f:
            numbers = [json.loads(line)["n"] for line in f]
        self.assertEqual(numbers, list(range(77, 91)))
