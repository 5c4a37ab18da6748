"""
Entries come in the order their exchanges started (each open line's
C{started}), not the order of their open lines: a proxy writes an open line
once the request has gone upstream, so an exchange that started first can be
logged second. Ties and open lines with no start keep the log's order.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.har import LineIndex, entriesFromLines
from netlog.core.logline import encodeLine
from netlog.har import export as exportModule
from tests.har.support import T0, Log, export, validate


def ids(entries: list[dict]) -> list[int]:
    return [e["_id"] for e in entries]


class StartedTests(SynchronousTestCase):
    """
    The first pass reads each open line's started.
    """

    def starts(self, lines: list[bytes]) -> list[float]:
        index = LineIndex()
        offset = 0
        for line in lines:
            index.add(offset, line)
            offset += len(line)
        byBlock = LineIndex()
        data = b"".join(lines)
        self.assertEqual(byBlock.addLines(0, data), len(data))
        self.assertEqual(list(byBlock.openStarts), list(index.openStarts))
        return list(index.openStarts)

    def test_table(self) -> None:
        """
        started as netlog writes it (a float, an int, an exponent, negative),
        a started nested in an object before the top-level one, a started
        that isn't a number (its time is used, as its entry shows it), the
        word started inside a string, fields in another order; and none at
        all, or a NaN (the start before it, so it keeps its place).
        """
        def line(n: int, body: str) -> bytes:
            return ('{"n":%d,"type":"open","id":%d,%s}\n' % (n, n, body)).encode()

        lines = [
            encodeLine(1, "open", 1, 1, T0 + 9, {"proxy": "site", "kind": "exchange", "started": T0 + 0.25}),
            line(2, '"open_from":1,"time":5,"started":1767225601'),
            line(3, '"time":5,"started":1.7e9'),
            line(4, '"started":-2.5,"time":5'),
            line(5, '"x":{"started":1},"started":7'),
            line(6, '"kind":"a \\"started\\":3","started":8'),
            line(7, '"started":"soon","time":9.5'),
            line(8, '"started":null'),
            ('{"type":"open","n":9,"id":9,"started":11}\n').encode(),
            line(10, '"time":12,"started":true'),
            line(11, '"started":NaN,"time":13'),
        ]
        self.assertEqual(
            self.starts(lines),
            [T0 + 0.25, 1767225601.0, 1.7e9, -2.5, 7.0, 8.0, 9.5, 9.5, 11.0, 12.0, 12.0],
        )

    def test_noTimeFirst(self) -> None:
        """
        A first open line with no time at all comes first.
        """
        lines = [b'{"n":1,"type":"open","id":1}\n', encodeLine(2, "open", 2, 1, T0, {"started": T0})]
        self.assertEqual(self.starts(lines), [float("-inf"), T0])
        entries, _ = entriesFromLines(lines)
        self.assertEqual(ids(entries), [1, 2])


class OrderTests(SynchronousTestCase):
    """
    Entries in start order.
    """

    def test_lateOpenLine(self) -> None:
        """
        Two exchanges whose open lines are in the other order than their
        starts export in the order they started, whatever order they ended
        in; ties keep the log's order.
        """
        log = Log()
        b = log.open(url="https://shop.test/b", started=T0 + 2)
        a = log.open(url="https://shop.test/a", started=T0 + 1)
        log.end(b)
        c = log.open(url="https://shop.test/c", started=T0 + 2)
        log.end(a)
        d = log.open(url="https://shop.test/d", started=T0 + 1.5)
        for n in (d, c):
            log.end(n)
        har, raw, result = export(log.bytes())
        entries = har["log"]["entries"]
        self.assertEqual([e["request"]["url"].rsplit("/", 1)[1] for e in entries], ["a", "d", "b", "c"])
        self.assertEqual(ids(entries), [a, d, b, c])
        self.assertEqual(
            [e["startedDateTime"] for e in entries],
            ["2026-01-01T00:00:01.000Z", "2026-01-01T00:00:01.500Z", "2026-01-01T00:00:02.000Z", "2026-01-01T00:00:02.000Z"],
        )
        self.assertEqual((result.entries, result.unreadable), (4, 0))
        self.assertEqual(validate(raw), [])

    def test_noStartedKeepsPlace(self) -> None:
        """
        An open line with neither started nor time stays after the entry
        before it in the log.
        """
        log = Log()
        log.open(url="https://shop.test/a", started=T0 + 5)
        log.raw(b'{"n":2,"type":"open","id":2,"request":{"url":"https://shop.test/b"}}\n')
        log.open(url="https://shop.test/c", started=T0 + 1)
        log.open(url="https://shop.test/d", started=T0 + 6)
        entries, unreadable = entriesFromLines(log.lines)
        self.assertEqual(ids(entries), [3, 1, 2, 4])
        self.assertEqual(unreadable, 0)


#: A log as a list of exchanges: (start offset in ms, how many lines later
#: its open line is written, when it ends, its body size); made into lines
#: by L{madeUpLog}.
EXCHANGES = st.lists(
    st.tuples(
        st.integers(0, 40).map(lambda ms: ms / 4),
        st.integers(0, 3),
        st.integers(0, 6),
        st.sampled_from([0, 10, 3000]),
    ),
    max_size=40,
)


def madeUpLog(exchanges: list[tuple[float, int, int, int]]) -> list[bytes]:
    """
    Each exchange's open line is written C{delay} events after its turn and
    its end line C{endAfter} events after that; starts are drawn
    independently of either, so open lines come in any order of starts.
    """
    events: list[tuple[int, int, str, int]] = []
    for i, (_, delay, endAfter, _) in enumerate(exchanges):
        events.append((2 * (i + delay), 0, "open", i))
        events.append((2 * (i + delay + endAfter) + 1, 1, "end", i))
    events.sort()
    lines: list[bytes] = []
    ns: dict[int, int] = {}
    for _, _, kind, i in events:
        n = len(lines) + 1
        started, _, _, size = exchanges[i]
        if kind == "open":
            ns[i] = n
            lines.append(encodeLine(n, "open", n, 1, T0 + 100, {
                "kind": "exchange", "started": T0 + started,
                "request": {"method": "GET", "url": f"https://x.test/{i}", "headers": []}}))
        else:
            body = json.dumps({"i": i, "pad": "x" * size})
            lines.append(encodeLine(n, "end", ns[i], 1, T0 + 100, {
                "response": {"status": 200, "headers": [["Content-Type", "application/json"]],
                             "body": {"size": len(body), "data": __import__("base64").b64encode(body.encode()).decode()}}}))
    return lines


class OrderPropertyTests(SynchronousTestCase):
    """
    Start order as a property, in memory and through writeHar's block reader.
    """

    @given(EXCHANGES)
    @settings(max_examples=150, deadline=None)
    def test_startOrder(self, exchanges: list[tuple[float, int, int, int]]) -> None:
        """
        Every exchange gets one entry; entries are sorted by started, ties
        in the order of their open lines; startedDateTime never goes
        backwards.
        """
        lines = madeUpLog(exchanges)
        entries, unreadable = entriesFromLines(lines)
        self.assertEqual(unreadable, 0)
        opened = [json.loads(line) for line in lines if b'"type":"open"' in line]
        expected = [o["id"] for o in sorted(opened, key=lambda o: o["started"])]
        self.assertEqual(ids(entries), expected)
        started = [e["startedDateTime"] for e in entries]
        self.assertEqual(started, sorted(started))
        for entry in entries:
            i = int(entry["request"]["url"].rsplit("/", 1)[1])
            self.assertEqual(json.loads(entry["response"]["content"]["text"])["i"], i)

    @given(EXCHANGES)
    @settings(max_examples=60, deadline=None)
    def test_blockReader(self, exchanges: list[tuple[float, int, int, int]]) -> None:
        """
        writeHar, reading the log in blocks of a few lines (so open lines
        before, in and past the block are all read), writes the same entries
        as the export in memory, in start order.
        """
        self.patch(exportModule, "READ_SIZE", 2048)
        lines = madeUpLog(exchanges)
        inMemory, _ = entriesFromLines(lines)
        har, _, result = export(b"".join(lines))
        self.assertEqual(har["log"]["entries"], json.loads(json.dumps(inMemory)))
        self.assertEqual(result.unreadable, 0)
        started = [e["startedDateTime"] for e in har["log"]["entries"]]
        self.assertEqual(started, sorted(started))


#: A log's lines as (kind, line number's step from the last, exchange's
#: step back from the last open): steps large enough to put ids past the
#: index's dense arrays, ends and notes of exchanges never opened, ended
#: twice, or not yet opened.
LINES = st.lists(
    st.tuples(
        st.sampled_from(["open", "open", "end", "end", "head", "message"]),
        st.sampled_from([1, 1, 1, 2, 5000, 70_000, 10**6]),
        st.integers(-2, 4),
    ),
    max_size=80,
)


class EndLineTests(SynchronousTestCase):
    """
    The first pass finds each exchange's end lines and notes where they lie.
    """

    @given(LINES, st.integers(1, 1000))
    @settings(max_examples=400, deadline=None)
    def test_asAModel(self, lines: list[tuple[str, int, int]], first: int) -> None:
        """
        Whatever the lines and their ids, the index (line by line, and in a
        block) finds the first end line of each exchange opened before it,
        later ones as extra, notes of an exchange opened and not ended, and
        counts the rest: as a plain model of the rules does.
        """
        opens: list[int] = []
        ends: dict[int, tuple[int, int]] = {}
        extra: dict[int, list[tuple[int, int]]] = {}
        notes: dict[int, list[int]] = {}
        unreadable = 0
        data = b""
        n = first
        named: set[int] = set()
        for kind, step, back in lines:
            n += step
            exchangeId = n if kind == "open" else (opens[-1 - back] if 0 <= back < len(opens) else n + back)
            named.add(exchangeId)
            line = encodeLine(n, kind, exchangeId, 1, T0, {"started": T0} if kind == "open" else {})
            where = (len(data), len(line))
            data += line
            if kind == "open":
                opens.append(exchangeId)
            elif exchangeId not in opens or (kind != "end" and exchangeId in ends):
                unreadable += 1
            elif kind != "end":
                notes.setdefault(exchangeId, []).extend(where)
            elif exchangeId in ends:
                extra.setdefault(exchangeId, []).append(where)
            else:
                ends[exchangeId] = where
        byLine, byBlock = LineIndex(), LineIndex()
        offset = 0
        for line in data.splitlines(keepends=True):
            byLine.add(offset, line)
            offset += len(line)
        self.assertEqual(byBlock.addLines(0, data), len(data))
        for index in (byLine, byBlock):
            self.assertEqual(list(index.openIds), opens)
            found = {i: index.endOf(i) for i in named}
            self.assertEqual({i: where for i, where in found.items() if where is not None}, ends)
            self.assertEqual(index.extraEnds, extra)
            self.assertEqual({i: list(v) for i, v in index.notes.items()}, notes)
            self.assertEqual(index.unreadable, unreadable)
