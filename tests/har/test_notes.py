"""
Head and message lines in the HAR: an entry takes its own, in order; an open
entry shows its head; lines that belong to no open exchange are counted as
unusable; readers that know only open and end lines are unchanged.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.har import entriesFromLines
from netlog.core.logline import encodeLine
from tests.har.support import T0, export, validate

OPEN = {"proxy": "site", "kind": "exchange", "started": T0, "client": "127.0.0.1:5", "connection": "c1",
        "request": {"method": "GET", "url": "wss://chat.test/ws", "version": "HTTP/1.1",
                    "headers": [["Host", "chat.test"], ["Upgrade", "websocket"]], "headers_size": 60},
        "server": {"host": "chat.test", "port": 443, "address": "127.0.0.1"}}
HEAD = {"first_byte": T0 + 0.1, "response": {"status": 101, "reason": "Switching Protocols", "version": "HTTP/1.1",
                                               "headers": [["Upgrade", "websocket"]], "headers_size": 50}}


def line(n: int, kind: str, exchangeId: int, fields: dict[str, Any], at: float = T0) -> bytes:
    return encodeLine(n, kind, exchangeId, 1, at, fields)


def message(direction: str, data: str, **extra: Any) -> dict[str, Any]:
    return dict({"direction": direction, "opcode": 1, "size": len(data), "data": data}, **extra)


class NotesTests(SynchronousTestCase):
    def test_openWebSocket(self) -> None:
        """
        A WebSocket still open: its entry has the 101 from the head line
        and the messages so far, Chrome's way, and validates.
        """
        lines = [
            line(1, "open", 1, OPEN),
            line(2, "head", 1, HEAD),
            line(3, "message", 1, message("up", "hi"), T0 + 1),
            line(4, "message", 1, {"direction": "down", "opcode": 2, "size": 3, "data": "AAEC",
                                   "encoding": "base64"}, T0 + 2),
        ]
        entries, unreadable = entriesFromLines(lines)
        self.assertEqual(unreadable, 0)
        [entry] = entries
        self.assertIs(entry["_open"], True)
        self.assertEqual(entry["response"]["status"], 101)
        self.assertEqual(entry["response"]["headers"], [{"name": "Upgrade", "value": "websocket"}])
        self.assertEqual(entry["_webSocketMessages"], [
            {"type": "send", "time": T0 + 1, "opcode": 1, "data": "hi", "_size": 2},
            {"type": "receive", "time": T0 + 2, "opcode": 2, "data": "AAEC", "_size": 3},
        ])
        har, raw, result = export(b"".join(lines))
        self.assertEqual(har["log"]["entries"], entries)
        self.assertEqual(validate(raw), [])

    def test_budgetSpent(self) -> None:
        """
        A message that kept no data (the WebSocket's budget spent) has empty
        data and is marked truncated.
        """
        lines = [line(1, "open", 1, OPEN), line(2, "message", 1, {"direction": "up", "opcode": 1, "size": 9,
                                                                   "_truncated": True})]
        [entry], _ = entriesFromLines(lines)
        self.assertEqual(entry["_webSocketMessages"],
                         [{"type": "send", "time": T0, "opcode": 1, "data": "", "_size": 9, "_truncated": True}])

    def test_strayNotes(self) -> None:
        """
        A message line for an exchange never opened, or after its end, is
        counted as unusable; the entries are as without it.
        """
        lines = [
            line(1, "open", 1, OPEN),
            line(2, "message", 7, message("up", "lost")),
            line(3, "end", 1, {"ended": T0 + 3, "times": {}, "response": HEAD["response"],
                               "bytes": {"up": 1, "down": 1}, "_websocket": {"messages_up": 0}}),
            line(4, "message", 1, message("up", "late")),
        ]
        entries, unreadable = entriesFromLines(lines)
        self.assertEqual(unreadable, 2)
        self.assertEqual(entries[0]["_webSocketMessages"], [])
        har, _, result = export(b"".join(lines))
        self.assertEqual(har["log"]["entries"], entries)

    def test_plainExchangeUnchanged(self) -> None:
        """
        An ordinary exchange has no _webSocketMessages; with a head line
        and still open, it shows the head's status.
        """
        opened = dict(OPEN, request=dict(OPEN["request"], url="https://chat.test/events"))
        head = {"first_byte": T0, "response": dict(HEAD["response"], status=200, reason="OK")}
        [entry], _ = entriesFromLines([line(1, "open", 1, opened), line(2, "head", 1, head)])
        self.assertNotIn("_webSocketMessages", entry)
        self.assertEqual((entry["response"]["status"], entry["_open"]), (200, True))
        [entry], _ = entriesFromLines([line(1, "open", 1, opened)])
        self.assertEqual(entry["response"]["status"], -1)
