"""
One exchange out of the log, for the live view's detail pane: its open and
end lines found by number, and what the pane shows of them. Pure logic over
a function that reads the file at an offset, like L{netlog.core.paging}.

The live view follows C{/network} and so knows both line numbers of an
exchange; with both, finding it costs two binary searches, whatever the
log's size. Without the end line's number it is looked for after the open
line, but only through L{MAX_SCAN} bytes of lines: a tunnel open for hours
is not worth reading a gigabyte for.
"""

from __future__ import annotations

import re
from typing import Any, Iterator

from netlog.core.har import buildEntry
from netlog.core.logline import decodeLine
from netlog.core.paging import BLOCK, ReadAt, page

#: Bytes of lines read after an open line to find its end line, when the
#: caller doesn't say where it is.
MAX_SCAN = 16 << 20

#: The start of an end line: its number and its exchange's id (the log's key
#: order puts them first).
_END_HEAD = re.compile(rb'\{"n":(\d{1,18}),"type":"end","id":(\d{1,18})[,}]')


class NoSuchExchange(Exception):
    """
    The log has no exchange with that id, or the end line named is not its
    own; the message says which.
    """


def lineAt(readAt: ReadAt, size: int, n: int) -> bytes | None:
    """
    The text of the line numbered C{n}, or L{None} when the log has none.
    """
    if n < 1:
        return None
    found = page(readAt, size, n - 1, 1)
    if found.begunAgain or not found.lines:
        return None
    record = decodeLine(found.lines[0])
    if record is None or record["n"] != n:
        return None
    return found.lines[0]


def sizeThrough(readAt: ReadAt, size: int, n: int) -> int | None:
    """
    The bytes of the log up to the end of line C{n} (0 for C{n == 0}): the
    log as it was when a reader's cursor said C{n}. L{None} when the log has
    no line C{n}.
    """
    if n == 0:
        return 0
    found = page(readAt, size, n - 1, 1)
    if found.begunAgain or not found.lines or found.next != n:
        return None
    return found.offset


def findExchange(
    readAt: ReadAt, size: int, exchangeId: int, endLine: int | None = None, maxScan: int = MAX_SCAN
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """
    The open and end records of the exchange C{exchangeId} (the end L{None}
    while it is open, or when it is not within C{maxScan} bytes after the
    open line and C{endLine} was not given).

    @param endLine: the C{n} of its end line, when the caller knows it.
    @raise NoSuchExchange: no open line numbered C{exchangeId}, or the line
        C{endLine} is missing or not this exchange's end.
    """
    text = lineAt(readAt, size, exchangeId)
    opened = decodeLine(text) if text is not None else None
    if opened is None or opened.get("type") != "open":
        raise NoSuchExchange(f"the log has no exchange {exchangeId} (no open line numbered {exchangeId})")
    if endLine is not None:
        text = lineAt(readAt, size, endLine)
        ended = decodeLine(text) if text is not None else None
        if ended is None or ended.get("type") != "end" or ended.get("id") != exchangeId:
            raise NoSuchExchange(f"line {endLine} is not the end line of exchange {exchangeId}")
        return opened, ended
    for line in _linesAfter(readAt, size, exchangeId, maxScan):
        head = _END_HEAD.match(line)
        if head is not None and int(head.group(2)) == exchangeId:
            return opened, decodeLine(line)
    return opened, None


def _linesAfter(readAt: ReadAt, size: int, n: int, maxScan: int) -> Iterator[bytes]:
    """
    The whole lines after line C{n}, in order, through at most C{maxScan}
    bytes of them.
    """
    cursor = n
    scanned = 0
    while scanned < maxScan:
        found = page(readAt, size, cursor, min(BLOCK, maxScan - scanned))
        if found.begunAgain or not found.lines:
            return
        for line in found.lines:
            scanned += len(line) + 1
            yield line
        cursor = found.next


#: The start of any line: its number, its type and its exchange's id.
_ANY_HEAD = re.compile(rb'\{"n":(\d{1,18}),"type":"([a-z]{1,16})","id":(\d{1,18})[,}]')
#: The line types that tell what happened between an exchange's open and end.
_NOTE_TYPES = frozenset({b"head", b"message"})


def findNotes(
    readAt: ReadAt, size: int, exchangeId: int, endLine: int | None = None, maxScan: int = MAX_SCAN
) -> list[dict[str, Any]]:
    """
    The head and message lines of the exchange C{exchangeId}, in order: the
    lines after its open line (up to its end line C{endLine} when given),
    through at most C{maxScan} bytes.
    """
    notes: list[dict[str, Any]] = []
    for line in _linesAfter(readAt, size, exchangeId, maxScan):
        head = _ANY_HEAD.match(line)
        if head is None or int(head.group(3)) != exchangeId:
            continue
        if head.group(2) == b"end" or (endLine is not None and int(head.group(1)) >= endLine):
            break
        if head.group(2) in _NOTE_TYPES:
            record = decodeLine(line)
            if record is not None:
                notes.append(record)
    return notes


def _withoutData(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """
    C{record} with its bodies' base64 left out (the entry has them decoded).
    """
    if record is None:
        return None
    out = dict(record)
    if isinstance(out.get("request_body"), dict):
        out["request_body"] = {k: v for k, v in out["request_body"].items() if k != "data"}
    response = out.get("response")
    if isinstance(response, dict) and isinstance(response.get("body"), dict):
        out["response"] = dict(response, body={k: v for k, v in response["body"].items() if k != "data"})
    return out


def exchangeDetail(opened: dict[str, Any], ended: dict[str, Any] | None,
                   notes: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """
    What C{GET /exchange} answers: C{{"id", "open", "end", "entry"}}, the
    two records as logged but for their bodies' base64, and the exchange's
    HAR entry as the export builds it (bodies as text where the HAR has
    them, parameters, cookies, timings, and from its head and message lines
    a streaming answer's head and a WebSocket's messages).
    """
    return {
        "id": opened.get("id"),
        "open": _withoutData(opened),
        "end": _withoutData(ended),
        "entry": buildEntry(opened, ended, notes),
    }
