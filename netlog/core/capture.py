"""
Body capture with limits: what an exchange keeps of a body.

A body is counted whole; at most C{limit} bytes of it are kept (when the
exchange keeps data), and a SHA-256 of the whole is computed when asked.
Bodies are never held past the limit, so a 100 MB transfer costs no memory.

The limits are decimal megabytes, as the log format and SPEC write them:
10 MB is C{10 * 1000 * 1000} bytes, 1 MB is C{1000 * 1000} bytes.  The HAR
builder uses the same constants.
"""

from __future__ import annotations

import binascii
import hashlib
import mmap
from typing import Any, Iterable, Sequence, TypeVar

from netlog.core.logline import AsciiText

__all__ = [
    "MAX_REQUEST_BODY",
    "MAX_RESPONSE_BODY",
    "REMOVED",
    "SPILL_SIZE",
    "BodyCapture",
    "keepsText",
    "removeSignIn",
    "requestCapture",
    "responseCapture",
]

#: The most bytes of a request body an entry keeps (10 MB, decimal).
MAX_REQUEST_BODY = 10 * 1000 * 1000
#: The most bytes of a text answer an entry keeps (1 MB, decimal).
MAX_RESPONSE_BODY = 1000 * 1000
#: Bytes of base64 a capture keeps in an ordinary buffer; past them, in an
#: anonymous memory map (see L{BodyCapture}).
SPILL_SIZE = 256 * 1024
#: What a sign-in header's value is replaced with.
REMOVED = "<removed>"

#: Headers whose values are never removed: graders read cookies.
_NEVER_REMOVED = frozenset({"cookie", "set-cookie"})

_TEXT_TYPES = frozenset(
    {
        "application/json",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "application/xml",
        "application/javascript",
        "application/x-javascript",
        "application/ecmascript",
        "application/x-ecmascript",
        "application/x-ndjson",
        "application/graphql",
    }
)


