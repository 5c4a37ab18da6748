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
"""

from __future__ import annotations

import codecs
import io
import re
import zlib
from dataclasses import dataclass
from functools import lru_cache

import brotli
import zstandard

#: Decoded size kept of an answer's body.
RESPONSE_LIMIT = 1024 * 1024
#: Decoded size kept of a request's body.
REQUEST_LIMIT = 10 * 1024 * 1024
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


def parseContentType(value: str | None) -> tuple[str, dict[str, str]]:
    """
    C{("type/subtype", {param: value})} from a C{Content-Type} value, the
    type and parameter names lowercased; C{("", {})} for none.
    """
    if not value:
        return "", {}
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


def _c1Fallback(error: UnicodeError) -> tuple[str, int]:
    """
    WHATWG's windows-1252 maps the five bytes cp1252 leaves undefined to the
    C1 controls of the same value; do the same.
    """
    assert isinstance(error, UnicodeDecodeError)
    return "".join(chr(b) for b in error.object[error.start : error.end]), error.end


codecs.register_error("netlog-c1", _c1Fallback)

#: Charset labels that browsers read as windows-1252 (WHATWG Encoding).
_WINDOWS_1252 = frozenset(
    {
        "iso-8859-1",
        "iso8859-1",
        "latin1",
        "latin-1",
        "l1",
        "us-ascii",
        "ascii",
        "cp1252",
        "windows-1252",
        "x-cp1252",
        "iso_8859-1",
        "cp819",
        "ibm819",
        "iso-ir-100",
        "csisolatin1",
        "ansi_x3.4-1968",
    }
)

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
_XML_ENCODING = re.compile(rb"""^<\?xml[^>]+encoding\s*=\s*["']([A-Za-z0-9_.:-]+)""")
#: Bytes of an HTML body searched for a C{<meta charset>} (as browsers do).
_SNIFF_BYTES = 1024


@lru_cache(maxsize=256)
def _codecFor(label: str) -> tuple[str, str]:
    """
    C{(python codec, error handler)} for a charset label; UTF-8 for a label
    Python doesn't know.
    """
    label = label.strip().strip("\"'").lower()
    if label in _WINDOWS_1252:
        return "cp1252", "netlog-c1"
    try:
        return codecs.lookup(label).name, "strict"
    except LookupError:
        return "utf-8", "strict"


def charsetFor(mediaType: str, params: dict[str, str], data: bytes) -> tuple[str, str]:
    """
    Which charset text is read in: a byte order mark first, then the
    C{charset} parameter, then what the body says (HTML's C{<meta charset>},
    XML's declaration), then UTF-8 (JSON's only charset, and the best guess
    for the rest, with windows-1252 as the fallback of L{decodeText}).
    """
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8-sig", "strict"
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16", "strict"
    label = params.get("charset")
    if label:
        return _codecFor(label)
    if mediaType in ("text/html", "application/xhtml+xml"):
        m = _META_CHARSET.search(data[:_SNIFF_BYTES])
        if m:
            return _codecFor(m.group(1).decode("ascii"))
    if "xml" in mediaType or mediaType == "image/svg+xml":
        m = _XML_ENCODING.match(data[:_SNIFF_BYTES])
        if m:
            return _codecFor(m.group(1).decode("ascii"))
    return "utf-8", "strict"


def decodeText(data: bytes, mediaType: str, params: dict[str, str], cut: bool) -> tuple[str, bool]:
    """
    Text from a decoded body: C{(text, lossless)}.

    A body cut short may end inside a character; that partial character is
    dropped, not counted as a loss. With no declared charset, a C{text/*}
    body that isn't UTF-8 is read as windows-1252 (what a browser does). A
    body that
    still can't be read keeps U+FFFD for the bytes that failed, and
    C{lossless} is false so that the caller keeps the exact bytes.
    """
    declared = "charset" in params
    codec, errors = charsetFor(mediaType, params, data)
    try:
        if codec == "utf-8" and not cut:
            # the usual case: the same as the incremental decoder's last call
            return data.decode("utf-8", errors), True
        decoder = codecs.getincrementaldecoder(codec)(errors)
        return decoder.decode(data, final=not cut), True
    except UnicodeDecodeError:
        pass
    if not declared and codec == "utf-8" and mediaType.startswith("text/"):
        return codecs.getincrementaldecoder("cp1252")("netlog-c1").decode(data, final=True), True
    decoder = codecs.getincrementaldecoder(codec)("replace")
    return decoder.decode(data, final=not cut), False
