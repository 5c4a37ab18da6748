"""
The pure logic of a log's segments: names, listing, which segment holds a
line, retention, and the option values.
"""

from __future__ import annotations

import itertools

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.segments import (
    Location,
    Partial,
    Segment,
    Rotation,
    closingSize,
    expired,
    listSegments,
    locate,
    parseDuration,
    parseSize,
    partialName,
    segmentName,
)


class NameTests(SynchronousTestCase):
    def test_names(self) -> None:
        """
        A closed segment is named after the live log and its first line,
        zero-padded so that names sort in line order; compressed adds .zst.
        """
        self.assertEqual(segmentName("network.jsonl", 42), "network.000000000042.jsonl")
        self.assertEqual(segmentName("network.jsonl", 42, True), "network.000000000042.jsonl.zst")
        self.assertEqual(segmentName("log", 1), "log.000000000001")
        names = [segmentName("a.jsonl", n) for n in (1, 9, 10, 100, 10**12 - 1)]
        self.assertEqual(sorted(names), names)

    def test_roundTrip(self) -> None:
        """
        Every name made is listed back as the segment it names, for live
        names with and without the .jsonl suffix and with dots in them.
        """
        for live, first, compressed in itertools.product(
            ("network.jsonl", "a.b.jsonl", "plain", ".jsonl", "x.jsonl.jsonl"), (1, 42, 10**13), (False, True)
        ):
            name = segmentName(live, first, compressed)
            found = listSegments(live, [name, live])
            self.assertEqual(found.segments, (Segment(first, name, compressed),), (live, first, compressed))


class ListingTests(SynchronousTestCase):
    def test_others(self) -> None:
        """
        Names of other logs, the live file, and names that only look alike
        are not segments.
        """
        found = listSegments("network.jsonl", [
            "network.jsonl", "other.000000000001.jsonl", "network.1.jsonl", "network.000000000001.json",
            "network.00000000000x.jsonl", "network.000000000001.jsonl.gz", "xnetwork.000000000001.jsonl",
            "network.000000000001.jsonl.zst.tmp.1",
        ])
        self.assertEqual(found.segments, ())
        self.assertEqual(found.toCompress, ())

    def test_order(self) -> None:
        """
        Segments come oldest first by their first line, not by name.
        """
        names = [segmentName("n.jsonl", 10**12 + 5, True), segmentName("n.jsonl", 7), segmentName("n.jsonl", 3, True)]
        found = listSegments("n.jsonl", names)
        self.assertEqual([s.first for s in found.segments], [3, 7, 10**12 + 5])
        self.assertEqual([s.first for s in found.toCompress], [7])

    def test_halfDone(self) -> None:
        """
        What a kill during compression leaves: a partial copy is removed and
        the segment compressed again; with a whole copy beside it, the
        uncompressed file is read and removed.
        """
        plain, packed = segmentName("n.jsonl", 5), segmentName("n.jsonl", 5, True)
        partial = packed + ".tmp"
        found = listSegments("n.jsonl", [plain, partial])
        self.assertEqual((found.segments, found.toCompress, found.leftovers),
                         ((Segment(5, plain, False),), (Segment(5, plain, False),), (partial,)))
        found = listSegments("n.jsonl", [plain, packed])
        self.assertEqual((found.segments, found.toCompress, found.leftovers),
                         ((Segment(5, plain, False),), (), (plain,)))
        found = listSegments("n.jsonl", [packed])
        self.assertEqual((found.segments, found.toCompress, found.leftovers), ((Segment(5, packed, True),), (), ()))

    def test_partialsOfProcesses(self) -> None:
        """
        A partial compressed copy is named after the process writing it;
        the listing sees every one, and names as leftovers only those no
        process is writing any more (the caller says which: here, PID 7
        lives), and those of the older name with no PID.
        """
        plain = segmentName("n.jsonl", 5)
        self.assertEqual(partialName(plain, 7), "n.000000000005.jsonl.zst.7.tmp")
        live, dead, old = partialName(plain, 7), partialName(plain, 8), plain + ".zst.tmp"
        asked: list[Partial] = []

        def beingWritten(partial: Partial) -> bool:
            asked.append(partial)
            return partial.pid == 7

        found = listSegments("n.jsonl", [plain, live, dead, old, "n.000000000005.jsonl.7.tmp"], beingWritten)
        self.assertEqual(found.segments, (Segment(5, plain, False),))
        self.assertEqual(found.toCompress, (Segment(5, plain, False),))
        self.assertEqual(sorted(found.leftovers), sorted([dead, old]))
        self.assertEqual(set(found.partials), {Partial(live, 7), Partial(dead, 8), Partial(old, None)})
        self.assertEqual(len(found.partials), 3)
        self.assertEqual(set(asked), set(found.partials))
        # with no one said to be writing, every partial is a leftover
        found = listSegments("n.jsonl", [plain, live, dead])
        self.assertEqual(sorted(found.leftovers), sorted([live, dead]))
        # a whole copy beside a live partial: the plain file goes, the partial stays
        packed = segmentName("n.jsonl", 5, True)
        found = listSegments("n.jsonl", [plain, packed, live], beingWritten)
        self.assertEqual((found.segments, found.leftovers), ((Segment(5, plain, False),), (plain,)))


