"""
The builder's join, as properties: whatever lines a log holds, in whatever
order exchanges end, every usable exchange gets one entry in start order
(here the order of the open lines; see test_order for logs where they
differ) and every unusable line is counted.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.har import entriesFromLines
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
