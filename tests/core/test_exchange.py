"""
One exchange out of the log for the live view's detail pane: its lines found
by number, the log's size at a cursor, and what the detail carries.
"""

from __future__ import annotations

import base64
import json

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.exchange import NoSuchExchange, exchangeDetail, findExchange, lineAt, sizeThrough
from netlog.core.logline import END, OPEN, encodeLine

from .logs import modelLog, reader, smallBlocks

_ops = st.lists(
    st.one_of(
        st.tuples(st.just("open"), st.integers(0, 60)),
        st.tuples(st.just("end"), st.integers(0, 1000)),
        st.tuples(st.just("junk"), st.integers(0, 30)),
    ),
    max_size=40,
)


def _model(data: bytes) -> tuple[dict[int, int | None], dict[int, int]]:
    """
    Each exchange's end line number (None while open), and the offset just
    past each numbered line, read plainly.
    """
    ends: dict[int, int | None] = {}
    through: dict[int, int] = {}
    pos = 0
    for raw in data.splitlines(keepends=True):
        pos += len(raw)
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        through[record["n"]] = pos
        if record["type"] == "open":
            ends[record["id"]] = None
        else:
            ends[record["id"]] = record["n"]
    return ends, through


class FindExchangeTests(SynchronousTestCase):
    @settings(max_examples=150, deadline=None)
    @given(_ops)
    def test_everyExchangeFound(self, ops: list[tuple[str, int]]) -> None:
        """
        In any log, every exchange is found with its own end line (or none
        while open), whether the caller names the end line or not; the end
        line of another exchange, or a number that is no open line, is
        refused.
        """
        data, _ = modelLog(ops)
        readAt = reader(data)
        ends, _ = _model(data)
        with smallBlocks():
            for exchangeId, endN in ends.items():
                opened, ended = findExchange(readAt, len(data), exchangeId)
                self.assertEqual(opened["n"], exchangeId)
                self.assertEqual(ended["n"] if ended else None, endN)
                if endN is not None:
                    opened, ended = findExchange(readAt, len(data), exchangeId, endN)
                    self.assertEqual((opened["n"], ended and ended["n"]), (exchangeId, endN))
            for exchangeId, endN in ends.items():
                for other in ends.values():
                    if other is not None and other != endN:
                        self.assertRaises(NoSuchExchange, findExchange, readAt, len(data), exchangeId, other)
            for endN in ends.values():
                if endN is not None:
                    self.assertRaises(NoSuchExchange, findExchange, readAt, len(data), endN)

    @settings(max_examples=150, deadline=None)
    @given(_ops)
    def test_sizeThrough(self, ops: list[tuple[str, int]]) -> None:
        """
        The log's size through line C{n} ends with that line (or with the
        lines that are not JSON right after it), and the line numbered C{n}
        is that line; a line the log lacks gives None.
        """
        data, _ = modelLog(ops)
        readAt = reader(data)
        _, through = _model(data)
        with smallBlocks():
            self.assertEqual(sizeThrough(readAt, len(data), 0), 0)
            for n, end in through.items():
                size = sizeThrough(readAt, len(data), n)
                assert size is not None
                self.assertGreaterEqual(size, end)
                self.assertNotIn(b"{", data[end:size], "only lines that are not netlog lines after it")
                text = lineAt(readAt, len(data), n)
                assert text is not None
                self.assertTrue(data[:end].endswith(b"\n" + text + b"\n") or data[:end] == text + b"\n")
            self.assertIsNone(sizeThrough(readAt, len(data), len(through) + 1))
            self.assertIsNone(lineAt(readAt, len(data), len(through) + 1))

    def test_endBeyondScan(self) -> None:
        """
        Without its end line's number, an end line further than the scan
        reaches is not looked for: the exchange comes back open.
        """
        lines = [encodeLine(1, OPEN, 1, 1, 0.0, {})]
        lines += [encodeLine(n, OPEN, n, 1, 0.0, {"pad": "p" * 100}) for n in range(2, 50)]
        lines.append(encodeLine(50, END, 1, 2, 0.0, {}))
        data = b"".join(lines)
        readAt = reader(data)
        self.assertIsNone(findExchange(readAt, len(data), 1, maxScan=1000)[1])
        self.assertEqual(findExchange(readAt, len(data), 1)[1]["n"], 50)  # type: ignore[index]
        self.assertEqual(findExchange(readAt, len(data), 1, 50, maxScan=1000)[1]["n"], 50)  # type: ignore[index]