class BodyCapture:
    """
    Counts a body fed in pieces; keeps its first C{limit} bytes when C{keep};
    hashes the whole with SHA-256 when C{hashAll}.

    The bytes kept are kept as their base64, encoded as they arrive (three
    bytes at a time; at most two wait for the next piece), since base64 is
    what the log writes: a 10 MB upload is never held raw and as base64 at
    once, and its line can be written straight from what was kept (see
    L{record}'s C{splice}).  Past L{SPILL_SIZE} bytes of base64 they go to an
    anonymous memory map sized for the whole limit: its pages cost memory
    only once written, it never moves or is copied as it grows, and it goes
    back to the system whole when let go.

    @ivar size: bytes fed so far.
    @ivar truncated: more than C{limit} bytes were fed (and C{keep}).
    """

    def __init__(self, limit: int, keep: bool, hashAll: bool) -> None:
        self.limit = limit
        self.keep = keep
        self.hashAll = hashAll
        self.size = 0
        self._keptSize = 0
        self._encoded: bytearray | mmap.mmap | None = None
        self._encodedSize = 0
        self._carry = b""
        self._spilled = False
        self._hash = hashlib.sha256() if hashAll else None

    @property
    def truncated(self) -> bool:
        return self.keep and self.size > self.limit

    @property
    def spilled(self) -> bool:
        """
        Whether what is kept passed L{SPILL_SIZE} bytes of base64 (and went
        to a memory map, where the system gave one).
        """
        return self._spilled

    def feed(self, data: bytes) -> None:
        """
        Count (and keep, and hash) the next piece of the body.
        """
        if not data:
            return
        self.size += len(data)
        if self._hash is not None:
            self._hash.update(data)
        if self.keep and self._keptSize < self.limit:
            room = self.limit - self._keptSize
            view = memoryview(data)
            if len(view) > room:
                view = view[:room]
            self._keptSize += len(view)
            self._encode(view)

    def _encode(self, view: memoryview) -> None:
        """
        Add the base64 of C{view} (after the bytes carried from the piece
        before) to what is kept; carry the last one or two bytes that don't
        make a group of three.
        """
        carry = self._carry
        if carry:
            need = 3 - len(carry)
            if len(view) < need:
                self._carry = carry + view.tobytes()
                return
            self._append(binascii.b2a_base64(carry + view[:need].tobytes(), newline=False))
            view = view[need:]
        cut = len(view) - len(view) % 3
        if cut:
            self._append(binascii.b2a_base64(view[:cut], newline=False))
        self._carry = view[cut:].tobytes()

    def _append(self, encoded: bytes) -> None:
        store = self._encoded
        start = self._encodedSize
        end = start + len(encoded)
        if store is None:
            store = self._encoded = bytearray()
        if end > SPILL_SIZE and not self._spilled:
            self._spilled = True
            try:
                mapped = mmap.mmap(-1, max(_encodedLength(self.limit), end), flags=mmap.MAP_PRIVATE)
            except (OSError, ValueError):
                # No map to be had (out of maps or address space): the
                # buffer grows on, as any buffer would.
                pass
            else:
                mapped[:start] = store
                store = self._encoded = mapped
        if isinstance(store, bytearray):
            store += encoded
        else:
            store[start:end] = encoded
        self._encodedSize = end

    def _tail(self) -> bytes:
        """
        The base64 of the carried bytes, padded: the end of the encoding.
        """
        return binascii.b2a_base64(self._carry, newline=False) if self._carry else b""

    @property
    def data(self) -> bytes:
        """
        The bytes kept (empty when not C{keep}), decoded from what is kept.
        """
        store = self._encoded
        if store is None:
            return self._carry
        return binascii.a2b_base64(memoryview(store)[: self._encodedSize]) + self._carry

    @property
    def sha256(self) -> str | None:
        """
        The hex SHA-256 of everything fed, when C{hashAll}.
        """
        return self._hash.hexdigest() if self._hash is not None else None

    def record(self, release: bool = False, splice: bool = False) -> dict[str, Any]:
        """
        What the log keeps: C{size}; C{data} (base64) and C{_truncated} when
        kept; C{sha256} when hashed.  See C{docs/log-format.rst}.

        @param release: let what is kept go (the capture keeps no data
            afterwards).
        @param splice: give C{data} as an L{AsciiText} over the kept base64
            itself, for the LogWriter to write without a copy; implies
            C{release}.
        """
        out: dict[str, Any] = {"size": self.size}
        if self.keep:
            if splice:
                out["data"] = self._spliced()
            else:
                out["data"] = self._base64()
                if release:
                    self._release()
            if self.truncated:
                out["_truncated"] = True
        elif splice or release:
            self._release()
        if self._hash is not None:
            out["sha256"] = self._hash.hexdigest()
        return out

    def _base64(self) -> str:
        store = self._encoded
        tail = self._tail().decode("ascii")
        if store is None:
            return tail
        with memoryview(store) as view:
            return str(view[: self._encodedSize], "ascii") + tail

    def _spliced(self) -> AsciiText:
        """
        The kept base64, finished with its tail, handed over whole: the
        capture lets it go.
        """
        tail = self._tail()
        self._carry = b""
        if tail:
            self._append(tail)
        store, size = self._encoded, self._encodedSize
        self._release()
        if store is None:
            return AsciiText(b"")
        if isinstance(store, bytearray):
            if len(store) != size:
                del store[size:]
            return AsciiText(store)
        # The view keeps the map alive until the line is written; then
        # both go, and the map's pages with them.
        return AsciiText(memoryview(store)[:size])

    def _release(self) -> None:
        self._encoded = None
        self._encodedSize = 0
        self._carry = b""


def _encodedLength(size: int) -> int:
    """
    The length of the base64 of C{size} bytes.
    """
    return (size + 2) // 3 * 4


def _mediaType(contentType: str | bytes | None) -> str:
    if contentType is None:
        return ""
    if isinstance(contentType, bytes):
        contentType = contentType.decode("latin-1")
    return contentType.split(";", 1)[0].strip(" \t").lower()


