"""
The WHATWG Encoding Standard, as browsers read text: every label, and each
encoding's decoder. Pure: no I/O.

Browsers don't read a page by the charset registry that Python's codecs
follow. The standard's labels (about 220) name 40 encodings, and those are
the vendors' supersets: C{shift_jis} is Windows-31J, C{gb2312} is GBK,
C{euc-kr} is Windows-949, C{big5} has HKSCS, C{iso-8859-1} is windows-1252,
C{iso-8859-9} is windows-1254. Each decoder here is Python's closest codec
with the standard's errors, corrected where the standard's index differs
(the data below; the tests hold every byte pair against Chromium's decoder):
a byte sequence a decoder can't use becomes one U+FFFD, and a bad lead byte
never swallows the ASCII byte after it.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Mapping

__all__ = ["ENCODINGS", "LABELS", "decode", "getEncoding", "sniffBOM"]

#: Each encoding by its name (as C{document.characterSet} gives it), with its
#: labels: the standard's table, in its order.
ENCODINGS: dict[str, tuple[str, ...]] = {
    "UTF-8": ("unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8", "x-unicode20utf8"),
    "IBM866": ("866", "cp866", "csibm866", "ibm866"),
    "ISO-8859-2": (
        "csisolatin2", "iso-8859-2", "iso-ir-101", "iso8859-2", "iso88592", "iso_8859-2", "iso_8859-2:1987",
        "l2", "latin2",
    ),
    "ISO-8859-3": (
        "csisolatin3", "iso-8859-3", "iso-ir-109", "iso8859-3", "iso88593", "iso_8859-3", "iso_8859-3:1988",
        "l3", "latin3",
    ),
    "ISO-8859-4": (
        "csisolatin4", "iso-8859-4", "iso-ir-110", "iso8859-4", "iso88594", "iso_8859-4", "iso_8859-4:1988",
        "l4", "latin4",
    ),
    "ISO-8859-5": (
        "csisolatincyrillic", "cyrillic", "iso-8859-5", "iso-ir-144", "iso8859-5", "iso88595", "iso_8859-5",
        "iso_8859-5:1988",
    ),
    "ISO-8859-6": (
        "arabic", "asmo-708", "csiso88596e", "csiso88596i", "csisolatinarabic", "ecma-114", "iso-8859-6",
        "iso-8859-6-e", "iso-8859-6-i", "iso-ir-127", "iso8859-6", "iso88596", "iso_8859-6", "iso_8859-6:1987",
    ),
    "ISO-8859-7": (
        "csisolatingreek", "ecma-118", "elot_928", "greek", "greek8", "iso-8859-7", "iso-ir-126", "iso8859-7",
        "iso88597", "iso_8859-7", "iso_8859-7:1987", "sun_eu_greek",
    ),
    "ISO-8859-8": (
        "csiso88598e", "csisolatinhebrew", "hebrew", "iso-8859-8", "iso-8859-8-e", "iso-ir-138", "iso8859-8",
        "iso88598", "iso_8859-8", "iso_8859-8:1988", "visual",
    ),
    "ISO-8859-8-I": ("csiso88598i", "iso-8859-8-i", "logical"),
    "ISO-8859-10": ("csisolatin6", "iso-8859-10", "iso-ir-157", "iso8859-10", "iso885910", "l6", "latin6"),
    "ISO-8859-13": ("iso-8859-13", "iso8859-13", "iso885913"),
    "ISO-8859-14": ("iso-8859-14", "iso8859-14", "iso885914"),
    "ISO-8859-15": ("csisolatin9", "iso-8859-15", "iso8859-15", "iso885915", "iso_8859-15", "l9"),
    "ISO-8859-16": ("iso-8859-16",),
    "KOI8-R": ("cskoi8r", "koi", "koi8", "koi8-r", "koi8_r"),
    "KOI8-U": ("koi8-ru", "koi8-u"),
    "macintosh": ("csmacintosh", "mac", "macintosh", "x-mac-roman"),
    "windows-874": ("dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620", "windows-874"),
    "windows-1250": ("cp1250", "windows-1250", "x-cp1250"),
    "windows-1251": ("cp1251", "windows-1251", "x-cp1251"),
    "windows-1252": (
        "ansi_x3.4-1968", "ascii", "cp1252", "cp819", "csisolatin1", "ibm819", "iso-8859-1", "iso-ir-100",
        "iso8859-1", "iso88591", "iso_8859-1", "iso_8859-1:1987", "l1", "latin1", "us-ascii", "windows-1252",
        "x-cp1252",
    ),
    "windows-1253": ("cp1253", "windows-1253", "x-cp1253"),
    "windows-1254": (
        "cp1254", "csisolatin5", "iso-8859-9", "iso-ir-148", "iso8859-9", "iso88599", "iso_8859-9",
        "iso_8859-9:1989", "l5", "latin5", "windows-1254", "x-cp1254",
    ),
    "windows-1255": ("cp1255", "windows-1255", "x-cp1255"),
    "windows-1256": ("cp1256", "windows-1256", "x-cp1256"),
    "windows-1257": ("cp1257", "windows-1257", "x-cp1257"),
    "windows-1258": ("cp1258", "windows-1258", "x-cp1258"),
    "x-mac-cyrillic": ("x-mac-cyrillic", "x-mac-ukrainian"),
    "GBK": ("chinese", "csgb2312", "csiso58gb231280", "gb2312", "gb_2312", "gb_2312-80", "gbk", "iso-ir-58", "x-gbk"),
    "gb18030": ("gb18030",),
    "Big5": ("big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5"),
    "EUC-JP": ("cseucpkdfmtjapanese", "euc-jp", "x-euc-jp"),
    "ISO-2022-JP": ("csiso2022jp", "iso-2022-jp"),
    "Shift_JIS": ("csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis", "windows-31j", "x-sjis"),
    "EUC-KR": (
        "cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean", "ks_c_5601-1987", "ks_c_5601-1989",
        "ksc5601", "ksc_5601", "windows-949",
    ),
    "replacement": ("csiso2022kr", "hz-gb-2312", "iso-2022-cn", "iso-2022-cn-ext", "iso-2022-kr", "replacement"),
    "UTF-16BE": ("unicodefffe", "utf-16be"),
    "UTF-16LE": ("csunicode", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff", "utf-16", "utf-16le"),
    "x-user-defined": ("x-user-defined",),
}

#: Each label's encoding.
LABELS: dict[str, str] = {label: name for name, labels in ENCODINGS.items() for label in labels}

#: What the standard trims from a label: ASCII whitespace.
_ASCII_WHITESPACE = "\t\n\x0c\r "
#: ASCII letters only: C{str.lower} would also fold a Kelvin sign into "k".
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def getEncoding(label: str) -> str | None:
    """
    The standard's "get an encoding": the encoding a label names (ASCII
    whitespace around it trimmed, ASCII case ignored), or L{None}.
    """
    return LABELS.get(label.strip(_ASCII_WHITESPACE).translate(_ASCII_LOWER))


def sniffBOM(data: bytes) -> tuple[str, int] | None:
    """
    C{(encoding, length)} of the byte order mark C{data} starts with, which
    overrides any label; L{None} when it starts with none.
    """
    if data.startswith(b"\xef\xbb\xbf"):
        return "UTF-8", 3
    if data.startswith(b"\xfe\xff"):
        return "UTF-16BE", 2
    if data.startswith(b"\xff\xfe"):
        return "UTF-16LE", 2
    return None


# --- Decoding ---------------------------------------------------------------

_REPLACEMENT = "\ufffd"
#: What an error handler here puts where the standard's decoder gives
#: U+FFFD: a lone surrogate, which no decoder here gives otherwise, so that an
#: error is told from a U+FFFD the text itself holds.
_ERROR = chr(0xDFFF)


def _markError(error: UnicodeError) -> tuple[str, int]:
    """
    An error of a codec whose errors already span what the standard's do
    (the single-byte ones, UTF-8, UTF-16).
    """
    assert isinstance(error, UnicodeDecodeError)
    return _ERROR, error.end


codecs.register_error("netlog-whatwg", _markError)


def _finish(text: str) -> tuple[str, bool]:
    if _ERROR in text:
        return text.replace(_ERROR, _REPLACEMENT), False
    return text, True


#: The single-byte encodings, each by Python's codec with the same index...
_SINGLE_BYTE: dict[str, str] = {
    "IBM866": "cp866",
    "ISO-8859-2": "iso8859_2",
    "ISO-8859-3": "iso8859_3",
    "ISO-8859-4": "iso8859_4",
    "ISO-8859-5": "iso8859_5",
    "ISO-8859-6": "iso8859_6",
    "ISO-8859-7": "iso8859_7",
    "ISO-8859-8": "iso8859_8",
    # the same bytes as ISO-8859-8, read in logical order: a matter of layout
    "ISO-8859-8-I": "iso8859_8",
    "ISO-8859-10": "iso8859_10",
    "ISO-8859-13": "iso8859_13",
    "ISO-8859-14": "iso8859_14",
    "ISO-8859-15": "iso8859_15",
    "ISO-8859-16": "iso8859_16",
    "KOI8-R": "koi8_r",
    "KOI8-U": "koi8_u",
    "macintosh": "mac_roman",
    "windows-874": "cp874",
    "windows-1250": "cp1250",
    "windows-1251": "cp1251",
    "windows-1252": "cp1252",
    "windows-1253": "cp1253",
    "windows-1254": "cp1254",
    "windows-1255": "cp1255",
    "windows-1256": "cp1256",
    "windows-1257": "cp1257",
    "windows-1258": "cp1258",
    "x-mac-cyrillic": "mac_cyrillic",
}

#: ...but for these bytes. Besides, every byte 0x80 to 0x9F that Microsoft's
#: C{windows-*} tables leave undefined is the C1 control of the same value, as
#: Windows itself decodes them.
_SINGLE_BYTE_FIXES: dict[str, dict[int, str]] = {
    # the standard's KOI8-U is KOI8-RU: Belarusian and Ukrainian short U
    "KOI8-U": {0xAE: "\u045e", 0xBE: "\u040e"},
    # HEBREW POINT HOLAM HASER FOR VAV, which Unicode's cp1255 table (Python's) lacks
    "windows-1255": {0xCA: "\u05ba"},
}


@lru_cache(maxsize=None)
def _charmap(encoding: str) -> str:
    """
    A single-byte encoding's 256 code points, U+FFFE for a byte that is an
    error (as C{codecs.charmap_decode} takes them).
    """
    if encoding == "x-user-defined":
        return "".join(chr(b) if b < 0x80 else chr(0xF780 + b - 0x80) for b in range(256))
    codec = _SINGLE_BYTE[encoding]
    fixes = _SINGLE_BYTE_FIXES.get(encoding, {})
    table = []
    for byte in range(256):
        if byte in fixes:
            table.append(fixes[byte])
            continue
        try:
            table.append(bytes((byte,)).decode(codec))
        except UnicodeDecodeError:
            if encoding.startswith("windows-") and 0x80 <= byte <= 0x9F:
                table.append(chr(byte))
            else:
                table.append("\ufffe")
    return "".join(table)


#: What a decoder step returns for a sequence cut by the end of the input.
_INCOMPLETE = -1

#: One step of a multi-byte decoder from its initial state at a position:
#: C{(text, next position)}, text L{None} for an error, or C{(None,
#: _INCOMPLETE)} when the input ends inside a sequence.
_Step = Callable[[bytes, int], "tuple[str | None, int]"]


@dataclass(frozen=True)
class _Multibyte:
    """
    A multi-byte encoding: Python's closest codec reads it at C speed, and the
    standard's decoder takes over at each of the codec's errors (so a bad byte
    never takes the next byte with it unless the standard says so).

    @ivar codec: Python's codec.
    @ivar step: the standard's decoder, one character at a time.
    @ivar fixes: the sequences the codec reads otherwise than the standard
        (L{None}: an error there), or not at all.
    @ivar unsafe: fixed sequences whose codec reading can't be mended in the
        text (it is also the right reading of another sequence): input holding
        one is read by L{step} alone.
    """

    codec: str
    step: _Step
    fixes: Mapping[bytes, str | None] = field(default_factory=dict)
    unsafe: tuple[bytes, ...] = ()


def _lookup(encoding: str, sequence: bytes) -> str | None:
    """
    The standard's index entry for one whole byte sequence: the fix, else
    Python's codec; L{None} for none.
    """
    table = _MULTIBYTE[encoding]
    if sequence in table.fixes:
        return table.fixes[sequence]
    try:
        return sequence.decode(table.codec)
    except UnicodeDecodeError:
        return None


def _pairError(byte: int, position: int) -> tuple[None, int]:
    """
    The standard's error for a lead byte and the byte after it: an ASCII byte
    is read again on its own; any other is part of the error.
    """
    return None, position + 1 if byte < 0x80 else position + 2


def _shiftJISStep(data: bytes, p: int) -> tuple[str | None, int]:
    lead = data[p]
    if lead <= 0x80:
        return chr(lead), p + 1
    if 0xA1 <= lead <= 0xDF:
        return chr(0xFF61 - 0xA1 + lead), p + 1
    if not (0x81 <= lead <= 0x9F or 0xE0 <= lead <= 0xFC):
        return None, p + 1
    if p + 1 >= len(data):
        return None, _INCOMPLETE
    byte = data[p + 1]
    if 0x40 <= byte <= 0x7E or 0x80 <= byte <= 0xFC:
        pointer = (lead - (0x81 if lead < 0xA0 else 0xC1)) * 188 + byte - (0x40 if byte < 0x7F else 0x41)
        if 8836 <= pointer <= 10715:
            # Windows' end-user-defined characters
            return chr(0xE000 - 8836 + pointer), p + 2
        text = _lookup("Shift_JIS", data[p : p + 2])
        if text is not None:
            return text, p + 2
    return _pairError(byte, p)


def _jis0208(pointer: int) -> str | None:
    """
    The standard's index jis0208, which Shift_JIS reads through the same
    pointers: its bytes for the pointer, read as Shift_JIS.
    """
    lead, trail = divmod(pointer, 188)
    return _lookup(
        "Shift_JIS", bytes((lead + (0x81 if lead < 0x1F else 0xC1), trail + (0x40 if trail < 0x3F else 0x41)))
    )


def _eucJPStep(data: bytes, p: int) -> tuple[str | None, int]:
    lead = data[p]
    if lead < 0x80:
        return chr(lead), p + 1
    if not (lead in (0x8E, 0x8F) or 0xA1 <= lead <= 0xFE):
        return None, p + 1
    if p + 1 >= len(data):
        return None, _INCOMPLETE
    byte = data[p + 1]
    if lead == 0x8E and 0xA1 <= byte <= 0xDF:
        return chr(0xFF61 - 0xA1 + byte), p + 2
    if lead == 0x8F and 0xA1 <= byte <= 0xFE:
        # JIS X 0212
        if p + 2 >= len(data):
            return None, _INCOMPLETE
        trail = data[p + 2]
        if 0xA1 <= trail <= 0xFE:
            text = _lookup("EUC-JP", data[p : p + 3])
            if text is not None:
                return text, p + 3
        return _pairError(trail, p + 1)
    if 0xA1 <= lead <= 0xFE and 0xA1 <= byte <= 0xFE:
        text = _jis0208((lead - 0xA1) * 94 + byte - 0xA1)
        if text is not None:
            return text, p + 2
    return _pairError(byte, p)


def _pairStep(name: str, trailing: Callable[[int], bool]) -> _Step:
    """
    The step of a two-byte encoding whose lead bytes are 0x81 to 0xFE (EUC-KR,
    Big5): a lead and a trailing byte C{trailing} accepts make the pair the
    encoding's index (read through C{name}'s codec) has, if it has it.
    """

    def step(data: bytes, p: int) -> tuple[str | None, int]:
        lead = data[p]
        if lead < 0x80:
            return chr(lead), p + 1
        if not 0x81 <= lead <= 0xFE:
            return None, p + 1
        if p + 1 >= len(data):
            return None, _INCOMPLETE
        byte = data[p + 1]
        if trailing(byte):
            text = _lookup(name, data[p : p + 2])
            if text is not None:
                return text, p + 2
        return _pairError(byte, p)

    return step


_eucKRStep = _pairStep("EUC-KR", lambda byte: 0x41 <= byte <= 0xFE)
_big5Step = _pairStep("Big5", lambda byte: 0x40 <= byte <= 0x7E or 0xA1 <= byte <= 0xFE)


def _gb18030Step(data: bytes, p: int) -> tuple[str | None, int]:
    first = data[p]
    if first < 0x80:
        return chr(first), p + 1
    if first == 0x80:
        return "\u20ac", p + 1
    if first == 0xFF:
        return None, p + 1
    if p + 1 >= len(data):
        return None, _INCOMPLETE
    second = data[p + 1]
    if 0x30 <= second <= 0x39:
        # four bytes, or an error that gives back all but the first
        if p + 2 >= len(data):
            return None, _INCOMPLETE
        if not 0x81 <= data[p + 2] <= 0xFE:
            return None, p + 1
        if p + 3 >= len(data):
            return None, _INCOMPLETE
        if not 0x30 <= data[p + 3] <= 0x39:
            return None, p + 1
        return _lookup("gb18030", data[p : p + 4]), p + 4
    if 0x40 <= second <= 0x7E or 0x80 <= second <= 0xFE:
        text = _lookup("gb18030", data[p : p + 2])
        if text is not None:
            return text, p + 2
    return _pairError(second, p)


def _big5Pointer(pointer: int) -> bytes:
    lead, trail = divmod(pointer, 157)
    return bytes((lead + 0x81, trail + (0x40 if trail < 0x3F else 0x62)))


#: The standard's index Big5 where Python's C{big5hkscs} (HKSCS-2004) reads
#: another character (eleven symbols, such as 0xA145 U+2027 for U+2022) or
#: none (HKSCS-2008's additions, control pictures, the euro sign), by runs of
#: consecutive pointers.
_BIG5_FIXES: dict[int, str] = {
    1000: (
        "\u3875\U00021d53\U0002369e\U00026021\u3eec\U000258de\u3af5\u7afc\u9f97\U00024161"
        "\U0002890d\U000231ea\U00020a8a\U0002325e\u430a\u8484\u9f96\u942f\u4930\u8613\u5896"
        "\u974a\u9218\u79d0\u7a32\u6660\u6a29\u889d\u744c\u7bc5\u6782\u7a2c\u524f\u9046\u34e6"
        "\u73c4\U00025db9\u74c6\u9fc7\u57b3\u492f\u544c\u4131\U0002368e\u5818\u7a72\U00027b65"
        "\u8b8f\u46ae\U00026e88\u4181\U00025d99\u7bae\U000224bc\u9fc8\U000224c1\U000224c9"
        "\U000224cc\u9fc9\u8504\U000235bb\u40b4\u9fca\u44e1\U0002adff\u62c1\u706e\u9fcb"
    ),
    2082: "\u7bb8",
    2088: "\u7c06",
    2103: "\u7cce",
    2114: "\u7dd2",
    2123: "\u7e1d",
    2148: "\u8005",
    2151: "\u8028",
    2221: "\u83c1",
    2239: "\u84a8",
    2244: "\u840f",
    2303: "\u89a6\u89a9",
    2354: "\u8d77",
    2400: "\u90fd",
    2413: "\u92b9",
    2477: "\u975c",
    2498: "\u97ff",
    2605: "\u9f16",
    2673: "\u8503",
    2746: "\u5159\u515b\u515d\u515e",
    2771: "\u936e",
    2780: "\u7479",
    2990: "\u6d67",
    3087: "\u799b",
    3259: "\u9097",
    3301: "\u975d",
    3436: "\u701e",
    3451: "\u5b28",
    4136: "\u7201",
    4138: "\u77d7",
    4141: "\u7e87",
    4182: "\u99d6",
    4206: "\u91d4",
    4220: "\u60de",
    4230: "\u6fb6",
    4241: "\u8f36",
    4258: "\u4fbb",
    4273: "\u71df",
    4279: "\u9104",
    4282: "\u9df0",
    4294: "\u83cf",
    4329: "\u5c10\u79e3",
    4349: "\u5a67",
    4419: "\u8f0b",
    4422: "\u7b51",
    4494: "\u62d0",
    4624: "\u6062",
    4694: "\u75f9",
    4708: "\u6c4a",
    4742: "\u9b2e",
    4748: "\u9f17",
    4815: "\u50ed",
    4828: "\u5f0c",
    4902: "\u880f",
    4922: "\u62ce",
    4982: "\u7468",
    4992: "\u7162",
    4997: "\u7250",
    5029: "\u2027",
    5038: "\ufe51",
    5120: "\xaf",
    5153: "\uff5e",
    5168: "\u2295\u2299",
    5182: "\u2215\ufe68",
    5185: "\uffe5",
    5187: "\uffe0\uffe1",
    5432: (
        "\u2400\u2401\u2402\u2403\u2404\u2405\u2406\u2407\u2408\u2409\u240a\u240b\u240c\u240d"
        "\u240e\u240f\u2410\u2411\u2412\u2413\u2414\u2415\u2416\u2417\u2418\u2419\u241a\u241b"
        "\u241c\u241d\u241e\u241f\u2421\u20ac"
    ),
    10942: "\u5ef4",
    10946: "\u65e0",
    10948: "\u7676",
    10950: "\u96b6",
    10957: "\u3003\u4edd",
    19028: "\u5029",
    19035: "\u507d",
    19088: "\u5305",
    19096: "\u5344",
    19112: "\u537f",
    19162: "\u5605",
    19240: "\u5a77",
    19299: "\u5e75",
    19305: "\u5ed0",
    19326: "\u5f58",
    19355: "\u60a4",
    19398: "\u6490",
    19439: "\u6674",
    19454: "\u675e",
    19553: "\u6c9c\u6e1d",
    19557: "\u6e2f",
    19611: "\u716e",
    19643: "\u732a",
    19672: "\u745c",
    19697: "\u74e9",
    19748: "\u7809",
}

#: The standard's index gb18030 (GB18030-2022) where Python's C{gb18030}
#: (GB18030-2005) reads another character: vertical forms and ideographs that
#: moved out of the private use area, 0xA3A0 as an ideographic space, and
#: 0xA8BC and 0x8135F437 swapped.
_GB18030_FIXES: dict[bytes, str | None] = {
    b"\xa3\xa0": "\u3000",
    b"\xa6\xd9": "\ufe10",
    b"\xa6\xda": "\ufe12",
    b"\xa6\xdb": "\ufe11",
    b"\xa6\xdc": "\ufe13",
    b"\xa6\xdd": "\ufe14",
    b"\xa6\xde": "\ufe15",
    b"\xa6\xdf": "\ufe16",
    b"\xa6\xec": "\ufe17",
    b"\xa6\xed": "\ufe18",
    b"\xa6\xf3": "\ufe19",
    b"\xa8\xbc": "\u1e3f",
    b"\x81\x35\xf4\x37": "\ue7c7",
    b"\xfe\x59": "\u9fb4",
    b"\xfe\x61": "\u9fb5",
    b"\xfe\x66": "\u9fb6",
    b"\xfe\x67": "\u9fb7",
    b"\xfe\x6d": "\u9fb8",
    b"\xfe\x7e": "\u9fb9",
    b"\xfe\x90": "\u9fba",
    b"\xfe\xa0": "\u9fbb",
}

_MULTIBYTE: dict[str, _Multibyte] = {
    # Windows-31J: cp932 reads every pair as the standard does, and 0xA0 and
    # 0xFD to 0xFF as private-use characters where the standard has errors
    "Shift_JIS": _Multibyte("cp932", _shiftJISStep, {bytes((b,)): None for b in (0xA0, 0xFD, 0xFE, 0xFF)}),
    # Python's euc_jp is JIS X 0208 as JIS published it; the standard's index
    # jis0208 is Microsoft's (cp932's, with NEC's and IBM's rows, which
    # _eucJPStep reads through cp932), and its jis0212 has a fullwidth tilde
    "EUC-JP": _Multibyte(
        "euc_jp",
        _eucJPStep,
        {
            b"\xa1\xc1": "\uff5e",
            b"\xa1\xc2": "\u2225",
            b"\xa1\xdd": "\uff0d",
            b"\xa1\xf1": "\uffe0",
            b"\xa1\xf2": "\uffe1",
            b"\xa2\xcc": "\uffe2",
            b"\x8f\xa2\xb7": "\uff5e",
        },
        # Python reads it as "~", which can't be told from an ASCII tilde
        unsafe=(b"\x8f\xa2\xb7",),
    ),
    # Windows-949 (Unified Hangul Code): the standard's index EUC-KR exactly
    "EUC-KR": _Multibyte("cp949", _eucKRStep),
    "Big5": _Multibyte(
        "big5hkscs",
        _big5Step,
        {_big5Pointer(start + i): c for start, run in _BIG5_FIXES.items() for i, c in enumerate(run)},
        # Python reads them as U+FF0F and U+FF3C, which the standard reads
        # 0xA1FE and 0xA240 as
        unsafe=(b"\xa2\x41", b"\xa2\x42"),
    ),
    # GBK's decoder is gb18030's
    "GBK": _Multibyte("gb18030", _gb18030Step, _GB18030_FIXES),
    "gb18030": _Multibyte("gb18030", _gb18030Step, _GB18030_FIXES),
}


def _stepHandler(step: _Step, final: bool) -> Callable[[UnicodeError], tuple[str, int]]:
    """
    An error handler that reads on from a codec's error as the standard's
    decoder does.
    """

    def handler(error: UnicodeError) -> tuple[str, int]:
        assert isinstance(error, UnicodeDecodeError)
        text, end = step(error.object, error.start)
        if end == _INCOMPLETE:
            return (_ERROR if final else ""), len(error.object)
        return (_ERROR if text is None else text), end

    return handler


for _name, _table in _MULTIBYTE.items():
    codecs.register_error("netlog-whatwg-" + _name, _stepHandler(_table.step, True))
    codecs.register_error("netlog-whatwg-cut-" + _name, _stepHandler(_table.step, False))


@lru_cache(maxsize=None)
def _mend(encoding: str) -> tuple[re.Pattern[str] | None, dict[str, str]]:
    """
    The characters a codec gives for its fixed sequences, each with what the
    standard gives (L{_ERROR} for an error): each is given by that sequence
    alone, so it can be mended in the decoded text.
    """
    table = _MULTIBYTE[encoding]
    mend: dict[str, str] = {}
    for sequence, text in table.fixes.items():
        if sequence in table.unsafe:
            continue
        try:
            read = sequence.decode(table.codec)
        except UnicodeDecodeError:
            continue
        mend[read] = _ERROR if text is None else text
    if not mend:
        return None, {}
    return re.compile("[" + "".join(re.escape(c) for c in sorted(mend)) + "]"), mend


_ASCII_RUN = re.compile(rb"[\x00-\x7f]+")


def _stepwise(data: bytes, step: _Step, final: bool) -> tuple[str, bool]:
    """
    A multi-byte encoding read by the standard's decoder alone (runs of
    ASCII at once: every multi-byte encoding here reads them as ASCII).
    """
    out: list[str] = []
    p = 0
    while p < len(data):
        run = _ASCII_RUN.match(data, p)
        if run is not None:
            out.append(run.group().decode("ascii"))
            p = run.end()
            continue
        text, end = step(data, p)
        if end == _INCOMPLETE:
            if final:
                out.append(_ERROR)
            break
        out.append(_ERROR if text is None else text)
        p = end
    return _finish("".join(out))


def _multibyte(data: bytes, encoding: str, final: bool) -> tuple[str, bool]:
    table = _MULTIBYTE[encoding]
    if any(sequence in data for sequence in table.unsafe):
        return _stepwise(data, table.step, final)
    # Python's incremental decoders drop what follows an error in a
    # sequence cut by the end, so each call reads all of C{data}: a sequence
    # still open at the end is an error, or left out when C{data} was cut
    errors = ("netlog-whatwg-" if final else "netlog-whatwg-cut-") + encoding
    text = codecs.decode(data, table.codec, errors)
    pattern, mend = _mend(encoding)
    if pattern is not None:
        text = pattern.sub(lambda m: mend[m.group()], text)
    return _finish(text)


_ISO_2022_JP_ASCII_RUN = re.compile(rb"[\x00-\x0d\x10-\x1a\x1c-\x7f]+")


def _iso2022JP(data: bytes, final: bool) -> tuple[str, bool]:
    """
    The standard's ISO-2022-JP decoder, state for state (a rare encoding,
    read in Python).
    """
    ascii_, roman, katakana, leadByte, trailByte, escapeStart, escape = range(7)
    state = outputState = ascii_
    lead = 0
    output = False
    out: list[str] = []
    p = 0
    n = len(data)
    while True:
        if p >= n:
            if not final or state in (ascii_, roman, katakana, leadByte):
                break
            if state == trailByte:
                state = leadByte
                out.append(_ERROR)
            elif state == escapeStart:
                state = outputState
                output = False
                out.append(_ERROR)
            else:
                # escape: the lead byte is read again in the state before
                state = outputState
                output = False
                out.append(_ERROR)
                p -= 1
                lead = 0
            continue
        if state == ascii_:
            run = _ISO_2022_JP_ASCII_RUN.match(data, p)
            if run is not None:
                output = False
                out.append(run.group().decode("ascii"))
                p = run.end()
                continue
        byte = data[p]
        p += 1
        if state in (ascii_, roman, katakana, leadByte) and byte == 0x1B:
            state = escapeStart
        elif state == ascii_:
            # 0x0E, 0x0F and bytes past ASCII: the run above took the rest
            output = False
            out.append(_ERROR)
        elif state == roman:
            output = False
            if byte == 0x5C:
                out.append("\u00a5")
            elif byte == 0x7E:
                out.append("\u203e")
            elif byte <= 0x7F and byte not in (0x0E, 0x0F):
                out.append(chr(byte))
            else:
                out.append(_ERROR)
        elif state == katakana:
            output = False
            out.append(chr(0xFF61 - 0x21 + byte) if 0x21 <= byte <= 0x5F else _ERROR)
        elif state == leadByte:
            output = False
            if 0x21 <= byte <= 0x7E:
                lead = byte
                state = trailByte
            else:
                out.append(_ERROR)
        elif state == trailByte:
            if byte == 0x1B:
                state = escapeStart
                out.append(_ERROR)
            else:
                state = leadByte
                text = _jis0208((lead - 0x21) * 94 + byte - 0x21) if 0x21 <= byte <= 0x7E else None
                out.append(_ERROR if text is None else text)
        elif state == escapeStart:
            if byte in (0x24, 0x28):
                lead = byte
                state = escape
            else:
                p -= 1
                output = False
                state = outputState
                out.append(_ERROR)
        else:
            escaped = {
                (0x28, 0x42): ascii_,
                (0x28, 0x4A): roman,
                (0x28, 0x49): katakana,
                (0x24, 0x40): leadByte,
                (0x24, 0x42): leadByte,
            }.get((lead, byte))
            lead = 0
            if escaped is not None:
                state = outputState = escaped
                if output:
                    out.append(_ERROR)
                output = True
            else:
                # the lead byte and this one are read again
                p -= 2
                output = False
                state = outputState
                out.append(_ERROR)
    return _finish("".join(out))


#: The Unicode encodings' decoders, as their incremental decoders call them
#: (C{decoder(data, errors, final)}: the text, and the bytes read).
_UNICODE = {"UTF-8": codecs.utf_8_decode, "UTF-16BE": codecs.utf_16_be_decode, "UTF-16LE": codecs.utf_16_le_decode}


def decode(data: bytes, encoding: str, final: bool = True) -> tuple[str, bool]:
    """
    C{(text, lossless)}: C{data} read by the decoder of C{encoding} (a name
    in L{ENCODINGS}), as the standard's decoder reads it (a byte order mark is
    the caller's: see L{sniffBOM}). Each error becomes U+FFFD, and
    C{lossless} is false when there was one.

    @param final: C{data} is the whole input; when false (a body cut short),
        a character cut at the end is left out, not an error.
    """
    if encoding in _MULTIBYTE:
        return _multibyte(data, encoding, final)
    if encoding in _UNICODE:
        # what a new incremental decoder's decode(data, final) gives
        return _finish(_UNICODE[encoding](data, "netlog-whatwg", final)[0])
    if encoding == "replacement":
        # one error for the whole input: a page labelled so shows nothing
        return (_REPLACEMENT, False) if data else ("", True)
    if encoding == "ISO-2022-JP":
        return _iso2022JP(data, final)
    return _finish(codecs.charmap_decode(data, "netlog-whatwg", _charmap(encoding))[0])
