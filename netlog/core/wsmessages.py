"""
WebSocket messages as a relay sees them (RFC 6455, RFC 7692): pure, no I/O.

A L{MessageAssembler} reads one direction's bytes as they are relayed, cut
anywhere, and gives back each whole message (not each frame: a message may
be fragmented across frames and frames across reads) with what of its data
is kept. Control frames are not messages; a close frame's code and reason
are kept for the end line.

Why not wsproto: it is an endpoint's state machine (one side of a
connection, which answers pings and closes itself and refuses what an
endpoint must refuse), while a relay reads both sides as a bystander and
passes every byte on unchanged; and its permessage-deflate inflates a whole
message with no bound, so a small hostile frame could become gigabytes in
the proxy's memory. Here inflating is bounded (L{MAX_INFLATED}) and what is
kept is capped (L{MESSAGE_CAP} per message, a L{KeptBudget} per WebSocket).
"""

from __future__ import annotations

import zlib
from typing import Optional

from netlog.core.websocket import OP_CONTINUATION, FrameWalker

__all__ = [
    "MESSAGE_CAP",
    "SOCKET_BUDGET",
    "MAX_INFLATED",
    "Deflate",
    "KeptBudget",
    "Message",
    "MessageAssembler",
    "parseDeflate",
]

#: Bytes of one message's data kept in its line; past it, C{_truncated}.
MESSAGE_CAP = 1024 * 1024
#: Bytes of message data kept for one WebSocket (both directions); past it,
#: messages keep only their size and time.
SOCKET_BUDGET = 10 * 1024 * 1024
#: Bytes one compressed message is inflated to at most: past it, inflating
#: stops (the message is C{_truncated}, its size a lower bound) and the
#: direction's context is lost, so a small frame never costs gigabytes.
MAX_INFLATED = 64 * 1024 * 1024
#: The most frames of one message whose lengths are kept (for a replay to
#: send it in the same frames); a message in more keeps none, so that a
#: peer sending endless tiny frames costs no memory.
MAX_KEPT_FRAMES = 64
#: Bytes inflated per call, so that no single call makes more than this.
_INFLATE_STEP = 256 * 1024
#: Compressed bytes given to zlib per call.
_INFLATE_SLICE = 16 * 1024
#: What RFC 7692 has the sender strip from each compressed message's end.
_TAIL = b"\x00\x00\xff\xff"


#: Why a compressed message's data is its compressed bytes.
UNDECODABLE_DEFLATE = "permessage-deflate data that could not be decompressed"
UNDECODABLE_CONTEXT = "permessage-deflate context lost by an earlier message"


class Deflate:
    """
    What the 101's C{Sec-WebSocket-Extensions} agreed for permessage-deflate.

    @ivar clientNoContext: the browser's compressor starts again each message.
    @ivar serverNoContext: the server's does.
    """

    __slots__ = ("clientNoContext", "serverNoContext")

    def __init__(self, clientNoContext: bool = False, serverNoContext: bool = False) -> None:
        self.clientNoContext = clientNoContext
        self.serverNoContext = serverNoContext


def parseDeflate(value: str | None) -> Deflate | None:
    """
    The permessage-deflate parameters a server's C{Sec-WebSocket-Extensions}
    answer agreed, or L{None} when it agreed none (a server answers with
    one offer only).
    """
    if not value:
        return None
    for offer in value.split(","):
        parts = [p.strip() for p in offer.split(";")]
        if parts[0].lower() != "permessage-deflate":
            continue
        names = {p.split("=", 1)[0].strip().lower() for p in parts[1:]}
        return Deflate("client_no_context_takeover" in names, "server_no_context_takeover" in names)
    return None


class KeptBudget:
    """
    The message data one WebSocket may still keep, shared by both directions.
    """

    __slots__ = ("remaining",)

    def __init__(self, remaining: int = SOCKET_BUDGET) -> None:
        self.remaining = remaining


