"""
Finding exchanges in a log's bytes (L{netlog.core.finding}): each ended
exchange that matches once, in end order, with a cursor to ask on from;
one exchange whole with its bodies paged.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.exchange import NoSuchExchange
from netlog.core.filters import parseFilter
from netlog.core.finding import exchangeWhole, findExchanges
from tests.agents.records import ended, logBytes, opened
from tests.core.logs import reader

_JSON = [("Content-Type", "application/json")]

RECORDS = [
    opened(1, url="http://shop.test/"),
    opened(2, "POST", "http://shop.test/api/order", _JSON),
    ended(3, 1, 200, [("Content-Type", "text/html")], b"<p>hi</p>"),
    opened(4, url="http://shop.test/api/cart"),
    ended(5, 2, 201, _JSON, b'{"order": 7}', requestBody=json.dumps({"quantity": 2}).encode()),
    opened(6, url="http://shop.test/api/slow"),
    ended(7, 4, 200, _JSON, b"[]"),
]
LOG = logBytes(RECORDS)


def find(text: str, after: int = 0, limit: int = 50, first: int = 0, data: bytes = LOG):  # type: ignore[no-untyped-def]
    return findExchanges(reader(data), len(data), parseFilter(text), after, limit, first=first)


class FindTests(SynchronousTestCase):

    def test_endOrder(self) -> None:
        """Ended exchanges that match, in the order they ended; an open one is not found yet."""
        found = find("url:/api/")
        self.assertEqual([s["id"] for s in found.summaries], [2, 4])
        self.assertEqual(found.next, 7)
        self.assertFalse(found.more)
        self.assertFalse(found.begunAgain)

    def test_summary(self) -> None:
        """A summary has the ids and line numbers, method, URL, status, type, times and sizes."""
        [order] = find("method:POST").summaries
        self.assertEqual(order["id"], 2)
        self.assertEqual(order["open_line"], 2)
        self.assertEqual(order["end_line"], 5)
        self.assertEqual(order["method"], "POST")
        self.assertEqual(order["url"], "http://shop.test/api/order")
        self.assertEqual(order["status"], 201)
        self.assertEqual(order["content_type"], "application/json")
        self.assertEqual(order["started"], 102.0)
        self.assertEqual(order["ended"], 102.5)
        self.assertEqual(order["duration"], 0.5)
        self.assertEqual(order["request_size"], len(b'{"quantity": 2}'))
        self.assertEqual(order["response_size"], len(b'{"order": 7}'))

    def test_cursor(self) -> None:
        """Asking on from the cursor finds only what ended after it: an open line before the cursor still counts."""
        self.assertEqual([s["id"] for s in find("", after=4).summaries], [2, 4])
        self.assertEqual([s["id"] for s in find("", after=5).summaries], [4])
        found = find("", after=7)
        self.assertEqual((found.summaries, found.next), ([], 7))

    def test_limit(self) -> None:
        """A full list stops at its end line and says there may be more."""
        found = find("", limit=1)
        self.assertEqual([s["id"] for s in found.summaries], [1])
        self.assertEqual((found.next, found.more), (3, True))
        self.assertEqual([s["id"] for s in find("", after=found.next).summaries], [2, 4])

    def test_first(self) -> None:
        """Exchanges opened before a session's first line are an earlier session's: passed over."""
        self.assertEqual([s["id"] for s in find("", first=2).summaries], [2, 4])

    def test_begunAgain(self) -> None:
        """A cursor past the log's end (a log begun again) reads the new log from its start, and says so."""
        found = find("", after=100)
        self.assertTrue(found.begunAgain)
        self.assertEqual([s["id"] for s in found.summaries], [1, 2, 4])

    def test_cutWhileSearched(self) -> None:
        """
        A log cut to nothing after its size was taken (logrotate's
        copytruncate during the search), or begun again with no line yet,
        says nothing yet: no exchange, the cursor where it was, not begun
        again.
        """
        for size in (len(LOG), 0):
            found = findExchanges(reader(b""), size, parseFilter(""), 3, 50)
            self.assertEqual((found.summaries, found.next, found.begunAgain), ([], 3, False))

    def test_searchBound(self) -> None:
        """A search reads at most its bound of bytes, and hands back the cursor it reached."""
        found = findExchanges(reader(LOG), len(LOG), parseFilter("status:404"), 0, 50, maxSearch=1)
        self.assertEqual((found.summaries, found.next, found.more), ([], 1, True))


class WholeTests(SynchronousTestCase):

    def test_whole(self) -> None:
        """One exchange whole: heads as logged, bodies as text."""
        whole = exchangeWhole(reader(LOG), len(LOG), 2)
        self.assertEqual(whole["summary"]["id"], 2)
        self.assertEqual(whole["request"]["method"], "POST")
        self.assertEqual(whole["request"]["headers"], [("Content-Type", "application/json")])
        self.assertEqual(whole["request"]["body"]["text"], '{"quantity": 2}')
        self.assertEqual(whole["response"]["status"], 201)
        self.assertEqual(whole["response"]["body"]["text"], '{"order": 7}')
        self.assertIsNone(whole["response"]["body"]["next_offset"])
        self.assertFalse(whole["open"])

    def test_paged(self) -> None:
        """A body longer than the page is cut, and next_offset pages through the rest."""
        first = exchangeWhole(reader(LOG), len(LOG), 2, 0, 5)["response"]["body"]
        self.assertEqual((first["text"], first["next_offset"], first["chars"]), ('{"ord', 5, 12))
        rest = exchangeWhole(reader(LOG), len(LOG), 2, 5, 100)["response"]["body"]
        self.assertEqual((rest["text"], rest["next_offset"]), ('er": 7}', None))

    def test_open(self) -> None:
        """An exchange still open has its request and no response yet."""
        whole = exchangeWhole(reader(LOG), len(LOG), 6)
        self.assertTrue(whole["open"])
        self.assertIsNone(whole["response"])

    def test_missing(self) -> None:
        """An id that is no open line is refused."""
        self.assertRaises(NoSuchExchange, exchangeWhole, reader(LOG), len(LOG), 3)


class LineTests(SynchronousTestCase):

    def test_otherKeyOrder(self) -> None:
        """
        A line that doesn't begin as the writer begins its lines (keys in
        another order) is parsed to learn its number, type and exchange.
        """
        lines = LOG.splitlines()
        record = json.loads(lines[2])
        lines[2] = json.dumps(dict(reversed(list(record.items())))).encode()
        data = b"\n".join(lines) + b"\n"
        self.assertEqual([s["id"] for s in find("", data=data).summaries], [1, 2, 4])
        self.assertEqual(find("status:200", data=data).summaries[0]["end_line"], 3)
