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

import base64
import binascii
import hashlib
from typing import Any, Iterable, Iterator, Sequence, TypeVar

__all__ = [
    "MAX_REQUEST_BODY",
    "MAX_RESPONSE_BODY",
    "REMOVED",
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

    @ivar size: bytes fed so far.
    @ivar truncated: more than C{limit} bytes were fed (and C{keep}).
    """

    def __init__(self, limit: int, keep: bool, hashAll: bool) -> None:
        self.limit = limit
        self.keep = keep
        self.hashAll = hashAll
        self.size = 0
        self._kept: list[bytes] = []
        self._keptSize = 0
        self._hash = hashlib.sha256() if hashAll else None

    @property
    def truncated(self) -> bool:
        return self.keep and self.size > self.limit

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
            piece = data if len(data) <= room else data[:room]
            self._kept.append(bytes(piece))
            self._keptSize += len(piece)

    @property
    def data(self) -> bytes:
        """
        The bytes kept (empty when not C{keep}).
        """
        if len(self._kept) > 1:
            self._kept = [b"".join(self._kept)]
        return self._kept[0] if self._kept else b""

    @property
    def sha256(self) -> str | None:
        """
        The hex SHA-256 of everything fed, when C{hashAll}.
        """
        return self._hash.hexdigest() if self._hash is not None else None

    def record(self, release: bool = False) -> dict[str, Any]:
        """
        What the log keeps: C{size}; C{data} (base64) and C{_truncated} when
        kept; C{sha256} when hashed.  See C{docs/log-format.rst}.

        @param release: let each kept piece go as soon as it is encoded (the
            capture keeps no data afterwards): a 10 MB body is never held
            whole and as base64 at once.
        """
        out: dict[str, Any] = {"size": self.size}
        if self.keep:
            out["data"] = self._base64(release)
            if self.truncated:
                out["_truncated"] = True
        if self._hash is not None:
            out["sha256"] = self._hash.hexdigest()
        return out

    def _base64(self, release: bool) -> str:
        """
        The kept bytes in base64, encoded piece by piece (each cut at a
        multiple of 3 bytes, so the pieces join into the encoding of the
        whole) and joined once, without joining the raw bytes first.
        """
        kept = self._kept
        if len(kept) <= 1:
            data = kept[0] if kept else b""
            if release:
                self._kept = []
            return base64.b64encode(data).decode("ascii")
        pieces: Iterator[bytes]
        if release:
            self._kept = []
            kept.reverse()
            pieces = (kept.pop() for _ in range(len(kept)))
        else:
            pieces = iter(kept)
        encoded: list[str] = []
        carry = b""
        for piece in pieces:
            if carry:
                piece = carry + piece
            cut = len(piece) - len(piece) % 3
            encoded.append(binascii.b2a_base64(memoryview(piece)[:cut], newline=False).decode("ascii"))
            carry = piece[cut:]
            del piece
        if carry:
            encoded.append(base64.b64encode(carry).decode("ascii"))
        return "".join(encoded)


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
