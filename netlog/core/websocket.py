"""
WebSocket frames (RFC 6455) as they pass: the one frame walker (every
reader of a WebSocket's bytes walks its frames with it) and a frame counter.

The counter reads only frame headers and skips payloads by counting, so it
holds at most one frame header (14 bytes) whatever the traffic, and gives
the same counts however the byte stream is cut.
"""

from __future__ import annotations

__all__ = ["FrameCounter", "FrameWalker", "OP_BINARY", "OP_CLOSE", "OP_CONTINUATION", "OP_PONG", "OP_TEXT", "frameHeaderLength"]

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA


class FrameWalker:
    """
    Walks the frames of one direction of a WebSocket connection: reads and
    checks each frame header, however the bytes are cut (holding at most
    one header, 14 bytes), and counts what passes. What a reader does with
    a frame's parts it says by overriding L{_message}, L{_frameBegins},
    L{_payload}, L{_controlEnds} and L{_messageEnds}, which do nothing here.

    @ivar messages: whole messages seen (a fragmented message counts once,
        when its final frame completes; ping, pong and close are not).
    @ivar bytes: every byte fed.
    @ivar payloadBytes: payload bytes of every frame (control frames too).
    @ivar frames: frames completed.
    @ivar closed: a close frame has completed.
    @ivar error: why the stream isn't WebSocket framing, or L{None}; once
        set, bytes are still counted but frames no longer are.
    """

    __slots__ = (
        "messages", "bytes", "payloadBytes", "frames", "closed", "error",
        "_head", "_remaining", "_inFrame", "_opcode", "_fin", "_fragmented",
    )

    def __init__(self) -> None:
        self.messages = 0
        self.bytes = 0
        self.payloadBytes = 0
        self.frames = 0
        self.closed = False
        self.error: str | None = None
        self._head = b""
        self._remaining = 0
        self._inFrame = False
        self._opcode = 0
        self._fin = False
        self._fragmented = False

    def _walk(self, data: bytes | bytearray | memoryview) -> None:
        """
        Walk C{data}, the next bytes of this direction (already counted in
        C{bytes}).
        """
        n = len(data)
        pos = 0
        while pos < n:
            if not self._inFrame and not self._head and not self._fragmented and n - pos >= 2:
                # The usual case, quickly: a whole unfragmented and
                # uncompressed text or binary frame (FIN set, no RSV bit).
                b0 = data[pos]
                b1 = data[pos + 1]
                length = b1 & 0x7F
                if (b0 == 0x81 or b0 == 0x82) and length <= 126:
                    at = pos + 2
                    if length == 126:
                        if n - pos < 4:
                            length = 65536  # (header cut: the slow path)
                        else:
                            length = (data[pos + 2] << 8) | data[pos + 3]
                            at = pos + 4
                    start = at + 4 if b1 & 0x80 else at
                    end = start + length
                    if end <= n:
                        pos = end
                        self.frames += 1
                        self.payloadBytes += length
                        self.messages += 1
                        self._message(data, b0 & 0x0F, at, start, end)
                        continue
            if self._inFrame:
                take = self._remaining if self._remaining < n - pos else n - pos
                self._payload(data, pos, take)
                pos += take
                self._remaining -= take
                self.payloadBytes += take
                if self._remaining == 0:
                    self._frameDone()
                continue
            # A frame header: at most 14 bytes, buffered across cuts.
            if self._head:
                head = self._head + bytes(data[pos : pos + 14])
                base = len(self._head)
            else:
                head = bytes(data[pos : pos + 14])
                base = 0
            need = frameHeaderLength(head)
            if need is None or len(head) < need:
                self._head = head
                break
            self._head = b""
            pos += need - base
            if not self._startFrame(head[:need]):
                return
            if self._remaining == 0:
                self._frameDone()

    def _startFrame(self, head: bytes) -> bool:
        """
        Start the frame of C{head}; C{False} when it ends the framing (its
        reason in C{error}).
        """
        b0, b1 = head[0], head[1]
        fin = bool(b0 & 0x80)
        opcode = b0 & 0x0F
        length = b1 & 0x7F
        at = 2
        if length == 126:
            length = int.from_bytes(head[2:4], "big")
            at = 4
        elif length == 127:
            length = int.from_bytes(head[2:10], "big")
            at = 10
            if length >> 63:
                self.error = "64-bit length with the high bit set"
                return False
        if opcode >= 8:
            if opcode > OP_PONG:
                self.error = "reserved control opcode %d" % (opcode,)
                return False
            if not fin or length > 125:
                self.error = "fragmented or long control frame"
                return False
        elif opcode > OP_BINARY:
            self.error = "reserved data opcode %d" % (opcode,)
            return False
        elif opcode == OP_CONTINUATION:
            if not self._fragmented:
                self.error = "continuation frame outside a message"
                return False
        elif self._fragmented:
            self.error = "new message before the previous one ended"
            return False
        self._frameBegins(head, at, opcode, length)
        self._opcode = opcode
        self._fin = fin
        self._remaining = length
        self._inFrame = True
        return True

    def _frameDone(self) -> None:
        self._inFrame = False
        self.frames += 1
        opcode = self._opcode
        if opcode >= 8:
            closes = opcode == OP_CLOSE and not self.closed
            if closes:
                self.closed = True
            self._controlEnds(closes)
            return
        if self._fin:
            self._fragmented = False
            self.messages += 1
            self._messageEnds()
        else:
            self._fragmented = True

    # -- what a reader overrides ----------------------------------------------------

    def _message(self, data: bytes | bytearray | memoryview, opcode: int, at: int, start: int, end: int) -> None:
        """
        A whole message in one frame came in C{data}: text or binary
        (C{opcode}), uncompressed, its mask key (if masked) at C{at}, its
        payload from C{start} to C{end}.
        """

    def _frameBegins(self, head: bytes, at: int, opcode: int, length: int) -> None:
        """
        A frame of C{length} payload bytes begins with C{head}, its mask key
        (if masked) at C{at}.
        """

    def _payload(self, data: bytes | bytearray | memoryview, pos: int, take: int) -> None:
        """
        The current frame's next C{take} payload bytes are C{data}'s from
        C{pos}.
        """

    def _controlEnds(self, closes: bool) -> None:
        """
        A control frame ended; C{closes} when it is the first close frame.
        """

    def _messageEnds(self) -> None:
        """
        A message's final frame ended (the message counted in C{messages}).
        """


class FrameCounter(FrameWalker):
    """
    Counts the frames of one direction of a WebSocket connection (a
    L{FrameWalker} that reads nothing of their payloads).
    """

    __slots__ = ()

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """
        Count C{data}, the next bytes of this direction.
        """
        self.bytes += len(data)
        if self.error is None:
            self._walk(data)


def frameHeaderLength(head: bytes) -> int | None:
    """
    The length of the frame header that C{head} starts, or L{None} when
    fewer than two bytes are known.
    """
    if len(head) < 2:
        return None
    b1 = head[1]
    length = b1 & 0x7F
    size = 2 + (4 if b1 & 0x80 else 0)
    if length == 126:
        size += 2
    elif length == 127:
        size += 8
    return size
