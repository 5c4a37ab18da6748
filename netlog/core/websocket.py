"""
A WebSocket frame counter (RFC 6455): counts messages and bytes as they pass.

It reads only frame headers and skips payloads by counting, so it holds at
most one frame header (14 bytes) whatever the traffic, and gives the same
counts however the byte stream is cut.
"""

from __future__ import annotations

__all__ = ["FrameCounter", "OP_BINARY", "OP_CLOSE", "OP_CONTINUATION", "OP_PONG", "OP_TEXT", "frameHeaderLength"]

OP_CONTINUATION = 0x0
OP_TEXT = 0x1
OP_BINARY = 0x2
OP_CLOSE = 0x8
OP_PING = 0x9
OP_PONG = 0xA


class FrameCounter:
    """
    Counts the frames of one direction of a WebSocket connection.

    @ivar messages: whole messages seen (a fragmented message counts once,
        when its final frame completes; ping, pong and close are not).
    @ivar bytes: every byte fed.
    @ivar payloadBytes: payload bytes of every frame (control frames too).
    @ivar frames: frames completed.
    @ivar closed: a close frame has completed.
    @ivar error: why the stream isn't WebSocket framing, or L{None}; once
        set, bytes are still counted but frames no longer are.
    """

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

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """
        Count C{data}, the next bytes of this direction.
        """
        n = len(data)
        self.bytes += n
        if self.error is not None:
            return
        pos = 0
        while pos < n:
            if self._inFrame:
                take = self._remaining if self._remaining < n - pos else n - pos
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
                pos = n
                break
            self._head = b""
            pos += need - base
            if not self._startFrame(head[:need]):
                return

    def _startFrame(self, head: bytes) -> bool:
        """
        Start the frame of C{head}; C{False} when it ends the framing (its
        reason in C{error}).
        """
        b0, b1 = head[0], head[1]
        fin = bool(b0 & 0x80)
        opcode = b0 & 0x0F
        length = b1 & 0x7F
        if length == 126:
            length = int.from_bytes(head[2:4], "big")
        elif length == 127:
            length = int.from_bytes(head[2:10], "big")
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
        self._opcode = opcode
        self._fin = fin
        self._remaining = length
        self._inFrame = True
        if length == 0:
            self._frameDone()
        return True

    def _frameDone(self) -> None:
        self._inFrame = False
        self.frames += 1
        opcode = self._opcode
        if opcode >= 8:
            if opcode == OP_CLOSE:
                self.closed = True
            return
        if self._fin:
            self.messages += 1
            self._fragmented = False
        else:
            self._fragmented = True


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
