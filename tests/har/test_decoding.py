"""
Content decoding with caps, and text by charset (netlog.core.decoding): table
and property tests.
"""

from __future__ import annotations

import gzip
import zlib

import brotli
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.decoding import decodeContent, decodeText, isTextType, parseCodings, parseContentType


def rawDeflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


ENCODERS = {
    "gzip": gzip.compress,
    "deflate": zlib.compress,
    "raw-deflate": rawDeflate,
    "br": brotli.compress,
    "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
}


def coding(name: str) -> str:
    return "deflate" if name == "raw-deflate" else name


class ParseTests(SynchronousTestCase):
    """
    Header values.
    """

    def test_codings(self) -> None:
        """
        Content-Encoding lists the codings in the order applied, identity
        and blanks left out, names lowercased.
        """
        self.assertEqual(parseCodings("gzip, BR"), ["gzip", "br"])
        self.assertEqual(parseCodings(" identity ,, zstd"), ["zstd"])
        self.assertEqual(parseCodings(None), [])

    def test_contentType(self) -> None:
        """
        Content-Type: type lowercased, parameters by lowercased name, quoted
        values unquoted, the first of a repeated parameter kept.
        """
        self.assertEqual(
            parseContentType('Multipart/Form-Data; Boundary="a;b\\"c"; charset=UTF-8; charset=x'),
            ("multipart/form-data", {"boundary": 'a;b"c', "charset": "UTF-8"}),
        )
        self.assertEqual(parseContentType(""), ("", {}))
        self.assertEqual(parseContentType("text/html;"), ("text/html", {}))

    def test_textTypes(self) -> None:
        """
        Text, JSON, forms, XML and scripts are text; images and octets not.
        """
        for t in ("text/html", "application/json", "application/ld+json", "application/xml", "image/svg+xml",
                  "application/javascript", "application/x-www-form-urlencoded", "application/atom+xml"):
            self.assertTrue(isTextType(t), t)
        for t in ("image/png", "application/octet-stream", "font/woff2", "video/mp4", "application/pdf"):
            self.assertFalse(isTextType(t), t)


class DecodeTests(SynchronousTestCase):
    """
    decodeContent.
    """

    @given(st.binary(max_size=4096), st.sampled_from(sorted(ENCODERS)))
    @settings(max_examples=60, deadline=None)
    def test_roundTrip(self, data: bytes, name: str) -> None:
        """
        What a coding made, decoding gives back, whole and not truncated.
        """
        result = decodeContent(ENCODERS[name](data), [coding(name)], 1 << 20)
        self.assertEqual(result.data, data)
        self.assertFalse(result.truncated)
        self.assertIsNone(result.undecoded)

    @given(st.binary(min_size=1, max_size=4096), st.sampled_from(sorted(ENCODERS)), st.data())
    @settings(max_examples=80, deadline=None)
    def test_cutAndCapped(self, data: bytes, name: str, draw: st.DataObject) -> None:
        """
        A cut body never raises: it decodes to a prefix of the whole (or
        is left undecoded), and output never passes the limit.
        """
        encoded = ENCODERS[name](data)
        cut = draw.draw(st.integers(0, len(encoded)))
        limit = draw.draw(st.integers(0, len(data) + 10))
        result = decodeContent(encoded[:cut], [coding(name)], limit, cut=cut < len(encoded))
        if result.undecoded is None:
            self.assertTrue(data.startswith(result.data))
            self.assertLessEqual(len(result.data), limit)
            if len(result.data) < len(data):
                self.assertTrue(result.truncated)
        else:
            self.assertEqual(result.data, encoded[:cut])

    @given(st.binary(max_size=512), st.lists(st.sampled_from(["gzip", "br", "zstd", "deflate", "x-unknown"]), max_size=3))
    @settings(max_examples=80, deadline=None)
    def test_garbage(self, data: bytes, codings: list[str]) -> None:
        """
        Any bytes under any codings: a result, never an exception.
        """
        result = decodeContent(data, codings, 1000)
        self.assertLessEqual(len(result.data), max(1000, len(data)))

    def test_bombs(self) -> None:
        """
        Every coding stops at the limit on a body that inflates far past it.
        """
        zeros = b"\0" * (20 * 1024 * 1024)
        for name, encode in ENCODERS.items():
            result = decodeContent(encode(zeros), [coding(name)], 1000)
            self.assertEqual(len(result.data), 1000, name)
            self.assertTrue(result.truncated, name)

    def test_multiMemberGzip(self) -> None:
        """
        gzip members one after another decode as one body.
        """
        result = decodeContent(gzip.compress(b"one ") + gzip.compress(b"two"), ["gzip"], 100)
        self.assertEqual(result.data, b"one two")
        self.assertFalse(result.truncated)

    def test_unknown(self) -> None:
        """
        An unknown coding leaves the body as it is, named in undecoded.
        """
        result = decodeContent(b"abc", ["compress"], 100)
        self.assertEqual((result.data, result.undecoded), (b"abc", ("compress", "unknown content coding")))


class TextTests(SynchronousTestCase):
    """
    decodeText.
    """

    @given(st.text(max_size=200), st.sampled_from(["utf-8", "utf-16", "iso-8859-15", "shift_jis", "windows-1251"]))
    @settings(max_examples=80, deadline=None)
    def test_declared(self, text: str, charset: str) -> None:
        """
        Text in a declared charset reads back as it was, losslessly.
        """
        try:
            data = text.encode(charset)
        except UnicodeEncodeError:
            return
        self.assertEqual(decodeText(data, "text/plain", {"charset": charset}, False), (text, True))

    @given(st.binary(max_size=300))
    @settings(max_examples=80, deadline=None)
    def test_undeclaredTextIsLossless(self, data: bytes) -> None:
        """
        Undeclared text/* is UTF-8 when it is, else windows-1252, which maps
        every byte: never a loss.
        """
        text, lossless = decodeText(data, "text/html", {}, False)
        self.assertTrue(lossless)
        if data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")) or b"charset" in data:
            return
        try:
            self.assertEqual(text, data.decode("utf-8"))
        except UnicodeDecodeError:
            self.assertEqual(len(text), len(data))
