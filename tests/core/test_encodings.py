"""
Tests of L{netlog.core.encodings}: the WHATWG Encoding Standard's labels, and
each encoding's decoder on its characteristic bytes, its vendor extensions
and its errors. (C{tests/browser/test_charsets.py} holds every label and
every byte pair against Chromium's own decoder.)
"""

from __future__ import annotations

import codecs

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core import encodings
from netlog.core.encodings import ENCODINGS, LABELS, decode, getEncoding, sniffBOM

E = "\ufffd"

#: Labels whose encoding is the point: the vendor supersets, the Latin-1
#: family, the aliases that surprise.
LABELLED = {
    "latin1": "windows-1252",
    "iso-8859-1": "windows-1252",
    "us-ascii": "windows-1252",
    "iso-8859-9": "windows-1254",
    "latin5": "windows-1254",
    "iso-8859-11": "windows-874",
    "tis-620": "windows-874",
    "shift_jis": "Shift_JIS",
    "sjis": "Shift_JIS",
    "ms_kanji": "Shift_JIS",
    "windows-31j": "Shift_JIS",
    "gb2312": "GBK",
    "chinese": "GBK",
    "x-gbk": "GBK",
    "iso-ir-58": "GBK",
    "gb18030": "gb18030",
    "euc-kr": "EUC-KR",
    "ks_c_5601-1987": "EUC-KR",
    "windows-949": "EUC-KR",
    "big5": "Big5",
    "big5-hkscs": "Big5",
    "iso-2022-kr": "replacement",
    "hz-gb-2312": "replacement",
    "iso-2022-cn-ext": "replacement",
    "utf-16": "UTF-16LE",
    "unicode": "UTF-16LE",
    "unicodefffe": "UTF-16BE",
    "utf8": "UTF-8",
    "unicode-1-1-utf-8": "UTF-8",
    "visual": "ISO-8859-8",
    "logical": "ISO-8859-8-I",
    "koi8-ru": "KOI8-U",
    "x-mac-ukrainian": "x-mac-cyrillic",
    "cseucpkdfmtjapanese": "EUC-JP",
    "x-user-defined": "x-user-defined",
}

#: Names that browsers don't take: Python's and IANA's, but not the standard's.
NOT_LABELS = [
    "", "cp932", "cp936", "cp949", "big5hkscs", "euc_kr", "shift_jisx0213", "utf-32", "utf-7",
    "latin-1", "iso-8859-1-windows-3.1-latin-1", "tis620", "windows-936", "utf-8\x0b", "x-cp1252x",
    # ASCII case folding only: KELVIN SIGN lowercases to "k" in Python, not here
    "\u212aoi8-r",
]