def keepsText(contentType: str | bytes | None) -> bool:
    """
    Whether an answer of this C{Content-Type} is kept as data (text, JSON,
    forms, XML, scripts) rather than as size and SHA-256.
    """
    media = _mediaType(contentType)
    if not media:
        return False
    if media.startswith("text/"):
        return True
    if media in _TEXT_TYPES:
        return True
    return media.endswith("+json") or media.endswith("+xml")


class SizeOnly(BodyCapture):
    """
    A body counted and nothing else kept: what L{BodyCapture} does with
    nothing to keep or hash, for a mode that keeps only sizes, in a few
    instructions per piece.
    """

    limit = 0
    keep = False
    hashAll = False
    spilled = False  # type: ignore[assignment]
    truncated = False  # type: ignore[assignment]

    def __init__(self) -> None:
        self.size = 0

    def feed(self, data: bytes) -> None:
        self.size += len(data)

    def record(self, release: bool = False, splice: bool = False) -> dict[str, Any]:
        return {"size": self.size}


def requestCapture(logging: bool) -> BodyCapture:
    """
    The capture for a request body: kept up to L{MAX_REQUEST_BODY} when the
    proxy logs, counted only when it doesn't.
    """
    return BodyCapture(MAX_REQUEST_BODY, keep=logging, hashAll=False)


def responseCapture(contentType: str | bytes | None, logging: bool) -> BodyCapture:
    """
    The capture for an answer's body: text kept up to L{MAX_RESPONSE_BODY},
    anything else hashed; counted only when the proxy doesn't log.
    """
    text = keepsText(contentType)
    return BodyCapture(MAX_RESPONSE_BODY, keep=logging and text, hashAll=logging and not text)


#: What C{--keep-bodies} takes: text answers' bodies (the default), or every
#: answer's (a recording to replay).
KEEP_TEXT = "text"
KEEP_ALL = "all"
KEEP_CHOICES = (KEEP_TEXT, KEEP_ALL)


def keepAllCapture(contentType: str | bytes | None, logging: bool) -> BodyCapture:
    """
    The capture for an answer's body with C{--keep-bodies all}: every type
    kept up to L{MAX_RESPONSE_BODY} (then C{_truncated}), and any but text
    also hashed whole, as it is without.
    """
    return BodyCapture(MAX_RESPONSE_BODY, keep=logging, hashAll=logging and not keepsText(contentType))


#: What the capture policy chose per answer type: C{(limit, keep, hashAll)}.
_CAPTURES: dict[tuple[bytes | str | None, bool], tuple[int, bool, bool]] = {}
#: The most answer types remembered (cleared when full).
MAX_CAPTURE_TYPES = 256


def responseCaptureFor(contentType: str | bytes | None, logging: bool) -> BodyCapture:
    """
    L{responseCapture}'s choice, worked out once per distinct
    C{Content-Type} (a handful per site) rather than per answer.
    """
    key = (contentType, logging)
    choice = _CAPTURES.get(key)
    if choice is None:
        if len(_CAPTURES) >= MAX_CAPTURE_TYPES:
            _CAPTURES.clear()
        model = responseCapture(contentType, logging)
        _CAPTURES[key] = (model.limit, model.keep, model.hashAll)
        return model
    return BodyCapture(*choice)


_H = TypeVar("_H", str, bytes)


def removeSignIn(
    headers: Iterable[Sequence[_H]], names: Iterable[str | bytes]
) -> list[list[_H]]:
    """
    The headers with the values of those named in C{names} (any case)
    replaced by C{"<removed>"}; C{Cookie} and C{Set-Cookie} are never
    removed.  Works on C{str} or C{bytes} pairs; returns C{[name, value]}
    lists as the log writes them.
    """
    wanted = set()
    for name in names:
        if isinstance(name, bytes):
            name = name.decode("latin-1")
        wanted.add(name.strip().lower())
    wanted -= _NEVER_REMOVED
    out: list[list[_H]] = []
    for name, value in headers:
        text = name.decode("latin-1") if isinstance(name, bytes) else name
        if text.lower() in wanted:
            removed: Any = REMOVED.encode("ascii") if isinstance(value, bytes) else REMOVED
            out.append([name, removed])
        else:
            out.append([name, value])
    return out
