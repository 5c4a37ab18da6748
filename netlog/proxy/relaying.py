"""
The exchange's collaborators for what passes once its answer is under way:
a raw relay (both sides as they come, after a C{101} or an answer that
isn't HTTP, a WebSocket's messages read and logged) and the rules'
bandwidth shaping of both directions.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

from twisted.internet.interfaces import IReactorTime

from netlog.core.records import messageRecord, websocketRecord
from netlog.core.rules import Bandwidth
from netlog.core.websocket import FrameCounter
from netlog.core.wsmessages import KeptBudget, Message, MessageAssembler, parseDeflate
from netlog.log.interfaces import ILogWriter
from netlog.net.gate import Gate
from netlog.net.shape import Shaper, shaperFor


class RawKind(Enum):
    """
    Why an exchange's sides are relayed raw.
    """

    #: The answer was a C{101}: the connections carry another protocol.
    UPGRADED = "upgraded"
    #: The answer can't be read as HTTP (its entry is C{_unparsed}).
    UNPARSED = "unparsed"


class RawRelay:
    """
    What an exchange relays raw, each way: a WebSocket's frames read (its
    messages logged when a log is kept, only counted when not).

    @ivar kind: why the sides are relayed raw.
    @ivar wsUp: the browser's WebSocket side read, or L{None} when not a
        WebSocket.
    @ivar wsDown: the server's side read, likewise.
    """

    __slots__ = ("kind", "wsUp", "wsDown", "_writer", "_id")

    def __init__(self, kind: RawKind, writer: ILogWriter, exchangeId: int) -> None:
        self.kind = kind
        self.wsUp: MessageAssembler | FrameCounter | None = None
        self.wsDown: MessageAssembler | FrameCounter | None = None
        self._writer = writer
        self._id = exchangeId

    def readWebSocket(self, extensions: str | None) -> None:
        """
        The relay is a WebSocket's, with C{extensions} agreed.
        """
        if self._id and self._writer.enabled:
            deflate = parseDeflate(extensions)
            budget = KeptBudget()
            self.wsUp = MessageAssembler(budget, deflate is not None, deflate is not None and deflate.clientNoContext)
            self.wsDown = MessageAssembler(budget, deflate is not None,
                                           deflate is not None and deflate.serverNoContext)
        else:
            self.wsUp = FrameCounter()
            self.wsDown = FrameCounter()

    def passed(self, direction: str, data: bytes) -> None:
        """
        C{data} went C{direction} (C{"up"} or C{"down"}): its messages are
        logged before their last bytes go on.
        """
        ws = self.wsUp if direction == "up" else self.wsDown
        if ws is not None:
            messages = ws.feed(data)
            if messages:
                self._log(direction, messages)

    def _log(self, direction: str, messages: list[Message]) -> None:
        write = self._writer.message
        for m in messages:
            write(self._id, messageRecord(direction, m.opcode, m.size, m.data, m.truncated, m.compressed,
                                          m.undecodable, m.frames))

    def record(self) -> dict[str, Any] | None:
        """
        The end line's C{_websocket}, or L{None} when not a WebSocket.
        """
        wsUp, wsDown = self.wsUp, self.wsDown
        if wsUp is None or wsDown is None:
            return None
        return websocketRecord(wsUp.messages, wsDown.messages, wsUp.bytes, wsDown.bytes,
                               _closeOf(wsUp), _closeOf(wsDown))


def _closeOf(side: MessageAssembler | FrameCounter) -> tuple[int | None, str] | None:
    """
    The close frame a WebSocket's side sent (its code and reason), if read.
    """
    if isinstance(side, MessageAssembler) and side.closed:
        return side.closeCode, side.closeReason or ""
    return None


class Shaping:
    """
    The rules' bandwidth for one exchange, each way, while it has a source:
    each side's reading is paused while what it passed takes its time.

    @ivar upShaper: the request's direction (pauses the browser's gate).
    @ivar downShaper: the answer's direction (pauses the source's gate).
    """

    __slots__ = ("reactor", "bandwidth", "upShaper", "downShaper")

    def __init__(self, reactor: IReactorTime | None, bandwidth: Bandwidth) -> None:
        self.reactor = reactor
        self.bandwidth = bandwidth
        self.upShaper: Shaper | None = None
        self.downShaper: Shaper | None = None

    def attach(self, browserGate: Gate, sourceGate: Gate | None) -> None:
        bandwidth = self.bandwidth
        if bandwidth.up is None and bandwidth.down is None:
            return
        assert self.reactor is not None
        self.upShaper = shaperFor(self.reactor, self.bandwidth.up, browserGate)
        self.downShaper = shaperFor(self.reactor, self.bandwidth.down, sourceGate)

    def up(self, size: int) -> None:
        if self.upShaper is not None:
            self.upShaper.passed(size)

    def down(self, size: int) -> None:
        if self.downShaper is not None:
            self.downShaper.passed(size)

    def stop(self) -> None:
        if self.upShaper is not None:
            self.upShaper.stop()
            self.upShaper = None
        if self.downShaper is not None:
            self.downShaper.stop()
            self.downShaper = None


#: The shaping of every exchange the rules give no bandwidth: it never
#: holds a shaper, so one serves them all.
UNSHAPED = Shaping(None, Bandwidth())


def shapingFor(reactor: IReactorTime, bandwidth: Bandwidth) -> Shaping:
    """
    The shaping of an exchange at the rules' C{bandwidth}.
    """
    if bandwidth.up is None and bandwidth.down is None:
        return UNSHAPED
    return Shaping(reactor, bandwidth)