#: C{(encoding, bytes, text, lossless)}: each encoding's characteristic bytes,
#: its vendor extensions, and its errors as the standard's decoder makes them.
CASES = [
    ("UTF-8", b"caf\xc3\xa9 \xf0\x9f\x92\xa9", "café 💩", True),
    ("UTF-8", b"\xe2\x82A", E + "A", False),
    ("UTF-8", b"\xed\xa0\x80", E * 3, False),
    ("UTF-8", b"\xc0\xaf", E * 2, False),
    ("IBM866", b"\x80\xaf\xf0", "АпЁ", True),
    ("ISO-8859-2", b"\xa1\xb1\xa9", "ĄąŠ", True),
    ("ISO-8859-3", b"\xa1\xa5", "Ħ" + E, False),
    ("ISO-8859-4", b"\xa1\xbd", "ĄŊ", True),
    ("ISO-8859-5", b"\xb0\xf0", "А№", True),
    ("ISO-8859-6", b"\xc7\xa1", "ا" + E, False),
    # the 2003 edition: euro and drachma signs
    ("ISO-8859-7", b"\xa4\xa5\xe1\xae", "€₯α" + E, False),
    ("ISO-8859-8", b"\xe0\xfd\xfe", "א\u200e\u200f", True),
    ("ISO-8859-8-I", b"\xe0\xfd\xfe\xbf", "א\u200e\u200f" + E, False),
    ("ISO-8859-10", b"\xa1\xbd", "Ą\u2015", True),
    ("ISO-8859-13", b"\xa1\xff", "”’", True),
    ("ISO-8859-14", b"\xa1\xf0", "Ḃŵ", True),
    ("ISO-8859-15", b"\xa4\xbc", "€Œ", True),
    ("ISO-8859-16", b"\xa4\xaa", "€Ș", True),
    ("KOI8-R", b"\xc1\xe1\xb3", "аАЁ", True),
    # KOI8-RU: Belarusian and Ukrainian short U where KOI8-U has box drawing
    ("KOI8-U", b"\xa4\xae\xbe", "єўЎ", True),
    ("macintosh", b"\x80\xdb\xf0", "Ä€\uf8ff", True),
    ("windows-874", b"\x80\xa1\x81\xdb", "€ก\x81" + E, False),
    ("windows-1250", b"\x8a\x81\xa5", "Š\x81Ą", True),
    ("windows-1251", b"\xc0\x98\x88", "А\x98€", True),
    ("windows-1252", b"\x80\x81\x93\xe9", "€\x81“é", True),
    ("windows-1253", b"\xc1\xaa", "Α" + E, False),
    # what an iso-8859-9 page holds past the strict standard: quotes, euro
    ("windows-1254", b"\xd0\xdd\xde\xf0\xfd\xfe\x80\x93\x94", "ĞİŞğış€“”", True),
    ("windows-1255", b"\xe0\xca\xd9", "א\u05ba" + E, False),
    ("windows-1256", b"\xc7\x81", "اپ", True),
    ("windows-1257", b"\xc0\xa1", "Ą" + E, False),
    ("windows-1258", b"\xc3\xd2", "Ă\u0309", True),
    ("x-mac-cyrillic", b"\x80\xff", "А€", True),
    # GBK characters in a page labelled gb2312, the euro, GB18030-2022
    ("GBK", "朱镕基、陶喆、张珺".encode("gbk") + b"\x80", "朱镕基、陶喆、张珺€", True),
    ("GBK", b"\xa6\xd9\xfe\x59\xa3\xa0\xa8\xbc", "\ufe10\u9fb4\u3000\u1e3f", True),
    ("GBK", b"\x81\x30\x81\x30\x81\x35\xf4\x37", "\x80\ue7c7", True),
    ("GBK", b"\x82\x22\xff0", E + '"' + E + "0", False),
    # a four-byte sequence that ends early gives back all but its first byte
    ("GBK", b"\x81\x30\x41", E + "0A", False),
    ("GBK", b"\x81\x30\x81\x41", E + "0\u4e04", False),
    ("gb18030", b"\x95\x32\x82\x36\xe3\x32\x9a\x35\x84\x31\xa4\x39", "\U00020000\U0010ffff\uffff", True),
    ("gb18030", b"\x84\x31\xa5\x30", E, False),
    # HKSCS (2008 too), the euro, the standard's symbols, two code points
    ("Big5", "中文嘅咗啲".encode("big5hkscs") + b"\x87\x40\xa3\xe1", "中文嘅咗啲\u43f0€", True),
    ("Big5", b"\xa1\x45\xa1\xfe\xa2\x41\xa2\x40\xa2\x42", "\u2027／∕＼﹨", True),
    ("Big5", b"\x88\x62\x88\xa5", "\u00ca\u0304\u00ea\u030c", True),
    ("Big5", b"\x80\xa4\x22\xa4\xff", E + E + '"' + E, False),
    # NEC's row 13 and IBM's rows, JIS X 0212, half-width katakana
    ("EUC-JP", b"\xc6\xfc\xcb\xdc\xad\xa1\xfc\xee\x8e\xb1\x8f\xb0\xa1", "日本①黑ｱ丂", True),
    ("EUC-JP", b"\xa1\xc1\x8f\xa2\xb7\xa1\xdd", "～～－", True),
    ("EUC-JP", b"\x8f\xa2\x41\xa1\xa1\xff", E + "A\u3000" + E, False),
    ("ISO-2022-JP", b"\x1b$B$3$s\x1b(B!\x1b(J\\~\x1b(I1\x1b(B", "こん!¥‾ｱ", True),
    ("ISO-2022-JP", b"\x1b$B-!\x1b(B", "①", True),
    # two escapes with nothing between them, a shift byte, a bad escape
    ("ISO-2022-JP", b"\x1b$B\x1b(Ba\x0e\x1b(Z", E + "a" + E + E + "(Z", False),
    # Windows-31J: NEC and IBM extensions, end-user-defined characters
    ("Shift_JIS", "①②③、㈱、Ⅲ、髙橋さん、﨑".encode("cp932"), "①②③、㈱、Ⅲ、髙橋さん、﨑", True),
    ("Shift_JIS", b"\x81\x60\x81\x61\x81\x7c\x81\xca\xfa\x40\xed\x40\xf0\x40\x80\xb1", "～∥－￢ⅰ纊\ue000\x80ｱ", True),
    # the standard's own example: a lead byte can't mask a quote
    ("Shift_JIS", b"\x82\x22", E + '"', False),
    ("Shift_JIS", b"\xa0\xfd\xeb\x40\x81\xfd", E + E + E + "@" + E, False),
    ("EUC-KR", "똠방각하, 펲시콜라, 쀍".encode("cp949"), "똠방각하, 펲시콜라, 쀍", True),
    ("EUC-KR", b"\x81\x41\xa1\x22\x80\xff", "갂" + E + '"' + E + E, False),
    ("replacement", b"anything at all", E, False),
    ("replacement", b"", "", True),
    ("UTF-16BE", b"\x00A\xd8\x3d\xdc\xa9", "A💩", True),
    ("UTF-16BE", b"\xd8\x00\x00A\x00", E + "A" + E, False),
    ("UTF-16LE", b"A\x00\x00\xdc", "A" + E, False),
    ("x-user-defined", b"a\x80\xff", "a\uf780\uf7ff", True),
]

