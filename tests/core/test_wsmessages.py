"""
The WebSocket message assembler: bytes in (cut anywhere), messages out.
"""

from __future__ import annotations

import os
import tracemalloc
import zlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.records import MESSAGE_KEYS, messageRecord
from netlog.core.wsmessages import (
    MAX_INFLATED,
    MAX_KEPT_FRAMES,
    MESSAGE_CAP,
    SOCKET_BUDGET,
    UNDECODABLE_CONTEXT,
    UNDECODABLE_DEFLATE,
    KeptBudget,
    MessageAssembler,
    parseDeflate,
)


def frame(opcode: int, payload: bytes, fin: bool = True, mask: bytes | None = None, rsv1: bool = False) -> bytes:
    """
    One RFC 6455 frame, masked when C{mask} is given (as a browser sends).
    """
    b0 = (0x80 if fin else 0) | (0x40 if rsv1 else 0) | opcode
    n = len(payload)
    m = 0x80 if mask is not None else 0
    if n < 126:
        head = bytes([b0, m | n])
    elif n < 65536:
        head = bytes([b0, m | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([b0, m | 127]) + n.to_bytes(8, "big")
    if mask is None:
        return head + payload
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return head + mask + masked


def compress(compressor: Any, data: bytes) -> bytes:
    """
    A message compressed as RFC 7692 says: a sync flush, its tail removed.
    """
    out = compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)
    assert out.endswith(b"\x00\x00\xff\xff")
    return out[:-4]


def summary(messages: list[Any]) -> list[tuple[int, int, bytes | None, bool]]:
    return [(m.opcode, m.size, m.data, m.truncated) for m in messages]


def feedAll(assembler: MessageAssembler, data: bytes, cuts: list[int]) -> list[Any]:
    out = []
    start = 0
    for cut in sorted(set(c % (len(data) + 1) for c in cuts)) + [len(data)]:
        out.extend(assembler.feed(data[start:cut]))
        start = cut
    return out


MASK = b"\x37\xfa\x21\x3d"
#: A stream with text, binary, a fragmented message with a ping inside,
#: masked (as a browser sends), then a close.
STREAM = (
    frame(1, "héllo".encode(), mask=MASK)
    + frame(2, bytes(range(256)) * 3, mask=MASK)
    + frame(1, b"frag", fin=False, mask=MASK)
    + frame(9, b"ping", mask=MASK)
    + frame(0, b"men", fin=False, mask=MASK)
    + frame(0, b"ted", mask=MASK)
    + frame(2, b"", mask=MASK)
    + frame(8, (1000).to_bytes(2, "big") + b"bye", mask=MASK)
)
EXPECTED = [
    (1, 6, "héllo".encode(), False),
    (2, 768, bytes(range(256)) * 3, False),
    (1, 10, b"fragmented", False),
    (2, 0, b"", False),
]


class AssemblerTests(SynchronousTestCase):
    def test_messagesNotFrames(self) -> None:
        """
        Whole messages come out: a fragmented one once, with its parts joined;
        ping and close are not messages; the close's code and reason are kept.
        """
        a = MessageAssembler()
        assert summary(a.feed(STREAM)) == EXPECTED
        assert a.messages == 4
        assert (a.closed, a.closeCode, a.closeReason) == (True, 1000, "bye")
        assert a.bytes == len(STREAM)


    @given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=30))
    @settings(max_examples=300, deadline=None)
    def test_anyCut(self, cuts: list[int]) -> None:
        """
        Any cut of the byte stream gives the same messages, and the same
        frames for the fragmented one: each frame's payload length, in
        order (none for a message in one frame).
        """
        a = MessageAssembler()
        messages = feedAll(a, STREAM, cuts)
        assert summary(messages) == EXPECTED
        assert [m.frames for m in messages] == [None, None, (4, 3, 3), None]
        assert a.closeCode == 1000

    def test_framesBounded(self) -> None:
        """
        A message in more than L{MAX_KEPT_FRAMES} frames keeps none of their
        lengths (a peer's endless tiny frames cost nothing); one in exactly
        that many keeps them all.
        """
        def fragmented(count: int) -> bytes:
            return frame(1, b"a", fin=False) + b"".join(frame(0, b"a", fin=False) for _ in range(count - 2)) \
                + frame(0, b"a")

        a = MessageAssembler()
        kept, dropped = a.feed(fragmented(MAX_KEPT_FRAMES) + fragmented(MAX_KEPT_FRAMES + 1))
        assert kept.frames == (1,) * MAX_KEPT_FRAMES
        assert (dropped.data, dropped.frames) == (b"a" * (MAX_KEPT_FRAMES + 1), None)

    def test_framesLogged(self) -> None:
        """
        A message line names the frames of a message that came in more than
        one (what a replay needs to send it in the same frames), in its key
        order; one in one frame has no C{frames}.
        """
        fragmented = messageRecord("down", 1, 10, b"fragmented", False, frames=(4, 3, 3))
        assert fragmented == {"direction": "down", "opcode": 1, "size": 10, "frames": [4, 3, 3],
                              "data": "fragmented"}
        assert list(fragmented) == [k for k in MESSAGE_KEYS if k in fragmented]
        assert "frames" not in messageRecord("down", 1, 10, b"fragmented", False)


    @given(st.lists(st.integers(min_value=0, max_value=100_000), max_size=20), st.booleans())
    @settings(max_examples=100, deadline=None)
    def test_anyCutDeflate(self, cuts: list[int], noContext: bool) -> None:
        """
        Compressed messages (fragmented too, context taken over or not) come
        out inflated, the same whatever the cuts.
        """
        texts = [b"hello hello hello", b"hello again " * 50, os.urandom(300), b"last"]
        compressor = zlib.compressobj(wbits=-15)
        data = b""
        for i, text in enumerate(texts):
            if noContext:
                compressor = zlib.compressobj(wbits=-15)
            payload = compress(compressor, text)
            if i == 1:
                half = len(payload) // 2
                data += frame(1, payload[:half], fin=False, rsv1=True) + frame(0, payload[half:])
            else:
                data += frame(2 if i == 2 else 1, payload, rsv1=True)
        a = MessageAssembler(deflate=True, noContextTakeover=noContext)
        got = feedAll(a, data, cuts)
        assert [m.data for m in got] == texts
        assert [m.size for m in got] == [len(t) for t in texts]
        assert all(m.compressed is not None and m.undecodable is None for m in got)


    def test_uncompressedAmongCompressed(self) -> None:
        """
        With permessage-deflate agreed, a message without RSV1 is as it came.
        """
        compressor = zlib.compressobj(wbits=-15)
        zipped = compress(compressor, b"zipped")
        data = frame(1, zipped, rsv1=True) + frame(1, b"plain")
        got = MessageAssembler(deflate=True).feed(data)
        assert [(m.data, m.compressed) for m in got] == [(b"zipped", len(zipped)), (b"plain", None)]


    def test_messageCap(self) -> None:
        """
        A message past 1 MB keeps its first 1 MB, its whole size, and is
        marked truncated.
        """
        big = os.urandom(MESSAGE_CAP + 1000)
        got = MessageAssembler().feed(frame(2, big))
        assert got[0].size == len(big)
        assert got[0].data == big[:MESSAGE_CAP]
        assert got[0].truncated


    def test_socketBudget(self) -> None:
        """
        Past 10 MB kept on one WebSocket (both directions together), messages
        keep only their size.
        """
        budget = KeptBudget()
        up, down = MessageAssembler(budget), MessageAssembler(budget)
        chunk = b"x" * MESSAGE_CAP
        kept = 0
        for i in range(SOCKET_BUDGET // MESSAGE_CAP):
            side = up if i % 2 else down
            (m,) = side.feed(frame(2, chunk))
            assert m.data == chunk
            kept += len(chunk)
        assert kept == SOCKET_BUDGET
        (m,) = up.feed(frame(1, b"later"))
        assert (m.size, m.data, m.truncated) == (5, None, True)
        assert messageRecord("up", m.opcode, m.size, m.data, m.truncated) == {
            "direction": "up", "opcode": 1, "size": 5, "_truncated": True}


    def test_deflateBomb(self) -> None:
        """
        A small compressed frame that would inflate to gigabytes costs bounded
        memory: inflating stops at its bound, the message keeps 1 MB and is
        marked truncated.
        """
        compressor = zlib.compressobj(9, wbits=-15)
        # ~2 GB of zeros would take a while to compress; repeat a compressed
        # block of 64 MB of zeros instead (each block inflates to 64 MB).
        block = compressor.compress(bytes(64 * 1024 * 1024)) + compressor.flush(zlib.Z_SYNC_FLUSH)
        payload = block * 32
        assert len(payload) < 4 * 1024 * 1024
        a = MessageAssembler(deflate=True)
        tracemalloc.start()
        try:
            (m,) = a.feed(frame(2, payload, rsv1=True))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        # The frame as read (held once more while it is cut into payload), the
        # compressed bytes kept in case they can't be inflated, the 1 MB kept.
        assert peak < 2 * len(payload) + 4 * MESSAGE_CAP
        assert m.truncated
        assert m.size == MAX_INFLATED
        assert m.data == bytes(MESSAGE_CAP)


    def test_undecompressable(self) -> None:
        """
        A compressed message that can't be inflated keeps its compressed bytes
        and says so; with the context lost, so do later ones in that direction.
        """
        compressor = zlib.compressobj(wbits=-15)
        bad = b"\xff\xff\xff\xff\xff"
        good = compress(compressor, b"fine")
        a = MessageAssembler(deflate=True)
        first, second = a.feed(frame(1, bad, rsv1=True) + frame(1, good, rsv1=True))
        assert (first.data, first.undecodable, first.size) == (bad, UNDECODABLE_DEFLATE, 5)
        assert second.undecodable == UNDECODABLE_CONTEXT
        record = messageRecord("down", first.opcode, first.size, first.data, first.truncated, first.compressed,
                               first.undecodable)
        assert record["encoding"] == "base64" and str(record["data"]) == "//////8="
        # Each message on its own context: the next one is read again.
        a = MessageAssembler(deflate=True, noContextTakeover=True)
        first, second = a.feed(frame(1, bad, rsv1=True) + frame(1, compress(zlib.compressobj(wbits=-15), b"ok"),
                                                                   rsv1=True))
        assert first.undecodable == UNDECODABLE_DEFLATE
        assert (second.data, second.undecodable) == (b"ok", None)


    def test_textCutInsideCharacter(self) -> None:
        """
        A text message cut by the cap inside a character keeps the whole
        characters as text.
        """
        text = ("é" * (MESSAGE_CAP // 2 + 10)).encode()
        (m,) = MessageAssembler().feed(frame(1, b"a" + text))
        record = messageRecord("up", m.opcode, m.size, m.data, m.truncated)
        assert record["_truncated"] is True
        assert record["data"] == "a" + "é" * ((MESSAGE_CAP - 1) // 2)
        assert "encoding" not in record


    def test_notFraming(self) -> None:
        """
        Bytes that aren't WebSocket framing stop the reading but are counted.
        """
        a = MessageAssembler()
        assert a.feed(b"\x83\x00garbage") == []
        assert a.error is not None
        a.feed(b"more")
        assert a.bytes == 13


    def test_parseDeflate(self) -> None:
        """
        The 101's extensions answer says what was agreed.
        """
        assert parseDeflate(None) is None
        assert parseDeflate("x-other") is None
        d = parseDeflate("permessage-deflate; client_max_window_bits=15; server_no_context_takeover")
        assert d is not None and (d.clientNoContext, d.serverNoContext) == (False, True)
        d = parseDeflate("permessage-deflate;client_no_context_takeover")
        assert d is not None and (d.clientNoContext, d.serverNoContext) == (True, False)
