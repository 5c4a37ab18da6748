"""
The site proxy writes a kept body's record releasing each piece as it is
encoded (L{netlog.core.capture.BodyCapture.record} with C{release}): the record
must be exactly the one the whole body gives, however the body was cut.
"""

from __future__ import annotations

import base64

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.capture import BodyCapture


class ReleasedRecordTests(SynchronousTestCase):
    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.binary(max_size=20), max_size=12), st.integers(0, 120), st.booleans())
    def test_sameRecord(self, pieces: list[bytes], limit: int, hashAll: bool) -> None:
        """
        Released piece by piece (each cut anywhere, not at a multiple of 3),
        the base64 data, size, truncation and hash are those of the whole
        body; afterwards the capture holds no data.
        """
        whole = b"".join(pieces)
        kept = BodyCapture(limit, keep=True, hashAll=hashAll)
        released = BodyCapture(limit, keep=True, hashAll=hashAll)
        for piece in pieces:
            kept.feed(piece)
            released.feed(piece)
        record = released.record(release=True)
        self.assertEqual(record, kept.record())
        self.assertEqual(base64.b64decode(record["data"]), whole[:limit])
        self.assertEqual(released.data, b"")

    def test_manyPieces(self) -> None:
        """
        A body kept as thousands of odd-sized pieces (as a slow upload
        arrives) reads back whole.
        """
        capture = BodyCapture(10_000_000, keep=True, hashAll=False)
        whole = bytes(range(256)) * 400
        pieces = [whole[i:i + 7] for i in range(0, len(whole), 7)]
        for piece in pieces:
            capture.feed(piece)
        self.assertEqual(base64.b64decode(capture.record(release=True)["data"]), whole)