#: A lead byte of each multi-byte encoding, all of them.
LEADS = {
    "Shift_JIS": [*range(0x81, 0xA0), *range(0xE0, 0xFD)],
    "EUC-JP": [0x8E, 0x8F, *range(0xA1, 0xFF)],
    "EUC-KR": list(range(0x81, 0xFF)),
    "Big5": list(range(0x81, 0xFF)),
    "GBK": list(range(0x81, 0xFF)),
    "gb18030": list(range(0x81, 0xFF)),
}


class LabelTests(SynchronousTestCase):
    """
    The standard's labels and its "get an encoding".
    """

    def test_table(self) -> None:
        """
        40 encodings and 228 labels, none naming two encodings; every
        encoding's name is one of its own labels, ASCII case aside.
        """
        self.assertEqual(len(ENCODINGS), 40)
        self.assertEqual(sum(len(labels) for labels in ENCODINGS.values()), 228)
        self.assertEqual(len(LABELS), 228)
        for name, labels in ENCODINGS.items():
            self.assertIn(name.lower(), labels)

    def test_everyLabel(self) -> None:
        """
        Every label names its encoding, whatever its ASCII case and with
        ASCII whitespace around it.
        """
        for name, labels in ENCODINGS.items():
            for label in labels:
                for variant in (label, label.upper(), f" \t{label.title()}\n\x0c\r"):
                    self.assertEqual(getEncoding(variant), name, repr(variant))

    def test_named(self) -> None:
        """
        The labels whose encoding surprises name the vendors' supersets.
        """
        self.assertEqual({label: getEncoding(label) for label in LABELLED}, LABELLED)

    def test_notLabels(self) -> None:
        """
        Names the standard doesn't list name nothing.
        """
        self.assertEqual([getEncoding(label) for label in NOT_LABELS], [None] * len(NOT_LABELS))

    def test_bom(self) -> None:
        """
        A byte order mark names its encoding and its length.
        """
        self.assertEqual(sniffBOM(b"\xef\xbb\xbfa"), ("UTF-8", 3))
        self.assertEqual(sniffBOM(b"\xfe\xff\x00a"), ("UTF-16BE", 2))
        self.assertEqual(sniffBOM(b"\xff\xfea\x00"), ("UTF-16LE", 2))
        self.assertIsNone(sniffBOM(b"\xef\xbb"))


