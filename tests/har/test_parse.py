"""
The second pass reads each line with orjson where it can: what it gives for
any line, netlog's or damaged, is what the json module gives (or L{None}
where json can't read it either), as properties.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.har import _parse, _parseEnd

_decoder = json.JSONDecoder()


def byJson(line: bytes) -> dict[str, Any] | None:
    """
    A line's object as the json module reads it (as the export read every
    line before orjson): UTF-8 with surrogates let through, whitespace
    after it, an object or nothing.
    """
    try:
        text = line.decode("utf-8", "surrogatepass")
        record, end = _decoder.raw_decode(text)
    except (ValueError, RecursionError):
        return None
    if text[end:].strip(" \t\n\r"):
        return None
    return record if isinstance(record, dict) else None


#: JSON numbers as text: long integers (past 64 bits too), many digits,
#: exponents past a double's range either way.
NUMBERS = st.from_regex(r"\A-?(0|[1-9][0-9]{0,40})(\.[0-9]{1,30})?([eE][-+]?[0-9]{1,4})?\Z", fullmatch=True)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(codec=None, exclude_categories=())),  # lone surrogates too
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=20,
)


def written(record: dict[str, Any], ascii: bool) -> bytes:
    """
    A record as a line: UTF-8 (a lone surrogate as its own three bytes,
    as Python's surrogatepass writes it, when not escaped).
    """
    return json.dumps(record, ensure_ascii=ascii, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n"


class ParseTests(SynchronousTestCase):
    """
    L{_parse} and L{_parseEnd} against the json module.
    """

    def assertSame(self, line: bytes) -> None:
        expected = byJson(line)
        # repr tells 1 from 1.0 and True, -0.0 from 0.0, and shows NaN
        self.assertEqual(repr(_parse(line)), repr(expected))
        if b'"data":"' not in line:
            self.assertEqual(repr(_parseEnd(line)), repr(expected))

    @given(st.dictionaries(st.text(max_size=8), VALUES, max_size=6), st.booleans())
    @settings(max_examples=500, deadline=None)
    def test_records(self, record: dict[str, Any], ascii: bool) -> None:
        """
        Any object JSON (and Python's json, with NaN and infinities) can
        write reads back as json reads it.
        """
        self.assertSame(written({"n": 1, **record}, ascii))

    @given(st.lists(NUMBERS, min_size=1, max_size=5))
    @settings(max_examples=500, deadline=None)
    def test_numbers(self, numbers: list[str]) -> None:
        """
        Numbers as text, whatever their length and exponent: integers past
        64 bits stay integers, floats round as json rounds them.
        """
        self.assertSame(('{"n":1,"v":[%s],"w":%s}\n' % (",".join(numbers), numbers[0])).encode())

    @given(
        st.dictionaries(st.text(max_size=8), VALUES, max_size=4),
        st.lists(st.tuples(st.floats(0, 1), st.integers(0, 3), st.binary(max_size=4)), min_size=1, max_size=3),
    )
    @settings(max_examples=500, deadline=None)
    def test_damaged(self, record: dict[str, Any], damage: list[tuple[float, int, bytes]]) -> None:
        """
        A line with bytes cut out, put in or changed (invalid UTF-8, a
        brace short, junk after it) reads as json reads it, or not at all.
        """
        line = bytearray(written({"n": 1, "type": "open", **record}, False))
        for where, cut, put in damage:
            at = int(where * len(line))
            line[at : at + cut] = put
        self.assertSame(bytes(line))

    def test_examples(self) -> None:
        """
        What orjson reads otherwise or not at all: json's answer.
        """
        for line in [
            b'{"n":123456789012345678901234}\n',
            b'{"n":-9223372036854775809}\n',
            b'{"n":18446744073709551616}\n',
            b'{"n":1e400,"m":-1e400}\n',
            b'{"n":NaN,"m":Infinity}\n',
            b'{"n":"\\ud800"}\n',
            b'{"n":"\xed\xa0\x80"}\n',
            b'{"n":1,"n":2}\n',
            b'{"n":1}\x0c\n',
            b'{"n":1} \t\r\n',
            b'{"n":' + b"[" * 2000 + b"]" * 2000 + b"}\n",
            b'{"n":[1,2]\n',
            b'{"n":"12345678901234567890"}\n',
        ]:
            self.assertSame(line)
