"""
What the engine asks of a log writer, declared apart from the writer
(L{netlog.log.writer.LogWriter}) so that a second writer, or a test's
writer that keeps its lines in memory, is one without naming it.
"""

from __future__ import annotations

from typing import Any, Protocol


class ILogWriter(Protocol):
    """
    The log as the engine writes it: an exchange's open, head, message and
    end lines, and a refusal (an open and an end at once). Each takes a
    line's fields as L{netlog.core.records} builds them.
    """

    @property
    def enabled(self) -> bool:
        """
        Whether lines are written at all (no log: the engine keeps no
        bodies and reads no WebSocket messages).
        """

    def open(self, fields: dict[str, Any]) -> int:
        """
        Write an open line; return the exchange's number.
        """

    def head(self, exchangeId: int, fields: dict[str, Any]) -> object:
        """
        Write the answer's head line for exchange C{exchangeId}.
        """

    def message(self, exchangeId: int, fields: dict[str, Any]) -> object:
        """
        Write a WebSocket message's line for exchange C{exchangeId}.
        """

    def end(self, exchangeId: int, fields: dict[str, Any]) -> None:
        """
        Write exchange C{exchangeId}'s end line.
        """

    def refuse(self, openFields: dict[str, Any], endFields: dict[str, Any]) -> int:
        """
        Write an open line and its end at once; return the exchange's
        number.
        """