class DetailTests(SynchronousTestCase):
    def test_detail(self) -> None:
        """
        The detail has both records as logged but for their bodies' base64,
        and the HAR entry with the bodies as text, the form's parameters and
        the answer's cookies.
        """
        form = b"user=ann&next=%2Faccount"
        opened = {
            "n": 7, "type": "open", "id": 7, "proxy": "site", "kind": "exchange", "started": 1764670000.0,
            "request": {
                "method": "POST", "url": "https://shop.test/login", "version": "HTTP/1.1",
                "headers": [["Host", "shop.test"], ["Content-Type", "application/x-www-form-urlencoded"]],
                "headers_size": 90,
            },
            "server": {"host": "shop.test", "port": 443, "address": "127.0.0.1"},
        }
        ended = {
            "n": 8, "type": "end", "id": 7, "ended": 1764670000.2,
            "times": {"connected": None, "sent": 1764670000.1, "first_byte": 1764670000.15, "end": 1764670000.2},
            "request_body": {"size": len(form), "data": base64.b64encode(form).decode()},
            "response": {
                "status": 303, "reason": "See Other", "version": "HTTP/1.1",
                "headers": [["Location", "/account"], ["Set-Cookie", "session=abc; Path=/; HttpOnly"]],
                "headers_size": 80, "body": {"size": 2, "data": base64.b64encode(b"ok").decode()},
            },
            "bytes": {"up": 120, "down": 90},
        }
        detail = exchangeDetail(opened, ended)
        self.assertEqual(detail["id"], 7)
        self.assertEqual(detail["open"], opened)
        self.assertNotIn("data", detail["end"]["request_body"])
        self.assertNotIn("data", detail["end"]["response"]["body"])
        self.assertEqual(detail["end"]["response"]["headers"], ended["response"]["headers"])  # type: ignore[index]
        self.assertIn("data", ended["request_body"], "the caller's record is left as it was")  # type: ignore[operator]
        entry = detail["entry"]
        self.assertEqual(
            [(p["name"], p["value"]) for p in entry["request"]["postData"]["params"]],
            [("user", "ann"), ("next", "/account")],
        )
        self.assertEqual([(c["name"], c["value"]) for c in entry["response"]["cookies"]], [("session", "abc")])
        self.assertEqual(entry["_id"], 7)
        json.dumps(detail)

    def test_open(self) -> None:
        """
        An exchange still open has no end record, and an entry that says so.
        """
        opened = {"n": 3, "type": "open", "id": 3, "kind": "tunnel", "request": {"method": "CONNECT"}}
        detail = exchangeDetail(opened, None)
        self.assertIsNone(detail["end"])
        self.assertTrue(detail["entry"]["_open"])


class NotesTests(SynchronousTestCase):
    def test_webSocketMessages(self) -> None:
        """
        The detail of a WebSocket carries its messages from the message
        lines between its open and its end, and no other exchange's.
        """
        from netlog.core.exchange import findNotes
        from netlog.core.records import headRecord, messageRecord

        head = {"status": 101, "reason": "Switching Protocols", "version": "HTTP/1.1",
                "headers": [["Upgrade", "websocket"]], "headers_size": 60}
        request = {"method": "GET", "url": "ws://a.test/chat", "version": "HTTP/1.1", "headers": [],
                   "headers_size": 40}
        lines = [
            encodeLine(1, OPEN, 1, 1, 10.0, {"kind": "exchange", "started": 10.0, "request": request}),
            encodeLine(2, OPEN, 2, 1, 10.1, {"kind": "exchange", "started": 10.1, "request": request}),
            encodeLine(3, "head", 1, 1, 10.2, headRecord(10.2, head)),
            encodeLine(4, "message", 1, 1, 10.3, messageRecord("up", 1, 5, b"hello", False)),
            encodeLine(5, "message", 2, 1, 10.4, messageRecord("up", 1, 5, b"other", False)),
            encodeLine(6, "message", 1, 1, 10.5, messageRecord("down", 2, 2, b"\x00\xff", False)),
            encodeLine(7, END, 1, 1, 11.0, {"ended": 11.0, "bytes": {"up": 1, "down": 1},
                                            "response": head}),
            encodeLine(8, "message", 1, 1, 11.5, messageRecord("up", 1, 4, b"late", False)),
        ]
        data = b"".join(lines)
        readAt = reader(data)
        opened, ended = findExchange(readAt, len(data), 1, 7)
        for endLine in (7, None):
            notes = findNotes(readAt, len(data), 1, endLine)
            self.assertEqual([n["n"] for n in notes], [3, 4, 6])
        entry = exchangeDetail(opened, ended, findNotes(readAt, len(data), 1, 7))["entry"]
        messages = entry["_webSocketMessages"]
        self.assertEqual([(m["type"], m["opcode"], m["data"]) for m in messages],
                         [("send", 1, "hello"), ("receive", 2, base64.b64encode(b"\x00\xff").decode())])
