"""
Tests of L{netlog.core.websocket.FrameCounter}: streams built with wsproto,
cut at every point and at random.
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase
from wsproto.frame_protocol import FrameProtocol, Opcode

from netlog.core.websocket import FrameCounter


@dataclass
class Recording:
    """
    A stream of frames and what a counter must make of it.
    """

    wire: bytes
    messages: int
    payloadBytes: int
    closed: bool


def record(client: bool, script: list[tuple[str, object]]) -> Recording:
    """
    Build one direction's bytes with wsproto from C{script}: C{("message",
    [piece, ...])} sends a message in that many frames (a ping between
    each), C{("ping", payload)}, C{("pong", payload)}, C{("close", None)}.
    """
    proto = FrameProtocol(client=client, extensions=[])
    wire = bytearray()
    messages = payload = 0
    closed = False
    for op, arg in script:
        if op == "message":
            pieces = arg
            assert isinstance(pieces, list)
            for i, piece in enumerate(pieces):
                fin = i == len(pieces) - 1
                wire += proto.send_data(piece, fin)
                payload += len(piece.encode("utf-8") if isinstance(piece, str) else piece)
                if not fin:
                    wire += proto.ping(b"between")
                    payload += len(b"between")
            messages += 1
        elif op == "ping":
            assert isinstance(arg, bytes)
            wire += proto.ping(arg)
            payload += len(arg)
        elif op == "pong":
            assert isinstance(arg, bytes)
            wire += proto.pong(arg)
            payload += len(arg)
        elif op == "close":
            frame = proto.close(1000, "bye")
            wire += frame
            payload += 2 + len(b"bye")
            closed = True
    return Recording(bytes(wire), messages, payload, closed)


SCRIPT: list[tuple[str, object]] = [
    ("message", ["hello"]),
    ("message", [b""]),
    ("ping", b""),
    ("message", [b"\x00" * 125]),
    ("message", [b"a" * 126]),
    ("message", ["part one ", "part two ", "end"]),
    ("pong", b"p" * 125),
    ("message", [b"b" * 65535]),
    ("message", [b"c" * 65536]),
    ("message", [b"x", b"y" * 300, b"", b"z" * 70000]),
    ("close", None),
]


#: A shorter stream for cutting at every point: still every length form.
SHORT_SCRIPT: list[tuple[str, object]] = [
    ("message", ["hello"]),
    ("ping", b""),
    ("message", [b"a" * 126]),
    ("message", ["part one ", "part two ", "end"]),
    ("message", [b"x", b"c" * 65536, b"", b"z"]),
    ("pong", b"p" * 125),
    ("message", [b""]),
    ("close", None),
]


def counted(wire: bytes, cuts: list[int]) -> FrameCounter:
    counter = FrameCounter()
    last = 0
    for cut in sorted(cuts) + [len(wire)]:
        counter.feed(wire[last:cut])
        last = cut
        assert len(counter._head) < 14, "a frame header is all that is ever buffered"
    return counter


class FrameCounterTests(SynchronousTestCase):
    """
    Messages, bytes and the close are counted exactly however the stream is
    cut.
    """

    def assertCounts(self, counter: FrameCounter, recording: Recording) -> None:
        self.assertEqual(
            (counter.messages, counter.bytes, counter.payloadBytes, counter.closed, counter.error),
            (recording.messages, len(recording.wire), recording.payloadBytes, recording.closed, None),
        )

    def test_whole(self) -> None:
        """
        Masked client frames and unmasked server frames, with 7-bit, 16-bit
        and 64-bit lengths, fragmented messages with pings in between: a
        fragmented message counts once; ping, pong and close don't.
        """
        for client in (True, False):
            recording = record(client, SCRIPT)
            self.assertEqual(recording.messages, 8)
            self.assertCounts(counted(recording.wire, []), recording)

    def test_everyCut(self) -> None:
        """
        Cut in two at every point, the stream counts the same.
        """
        for client in (True, False):
            recording = record(client, SHORT_SCRIPT)
            self.assertEqual(recording.messages, 5)
            wire = memoryview(recording.wire)
            for cut in range(len(wire) + 1):
                counter = FrameCounter()
                counter.feed(wire[:cut])
                counter.feed(wire[cut:])
                if counter.messages != recording.messages or counter.payloadBytes != recording.payloadBytes:
                    self.fail(f"cut at {cut} counted {counter.messages} messages")
                self.assertTrue(counter.closed)

    def test_byteByByte(self) -> None:
        """
        Fed a byte at a time, the counts are the same; a message is counted
        only once its last byte came.
        """
        recording = record(True, [("message", ["abc"])])
        counter = FrameCounter()
        for i in range(len(recording.wire)):
            self.assertEqual(counter.messages, 0)
            counter.feed(recording.wire[i : i + 1])
        self.assertEqual(counter.messages, 1)
        recording = record(False, SCRIPT)
        self.assertCounts(counted(recording.wire, list(range(len(recording.wire)))), recording)

    def test_closeNoticed(self) -> None:
        """
        A close frame is noticed when it completes.
        """
        recording = record(False, [("message", ["x"]), ("close", None)])
        counter = FrameCounter()
        counter.feed(recording.wire[:-1])
        self.assertFalse(counter.closed)
        counter.feed(recording.wire[-1:])
        self.assertTrue(counter.closed)

    def test_notWebSocket(self) -> None:
        """
        Bytes that aren't WebSocket framing set C{error}; bytes are still
        counted, frames no longer.
        """
        table = [
            b"\x83\x00",  # reserved data opcode
            b"\x8b\x00",  # reserved control opcode
            b"\x09\x00",  # fragmented ping
            b"\x89\x7e\x00\x80" + b"x" * 128,  # long ping
            b"\x00\x01x",  # continuation outside a message
            b"\x01\x01x\x81\x01y",  # new message inside a fragmented one
            b"\x82\x7f\x80\x00\x00\x00\x00\x00\x00\x00",  # 64-bit length with the high bit
        ]
        for wire in table:
            counter = FrameCounter()
            counter.feed(wire)
            counter.feed(b"\x81\x01z")
            self.assertIsNotNone(counter.error, wire)
            self.assertEqual(counter.bytes, len(wire) + 3)
            self.assertEqual(counter.messages, 0, wire)


@st.composite
def scripts(draw: st.DrawFn) -> list[tuple[str, object]]:
    sizes = st.one_of(st.integers(0, 130), st.integers(65530, 65540), st.just(70000))
    ops: list[tuple[str, object]] = []
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["message", "message", "ping", "pong"]))
        if kind == "message":
            pieces = draw(st.lists(sizes, min_size=1, max_size=3))
            text = draw(st.booleans())
            ops.append(("message", ["t" * n if text else b"\x00" * n for n in pieces]))
        else:
            ops.append((kind, b"p" * draw(st.integers(0, 125))))
    if draw(st.booleans()):
        ops.append(("close", None))
    return ops


class FrameCounterPropertyTests(SynchronousTestCase):
    """
    Random streams cut at random count as built, and as wsproto reads them.
    """

    @settings(max_examples=150, deadline=None)
    @given(st.booleans(), scripts(), st.lists(st.integers(0, 300_000), max_size=20))
    def test_randomSplits(self, client: bool, script: list[tuple[str, object]], cuts: list[int]) -> None:
        """
        However a random stream is cut, it counts what was built.
        """
        recording = record(client, script)
        wire = recording.wire
        counter = counted(wire, [c % (len(wire) + 1) for c in cuts])
        self.assertEqual(
            (counter.messages, counter.bytes, counter.payloadBytes, counter.closed, counter.error),
            (recording.messages, len(wire), recording.payloadBytes, recording.closed, None),
        )
        # wsproto, the oracle, reading the same bytes as the other side.
        reader = FrameProtocol(client=not client, extensions=[])
        reader.receive_bytes(wire)
        messages = 0
        for frame in reader.received_frames():
            if frame.opcode in (Opcode.TEXT, Opcode.BINARY, Opcode.CONTINUATION) and frame.message_finished:
                messages += 1
        self.assertEqual(counter.messages, messages)
