"""
The log line format: what a line holds and how it reads back.
"""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import END, OPEN, decodeLine, encodeLine, parseJSON


#: A line this long is read by the way for long lines (its values looked
#: through once read, not its bytes scanned first).
LONG_LINE = 4096

#: Integers at the edges of what a 64-bit reader holds, and past them.
EDGE_INTEGERS = [
    2**63 - 1, -2**63, 2**64 - 1, 2**64, -2**63 - 1, 10**30, -10**30,
    10**18, -10**18, 9999999999999999999, -9999999999999999999, 0,
]


def exactly(value: object) -> str:
    """
    A value as the C{json} module writes it: equal only for equal values of
    the same types (C{2**64} and C{1.8446744073709552e+19} differ here,
    where C{==} calls them equal).
    """
    return json.dumps(value)


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

    def test_nonFiniteRefusedAtAnyDepth(self) -> None:
        """
        A NaN or an infinity is refused as the C{json} module refuses it
        (the writer then keeps the line with C{_unencodable}), wherever it
        is in the fields: never written as a silent C{null}.
        """
        for fields in ({"v": float("nan")}, {"times": {"end": float("inf")}},
                       {"a": {"b": {"c": float("-inf")}}}, {"l": [1, [float("nan")]]},
                       # Beside the usual null (a reused connection's), and in its place.
                       {"times": {"connected": None, "end": float("nan")}},
                       {"times": {"connected": None}, "v": [float("inf")]},
                       {"times": {"connected": float("nan")}}):
            with self.assertRaises(ValueError):
                encodeLine(1, OPEN, 1, 1, 0.0, fields)
        self.assertEqual(json.loads(encodeLine(1, OPEN, 1, 1, 0.0, {"a": None, "b": [None, 1.5]}))["b"],
                         [None, 1.5])
        self.assertEqual(json.loads(encodeLine(1, OPEN, 1, 1, 0.0, {"times": {"connected": None, "end": 2.5}}))["times"],
                         {"connected": None, "end": 2.5})

    @given(st.dictionaries(st.text(), st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda c: st.lists(c) | st.dictionaries(st.text(), c),
        max_leaves=10)), st.sampled_from([0, LONG_LINE]))
    def test_roundTrip(self, fields: dict, padding: int) -> None:  # type: ignore[type-arg]
        """
        Any JSON fields, any text in them, give one valid UTF-8 line that
        decodes to the same fields, each of the same type (an integer of any
        size stays that integer, never a float), in a short line and in a
        long one (which are read differently).
        """
        fields = {**fields, "pad": "x" * padding}
        line = encodeLine(3, OPEN, 3, 1, 0.0, fields)
        self.assertEqual(line.count(b"\n"), 1)
        line.decode("utf-8")
        record = decodeLine(line)
        assert record is not None
        for key, value in fields.items():
            if key not in ("n", "type", "id", "open_from", "time"):
                self.assertEqual(exactly(record[key]), exactly(value))


class BigIntegerTests(SynchronousTestCase):
    def test_edgeValues(self) -> None:
        """
        Every edge integer reads back as the same integer, alone, in a
        list, in an object, in a short line and a long one.
        """
        for value in EDGE_INTEGERS:
            for padding in (0, LONG_LINE):
                for wrapped in (value, [1, value], {"deep": {"er": [value]}}):
                    line = encodeLine(3, OPEN, 3, 1, 0.0, {"x": wrapped, "pad": "y" * padding})
                    record = decodeLine(line)
                    assert record is not None, line
                    self.assertEqual(exactly(record["x"]), exactly(wrapped), (value, padding))
                    self.assertEqual(exactly(parseJSON(line)["x"]), exactly(wrapped))

    def test_digitsInTextAreText(self) -> None:
        """
        A long run of digits inside a string (a body, an id in a URL) is
        read as the string it is, and a float far from 0 as that float.
        """
        for fields in ({"url": "https://shop.test/order/123456789012345678901234567890"},
                       {"size": 1e30, "negative": -2.5e19},
                       {"mixed": ["12345678901234567890", 12345678901234567890, 1.5]}):
            for padding in (0, LONG_LINE):
                line = encodeLine(3, OPEN, 3, 1, 0.0, {**fields, "pad": "z" * padding})
                record = decodeLine(line)
                assert record is not None
                for key, value in fields.items():
                    self.assertEqual(exactly(record[key]), exactly(value))

    def test_sameAsJsonModule(self) -> None:
        """
        What orjson refuses or might read otherwise reads exactly as the
        C{json} module reads it: a lone surrogate, C{NaN}, C{1e400}, a
        repeated key (the last wins), C{-0.0}, the smallest subnormal.
        """
        for text in [b'{"n":1,"v":"\\ud800"}', b'{"n":1,"v":NaN}', b'{"n":1,"v":1e400}',
                     b'{"n":1,"v":1,"v":2}', b'{"n":1,"v":-0.0}', b'{"n":1,"v":5e-324}',
                     b'{"n":1,"v":[-9223372036854775809,18446744073709551616]}']:
            self.assertEqual(repr(parseJSON(text)), repr(json.loads(text)), text)


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