class Message:
    """
    One whole message.

    @ivar opcode: 1 (text) or 2 (binary).
    @ivar size: its bytes as the receiving application gets them (inflated,
        when compressed; a lower bound when inflating stopped).
    @ivar data: the kept bytes (at most L{MESSAGE_CAP}), or L{None} when the
        WebSocket's budget was spent.
    @ivar truncated: C{data} holds less than the message.
    @ivar compressed: payload bytes on the wire when it came compressed.
    @ivar undecodable: why C{data} holds the compressed bytes, or L{None}.
    @ivar frames: for a message sent in more than one frame, each frame's
        payload length on the wire, in order (L{None} for one frame).
    """

    __slots__ = ("opcode", "size", "data", "truncated", "compressed", "undecodable", "frames")

    def __init__(self, opcode: int, size: int, data: bytes | None, truncated: bool,
                 compressed: int | None = None, undecodable: str | None = None,
                 frames: tuple[int, ...] | None = None) -> None:
        self.opcode = opcode
        self.size = size
        self.data = data
        self.truncated = truncated
        self.compressed = compressed
        self.undecodable = undecodable
        self.frames = frames

    def __repr__(self) -> str:
        return (f"Message(opcode={self.opcode}, size={self.size}, data={self.data!r:.40}, "
                f"truncated={self.truncated}, compressed={self.compressed}, undecodable={self.undecodable}, "
                f"frames={self.frames})")


def _unmask(data: bytes, key: bytes, offset: int) -> bytes:
    """
    C{data} unmasked with C{key}, C{data}'s first byte being the payload's
    byte C{offset}: one big-integer XOR, not a loop per byte.
    """
    n = len(data)
    if not n:
        return b""
    shift = offset & 3
    if shift:
        key = key[shift:] + key[:shift]
    pad = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(pad, "big")).to_bytes(n, "big")


