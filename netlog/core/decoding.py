"""
Content decoding with caps, and text by charset: pure functions, no I/O.

A body is kept in the log as it came (content coding kept). The HAR shows it
decoded, so this undoes C{gzip}, C{deflate} (zlib-wrapped or raw), C{br} and
C{zstd}, in the reverse of the order they were applied, and stops as it goes
once the output reaches the limit: a 317-byte C{br} body that would inflate to
200 MB costs at most the limit (plus one decoder buffer) in memory and time.

A captured body may itself be cut (the proxy keeps at most 1 MB); decoding a
cut stream gives what the bytes present decode to, marked truncated, rather
than an error.

Text is then read as a browser reads it: the encoding a byte order mark, the
C{charset} parameter or the body names (HTML's prescan, XML's declaration,
CSS's C{@charset}), by the WHATWG Encoding Standard (L{netlog.core.encodings}).

The log keeps bodies in base64: L{decodeBase64} reads a long one with
OpenSSL's decoder, already loaded with Python's C{hashlib}, where it is at
hand (five times C{binascii}'s speed), else with C{binascii}, to the same
bytes.
"""

from __future__ import annotations

import binascii
import ctypes
import io
import re
import zlib
from dataclasses import dataclass
from typing import Callable, Mapping

import brotli
import zstandard

from netlog.core.capture import MAX_REQUEST_BODY, MAX_RESPONSE_BODY
from netlog.core.encodings import decode, getEncoding, sniffBOM

#: Decoded size kept of an answer's body: what the proxy keeps of it (1 MB),
#: so that a body's text stops at the same byte whether it came encoded or
#: not.
RESPONSE_LIMIT = MAX_RESPONSE_BODY
#: Decoded size kept of a request's body (10 MB), likewise.
REQUEST_LIMIT = MAX_REQUEST_BODY
#: Bytes of compressed input handed to a decoder at a time.
_INPUT_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Decoded:
    """
    The outcome of undoing a body's content codings.

    @ivar data: the decoded bytes, at most the limit (the body as kept when a
        coding could not be undone).
    @ivar truncated: C{data} is not the whole decoded body (the output reached
        the limit, or the input was cut).
    @ivar undecoded: L{None}, or C{(coding, reason)} for a coding that could
        not be undone; C{data} is then the body as kept.
    """

    data: bytes
    truncated: bool
    undecoded: tuple[str, str] | None = None


def _openSSLDecodeBlock() -> Callable[[object, int, int], int] | None:
    """
    OpenSSL's C{EVP_DecodeBlock}, from the libcrypto that Python's own
    C{hashlib} is linked to (already loaded: no library of its own), or
    L{None} where it can't be found or doesn't decode as L{decodeBase64}
    relies on (checked once, here). It decodes base64 five times faster
    than C{binascii} (a log's bodies are base64: this is most of a HAR
    export's time).
    """
    try:
        import _hashlib

        function = ctypes.CDLL(_hashlib.__file__).EVP_DecodeBlock
    except (ImportError, OSError, AttributeError, TypeError):
        return None
    function.restype = ctypes.c_int
    function.argtypes = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)
    for encoded, decoded in ((b"TWFu", b"Man"), (b"TWE=", b"Ma\0"), (b"TQ==", b"M\0\0")):
        out = ctypes.create_string_buffer(3)
        if function(out, encoded, 4) != 3 or out.raw != decoded:
            return None
    return function


_decodeBlock = _openSSLDecodeBlock()
#: The most base64 handed to C{EVP_DecodeBlock} at once (its length is a C int).
_BLOCK_LIMIT = 1 << 30
#: Base64 shorter than this is left to C{binascii}: calling OpenSSL through
#: C{ctypes} costs microseconds, more than it saves on a short body.
FAST_BASE64_MIN = 2048


def decodeBase64(data: str | bytes) -> bytes:
    """
    What C{binascii.a2b_base64(data)} gives (and raises), faster for long
    base64 as netlog writes it (see L{decodeWrittenBase64}); anything else (junk,
    whitespace, a misplaced C{=}, which C{binascii} skips or reads its own
    way) is left to C{binascii}.
    """
    decoded = None
    if len(data) >= FAST_BASE64_MIN:
        if isinstance(data, str):
            decoded = decodeWrittenBase64(data.encode("ascii")) if data.isascii() else None
        else:
            decoded = decodeWrittenBase64(data)
    return decoded if decoded is not None else binascii.a2b_base64(data)