class LocateTests(SynchronousTestCase):
    def test_table(self) -> None:
        """
        The segment holding line after+1, for closed segments starting at
        1, 11 and 21 and a live one at 31.
        """
        firsts = [1, 11, 21]
        cases = [
            (0, Location(0, 0)),
            (1, Location(0, 1)),
            (9, Location(0, 9)),
            (10, Location(1, 10)),
            (11, Location(1, 11)),
            (20, Location(2, 20)),
            (29, Location(2, 29)),
            (30, Location(3, 30)),
            (31, Location(3, 31)),
            (1000, Location(3, 1000)),
        ]
        for after, where in cases:
            self.assertEqual(locate(after, firsts, 31), where, after)

    def test_liveEmpty(self) -> None:
        """
        With no line in the live segment yet, the newest closed one is
        where a cursor past all lines goes (its page then says what follows).
        """
        self.assertEqual(locate(30, [1, 11, 21], None), Location(2, 30))
        self.assertEqual(locate(5, [], None), Location(0, 5))
        self.assertEqual(locate(5, [], 1), Location(0, 5))

    def test_removed(self) -> None:
        """
        A cursor before the oldest line kept reads from that line, and is
        told where the log now begins.
        """
        self.assertEqual(locate(3, [11, 21], 31), Location(0, 0, 10))
        self.assertEqual(locate(9, [11, 21], 31), Location(0, 0, 10))
        self.assertEqual(locate(10, [11, 21], 31), Location(0, 10))
        self.assertEqual(locate(3, [], 31), Location(0, 0, 30))

    def test_exhaustive(self) -> None:
        """
        Over many layouts and every cursor: the segment chosen holds
        after+1 whenever a kept segment does.
        """
        for cuts in itertools.combinations(range(2, 12), 3):
            starts = [1, *cuts]
            for dropped in range(len(starts)):
                kept = starts[dropped:]
                firsts, live = kept[:-1], kept[-1]
                for after in range(0, 15):
                    where = locate(after, firsts, live)
                    want = after + 1
                    if after == 0:
                        self.assertEqual(where, Location(0, 0))
                    elif want < kept[0]:
                        self.assertEqual(where, Location(0, 0, kept[0] - 1))
                    else:
                        lo = kept[where.index]
                        hi = kept[where.index + 1] if where.index + 1 < len(kept) else None
                        self.assertTrue(lo <= want and (hi is None or want < hi), (kept, after, where))
                        self.assertEqual(where.after, after)


class RetentionTests(SynchronousTestCase):
    def segments(self, *ages: float) -> list[tuple[Segment, float]]:
        return [(Segment(i * 10 + 1, f"s{i}", True), 1000.0 - age) for i, age in enumerate(ages)]

    def test_keepSegments(self) -> None:
        """
        --keep-segments N keeps the newest N closed segments.
        """
        segments = self.segments(50, 40, 30, 20, 10)
        self.assertEqual([s.name for s in expired(segments, 3, None, 1000.0)], ["s0", "s1"])
        self.assertEqual(expired(segments, 5, None, 1000.0), [])
        self.assertEqual(expired(segments, None, None, 1000.0), [])
        self.assertEqual([s.name for s in expired(segments, 1, None, 1000.0)], ["s0", "s1", "s2", "s3"])

    def test_keepFor(self) -> None:
        """
        --keep-for removes segments last written longer ago, and both
        limits together remove what either would.
        """
        segments = self.segments(50, 40, 30, 20, 10)
        self.assertEqual([s.name for s in expired(segments, None, 35, 1000.0)], ["s0", "s1"])
        self.assertEqual([s.name for s in expired(segments, None, 40, 1000.0)], ["s0"])
        self.assertEqual([s.name for s in expired(segments, 4, 45, 1000.0)], ["s0"])
        self.assertEqual([s.name for s in expired(segments, 2, 45, 1000.0)], ["s0", "s1", "s2"])

    def test_closingSize(self) -> None:
        """
        A live segment is closed once it holds the size asked; never by
        size without one.
        """
        self.assertEqual(closingSize(Rotation(size=100)), 100)
        self.assertFalse(10**15 >= closingSize(Rotation(every=60.0)))


class ParseTests(SynchronousTestCase):
    def test_sizes(self) -> None:
        """
        Sizes take SI and binary units, any case.
        """
        for text, value in [("1GiB", 1 << 30), ("64MiB", 64 << 20), ("1mib", 1 << 20), ("500MB", 500 * 10**6),
                            ("65536", 65536), ("1.5KiB", 1536), ("2 k", 2000)]:
            self.assertEqual(parseSize(text), value, text)
        for text in ["", "GiB", "-1MiB", "0", "1 parsec", "1e9"]:
            self.assertRaises(ValueError, parseSize, text)

    def test_durations(self) -> None:
        """
        Durations take s, m, h, d, w; a bare number is seconds.
        """
        for text, value in [("1d", 86400), ("12h", 43200), ("30m", 1800), ("90", 90), ("0.5s", 0.5), ("2w", 1209600)]:
            self.assertEqual(parseDuration(text), value, text)
        for text in ["", "d", "0s", "1y", "-1d"]:
            self.assertRaises(ValueError, parseDuration, text)
