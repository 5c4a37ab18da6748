"""
The log line format: what a line holds and how it reads back.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import END, OPEN, decodeLine, encodeLine


class EncodeLineTests(SynchronousTestCase):
    def test_fixedFieldsFirst(self) -> None:
        """
        A line is one JSON object ending in a newline, with n, type, id,
        open_from and time first, then the fields given.
        """
        line = encodeLine(7, OPEN, 7, 3, 1700000000.1234567, {"proxy": "site"})
        self.assertTrue(line.endswith(b"\n"))
        self.assertEqual(line.count(b"\n"), 1)
        record = json.loads(line)
        self.assertEqual(list(record), ["n", "type", "id", "open_from", "time", "proxy"])
        self.assertEqual(record["time"], 1700000000.123457)

    def test_fieldsCannotOverrideFixed(self) -> None:
        """
        A field named like a fixed field doesn't replace it.
        """
        record = json.loads(encodeLine(2, END, 1, 1, 0.0, {"n": 99, "id": 5, "x": 1}))
        self.assertEqual((record["n"], record["id"], record["x"]), (2, 1, 1))

    def test_newlinesEscaped(self) -> None:
        """
        A newline inside a value never splits the line.
        """
        line = encodeLine(1, OPEN, 1, 1, 0.0, {"v": "a\nb\r\n"})
        self.assertEqual(line.count(b"\n"), 1)

    def test_loneSurrogate(self) -> None:
        """
        A lone surrogate (bytes decoded with surrogateescape) makes a valid
        UTF-8 line that reads back to the same string.
        """
        line = encodeLine(1, OPEN, 1, 1, 0.0, {"v": "x\udcff\u00e9\\"})
        line.decode("utf-8")
        self.assertEqual(decodeLine(line)["v"], "x\udcff\u00e9\\")  # type: ignore[index]

    @given(st.dictionaries(st.text(), st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                                                     lambda c: st.lists(c) | st.dictionaries(st.text(), c),
                                                     max_leaves=10)))
    def test_roundTrip(self, fields: dict) -> None:  # type: ignore[type-arg]
        """
        Any JSON fields, any text in them, give one valid UTF-8 line that
        decodes to the same fields.
        """
        line = encodeLine(3, OPEN, 3, 1, 0.0, fields)
        self.assertEqual(line.count(b"\n"), 1)
        line.decode("utf-8")
        record = decodeLine(line)
        assert record is not None
        for key, value in fields.items():
            if key not in ("n", "type", "id", "open_from", "time"):
                self.assertEqual(record[key], value)


class DecodeLineTests(SynchronousTestCase):
    def test_table(self) -> None:
        """
        Only a JSON object with a positive integer n is a netlog line.
        """
        table = [
            (b'{"n":1,"type":"open"}', True),
            (b'{"n":1,"type":"open"}\n', True),
            (b'{"n":1,"type":"op', False),
            (b"", False),
            (b"garbage", False),
            (b"[1,2]", False),
            (b'{"n":"1"}', False),
            (b'{"n":0}', False),
            (b'{"n":-3}', False),
            (b'{"n":true}', False),
            (b'{"n":1.5}', False),
            (b'{"type":"open"}', False),
            (b"\xff\xfe", False),
        ]
        for line, ok in table:
            self.assertEqual(decodeLine(line) is not None, ok, line)
