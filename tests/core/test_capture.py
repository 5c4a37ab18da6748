"""
Tests of L{netlog.core.capture}: what an entry keeps of a body.
"""

from __future__ import annotations

import base64
import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.capture import (
    MAX_REQUEST_BODY,
    MAX_RESPONSE_BODY,
    BodyCapture,
    keepsText,
    removeSignIn,
    requestCapture,
    responseCapture,
)


class BodyCaptureTests(SynchronousTestCase):
    """
    A body is counted whole, kept up to the limit, hashed whole.
    """

    def test_limits(self) -> None:
        """
        The limits are decimal megabytes: 10 MB for requests, 1 MB for
        answers.
        """
        self.assertEqual(MAX_REQUEST_BODY, 10_000_000)
        self.assertEqual(MAX_RESPONSE_BODY, 1_000_000)

    def test_underLimit(self) -> None:
        """
        A body under the limit is kept whole, not truncated.
        """
        capture = BodyCapture(10, keep=True, hashAll=False)
        capture.feed(b"abc")
        capture.feed(b"")
        capture.feed(b"def")
        self.assertEqual(capture.record(), {"size": 6, "data": base64.b64encode(b"abcdef").decode()})
        self.assertFalse(capture.truncated)

    def test_exactlyLimit(self) -> None:
        """
        A body of exactly the limit is kept whole, not truncated.
        """
        capture = BodyCapture(6, keep=True, hashAll=False)
        capture.feed(b"abcdef")
        self.assertEqual(capture.record(), {"size": 6, "data": base64.b64encode(b"abcdef").decode()})

    def test_overLimit(self) -> None:
        """
        Past the limit the first C{limit} bytes are kept, the size counts
        everything, and C{_truncated} says so.
        """
        capture = BodyCapture(5, keep=True, hashAll=False)
        for piece in (b"abc", b"def", b"ghi"):
            capture.feed(piece)
        self.assertEqual(
            capture.record(),
            {"size": 9, "data": base64.b64encode(b"abcde").decode(), "_truncated": True},
        )
        self.assertTrue(capture.truncated)

    def test_hash(self) -> None:
        """
        With C{hashAll}, the whole body's SHA-256 is recorded, no data.
        """
        capture = BodyCapture(4, keep=False, hashAll=True)
        capture.feed(b"\x89PNG")
        capture.feed(b"\x00" * 100)
        self.assertEqual(
            capture.record(),
            {"size": 104, "sha256": hashlib.sha256(b"\x89PNG" + b"\x00" * 100).hexdigest()},
        )

    def test_countOnly(self) -> None:
        """
        Neither kept nor hashed: size only.
        """
        capture = BodyCapture(4, keep=False, hashAll=False)
        capture.feed(b"abcdefgh")
        self.assertEqual(capture.record(), {"size": 8})
        self.assertFalse(capture.truncated)
        self.assertEqual(capture.data, b"")

    def test_empty(self) -> None:
        """
        An empty kept body is size 0 and empty data.
        """
        self.assertEqual(BodyCapture(4, keep=True, hashAll=False).record(), {"size": 0, "data": ""})

    def test_choices(self) -> None:
        """
        Request bodies are kept up to 10 MB; text answers up to 1 MB; other
        answers hashed; with no log, bodies are only counted.
        """
        capture = requestCapture(logging=True)
        self.assertEqual((capture.limit, capture.keep, capture.hashAll), (MAX_REQUEST_BODY, True, False))
        capture = responseCapture("text/html; charset=latin-1", logging=True)
        self.assertEqual((capture.limit, capture.keep, capture.hashAll), (MAX_RESPONSE_BODY, True, False))
        capture = responseCapture(b"image/png", logging=True)
        self.assertEqual((capture.keep, capture.hashAll), (False, True))
        capture = responseCapture(None, logging=True)
        self.assertEqual((capture.keep, capture.hashAll), (False, True))
        for capture in (requestCapture(False), responseCapture("text/plain", False), responseCapture("image/png", False)):
            self.assertEqual((capture.keep, capture.hashAll), (False, False))

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.binary(max_size=50), max_size=10), st.integers(0, 200))
    def test_anyPieces(self, pieces: list[bytes], limit: int) -> None:
        """
        However the body is cut, the record is that of the whole body.
        """
        whole = b"".join(pieces)
        capture = BodyCapture(limit, keep=True, hashAll=True)
        for piece in pieces:
            capture.feed(piece)
        expected = {
            "size": len(whole),
            "data": base64.b64encode(whole[:limit]).decode(),
            "sha256": hashlib.sha256(whole).hexdigest(),
        }
        if len(whole) > limit:
            expected["_truncated"] = True
        self.assertEqual(capture.record(), expected)


class KeepsTextTests(SynchronousTestCase):
    """
    Text, JSON, forms, XML and scripts are kept as data; the rest isn't.
    """

    def test_table(self) -> None:
        """
        Each content type is classified as the log format says.
        """
        kept = [
            "text/html",
            "text/plain; charset=utf-8",
            "TEXT/CSS",
            "text/javascript",
            "application/json",
            "application/json; charset=utf-8",
            "application/ld+json",
            "application/problem+json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=xyz",
            "application/xml",
            "image/svg+xml",
            "application/atom+xml",
            "application/javascript",
            "application/x-javascript",
            "application/ecmascript",
            b"text/html",
            " text/html ",
        ]
        notKept = [
            None,
            "",
            "image/png",
            "application/octet-stream",
            "application/pdf",
            "video/mp4",
            "font/woff2",
            "application/wasm",
            "application/jsonx",
            "textual/html",
            "application/zip",
        ]
        for contentType in kept:
            self.assertTrue(keepsText(contentType), contentType)
        for contentType in notKept:
            self.assertFalse(keepsText(contentType), contentType)


class RemoveSignInTests(SynchronousTestCase):
    """
    Sign-in header values become C{<removed>}; cookies never do.
    """

    def test_str(self) -> None:
        """
        Named headers (any case) are removed, the rest kept in order.
        """
        headers = [("Host", "a"), ("Authorization", "Bearer x"), ("X-Token", "t"), ("Cookie", "s=1")]
        self.assertEqual(
            removeSignIn(headers, ["authorization", "X-TOKEN", "Cookie"]),
            [["Host", "a"], ["Authorization", "<removed>"], ["X-Token", "<removed>"], ["Cookie", "s=1"]],
        )

    def test_bytes(self) -> None:
        """
        Byte pairs work the same, and Set-Cookie is never removed.
        """
        headers = [(b"Set-Cookie", b"s=1"), (b"X-Api-Key", b"k")]
        self.assertEqual(
            removeSignIn(headers, [b"set-cookie", "x-api-key"]),
            [[b"Set-Cookie", b"s=1"], [b"X-Api-Key", b"<removed>"]],
        )