def decodeWrittenBase64(data: bytes, start: int = 0, end: int | None = None) -> bytes | None:
    """
    The bytes C{data[start:end]} holds in base64 as netlog writes it (whole
    quads of the standard alphabet, C{=} only as the last quad's padding),
    decoded by OpenSSL (L{_openSSLDecodeBlock}) without copying it out; or
    L{None} for anything else (or where OpenSSL isn't at hand). Where it
    gives bytes they are what C{binascii.a2b_base64} gives.
    """
    end = len(data) if end is None else end
    size = end - start
    if _decodeBlock is None or type(data) is not bytes:
        return None
    if not 0 < size < _BLOCK_LIMIT or size % 4 or not 0 <= start <= end <= len(data):
        return None
    pad = 2 if data[end - 2 : end] == b"==" else 1 if data[end - 1] == 0x3D else 0
    if data.find(b"=", start, end - pad) >= 0:
        return None
    out = bytearray(size // 4 * 3)
    # the bytes' own buffer, at start (no copy; data is held meanwhile)
    at = ctypes.cast(ctypes.c_char_p(data), ctypes.c_void_p).value
    if at is None:
        return None
    # -1 for a byte outside the alphabet, fewer for whitespace trimmed at
    # either end: both not as netlog writes it
    if _decodeBlock((ctypes.c_char * len(out)).from_buffer(out), at + start, size) != len(out):
        return None
    with memoryview(out) as view:
        return view[: len(out) - pad].tobytes()


class _CannotDecode(Exception):
    """
    A coding that can't be undone: unknown, or its data is corrupt.
    """


def parseCodings(header: str | None) -> list[str]:
    """
    The content codings named by a C{Content-Encoding} value, in the order
    they were applied, C{identity} left out.
    """
    if not header:
        return []
    return [c for c in (p.strip().lower() for p in header.split(",")) if c and c != "identity"]


def _zlibStream(data: bytes, wbits: int, limit: int, multiMember: bool) -> tuple[bytes, bool]:
    out = bytearray()
    rest = data
    while True:
        d = zlib.decompressobj(wbits)
        pos = 0
        while pos < len(rest) or d.unconsumed_tail:
            if d.unconsumed_tail:
                chunk = d.unconsumed_tail
            else:
                chunk = rest[pos : pos + _INPUT_CHUNK]
                pos += len(chunk)
            try:
                out += d.decompress(chunk, limit + 1 - len(out))
            except zlib.error as e:
                raise _CannotDecode(str(e)) from None
            if len(out) > limit:
                return bytes(out[:limit]), True
            if d.eof:
                break
        if not d.eof:
            # the input ended before the stream did: a cut body
            try:
                out += d.flush()
            except zlib.error:
                pass
            if len(out) > limit:
                return bytes(out[:limit]), True
            return bytes(out), True
        rest = d.unused_data + rest[pos:]
        if not multiMember or not rest.strip(b"\0"):
            return bytes(out), False


def _gunzip(data: bytes, limit: int) -> tuple[bytes, bool]:
    return _zlibStream(data, 16 + zlib.MAX_WBITS, limit, multiMember=True)


def _inflate(data: bytes, limit: int) -> tuple[bytes, bool]:
    # "deflate" is meant to be zlib-wrapped (RFC 9110), but servers send raw
    # deflate too: a zlib header is two bytes whose value is a multiple of 31
    # with method 8.
    if len(data) >= 2 and data[0] & 0x0F == 8 and (data[0] << 8 | data[1]) % 31 == 0:
        try:
            return _zlibStream(data, zlib.MAX_WBITS, limit, multiMember=False)
        except _CannotDecode:
            pass
    return _zlibStream(data, -zlib.MAX_WBITS, limit, multiMember=False)


def _unbrotli(data: bytes, limit: int) -> tuple[bytes, bool]:
    d = brotli.Decompressor()
    out = bytearray()
    pos = 0
    try:
        while True:
            if d.can_accept_more_data():
                if pos >= len(data):
                    break
                chunk = data[pos : pos + _INPUT_CHUNK]
                pos += len(chunk)
            else:
                chunk = b""
            out += d.process(chunk, output_buffer_limit=limit + 1 - len(out))
            if len(out) > limit:
                return bytes(out[:limit]), True
            if d.is_finished():
                return bytes(out), False
    except brotli.error as e:
        raise _CannotDecode(str(e) or "invalid brotli data") from None
    return bytes(out), not d.is_finished()


def _unzstd(data: bytes, limit: int) -> tuple[bytes, bool]:
    reader = zstandard.ZstdDecompressor().stream_reader(
        io.BytesIO(data), read_size=_INPUT_CHUNK, read_across_frames=True
    )
    out = bytearray()
    try:
        while len(out) <= limit:
            chunk = reader.read(min(_INPUT_CHUNK, limit + 1 - len(out)))
            if not chunk:
                break
            out += chunk
    except zstandard.ZstdError as e:
        raise _CannotDecode(str(e)) from None
    if len(out) > limit:
        return bytes(out[:limit]), True
    # The reader gives no error for a frame cut short; check it was whole.
    # Every byte of input decoded to at most the limit, so this costs no more.
    return bytes(out), not _zstdComplete(data)


def _zstdComplete(data: bytes) -> bool:
    """
    Whether C{data} ends where a zstd frame ends: the decoder's C{eof} after
    every byte. Only called on data known to decode to at most the limit.
    """
    d = zstandard.ZstdDecompressor().decompressobj(write_size=_INPUT_CHUNK)
    try:
        pos = 0
        while pos < len(data):
            d.decompress(data[pos : pos + 4096])
            pos += 4096
            if d.eof:
                rest = d.unused_data + data[pos:]
                if not rest:
                    return True
                data, pos = rest, 0
                d = zstandard.ZstdDecompressor().decompressobj(write_size=_INPUT_CHUNK)
        return bool(d.eof)
    except zstandard.ZstdError:
        return False


_DECODERS = {
    "gzip": _gunzip,
    "x-gzip": _gunzip,
    "deflate": _inflate,
    "br": _unbrotli,
    "zstd": _unzstd,
}


def decodeContent(body: bytes, codings: list[str], limit: int, cut: bool = False) -> Decoded:
    """
    Undo C{codings} (as L{parseCodings} gives them) on C{body}, keeping at
    most C{limit} decoded bytes.

    @param cut: C{body} is only the start of the body (the capture stopped).
    """
    data = body
    truncated = cut
    for coding in reversed(codings):
        decoder = _DECODERS.get(coding)
        if decoder is None:
            return Decoded(body, cut, (coding, "unknown content coding"))
        try:
            data, stepCut = decoder(data, limit)
        except _CannotDecode as e:
            return Decoded(body, cut, (coding, str(e)))
        truncated = truncated or stepCut
    if len(data) > limit:
        return Decoded(data[:limit], True)
    return Decoded(data, truncated)


# --- Content-Type and charsets ---------------------------------------------

_PARAM = re.compile(r';\s*([!#$%&\'*+.^_`|~0-9A-Za-z-]+)\s*=\s*("(?:[^"\\]|\\.)*"|[^;]*)')


#: The Content-Type values last read, and what they gave (a log holds few
#: distinct ones); emptied when it reaches L{_CONTENT_TYPES_KEPT}.
_CONTENT_TYPES: dict[str, tuple[str, Mapping[str, str]]] = {}
_CONTENT_TYPES_KEPT = 256


def parseContentType(value: str | None) -> tuple[str, Mapping[str, str]]:
    """
    C{("type/subtype", {param: value})} from a C{Content-Type} value, the
    type and parameter names lowercased; C{("", {})} for none. The same
    value gives the same mapping, which is not to be changed.
    """
    if not value:
        return "", {}
    parsed = _CONTENT_TYPES.get(value)
    if parsed is None:
        if len(_CONTENT_TYPES) >= _CONTENT_TYPES_KEPT:
            _CONTENT_TYPES.clear()
        parsed = _CONTENT_TYPES[value] = _parseContentType(value)
    return parsed


def _parseContentType(value: str) -> tuple[str, Mapping[str, str]]:
    semi = value.find(";")
    mediaType = (value if semi < 0 else value[:semi]).strip().lower()
    params: dict[str, str] = {}
    if semi >= 0:
        for m in _PARAM.finditer(value, semi):
            v = m.group(2).strip()
            if len(v) >= 2 and v[0] == '"' and v[-1] == '"':
                v = re.sub(r"\\(.)", r"\1", v[1:-1])
            params.setdefault(m.group(1).lower(), v)
    return mediaType, params


_TEXT_APPLICATION = frozenset(
    {
        "application/json",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/xml",
        "application/xhtml+xml",
        "application/x-www-form-urlencoded",
        "application/graphql",
        "application/x-ndjson",
        "application/ld+json",
        "application/manifest+json",
        "application/rss+xml",
        "application/atom+xml",
        "image/svg+xml",
    }
)


def isTextType(mediaType: str) -> bool:
    """
    Whether a media type is text to a reader: text, JSON, forms, XML and
    scripts (the types whose bodies the proxies keep).
    """
    if mediaType.startswith("text/") or mediaType in _TEXT_APPLICATION:
        return True
    return mediaType.endswith(("+json", "+xml")) or mediaType == "multipart/form-data"


#: Bytes of a body searched for the encoding it declares (HTML's prescan, XML's
#: declaration, CSS's C{@charset}), as browsers do.
SNIFF_BYTES = 1024

#: HTML's whitespace between a tag's attributes.
_SPACE = b"\t\n\x0c\r "
#: What an encoding that the body itself declares is read as: bytes whose
#: declaration was read as ASCII aren't UTF-16, and HTML reads
#: x-user-defined so declared as windows-1252.
_NOT_DECLARED = {"UTF-16BE": "UTF-8", "UTF-16LE": "UTF-8", "x-user-defined": "windows-1252"}


def _lower(byte: int) -> str:
    return chr(byte + 0x20 if 0x41 <= byte <= 0x5A else byte)


def _attribute(data: bytes, p: int) -> tuple[str, str, int] | None:
    """
    HTML's "get an attribute" at C{p}: C{(name, value, position after)}, the
    name and value lowercased (ASCII); L{None} at a tag's end, or at the end
    of C{data} (an attribute cut there is not read).
    """
    n = len(data)
    while p < n and data[p] in _SPACE + b"/":
        p += 1
    if p >= n or data[p] == 0x3E:
        return None
    name = ""
    while True:
        if p >= n:
            return None
        byte = data[p]
        if byte == 0x3D and name:
            p += 1
            break
        if byte in _SPACE:
            while p < n and data[p] in _SPACE:
                p += 1
            if p >= n:
                return None
            if data[p] != 0x3D:
                return name, "", p
            p += 1
            break
        if byte in b"/>":
            return name, "", p
        name += _lower(byte)
        p += 1
    while p < n and data[p] in _SPACE:
        p += 1
    if p >= n:
        return None
    value = ""
    if data[p] in b"\"'":
        quote = data[p]
        end = data.find(bytes((quote,)), p + 1)
        if end < 0:
            return None
        return name, "".join(_lower(b) for b in data[p + 1 : end]), end + 1
    if data[p] == 0x3E:
        return name, "", p
    while True:
        if p >= n:
            return None
        byte = data[p]
        if byte in _SPACE or byte == 0x3E:
            return name, value, p
        value += _lower(byte)
        p += 1


_CONTENT_CHARSET = re.compile(r"charset[\t\n\x0c\r ]*=[\t\n\x0c\r ]*(?:\"([^\"]*)\"|'([^']*)'|([^\"'\t\n\x0c\r ;][^\t\n\x0c\r ;]*))?")


def _contentCharset(content: str) -> str | None:
    """
    HTML's "extracting a character encoding from a meta element": the
    encoding a C{content} attribute (lowercased) names after C{charset=}.
    """
    for m in _CONTENT_CHARSET.finditer(content):
        label = next((g for g in m.groups() if g is not None), None)
        if label is None:
            # nothing, or an unmatched quote, after "charset=": no encoding
            return None
        return getEncoding(label)
    return None


def _meta(data: bytes, p: int) -> tuple[str | None, int]:
    """
    The encoding a C{<meta>} tag whose attributes start at C{p} declares
    (C{charset}, or C{http-equiv=content-type} with C{content}), and the
    position after what was read.
    """
    names: set[str] = set()
    gotPragma = False
    needPragma: bool | None = None
    charset: str | None = None
    charsetSet = False
    while (attribute := _attribute(data, p)) is not None:
        name, value, p = attribute
        if name in names:
            continue
        names.add(name)
        if name == "http-equiv":
            gotPragma = gotPragma or value == "content-type"
        elif name == "content":
            found = _contentCharset(value)
            if found is not None and not charsetSet:
                charset, charsetSet, needPragma = found, True, True
        elif name == "charset":
            charset, charsetSet, needPragma = getEncoding(value), True, False
    if needPragma is None or (needPragma and not gotPragma) or charset is None:
        return None, p
    return _NOT_DECLARED.get(charset, charset), p


def prescanHTML(data: bytes) -> str | None:
    """
    The encoding an HTML document's first L{SNIFF_BYTES} declare, by HTML's
    "prescan a byte stream to determine its encoding": the first C{<meta
    charset>} (or C{http-equiv} with C{content}) outside comments whose label
    names an encoding; L{None} for none.
    """
    data = data[:SNIFF_BYTES]
    n = len(data)
    p = 0
    while p < n:
        if data.startswith(b"<!--", p):
            end = data.find(b"-->", p + 2)
            if end < 0:
                return None
            p = end + 2
        elif data[p : p + 5].lower() == b"<meta" and p + 5 < n and data[p + 5] in _SPACE + b"/":
            encoding, p = _meta(data, p + 5)
            if encoding is not None:
                return encoding
        elif data.startswith(b"<", p) and re.match(rb"</?[A-Za-z]", data[p : p + 3]):
            while p < n and data[p] not in _SPACE + b">":
                p += 1
            while (attribute := _attribute(data, p)) is not None:
                p = attribute[2]
        elif data.startswith((b"<!", b"</", b"<?"), p):
            p = data.find(b">", p + 2)
            if p < 0:
                return None
        p += 1
    return None


_XML_ENCODING = re.compile(rb"""<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""")
#: CSS's own declaration, exactly as CSS Syntax matches it at the start.
_CSS_CHARSET = re.compile(rb'@charset "([^"]*)";')


def textEncoding(mediaType: str, params: Mapping[str, str], data: bytes) -> tuple[str | None, int]:
    """
    C{(encoding, BOM length)}: which encoding text is read in, as a browser
    picks it. A byte order mark first, then the C{charset} parameter when it
    names one, then what the body says: HTML's C{<meta>} prescan, XML's
    declaration, CSS's C{@charset}. L{None} when nothing names one.
    """
    bom = sniffBOM(data)
    if bom is not None:
        return bom
    label = params.get("charset")
    if label is not None:
        named = getEncoding(label)
        if named is not None:
            return named, 0
    declared: str | None = None
    if mediaType == "text/html":
        declared = prescanHTML(data)
    elif "xml" in mediaType:
        m = _XML_ENCODING.match(data[:SNIFF_BYTES])
        declared = getEncoding(m.group(1).decode("ascii")) if m else None
    elif mediaType == "text/css":
        m = _CSS_CHARSET.match(data[:SNIFF_BYTES])
        declared = getEncoding(m.group(1).decode("latin-1")) if m else None
    if declared is not None:
        return _NOT_DECLARED.get(declared, declared), 0
    return None, 0


def decodeText(data: bytes, mediaType: str, params: Mapping[str, str], cut: bool) -> tuple[str, bool]:
    """
    Text from a decoded body: C{(text, lossless)}.

    Text is read in the encoding L{textEncoding} finds, as the WHATWG
    Encoding Standard's decoder reads it. Text that names none is read as
    UTF-8 when it is UTF-8 (JSON's only encoding, and what any page written
    today is), else, for C{text/*}, as windows-1252 (a browser's default, which
    maps every byte). A body cut short may end inside a character; that
    partial character is dropped, not counted as a loss. A byte that can't be
    read is U+FFFD, and C{lossless} is false so that the caller keeps the
    exact bytes.
    """
    encoding, bom = textEncoding(mediaType, params, data)
    if encoding is not None:
        return decode(data[bom:], encoding, final=not cut)
    text, lossless = decode(data, "UTF-8", final=not cut)
    if lossless or not mediaType.startswith("text/"):
        return text, lossless
    return decode(data, "windows-1252", final=not cut)
