"""
Tests of L{netlog.core.logline.encodePieces} and L{AsciiText}: a line whose
big values are spliced in as their own bytes is, joined, exactly the line
the plain encoding gives.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core import logline
from netlog.core.logline import (
    END,
    MAX_SPLICED,
    OPEN,
    AsciiText,
    encodeLine,
    encodePieces,
    encodeRecord,
)


def plain(value: Any) -> Any:
    """
    The same fields with every L{AsciiText} as the string it is.
    """
    if isinstance(value, AsciiText):
        return str(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def joined(pieces: list[Any]) -> bytes:
    return b"".join(bytes(p) for p in pieces)


_base64 = st.binary(max_size=40).map(lambda b: base64.b64encode(b))
_spliced = st.one_of(
    _base64.map(AsciiText),
    _base64.map(lambda b: AsciiText(bytearray(b))),
    _base64.map(lambda b: AsciiText(memoryview(b))),
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    # Any text: quotes, backslashes, controls, lone surrogates.
    st.text(),
)
_values = st.recursive(
    st.one_of(_scalars, _spliced),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


class SplicedLineTests(SynchronousTestCase):
    """
    The pieces of a line are the line.
    """

    def test_bodyValues(self) -> None:
        """
        An end line with a request and an answer body spliced: the pieces
        are the text before, the base64 itself (not copied), the text
        between, the other base64, the text after; joined they are the plain
        line.
        """
        request = base64.b64encode(b"item=42&n=1")
        answer = memoryview(base64.b64encode(b"<!doctype html>"))
        fields = {
            "request_body": {"size": 11, "data": AsciiText(request)},
            "response": {"status": 200, "body": {"size": 15, "data": AsciiText(answer)}},
            "bytes": {"up": 1, "down": 2},
        }
        pieces = encodePieces(9, END, 7, 7, 1.5, fields)
        self.assertEqual(len(pieces), 5)
        self.assertIs(pieces[1], request)
        self.assertIs(pieces[3], answer)
        self.assertEqual(joined(pieces), encodeRecord(9, END, 7, 7, 1.5, plain(fields)))
        self.assertEqual(json.loads(joined(pieces))["request_body"]["data"], request.decode())

    def test_table(self) -> None:
        """
        Empty, bytearray and memoryview values, values in lists, next to
        escaped text and lone surrogates: each joined line is the plain one.
        """
        table: list[dict[str, Any]] = [
            {"data": AsciiText(b"")},
            {"data": AsciiText(bytearray(b"QUJD"))},
            {"a": "\udcff\"\\\n", "data": AsciiText(memoryview(b"QUJD")[1:3]), "z": "\u00e9"},
            {"list": [AsciiText(b"QQ=="), "x", AsciiText(b"Qg==")]},
            {"nested": {"deeper": {"data": AsciiText(b"YWJj")}}, "n": 99},
            {"\u2028key\"": AsciiText(b"YWJj")},
        ]
        for fields in table:
            pieces = encodePieces(1, OPEN, 1, 1, 0.25, fields)
            self.assertEqual(joined(pieces), encodeRecord(1, OPEN, 1, 1, 0.25, plain(fields)), fields)
            self.assertEqual(encodeRecord(1, OPEN, 1, 1, 0.25, fields), joined(pieces))
            self.assertEqual(encodeLine(1, OPEN, 1, 1, 0.25, fields), joined(pieces) + b"\n")

    def test_noSplicedValueOnePiece(self) -> None:
        """
        A line with no spliced value is one piece: the plain line.
        """
        fields = {"proxy": "site", "v": "x\udcff"}
        self.assertEqual(encodePieces(2, OPEN, 2, 1, 0.0, fields), [encodeRecord(2, OPEN, 2, 1, 0.0, fields)])

    def test_stand_inTextCollides(self) -> None:
        """
        A field whose text is the stand-in a spliced value is encoded as
        (keys and values alike) doesn't move the value: the line is built
        whole, and is still the plain line.
        """
        token = logline._TOKEN + "0"
        for fields in (
            {"a": token, "data": AsciiText(b"YWJj")},
            {token: 1, "data": AsciiText(b"YWJj")},
            {"data": AsciiText(b"YWJj"), "z": [token]},
        ):
            pieces = encodePieces(1, END, 1, 1, 0.0, fields)
            self.assertEqual(joined(pieces), encodeRecord(1, END, 1, 1, 0.0, plain(fields)))
            record = json.loads(joined(pieces))
            self.assertEqual(record["data"], "YWJj")

    def test_tooManySpliced(self) -> None:
        """
        Past L{MAX_SPLICED} values in a line, the rest are written as text:
        the line stays the plain line, in few pieces.
        """
        fields = {f"k{i}": AsciiText(b"YWJj") for i in range(MAX_SPLICED + 3)}
        pieces = encodePieces(1, END, 1, 1, 0.0, fields)
        self.assertEqual(len(pieces), 2 * MAX_SPLICED + 1)
        self.assertEqual(joined(pieces), encodeRecord(1, END, 1, 1, 0.0, plain(fields)))

    def test_asciiText(self) -> None:
        """
        An L{AsciiText} is its bytes' length, reads as its string, and
        equals another over the same bytes.
        """
        text = AsciiText(memoryview(b"YWJj"))
        self.assertEqual((len(text), str(text)), (4, "YWJj"))
        self.assertEqual(text, AsciiText(b"YWJj"))
        self.assertNotEqual(text, AsciiText(b"YWJk"))

    @settings(max_examples=300, deadline=None)
    @given(st.dictionaries(st.text(max_size=8), _values, max_size=6), st.integers(1, 2**40), st.floats(0, 2e9))
    def test_anyFields(self, fields: dict[str, Any], n: int, now: float) -> None:
        """
        Whatever the fields (odd keys, any text, spliced values anywhere),
        the joined pieces are the plain line, byte for byte, and read back
        to the plain fields.
        """
        pieces = encodePieces(n, END, n, n, now, fields)
        line = joined(pieces)
        self.assertEqual(line, encodeRecord(n, END, n, n, now, plain(fields)))
        self.assertNotIn(b"\n", line)
        line.decode("utf-8")
