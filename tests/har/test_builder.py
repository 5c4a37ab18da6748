"""
The builder's join, as properties: whatever lines a log holds, in whatever
order exchanges end, every usable exchange gets one entry in start order
(here the order of the open lines; see test_order for logs where they
differ) and every unusable line is counted.
"""

from __future__ import annotations

import base64
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.har import buildEntry, encodeEntry, entriesFromLines
from netlog.core.logline import encodeLine
from tests.har.support import T0

REQUIRED = {"startedDateTime", "time", "request", "response", "cache", "timings"}

OPS = st.lists(
    st.one_of(
        st.just(("open",)),
        st.tuples(st.just("end"), st.integers(0, 30)),
        st.tuples(st.just("junk"), st.binary(max_size=30).filter(lambda b: b"\n" not in b)),
        st.tuples(st.just("stray"), st.integers(1000, 2000)),
    ),
    max_size=60,
)


class JoinTests(SynchronousTestCase):
    """
    joinEntries over made-up logs.
    """

    @given(OPS, st.booleans())
    @settings(max_examples=150, deadline=None)
    def test_join(self, ops: list[tuple], cutLast: bool) -> None:
        """
        One entry per open line, in start order (here file order); ends join their opens
        whatever their order; junk, stray ends, second ends and a cut last
        line are counted.
        """
        lines: list[bytes] = []
        opens: list[int] = []
        ended: set[int] = set()
        unreadable = 0
        for op in ops:
            n = len(lines) + 1
            if op[0] == "open":
                opens.append(n)
                lines.append(encodeLine(n, "open", n, 1, T0, {"kind": "exchange", "started": T0 + n,
                    "request": {"method": "GET", "url": f"https://x.test/{n}", "headers": []}}))
            elif op[0] == "end":
                if not opens:
                    target = 999
                else:
                    target = opens[op[1] % len(opens)]
                if target in ended or target == 999:
                    unreadable += 1
                ended.add(target)
                lines.append(encodeLine(n, "end", target, 1, T0, {"response": {"status": 200 + n % 100, "headers": []}}))
            elif op[0] == "junk":
                lines.append(b"\x00" + op[1] + b"\n")
                unreadable += 1
            else:
                lines.append(encodeLine(n, "end", op[1], 1, T0, {}))
                unreadable += 1
        if cutLast:
            # a last line cut short (no newline): counted, not an entry
            n = len(lines) + 1
            whole = encodeLine(n, "open", n, 1, T0, {"request": {"url": f"https://x.test/{n}"}})
            lines.append(whole[: len(whole) // 2])
            unreadable += 1
        entries, counted = entriesFromLines(lines)
        self.assertEqual([e["_id"] for e in entries], opens)
        self.assertEqual([e["request"]["url"] for e in entries], [f"https://x.test/{n}" for n in opens])
        for entry in entries:
            self.assertTrue(REQUIRED <= entry.keys())
            self.assertEqual(entry.get("_open", False), entry["_id"] not in ended)
        self.assertEqual(counted, unreadable)

    def test_repeatedOpen(self) -> None:
        """
        An open line whose id isn't its number, or that repeats an earlier
        number, is counted and left out.
        """
        lines = [
            encodeLine(1, "open", 1, 1, T0, {"request": {"url": "https://x.test/a"}}),
            encodeLine(2, "open", 1, 1, T0, {"request": {"url": "https://x.test/b"}}),
            encodeLine(1, "open", 1, 1, T0, {"request": {"url": "https://x.test/c"}}),
            encodeLine(4, "open", 4, 1, T0, {"request": {"url": "https://x.test/d"}}),
        ]
        entries, counted = entriesFromLines(lines)
        self.assertEqual([e["request"]["url"] for e in entries], ["https://x.test/a", "https://x.test/d"])
        self.assertEqual(counted, 2)


#: Ways an end line's bodies may be written: as netlog writes them, and
#: damaged (junk in the base64, padding inside it, a C{data} given twice, a
#: long base64 C{data} elsewhere, C{\u0000} of its own, a value like the
#: stand-in netlog parses the line with).
BODY_LINES = (
    "netlog",
    "junk",
    "inner padding",
    "twice",
    "elsewhere",
    "nul",
    "placeholder",
    "cut short",
)


class BodyDataTests(SynchronousTestCase):
    """
    An end line's bodies are decoded where they lie in the line; the entry
    is the one built from the whole line parsed.
    """

    @given(
        # short and long bodies: long base64 is decoded in place
        st.binary(max_size=30).map(lambda b: b * 120),
        st.binary(max_size=30).map(lambda b: b * 120),
        st.sampled_from(BODY_LINES),
        st.sampled_from(["text/html; charset=utf-8", "application/octet-stream", "text/plain", ""]),
    )
    @settings(max_examples=300, deadline=None)
    def test_sameEntry(self, answer: bytes, sent: bytes, variant: str, contentType: str) -> None:
        """
        Whatever an end line's bodies hold, and however the line is damaged,
        the export's entry is the one built from the open line and the end
        line parsed whole with C{json} (or the line is counted unusable when
        C{json} can't read it).
        """
        opened = encodeLine(1, "open", 1, 1, T0, {"kind": "exchange", "started": T0, "request": {
            "method": "POST", "url": "https://x.test/", "headers": [["Content-Type", contentType]]}})
        answerData = base64.b64encode(answer).decode("ascii")
        sentData = base64.b64encode(sent).decode("ascii")
        headers = [["Content-Type", contentType]]
        extra: dict[str, object] = {}
        if variant == "junk" and answerData:
            answerData = answerData[: len(answerData) // 2] + " -\u00e9" + answerData[len(answerData) // 2 :]
        elif variant == "inner padding" and len(answerData) > 8:
            answerData = answerData[:4] + "==" + answerData[6:]
        elif variant == "elsewhere":
            extra["_note"] = {"data": sentData}
        elif variant == "nul":
            headers.append(["X-Nul", "a\u0000b"])
        elif variant == "placeholder":
            sentData = "\u00000"
        line = encodeLine(2, "end", 1, 1, T0 + 1, {
            "ended": T0 + 1,
            "request_body": {"size": len(sent), "data": sentData},
            "response": {"status": 200, "headers": headers, "body": {"size": len(answer), "data": answerData}},
            **extra,
        })
        if variant == "twice":
            # a second data for the answer's body: JSON keeps the last
            line = line.replace(b',"data":"', b',"data":"%s","data":"' % base64.b64encode(sent[::-1]), 1)
        elif variant == "cut short":
            line = line[: len(line) // 2] + b"\n"
        entries, unreadable = entriesFromLines([opened, line])
        try:
            ended = json.loads(line)
        except ValueError:
            # the exchange shows as still open, its end line counted
            self.assertEqual((entries, unreadable), ([buildEntry(json.loads(opened), None, [])], 1))
        else:
            self.assertEqual((entries, unreadable), ([buildEntry(json.loads(opened), ended, [])], 0))


class NumbersTests(SynchronousTestCase):
    def test_stillOpenWritten(self) -> None:
        """
        An exchange the log never ended is written with the integers it
        always had (C{"time":0}, timings of C{-1} and C{0}), in the compiled
        build as in the pure one: a compiled module must not turn them into
        floats (C{0.0}), or the two builds' HARs would differ.
        """
        opened = encodeLine(1, "open", 1, 1, T0, {"method": "GET", "url": "http://a.test/"})
        entry = buildEntry(json.loads(opened), None, [])
        written = encodeEntry(entry)
        self.assertIn(b'"time":0,', written)
        self.assertIn(
            b'"timings":{"blocked":-1,"dns":-1,"connect":-1,"send":0,"wait":0,"receive":0,"ssl":-1}', written
        )
        self.assertIs(type(entry["time"]), int)
