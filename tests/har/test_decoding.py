"""
Content decoding with caps, and text by charset (netlog.core.decoding): table
and property tests.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import zlib

import brotli
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.capture import MAX_REQUEST_BODY, MAX_RESPONSE_BODY
from netlog.core.decoding import (
    FAST_BASE64_MIN,
    REQUEST_LIMIT,
    RESPONSE_LIMIT,
    SNIFF_BYTES,
    decodeBase64,
    decodeContent,
    decodeText,
    isTextType,
    parseCodings,
    parseContentType,
    prescanHTML,
    textEncoding,
)


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


def _a2b(data: str | bytes) -> bytes | type:
    try:
        return binascii.a2b_base64(data)
    except (binascii.Error, ValueError) as e:
        return type(e)


def _decoded(data: str | bytes) -> bytes | type:
    try:
        return decodeBase64(data)
    except (binascii.Error, ValueError) as e:
        return type(e)


#: Base64's alphabet, its padding, and bytes binascii skips or refuses.
_BASE64_ISH = st.sampled_from(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=" + "= \n\r\t-_.:\\\"\x00\x80\xff\u00e9"
)


#: Base64 long enough to be decoded by OpenSSL where it is at hand.
LONG_BASE64 = base64.b64encode(bytes(range(256)) * 12).decode("ascii")
assert len(LONG_BASE64) >= FAST_BASE64_MIN


class Base64Tests(SynchronousTestCase):
    def test_bodies(self) -> None:
        """
        A body's base64 as netlog writes it (any length, so any padding)
        decodes to the body, given as text or bytes.
        """
        for size in (0, 1, 2, 3, 4, 5, 100, 99_999, 100_000, 100_001):
            body = bytes(range(256)) * (size // 256) + bytes(range(size % 256))
            encoded = base64.b64encode(body)
            self.assertEqual(decodeBase64(encoded), body)
            self.assertEqual(decodeBase64(encoded.decode("ascii")), body)

    @settings(max_examples=2000)
    @given(st.lists(_BASE64_ISH, max_size=24).map("".join), st.booleans())
    def test_sameAsBinascii(self, text: str, asBytes: bool) -> None:
        """
        Any text, base64 or not (junk, whitespace, misplaced or missing
        padding), short or after a long run of base64, decodes to what
        C{binascii.a2b_base64} gives, or fails as it does.
        """
        for encoded in (text, LONG_BASE64 + text):
            data: str | bytes = encoded.encode("utf-8") if asBytes else encoded
            self.assertEqual(_decoded(data), _a2b(data))

    @settings(max_examples=500)
    @given(st.binary(max_size=64), st.integers(min_value=0, max_value=90), st.sampled_from(list(" =\n.-\x00\x80")))
    def test_damagedBase64(self, body: bytes, at: int, junk: str) -> None:
        """
        Long base64 with one character put in or replaced near its end
        decodes as C{binascii.a2b_base64} decodes it.
        """
        encoded = LONG_BASE64 + base64.b64encode(body).decode("ascii")
        at = min(len(LONG_BASE64) + at, len(encoded))
        for data in (encoded[:at] + junk + encoded[at:], encoded[:at] + junk + encoded[at + 1 :]):
            self.assertEqual(_decoded(data), _a2b(data))


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

    @given(st.text(max_size=200), st.sampled_from(["utf-8", "utf-16", "iso-8859-15", "windows-1251"]))
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

    @given(st.text(st.characters(blacklist_characters="\uf8f0\uf8f1\uf8f2\uf8f3", blacklist_categories=("Cs",)),
                   max_size=200))
    @settings(max_examples=80, deadline=None)
    def test_shiftJIS(self, text: str) -> None:
        """
        Text that Windows-31J holds, labelled shift_jis, reads back losslessly
        as the same bytes (Windows writes U+301C WAVE DASH as 0x8160, which
        browsers read as U+FF5E; only Windows' four one-byte private-use
        characters are errors to a browser, and left out).
        """
        try:
            data = text.encode("cp932")
        except UnicodeEncodeError:
            return
        read, lossless = decodeText(data, "text/html", {"charset": "shift_jis"}, False)
        self.assertTrue(lossless)
        self.assertEqual(read.encode("cp932"), data)

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


def html(head: str, body: str = "") -> bytes:
    return f"<!doctype html><html><head>{head}</head><body>{body}</body></html>".encode("ascii")


class TextEncodingTests(SynchronousTestCase):
    """
    Which encoding text is read in, as a browser picks it.
    """

    def test_labelsAreBrowsers(self) -> None:
        """
        A label names the vendor superset browsers read: the issue's pages
        come out as Chromium showed them.
        """
        pages = [
            ("Shift_JIS", "cp932", "①②③、㈱、Ⅲ、髙橋さん、﨑"),
            ("gb2312", "gbk", "朱镕基、陶喆、张珺"),
            ("euc-kr", "cp949", "똠방각하, 펲시콜라, 쀍"),
            ("big5", "big5hkscs", "香港嘅咗啲"),
            ("iso-8859-9", "cp1254", "“Ğüzel” — 5 €"),
            ("ISO-8859-8-I", "iso8859_8", "שלום\u200f"),
        ]
        for label, codec, text in pages:
            self.assertEqual(decodeText(text.encode(codec), "text/html", {"charset": label}, False), (text, True), label)

    def test_bomOverridesLabel(self) -> None:
        """
        A byte order mark wins over the charset parameter and the body's
        declaration, and is not part of the text.
        """
        self.assertEqual(decodeText(b"\xef\xbb\xbfcaf\xc3\xa9", "text/html", {"charset": "shift_jis"}, False), ("café", True))
        self.assertEqual(decodeText(b"\xff\xfeA\x00", "text/plain", {"charset": "utf-8"}, False), ("A", True))
        self.assertEqual(decodeText(b"\xfe\xff\x00A", "text/html", {}, False), ("A", True))
        self.assertEqual(textEncoding("text/html", {}, b"\xef\xbb\xbf" + html("<meta charset=big5>")), ("UTF-8", 3))

    def test_labelOverridesBody(self) -> None:
        """
        The charset parameter wins over the body's declaration; one that
        names no encoding is ignored, as browsers ignore it.
        """
        page = html("<meta charset=koi8-r>")
        self.assertEqual(textEncoding("text/html", {"charset": "EUC-KR"}, page), ("EUC-KR", 0))
        self.assertEqual(textEncoding("text/html", {"charset": "utf8mb4"}, page), ("KOI8-R", 0))
        self.assertEqual(textEncoding("text/plain", {"charset": "x-nonsense"}, b"abc"), (None, 0))

    def test_prescan(self) -> None:
        """
        An HTML answer with no charset is read in what its first 1024 bytes
        declare, found as HTML's prescan finds it.
        """
        cases = [
            ('<meta charset="Shift_JIS">', "Shift_JIS"),
            ("<META CHARSET=KOI8-R>", "KOI8-R"),
            ("<meta/charset=big5 />", "Big5"),
            # an unquoted value ends at a space or ">" only
            ("<meta charset=big5/>", None),
            ('<meta http-equiv="Content-Type" content="text/html; charset=euc-kr">', "EUC-KR"),
            ("<meta content='text/html;charset = \"gb2312\"' http-equiv=content-type>", "GBK"),
            # content without http-equiv declares nothing
            ('<meta content="text/html; charset=euc-kr">', None),
            ('<meta http-equiv="refresh" content="0; charset=euc-kr">', None),
            # the charset attribute wins over content; a repeated attribute is ignored
            ('<meta charset=windows-1251 http-equiv=content-type content="text/html; charset=koi8-r">', "windows-1251"),
            ("<meta charset=iso-8859-7 charset=koi8-r>", "ISO-8859-7"),
            # a label that names nothing: the next declaration counts
            ("<meta charset=bogus><meta charset=iso-8859-2>", "ISO-8859-2"),
            # not in a comment, an attribute's value, or another tag
            ("<!-- <meta charset=big5> --><meta charset=euc-jp>", "EUC-JP"),
            ('<p title="<meta charset=big5>"><meta charset=euc-jp>', "EUC-JP"),
            ("<metadata charset=big5><meta charset=euc-jp>", "EUC-JP"),
            ("<?php <meta charset=big5> ?><meta charset=euc-jp>", "EUC-JP"),
            # bytes can't declare an encoding that isn't ASCII-compatible
            ("<meta charset=utf-16le>", "UTF-8"),
            ("<meta charset=x-user-defined>", "windows-1252"),
            ("<meta charset=iso-2022-kr>", "replacement"),
            ("<title>no declaration</title>", None),
            ("<meta charset=big5", None),
        ]
        for head, encoding in cases:
            self.assertEqual(prescanHTML(html(head)), encoding, head)
            self.assertEqual(textEncoding("text/html", {}, html(head)), (encoding, 0), head)

    def test_prescanFirstBytes(self) -> None:
        """
        Only the first 1024 bytes are searched; other types aren't.
        """
        padding = "<!-- " + "x" * (SNIFF_BYTES - 40) + " -->"
        self.assertEqual(prescanHTML(html(padding + "<meta charset=big5>")), None)
        self.assertEqual(prescanHTML(html("<meta charset=big5>" + padding)), "Big5")
        self.assertEqual(textEncoding("text/plain", {}, html("<meta charset=big5>")), (None, 0))

    def test_declarations(self) -> None:
        """
        XML's declaration and CSS's @charset name the encoding of their types.
        """
        xml = b'<?xml version="1.0" encoding="ISO-8859-9"?><a>\xfe</a>'
        self.assertEqual(decodeText(xml, "application/xml", {}, False), ('<?xml version="1.0" encoding="ISO-8859-9"?><a>ş</a>', True))
        self.assertEqual(textEncoding("image/svg+xml", {}, b"<?xml version='1.0' encoding='big5'?>"), ("Big5", 0))
        self.assertEqual(textEncoding("text/css", {}, b'@charset "koi8-r"; a{}'), ("KOI8-R", 0))
        self.assertEqual(textEncoding("text/css", {}, b"@charset 'koi8-r'; a{}"), (None, 0))
        self.assertEqual(textEncoding("text/css", {}, b'@charset "utf-16"; a{}'), ("UTF-8", 0))

    def test_unlabelled(self) -> None:
        """
        Text that names no encoding is UTF-8 when it is; else text/* is
        windows-1252 (every byte a character) and other types keep U+FFFD.
        """
        self.assertEqual(decodeText("café".encode(), "text/html", {}, False), ("café", True))
        self.assertEqual(decodeText(b"caf\xe9 \x93q\x94", "text/html", {}, False), ("café “q”", True))
        self.assertEqual(decodeText(b'{"a":"\xe9"}', "application/json", {}, False), ('{"a":"\ufffd"}', False))

    def test_replacement(self) -> None:
        """
        A label of the replacement encoding (ISO-2022-KR, HZ...) shows one
        U+FFFD for the whole body, as browsers show it.
        """
        self.assertEqual(decodeText(b"~{<:Ky2;S{#,~}", "text/html", {"charset": "hz-gb-2312"}, False), ("\ufffd", False))

    def test_cut(self) -> None:
        """
        A body cut inside a character loses that character only, and that is
        no loss; an error before the cut still is.
        """
        data = "髙橋".encode("cp932")
        self.assertEqual(decodeText(data[:-1], "text/plain", {"charset": "sjis"}, True), ("髙", True))
        self.assertEqual(decodeText(b"\x82\x22" + data[:-1], "text/plain", {"charset": "sjis"}, True), ('\ufffd"髙', False))

    def test_oneTextCap(self) -> None:
        """
        The text of a body stops where the proxy stops keeping it: one limit
        for a coded body and a plain one.
        """
        self.assertEqual(RESPONSE_LIMIT, MAX_RESPONSE_BODY)
        self.assertEqual(REQUEST_LIMIT, MAX_REQUEST_BODY)
