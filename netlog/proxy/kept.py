"""
What is kept of one exchange for its log lines, whichever way it goes: the
times, the bytes each way, the bodies as their captures keep them, the
answer's record, and what its source says of it; and the end line's fields
built from them.
"""

from __future__ import annotations

from typing import Any, Callable

from netlog.core.capture import BodyCapture
from netlog.core.records import endRecord
from netlog.proxy.relaying import RawKind, RawRelay

#: What an exchange's captures become once their fields are written.
_SPENT = BodyCapture(0, keep=False, hashAll=False)


class Kept:
    """
    The record of one exchange as it goes.

    @ivar connectedAt: when a new connection for it was made (L{None} when
        reused or none was).
    @ivar sentAt: when the request had gone whole to the source.
    @ivar firstByteAt: when the answer's first byte came.
    @ivar requestBody: what of the request's body is kept (made when a
        body comes).
    @ivar responseBody: what of the answer's body is kept.
    @ivar response: the answer's record, once its head came.
    @ivar interim: the statuses of the interim heads passed on.
    @ivar up: bytes passed toward the source.
    @ivar down: bytes passed toward the browser.
    @ivar closedBy: who closed a raw relay (or cut the exchange).
    @ivar marks: what the source says of the answer in the end line.
    @ivar recordedAs: for a recording, the end line's answer made the
        recorded one (a body the recording cut).
    """

    __slots__ = ("connectedAt", "sentAt", "firstByteAt", "requestBody", "responseBody", "response", "interim",
                 "up", "down", "closedBy", "marks", "recordedAs")

    def __init__(self) -> None:
        self.connectedAt: float | None = None
        self.sentAt: float | None = None
        self.firstByteAt: float | None = None
        self.requestBody: BodyCapture | None = None
        self.responseBody: BodyCapture | None = None
        self.response: dict[str, Any] | None = None
        self.interim: list[int] = []
        self.up = 0
        self.down = 0
        self.closedBy: str | None = None
        self.marks: dict[str, object] | None = None
        self.recordedAs: Callable[[dict[str, object]], dict[str, object]] | None = None

    def endFields(self, now: float, relay: RawRelay | None, *, failed: str | None = None,
                  failedStatus: int | None = None, refused: tuple[str, int] | None = None) -> dict[str, Any]:
        """
        The end line's fields at C{now}: a raw relay (C{relay}) keeps no
        answer's body, and an unparsed one no answer.
        """
        requestBody = None
        if self.requestBody is not None:
            requestBody = self.requestBody.record(splice=True)
        response = None
        if self.response is not None and (relay is None or relay.kind is RawKind.UPGRADED):
            response = dict(self.response)
            if self.responseBody is not None and relay is None:
                response["body"] = self.responseBody.record(splice=True)
            if self.recordedAs is not None:
                response = self.recordedAs(response)  # type: ignore[arg-type,assignment]
        fields = endRecord(
            now, self.connectedAt, self.sentAt, self.firstByteAt,
            up=self.up, down=self.down, requestBody=requestBody, response=response, interim=self.interim,
            closedBy=self.closedBy if relay is not None else None,
            websocket=relay.record() if relay is not None else None,
            unparsed=relay is not None and relay.kind is RawKind.UNPARSED, refused=refused, failed=failed,
            failedStatus=failedStatus, marks=self.marks,
        )
        # The kept bodies are in the fields now, as the base64 the captures
        # kept (the LogWriter writes it into the line without a copy): let
        # the captures go before the line is encoded.
        self.requestBody = _SPENT if self.requestBody is not None else None
        self.responseBody = _SPENT if self.responseBody is not None else None
        return fields
