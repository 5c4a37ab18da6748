"""
Tests of L{netlog.core.capture.BodyCapture} keeping a body as base64 as it
arrives: the record is the whole body's however it was cut, below and past
the spill into a memory map, and the spliced record is the same text.
"""

from __future__ import annotations

import base64
import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core import capture as captureModule
from netlog.core.capture import SPILL_SIZE, BodyCapture
from netlog.core.logline import AsciiText


def expected(whole: bytes, limit: int, hashAll: bool) -> dict[str, object]:
    out: dict[str, object] = {"size": len(whole), "data": base64.b64encode(whole[:limit]).decode()}
    if len(whole) > limit:
        out["_truncated"] = True
    if hashAll:
        out["sha256"] = hashlib.sha256(whole).hexdigest()
    return out


def plainRecord(record: dict[str, object]) -> dict[str, object]:
    data = record.get("data")
    if isinstance(data, AsciiText):
        return dict(record, data=str(data))
    return record


class Base64CaptureTests(SynchronousTestCase):
    """
    What is kept is the base64 of the kept bytes, whatever the cuts.
    """

    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.binary(max_size=20), max_size=12), st.integers(0, 120), st.booleans())
    def test_splicedRecord(self, pieces: list[bytes], limit: int, hashAll: bool) -> None:
        """
        The spliced record's data is an L{AsciiText} of the same base64 the
        plain record has; afterwards the capture keeps nothing.
        """
        whole = b"".join(pieces)
        capture = BodyCapture(limit, keep=True, hashAll=hashAll)
        for piece in pieces:
            capture.feed(piece)
        self.assertEqual(capture.record(), expected(whole, limit, hashAll))
        self.assertEqual(capture.data, whole[:limit])
        record = capture.record(splice=True)
        self.assertIsInstance(record["data"], AsciiText)
        self.assertEqual(plainRecord(record), expected(whole, limit, hashAll))
        self.assertEqual(capture.data, b"")

    @settings(max_examples=25, deadline=None)
    @given(st.lists(st.integers(1, 5000), min_size=1, max_size=30), st.integers(0, 2), st.booleans())
    def test_pastTheSpill(self, sizes: list[int], extra: int, splice: bool) -> None:
        """
        A body kept past the spill (in a memory map, here with a small
        spill size) reads back whole, cut anywhere, up to the limit.
        """
        self.patch(captureModule, "SPILL_SIZE", 1000)
        whole = bytes(i * 7 % 256 for i in range(sum(sizes)))
        limit = max(0, len(whole) - extra * 1000)
        capture = BodyCapture(limit, keep=True, hashAll=False)
        at = 0
        for size in sizes:
            capture.feed(whole[at:at + size])
            at += size
        self.assertEqual(capture.data, whole[:limit])
        record = capture.record(splice=splice)
        self.assertEqual(plainRecord(record), expected(whole, limit, False))

    def test_tenMegabytes(self) -> None:
        """
        A 10 MB body in 64 KiB pieces past the real spill size is kept as
        its base64, spliced as one view over the map.
        """
        self.assertLess(SPILL_SIZE, 13_333_336)
        block = bytes(range(256)) * 256
        capture = BodyCapture(10_000_000, keep=True, hashAll=False)
        for _ in range(170):
            capture.feed(block)
        record = capture.record(splice=True)
        data = record["data"]
        assert isinstance(data, AsciiText)
        self.assertIsInstance(data.buffer, memoryview)
        self.assertEqual(len(data), 13_333_336)
        self.assertEqual(base64.b64decode(bytes(data.buffer)), (block * 153)[:10_000_000])
        self.assertTrue(record["_truncated"])

    def test_notKept(self) -> None:
        """
        A body counted or hashed only has no data, spliced or not.
        """
        capture = BodyCapture(10, keep=False, hashAll=True)
        capture.feed(b"abc")
        self.assertEqual(capture.record(splice=True), {"size": 3, "sha256": hashlib.sha256(b"abc").hexdigest()})

    def test_noMapToBeHad(self) -> None:
        """
        Where the system gives no memory map, the body is kept on in an
        ordinary buffer, the record the same.
        """
        self.patch(captureModule, "SPILL_SIZE", 100)

        def refuse(*args: object, **kwargs: object) -> None:
            raise OSError(12, "Cannot allocate memory")

        self.patch(captureModule.mmap, "mmap", refuse)
        whole = bytes(range(256)) * 10
        capture = BodyCapture(2000, keep=True, hashAll=False)
        for at in range(0, len(whole), 77):
            capture.feed(whole[at:at + 77])
        self.assertTrue(capture.spilled)
        record = capture.record(splice=True)
        self.assertEqual(plainRecord(record), expected(whole, 2000, False))

    def test_spilled(self) -> None:
        """
        A capture says when what it keeps passed the spill size, not before.
        """
        self.patch(captureModule, "SPILL_SIZE", 100)
        capture = BodyCapture(1000, keep=True, hashAll=False)
        capture.feed(b"x" * 76)
        # 100 bytes of base64, one byte carried: not past the spill yet.
        self.assertFalse(capture.spilled)
        capture.feed(b"xx")
        self.assertTrue(capture.spilled)