class DecodeTests(SynchronousTestCase):
    """
    Each encoding as the standard's decoder reads it.
    """

    def test_cases(self) -> None:
        """
        Every encoding reads its characteristic bytes as a browser does, its
        errors each one U+FFFD.
        """
        self.assertEqual({case[0] for case in CASES}, set(ENCODINGS))
        for name, data, text, lossless in CASES:
            self.assertEqual(decode(data, name), (text, lossless), f"{name} {data!r}")

    def test_asciiNeverMasked(self) -> None:
        """
        A lead byte followed by an ASCII byte is one error, and the ASCII byte
        is read on its own: it is never swallowed.
        """
        for name, leads in LEADS.items():
            for lead in leads:
                for byte in range(0x80):
                    text, lossless = decode(bytes((lead, byte)) + b"z", name)
                    if lossless:
                        # a character (0x40 to 0x7E trail a lead in some
                        # encodings; Big5 has two that are two code points)
                        self.assertIn(len(text), (2, 3), f"{name} {lead:02x}{byte:02x}")
                        self.assertEqual(text[-1], "z")
                    else:
                        self.assertEqual(text, E + chr(byte) + "z", f"{name} {lead:02x}{byte:02x}")

    def test_leadAtEnd(self) -> None:
        """
        A lead byte at the end is one error, or nothing when the body was cut
        there (the rest of its character never came).
        """
        for name, leads in LEADS.items():
            end = bytes((leads[0],))
            self.assertEqual(decode(b"ab" + end, name), ("ab" + E, False), name)
            self.assertEqual(decode(b"ab" + end, name, final=False), ("ab", True), name)
        self.assertEqual(decode(b"a\x81\x30\x81", "gb18030"), ("a" + E, False))
        self.assertEqual(decode(b"a\x81\x30\x81", "gb18030", final=False), ("a", True))
        self.assertEqual(decode(b"a\x8f\xa2", "EUC-JP", final=False), ("a", True))
        self.assertEqual(decode(b"a\xe2\x82", "UTF-8", final=False), ("a", True))
        self.assertEqual(decode(b"a\x00\x3d\xd8", "UTF-16LE", final=False), ("a", True))
        self.assertEqual(decode(b"a\x1b$", "ISO-2022-JP", final=False), ("a", True))

    def test_cutKeepsComplete(self) -> None:
        """
        A body cut after whole characters loses nothing: gb18030's euro and a
        digit are two characters, not the start of a four-byte one.
        """
        self.assertEqual(decode(b"\x800", "gb18030", final=False), ("€0", True))
        self.assertEqual(decode(b"\xff0", "gb18030", final=False), (E + "0", False))

    def test_textHoldsReplacement(self) -> None:
        """
        A U+FFFD that the text itself holds is not a loss.
        """
        self.assertEqual(decode("a\ufffdb".encode(), "UTF-8"), ("a\ufffdb", True))
        self.assertEqual(decode(b"\x84\x31\xa4\x37", "gb18030"), ("\ufffd", True))

    @given(st.binary(max_size=40), st.sampled_from(sorted(LEADS)))
    @settings(max_examples=300, deadline=None)
    def test_fastPathIsTheStandard(self, data: bytes, name: str) -> None:
        """
        Python's codec with its mends reads any bytes as the standard's decoder
        does step by step.
        """
        table = encodings._MULTIBYTE[name]
        self.assertEqual(encodings._multibyte(data, name, True), encodings._stepwise(data, table.step, True))
        self.assertEqual(encodings._multibyte(data, name, False), encodings._stepwise(data, table.step, False))

    def test_everyPairFastPath(self) -> None:
        """
        Every one- and two-byte sequence (and GB18030's four-byte BMP ones,
        EUC-JP's JIS X 0212 ones) reads the same through Python's codec as
        through the standard's decoder: a mended character is never another
        sequence's right one.
        """
        sequences = [bytes((a,)) for a in range(256)] + [bytes((a, b)) for a in range(0x80, 0x100) for b in range(256)]
        extra = {
            "gb18030": [bytes((a, b, c, d)) for a in range(0x81, 0x85) for b in range(0x30, 0x3A)
                        for c in range(0x81, 0xFF) for d in range(0x30, 0x3A)],
            "EUC-JP": [bytes((0x8F, a, b)) for a in range(0xA1, 0xFF) for b in range(0xA1, 0xFF)],
        }
        for name, table in encodings._MULTIBYTE.items():
            bad = [
                s for s in sequences + extra.get(name, [])
                if encodings._multibyte(s, name, True) != encodings._stepwise(s, table.step, True)
            ]
            self.assertEqual(bad[:5], [], name)


class UnicodeDecoderTests(SynchronousTestCase):
    """
    UTF-8 and UTF-16 are read by Python's decoders called directly.
    """

    @given(st.binary(max_size=40), st.sampled_from(["UTF-8", "UTF-16BE", "UTF-16LE"]), st.booleans())
    @settings(max_examples=500, deadline=None)
    def test_asIncremental(self, data: bytes, name: str, final: bool) -> None:
        """
        Any bytes, whole or cut, read as a new incremental decoder reads
        them: each error U+FFFD and the text not lossless, a character cut
        at the end of a cut body left out.
        """
        codec = {"UTF-8": "utf-8", "UTF-16BE": "utf-16-be", "UTF-16LE": "utf-16-le"}[name]
        text = codecs.getincrementaldecoder(codec)("netlog-whatwg").decode(data, final)
        self.assertEqual(decode(data, name, final), (text.replace("\udfff", "\ufffd"), "\udfff" not in text))
