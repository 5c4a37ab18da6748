"""
A log in segments, on real files: the writer closes, compresses and removes
segments; readers page across them, compressed or not; a writer started
again numbers on from the segments.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from typing import Any, cast

import zstandard
from twisted.internet.task import Clock
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import REASON_RESTARTED, decodeLine
from netlog.core.segments import Rotation, segmentName
from netlog.log.reader import LogReader
from netlog.log.series import compressSegment, listing, segmentPath, tidy
from netlog.log import series as seriesModule
from netlog.log import writer as writerModule
from netlog.log.cut import CUT_CHECK_INTERVAL, WRITTEN_AGAIN_WITHIN
from netlog.log.writer import LogWriter

from tests.support import netlogArgv, sourceEnv

from .test_writer import publicTempDir, readLines

#: Seconds a test waits for the background compression at most.
WAIT = 30.0


def seriesLines(path: str, killed: bool = False) -> list[dict[str, Any]]:
    """
    Every line of the log at C{path}, its closed segments first.

    @param killed: whether writers of the log were killed (SIGKILL): a
        line a kill cut short is then kept, ended with a newline by the
        next start, which gives its number again (see L{LogWriter}); such
        lines are checked to be just that, and left out.
    """
    for _ in range(5):
        data = b""
        try:
            for segment in listing(path).segments:
                with open(segmentPath(path, segment), "rb") as f:
                    raw = f.read()
                data += zstandard.ZstdDecompressor().decompressobj().decompress(raw) if segment.compressed else raw
        except FileNotFoundError:
            # Compressed meanwhile by the writer's thread.
            continue
        break
    try:
        with open(path, "rb") as f:
            data += f.read()
    except FileNotFoundError:
        # A writer killed between closing a segment and opening the next
        # leaves no live file (until it starts again): the segments hold
        # every line.
        if not (killed and data):
            raise
    lines = data.splitlines()
    records = [decodeLine(line) for line in lines]
    for i, record in enumerate(records):
        if record is None:
            assert killed, f"an undecodable line in a log no kill cut: {lines[i][:200]!r}"
            after = next((r for r in records[i + 1 :] if r is not None), None)
            assert after is not None, f"a cut line with no line after it: {lines[i][:200]!r}"
            again = b'{"n":%d,' % (after["n"],)
            assert (again.startswith(lines[i]) or lines[i].startswith(again)) and not lines[i].endswith(b"}"), (
                f"an undecodable line that is not a cut line whose number {after['n']} was given again: "
                f"{lines[i][:200]!r}"
            )
    return [r for r in records if r is not None]


def readAll(reader: LogReader, after: int = 0, limit: int = 1000) -> tuple[list[int], list[Any]]:
    """
    Page through the log from C{after} to its end: the numbers read, and
    the pages.
    """
    numbers: list[int] = []
    pages = []
    for _ in range(10000):
        page = reader.read(after, limit)
        pages.append(page)
        if not page.lines:
            return numbers, pages
        numbers.extend(r["n"] for r in page.records())
        after = page.next
    raise AssertionError("the log never ended")


class _Logs(SynchronousTestCase):
    """
    A log path in a fresh folder, and writers on it.
    """

    def setUp(self) -> None:
        self.folder = publicTempDir(self)
        self.path = os.path.join(self.folder, "network.jsonl")

    def writer(self, rotation: Rotation, clock: Clock | None = None) -> LogWriter:
        writer = LogWriter(self.path, reactor=cast(Any, clock), rotation=rotation)
        writer.startService()
        self.addCleanup(lambda: writer.running and writer.stopService())
        self.addCleanup(writer.waitForHousekeeping, WAIT)
        return writer

    def fill(self, writer: LogWriter, exchanges: int) -> None:
        for i in range(exchanges):
            exchangeId = writer.open({"url": f"http://a.test/{i}", "pad": "p" * 100})
            writer.end(exchangeId, {"status": 200})


class RotationTests(_Logs):
    def test_bySize(self) -> None:
        """
        With --rotate-size, the live file is closed once it holds that much:
        closed segments are named after their first line, all compressed,
        and together with the live file hold every line once, in order.
        """
        writer = self.writer(Rotation(size=4000))
        self.fill(writer, 200)
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        found = listing(self.path)
        self.assertGreaterEqual(len(found.segments), 10)
        self.assertTrue(all(s.compressed for s in found.segments))
        self.assertEqual(found.toCompress, ())
        self.assertEqual([n for n in os.listdir(self.folder) if n.endswith(".tmp")], [])
        self.assertEqual([r["n"] for r in seriesLines(self.path)], list(range(1, 401)))
        for segment in found.segments:
            with open(segmentPath(self.path, segment), "rb") as f:
                text = zstandard.ZstdDecompressor().decompressobj().decompress(f.read())
            self.assertEqual(decodeLine(text.split(b"\n", 1)[0])["n"], segment.first)  # type: ignore[index]
            self.assertGreaterEqual(len(text), 4000)
            self.assertEqual(os.stat(segmentPath(self.path, segment)).st_mode & 0o777, 0o644)

    def test_readAcross(self) -> None:
        """
        A reader pages through every segment from any cursor, seeing each
        line once and in order, whether the segments are compressed yet or
        not; a cursor past the log's end is the log begun again.
        """
        writer = self.writer(Rotation(size=4000))
        self.fill(writer, 150)
        numbers, pages = readAll(LogReader(self.path), 0, 1500)
        self.assertEqual(numbers, list(range(1, 301)))
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        for after in (0, 1, 57, 99, 150, 299):
            numbers, pages = readAll(LogReader(self.path), after, 700)
            self.assertEqual(numbers, list(range(after + 1, 301)), after)
            self.assertFalse(any(p.begunAgain or p.removedUpTo for p in pages))
        page = LogReader(self.path).read(500)
        self.assertTrue(page.begunAgain)
        self.assertEqual(page.records()[0]["n"], 1)

    def test_followAcrossRotation(self) -> None:
        """
        One reader following the log while it rotates sees every line once,
        and never a page that says begun again.
        """
        writer = self.writer(Rotation(size=3000))
        reader = LogReader(self.path)
        seen: list[int] = []
        cursor = 0
        for _ in range(40):
            self.fill(writer, 7)
            for _ in range(10):
                page = reader.read(cursor, 900)
                self.assertFalse(page.begunAgain)
                self.assertIsNone(page.removedUpTo)
                seen.extend(r["n"] for r in page.records())
                cursor = page.next
        seen.extend(readAll(reader, cursor)[0])
        self.assertEqual(seen, list(range(1, 561)))

    def test_keepSegments(self) -> None:
        """
        --keep-segments 3 leaves three closed segments and the live one; a
        cursor into a removed segment reads on from the oldest line kept,
        and is told where the log now begins.
        """
        writer = self.writer(Rotation(size=4000, keepSegments=3))
        self.fill(writer, 200)
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        writer.stopService()
        found = listing(self.path)
        self.assertEqual(len(found.segments), 3)
        oldest = found.segments[0].first
        page = LogReader(self.path).read(5, 10**6)
        self.assertEqual((page.begunAgain, page.removedUpTo), (False, oldest - 1))
        self.assertEqual(page.records()[0]["n"], oldest)
        self.assertIn(b'"removed_up_to":%d' % (oldest - 1), page.envelope())
        numbers, _ = readAll(LogReader(self.path), oldest - 1)
        self.assertEqual(numbers, list(range(oldest, 401)))
        done = subprocess.run(netlogArgv() + ["read", self.path, "--after", "5", "--limit", "1"],
                              capture_output=True, env=sourceEnv(), timeout=WAIT)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout)["n"], oldest)
        self.assertIn(f"the lines up to {oldest - 1} are no longer kept".encode(), done.stderr)

    def test_keepFor(self) -> None:
        """
        --keep-for removes closed segments last written longer ago.
        """
        writer = self.writer(Rotation(size=4000))
        self.fill(writer, 50)
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        old = listing(self.path).segments
        for segment in old:
            os.utime(segmentPath(self.path, segment), (1000, 1000))
        self.fill(writer, 50)
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        removed = tidy(self.path, None, 3600.0, time.time())
        self.assertEqual(sorted(removed), [segmentPath(self.path, s) for s in old])
        self.assertEqual(tidy(self.path, None, 3600.0, time.time()), [])
        kept = listing(self.path).segments
        self.assertTrue(kept)
        self.assertFalse(set(old) & set(kept))

    def test_byTime(self) -> None:
        """
        With --rotate-every, the live file is closed on time, and not when
        it has no line.
        """
        clock = Clock()
        writer = self.writer(Rotation(every=60.0), clock)
        self.fill(writer, 3)
        clock.advance(59)
        self.assertEqual(listing(self.path).segments, ())
        clock.advance(1)
        self.assertEqual([s.first for s in listing(self.path).segments], [1])
        clock.advance(60)
        self.assertEqual(len(listing(self.path).segments), 1)
        self.fill(writer, 1)
        clock.advance(60)
        self.assertEqual([s.first for s in listing(self.path).segments], [1, 7])
        self.assertTrue(writer.waitForHousekeeping(WAIT))

    def test_restart(self) -> None:
        """
        A writer started again on a log whose live file is empty (just
        rotated) or missing (killed between closing one segment and opening
        the next) numbers on after the last closed segment, and ends the
        exchanges left open in earlier segments.
        """
        writer = self.writer(Rotation())
        self.fill(writer, 3)
        left = writer.open({"url": "http://a.test/open"})
        self.assertTrue(writer.rotate())
        writer._closing = True
        os.close(cast(int, writer._fd))
        writer._fd = None
        writer.running = False
        again = self.writer(Rotation())
        self.assertEqual(again.nextNumber, 9)
        lines = seriesLines(self.path)
        self.assertEqual(lines[-1]["id"], left)
        self.assertEqual(lines[-1]["_failed"]["reason"], REASON_RESTARTED)
        again.stopService()
        self.assertTrue(again.rotate() is False)
        os.rename(self.path, segmentPath(self.path, segmentName("network.jsonl", 8)))
        third = self.writer(Rotation())
        self.assertEqual(third.nextNumber, 9)
        self.assertEqual([r["n"] for r in seriesLines(self.path)], list(range(1, 9)))

    def test_readKilledBetweenSegments(self) -> None:
        """
        A log whose writer was killed between closing a segment and opening
        the next has no live file: its lines are read from the segments,
        whole, by a reader, and one that read them all is told nothing
        else (not that the log began again).
        """
        writer = self.writer(Rotation())
        self.fill(writer, 3)
        self.assertTrue(writer.rotate())
        self.fill(writer, 2)
        writer.stopService()
        os.rename(self.path, segmentPath(self.path, segmentName("network.jsonl", 7)))
        self.assertFalse(os.path.exists(self.path))
        numbers = [r["n"] for r in seriesLines(self.path, killed=True)]
        self.assertEqual(numbers, list(range(1, 11)))
        reader = LogReader(self.path)
        self.assertEqual(readAll(reader)[0], numbers)
        page = reader.read(10)
        self.assertEqual((page.lines, page.next, page.begunAgain, page.removedUpTo), ([], 10, False, None))
        with self.assertRaises(FileNotFoundError):
            seriesLines(self.path)

    def test_halfCompressed(self) -> None:
        """
        What a kill during compression leaves is finished by the next
        pass: a partial copy is dropped and the segment compressed again;
        a reader meanwhile reads the uncompressed segment.
        """
        writer = self.writer(Rotation())
        self.fill(writer, 5)
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        writer._tidy = lambda: None  # type: ignore[method-assign]
        self.assertTrue(writer.rotate())
        plain = segmentPath(self.path, segmentName("network.jsonl", 1))
        with open(plain + ".zst.tmp", "wb") as f:
            f.write(b"\x28\xb5\x2f\xfd cut")
        self.assertEqual(readAll(LogReader(self.path))[0], list(range(1, 11)))
        tidy(self.path, None, None, 0.0)
        self.assertEqual(sorted(os.listdir(self.folder)), ["network.000000000001.jsonl.zst", "network.jsonl"])
        self.assertEqual(readAll(LogReader(self.path))[0], list(range(1, 11)))


    def test_twoWritersCompress(self) -> None:
        """
        A second writer of one log in this process (one started again
        beside the first) asks to compress a segment while the first's
        thread is compressing it: it leaves it to the first, whose partial
        copy is neither cut short nor renamed half written, and readers
        never see the segment missing.
        """
        writer = self.writer(Rotation())
        self.fill(writer, 5)
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        writer._tidy = lambda: None  # type: ignore[method-assign]
        self.assertTrue(writer.rotate())
        segment = listing(self.path).toCompress[0]
        compressInto = seriesModule._compressInto
        second: list[str | None] = []

        def secondArrives(source: str, partial: str) -> None:
            compressInto(source, partial)
            if second:
                return  # the second writer's own (were it let in)
            size = os.path.getsize(partial)
            second.append("arrived")
            second.append(compressSegment(self.path, segment))
            self.assertEqual(os.path.getsize(partial), size)
            self.assertEqual(readAll(LogReader(self.path))[0], list(range(1, 11)))

        self.patch(seriesModule, "_compressInto", secondArrives)
        compressSegment(self.path, segment)
        self.assertEqual(second, ["arrived", None])
        self.assertEqual(sorted(os.listdir(self.folder)), ["network.000000000001.jsonl.zst", "network.jsonl"])
        self.assertEqual(readAll(LogReader(self.path))[0], list(range(1, 11)))


class OutsideRotationTests(_Logs):
    def copyThenTruncate(self, between: Any = None) -> str:
        """
        What logrotate's C{copytruncate} does: copy the live file to
        C{network.jsonl.1}, then (after C{between}, lines written in its
        gap) cut the live file to nothing.
        """
        copy = self.path + ".1"
        with open(self.path, "rb") as source, open(copy, "wb") as target:
            shutil.copyfileobj(source, target)
        if between is not None:
            between()
        os.truncate(self.path, 0)
        return copy

    def tenLinesRead(self, clock: Clock | None = None) -> tuple[LogWriter, LogReader]:
        """
        A writer that wrote ten lines, and a reader that read them.
        """
        writer = self.writer(Rotation())
        for i in range(5):
            writer.refuse({"i": i}, {})
        reader = LogReader(self.path) if clock is None else LogReader(self.path, clock.seconds)
        self.assertEqual(reader.read(0).next, 10)
        return writer, reader

    def test_copytruncate(self) -> None:
        """
        The live file copied, then cut to nothing under the writer
        (logrotate's copytruncate), with lines written between the copy and
        the cut: at its next line the writer writes the file again from
        the line after the copy's last, so that the copy and the live file
        hold every line once, in order; a reader reads on with nothing
        missed and nothing begun again.
        """
        path = self.path
        writer, reader = self.tenLinesRead()
        copy = self.copyThenTruncate(lambda: writer.refuse({"i": 5}, {}))
        writer.refuse({"i": 6}, {})
        self.assertEqual([r["n"] for r in readLines(copy)], list(range(1, 11)))
        self.assertEqual([r["n"] for r in readLines(path)], [11, 12, 13, 14])
        page = reader.read(10)
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo),
                         ([11, 12, 13, 14], False, None))
        self.assertEqual(writer.restoredCuts, 1)
        # A second cut, with no line between: the same, and no line is
        # said to be lost (the line being written is not).
        said: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(said.append)
        self.addCleanup(globalLogPublisher.removeObserver, said.append)
        copy = self.copyThenTruncate()
        writer.refuse({"i": 7}, {})
        self.assertEqual([e for e in said if e.get("log_level") == LogLevel.error], [])
        self.assertEqual([formatEvent(e) for e in said if "cut under it" in e.get("log_format", "")],
                         [f"netlog's log {path} was cut under it (copytruncate); its copy {copy} ends at line 14: "
                          "no line to write again"])
        self.assertEqual([r["n"] for r in readLines(copy)], list(range(11, 15)))
        self.assertEqual([r["n"] for r in readLines(path)], [15, 16])
        page = reader.read(14)
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo), ([15, 16], False, None))

    def test_copytruncateReadInTheGap(self) -> None:
        """
        A reader that read the lines written between logrotate's copy and
        its cut (from the live file, before the cut) reads on from its
        cursor when the writer writes them again: nothing twice, nothing
        begun again.
        """
        path = self.path
        writer, reader = self.tenLinesRead()
        seen: list[Any] = []

        def between() -> None:
            writer.refuse({"i": 5}, {})
            seen.append(reader.read(10))

        copy = self.copyThenTruncate(between)
        self.assertEqual([r["n"] for r in seen[0].records()], [11, 12])
        writer.refuse({"i": 6}, {})
        self.assertEqual([r["n"] for r in readLines(copy)], list(range(1, 11)))
        self.assertEqual([r["n"] for r in readLines(path)], [11, 12, 13, 14])
        page = reader.read(12)
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo),
                         ([13, 14], False, None))

    def cutAfterTheWritersLook(self) -> None:
        """
        Make logrotate's cut land between the writer's look at its file's
        size and its next write: that line is then the first of the cut
        file, before the writer sees the cut at the line after.
        """
        look = os.lseek

        def lookThenCut(fd: int, offset: int, how: int) -> int:
            self.patch(os, "lseek", look)
            where = look(fd, offset, how)
            os.truncate(self.path, 0)
            return where

        self.patch(os, "lseek", lookThenCut)

    def test_cutBetweenLookAndWrite(self) -> None:
        """
        logrotate's cut lands between the writer's look and its write, so
        the cut file begins with the line after those written between the
        copy and the cut: a reader behind the copy's end waits for them
        (neither file holds them) rather than skipping them, and reads on
        once the writer has written them again; nothing is begun again and
        nothing is said removed.
        """
        path = self.path
        clock = Clock()
        writer, reader = self.tenLinesRead(clock)
        shutil.copyfile(path, path + ".1")
        writer.refuse({"i": 5}, {})
        self.cutAfterTheWritersLook()
        exchangeId = writer.open({"i": 6})
        self.assertEqual([r["n"] for r in readLines(path)], [13])
        for waited in (0.0, WRITTEN_AGAIN_WITHIN / 2):
            clock.advance(waited)
            page = reader.read(10)
            self.assertEqual((page.lines, page.next, page.begunAgain, page.removedUpTo), ([], 10, False, None))
        writer.end(exchangeId, {})
        self.assertEqual(writer.restoredCuts, 1)
        self.assertEqual([r["n"] for r in readLines(path)], [11, 12, 13, 14])
        page = reader.read(10)
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo),
                         ([11, 12, 13, 14], False, None))

    def test_cutBetweenLookAndWriteReadInTheGap(self) -> None:
        """
        The same cut, with a reader that had read the lines written between
        the copy and the cut: it reads the line that begins the cut file as
        the next, and reads on from it when the writer writes the file
        again from the copy's end (the file still holds the line it read
        last): nothing twice, nothing begun again.
        """
        path = self.path
        writer, reader = self.tenLinesRead()
        shutil.copyfile(path, path + ".1")
        writer.refuse({"i": 5}, {})
        self.assertEqual([r["n"] for r in reader.read(10).records()], [11, 12])
        self.cutAfterTheWritersLook()
        exchangeId = writer.open({"i": 6})
        page = reader.read(12)
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo), ([13], False, None))
        writer.end(exchangeId, {})
        self.assertEqual([r["n"] for r in readLines(path)], [11, 12, 13, 14])
        page = reader.read(13)
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo), ([14], False, None))

    def test_cutWhileRead(self) -> None:
        """
        logrotate's cut lands while a reader reads a page (after it looked
        at the file's size and first line, before the page's reads): the
        reader reads again and finds the file cut, waits for the writer, and
        reads on from the copy's end; nothing is begun again.
        """
        path = self.path
        writer, reader = self.tenLinesRead()
        shutil.copyfile(path, path + ".1")
        pread = os.pread
        reads = []

        def readThenCut(fd: int, size: int, offset: int) -> bytes:
            reads.append(offset)
            if len(reads) == 2:
                os.truncate(path, 0)
            return pread(fd, size, offset)

        self.patch(os, "pread", readThenCut)
        page = reader.read(10)
        self.assertEqual((page.lines, page.next, page.begunAgain, page.removedUpTo), ([], 10, False, None))
        writer.refuse({"i": 5}, {})
        page = reader.read(10)
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo), ([11, 12], False, None))

    def segmentsThenLive(self) -> tuple[LogWriter, list[int]]:
        """
        A writer closing segments by size, and the numbers of the lines its
        live file holds after the first closed segment.
        """
        writer = self.writer(Rotation(size=3000))
        self.fill(writer, 12)
        self.assertEqual(len(listing(self.path).segments), 1)
        live = [r["n"] for r in readLines(self.path)]
        self.assertGreater(len(live), 1)
        return writer, live

    def test_copytruncateAfterSegments(self) -> None:
        """
        logrotate's C{copytruncate} of a log whose writer closes segments
        too: a reader whose cursor was inside the live file when it was cut
        is told the lines only logrotate's copy holds were removed, and
        reads on from the lines written again; one at the live file's end
        reads on. Neither is told the log was begun again.
        """
        path = self.path
        writer, live = self.segmentsThenLive()
        self.copyThenTruncate(lambda: writer.refuse({"i": 0}, {}))
        writer.refuse({"i": 1}, {})
        after = [r["n"] for r in readLines(path)]
        self.assertEqual(after, list(range(live[-1] + 1, live[-1] + 5)))
        page = LogReader(path).read(live[0])
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo),
                         (after, False, live[-1]))
        page = LogReader(path).read(live[-1])
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo), (after, False, None))

    def test_cutBetweenLookAndWriteAfterSegments(self) -> None:
        """
        The cut between the writer's look and its write, in a log with
        closed segments: a reader at the live file's end waits for the
        lines no file holds yet, then reads them.
        """
        path = self.path
        writer, live = self.segmentsThenLive()
        clock = Clock()
        reader = LogReader(path, clock.seconds)
        self.assertEqual(readAll(reader)[0], list(range(1, live[-1] + 1)))
        shutil.copyfile(path, path + ".1")
        writer.refuse({"i": 0}, {})
        self.cutAfterTheWritersLook()
        exchangeId = writer.open({"i": 1})
        self.assertEqual([r["n"] for r in readLines(path)], [live[-1] + 3])
        for waited in (0.0, WRITTEN_AGAIN_WITHIN / 2):
            clock.advance(waited)
            page = reader.read(live[-1])
            self.assertEqual((page.lines, page.next, page.begunAgain, page.removedUpTo),
                             ([], live[-1], False, None))
        # A reader that hands out no cursor of its own (a one-off read)
        # doesn't wait: it can't tell the moment from lines lost for good.
        page = LogReader(path).read(live[-1])
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo),
                         ([live[-1] + 3], False, live[-1] + 2))
        writer.end(exchangeId, {})
        self.assertEqual(len(listing(path).segments), 1)
        page = reader.read(live[-1])
        self.assertEqual(([r["n"] for r in page.records()], page.begunAgain, page.removedUpTo),
                         (list(range(live[-1] + 1, live[-1] + 5)), False, None))

    def test_cutWhileIdle(self) -> None:
        """
        Cut while nothing is written: within a second the lost lines are on
        the file again, before any new line.
        """
        clock = Clock()
        writer = self.writer(Rotation(), clock)
        for i in range(3):
            writer.refuse({"i": i}, {})
        self.copyThenTruncate(lambda: writer.refuse({"i": 3}, {}))
        self.assertEqual(readLines(self.path), [])
        clock.advance(CUT_CHECK_INTERVAL)
        self.assertEqual([r["n"] for r in readLines(self.path)], [7, 8])
        clock.advance(CUT_CHECK_INTERVAL)
        writer.refuse({"i": 4}, {})
        self.assertEqual([r["n"] for r in readLines(self.path)], [7, 8, 9, 10])
        self.assertEqual(writer.restoredCuts, 1)

    def test_cutWithNoCopy(self) -> None:
        """
        Cut with no copy beside it (C{: > network.jsonl}, or logrotate's
        copy compressed or in another folder): every line the writer still
        holds goes back, so none is lost, though some may then be in the
        copy too.
        """
        writer = self.writer(Rotation())
        for i in range(4):
            writer.refuse({"i": i}, {})
        os.truncate(self.path, 0)
        writer.refuse({"i": 4}, {})
        self.assertEqual([r["n"] for r in readLines(self.path)], list(range(1, 11)))

    def test_sessionLogKeepsNone(self) -> None:
        """
        A writer told not to guard against cuts (a session's) keeps no
        lines: cut under it, it writes on from the cut.
        """
        writer = LogWriter(self.path, guardCuts=False)
        writer.startService()
        self.addCleanup(writer.stopService)
        for i in range(3):
            writer.refuse({"i": i}, {})
        self.copyThenTruncate(lambda: writer.refuse({"i": 3}, {}))
        writer.refuse({"i": 4}, {})
        self.assertEqual([r["n"] for r in readLines(self.path)], [9, 10])
        self.assertEqual(writer.restoredCuts, 0)

    def test_olderThanKept(self) -> None:
        """
        Lines of the gap older than the writer's most recent bytes can't go
        back: the rest does, and a reader is told where the file begins
        once it has waited L{WRITTEN_AGAIN_WITHIN} seconds for them.
        """
        self.patch(writerModule, "RECENT_BYTES", 600)
        writer = self.writer(Rotation())
        self.fill(writer, 2)
        clock = Clock()
        reader = LogReader(self.path, clock.seconds)
        self.assertEqual(reader.read(0).next, 4)
        self.copyThenTruncate(lambda: self.fill(writer, 10))
        writer.refuse({"i": 0}, {})
        numbers = [r["n"] for r in readLines(self.path)]
        self.assertEqual(numbers, list(range(numbers[0], 27)))
        self.assertGreater(numbers[0], 5)
        # Lines no file holds may be about to be written again: the
        # reader waits a while before it takes them for lost.
        page = reader.read(4)
        self.assertEqual((page.lines, page.begunAgain, page.removedUpTo), ([], False, None))
        clock.advance(WRITTEN_AGAIN_WITHIN)
        page = reader.read(4)
        self.assertEqual((page.begunAgain, page.removedUpTo, page.records()[0]["n"]),
                         (False, numbers[0] - 1, numbers[0]))

    def test_renamedAway(self) -> None:
        """
        The live file renamed away by an outside rotation (logrotate
        without copytruncate) and then a rotation asked (its postrotate
        SIGUSR1): the renamed file keeps its name and gets a segment's name
        too, and the writer goes on in a new file at the path, so readers
        read on across.
        """
        path = self.path
        writer = self.writer(Rotation())
        for i in range(3):
            writer.refuse({"i": i}, {})
        os.rename(path, path + ".1")
        writer.refuse({"i": 3}, {})
        self.assertTrue(writer.rotate())
        writer.refuse({"i": 4}, {})
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        self.assertEqual([r["n"] for r in readLines(path + ".1")], list(range(1, 9)))
        self.assertEqual(readAll(LogReader(path))[0], list(range(1, 11)))
        self.assertEqual([s.first for s in listing(path).segments], [1])

    def test_cutThenRotated(self) -> None:
        """
        A live file cut under the writer (copytruncate) and later closed by
        size is named after the first line it really holds.
        """
        writer = self.writer(Rotation(size=3000))
        self.fill(writer, 5)
        self.copyThenTruncate()
        self.fill(writer, 40)
        self.assertTrue(writer.waitForHousekeeping(WAIT))
        segments = listing(self.path).segments
        self.assertEqual(segments[0].first, 11)
        lines = seriesLines(self.path)
        self.assertEqual([r["n"] for r in lines], list(range(11, 91)))
        page = LogReader(self.path).read(4)
        self.assertEqual((page.removedUpTo, page.records()[0]["n"]), (10, 11))