class MessageAssembler(FrameWalker):
    """
    Reads one direction of a WebSocket and gives back its messages (a
    L{FrameWalker} that keeps what its frames carry).

    L{feed} returns the messages its bytes completed; the same messages
    come whatever the cuts. Memory: a frame header, one message's kept data
    (at most L{MESSAGE_CAP}, twice when compressed: the compressed bytes are
    kept too, in case they can't be inflated) and the zlib context.

    @ivar closeCode: the close frame's status code, if one came with one.
    @ivar closeReason: its reason, as text.
    """

    __slots__ = (
        "closeCode", "closeReason",
        "_budget", "_deflate", "_noContext", "_inflater", "_contextLost",
        "_mask", "_offset", "_msgOpcode", "_msgCompressed", "_kept", "_raw", "_size",
        "_wire", "_truncated", "_failed", "_control", "_frames", "_out",
    )

    def __init__(self, budget: KeptBudget | None = None, deflate: bool = False,
                 noContextTakeover: bool = False) -> None:
        super().__init__()
        self.closeCode: int | None = None
        self.closeReason: str | None = None
        self._budget = budget if budget is not None else KeptBudget()
        self._deflate = deflate
        self._noContext = noContextTakeover
        self._inflater: Optional["zlib._Decompress"] = None
        self._contextLost = False
        self._mask: bytes | None = None
        self._offset = 0
        self._msgOpcode = 0
        self._msgCompressed = False
        self._kept = bytearray()
        self._raw = bytearray()
        self._size = 0
        self._wire = 0
        self._truncated = False
        self._failed: str | None = None
        self._control = bytearray()
        #: The payload lengths of the current message's frames so far
        #: (L{None} once past L{MAX_KEPT_FRAMES}).
        self._frames: list[int] | None = []
        #: The messages the bytes being fed have completed (L{feed} hands
        #: them on).
        self._out: list[Message] = []

    def feed(self, data: bytes | bytearray | memoryview) -> list[Message]:
        """
        Read C{data}, the next bytes of this direction; return the messages
        they completed, in order.
        """
        self.bytes += len(data)
        if self.error is None:
            self._walk(data)
            out = self._out
            if out:
                self._out = []
                return out
        return []

    # -- frames ---------------------------------------------------------------

    def _message(self, data: bytes | bytearray | memoryview, opcode: int, at: int, start: int, end: int) -> None:
        # (A frame the walker reads whole has a 16-bit length: within
        # MESSAGE_CAP.)
        payload = bytes(data[start:end])
        if start != at:
            payload = _unmask(payload, bytes(data[at:start]), 0)
        self._out.append(self._spend(opcode, end - start, payload, False, None, None))

    def _frameBegins(self, head: bytes, at: int, opcode: int, length: int) -> None:
        self._mask = head[at:at + 4] if head[1] & 0x80 else None
        self._offset = 0
        if opcode >= 8:
            self._control = bytearray()
            return
        if opcode != OP_CONTINUATION:
            self._startMessage(opcode, bool(head[0] & 0x40) and self._deflate)
        if self._frames is not None:
            if len(self._frames) < MAX_KEPT_FRAMES:
                self._frames.append(length)
            else:
                self._frames = None

    def _payload(self, data: bytes | bytearray | memoryview, pos: int, take: int) -> None:
        chunk = bytes(data[pos:pos + take])
        if self._mask is not None:
            chunk = _unmask(chunk, self._mask, self._offset)
        self._offset += len(chunk)
        if self._opcode >= 8:
            self._control += chunk
        else:
            self._messageBytes(chunk)

    def _controlEnds(self, closes: bool) -> None:
        if closes:
            body = bytes(self._control)
            if len(body) >= 2:
                self.closeCode = int.from_bytes(body[:2], "big")
                self.closeReason = body[2:].decode("utf-8", "replace")
        self._control = bytearray()

    def _messageEnds(self) -> None:
        self._out.append(self._endMessage())

    # -- messages -------------------------------------------------------------

    def _startMessage(self, opcode: int, compressed: bool) -> None:
        self._msgOpcode = opcode
        self._msgCompressed = compressed
        self._frames = []
        self._kept = bytearray()
        self._raw = bytearray()
        self._size = 0
        self._wire = 0
        self._truncated = False
        self._failed = UNDECODABLE_CONTEXT if compressed and self._contextLost and not self._noContext else None
        if compressed and (self._inflater is None or self._noContext):
            self._inflater = zlib.decompressobj(-15)

    def _keep(self, data: bytes) -> None:
        """
        Count C{data}, the message's next bytes, and keep what fits the cap.
        """
        self._size += len(data)
        room = MESSAGE_CAP - len(self._kept)
        if len(data) > room:
            self._truncated = True
            data = data[:room]
        if data:
            self._kept += data

    def _messageBytes(self, chunk: bytes) -> None:
        if not self._msgCompressed:
            self._keep(chunk)
            return
        self._wire += len(chunk)
        room = MESSAGE_CAP - len(self._raw)
        if room > 0:
            self._raw += chunk[:room]
        if self._failed is None:
            self._inflate(chunk)

    def _inflate(self, data: bytes) -> None:
        if len(data) <= _INFLATE_SLICE:
            self._inflateSlice(data)
            return
        # In slices, so that what zlib leaves unconsumed (copied at each
        # call) stays small.
        view = memoryview(data)
        for at in range(0, len(data), _INFLATE_SLICE):
            if self._failed is not None:
                return
            self._inflateSlice(bytes(view[at:at + _INFLATE_SLICE]))

    def _inflateSlice(self, chunk: bytes) -> None:
        inflater = self._inflater
        assert inflater is not None
        try:
            while chunk:
                if inflater.eof:
                    # The sender ended its stream (BFINAL): the rest starts anew.
                    chunk = inflater.unused_data + chunk
                    inflater = self._inflater = zlib.decompressobj(-15)
                if self._size >= MAX_INFLATED:
                    self._failed = "inflating stopped at %d bytes" % (MAX_INFLATED,)
                    self._truncated = True
                    self._contextLost = True
                    return
                out = inflater.decompress(chunk, min(_INFLATE_STEP, MAX_INFLATED - self._size))
                self._keep(out)
                chunk = inflater.unconsumed_tail
                if not out and chunk:
                    break
        except zlib.error:
            self._failed = UNDECODABLE_DEFLATE
            self._contextLost = True

    def _endMessage(self) -> Message:
        compressed: int | None = None
        undecodable: str | None = None
        if self._msgCompressed:
            compressed = self._wire
            if self._failed is None:
                self._inflate(_TAIL)
            if self._failed is not None and not self._failed.startswith("inflating stopped"):
                # (Inflating stopped at its bound: what was inflated is kept,
                # marked truncated.)
                undecodable = self._failed
                self._kept = self._raw
                self._size = self._wire
                self._truncated = len(self._raw) < self._wire
            self._raw = bytearray()
        kept = bytes(self._kept)
        self._kept = bytearray()
        frames = tuple(self._frames) if self._frames is not None and len(self._frames) > 1 else None
        self._frames = []
        return self._spend(self._msgOpcode, self._size, kept, self._truncated, compressed, undecodable, frames)

    def _spend(self, opcode: int, size: int, kept: bytes, truncated: bool, compressed: int | None,
               undecodable: str | None, frames: tuple[int, ...] | None = None) -> Message:
        """
        The message, its kept bytes taken from the WebSocket's budget.
        """
        budget = self._budget
        data: bytes | None
        if budget.remaining <= 0:
            data = None
            truncated = truncated or size > 0
        else:
            if len(kept) > budget.remaining:
                kept = kept[:budget.remaining]
                truncated = True
            budget.remaining -= len(kept)
            data = kept
        return Message(opcode, size, data, truncated, compressed, undecodable, frames)
