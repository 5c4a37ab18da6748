"""
Finding exchanges in a log by a filter (L{netlog.core.filters}), and what
is answered of each: a summary for a list, and one exchange whole with its
bodies as text, a page at a time. Pure logic over a function that reads the
file at an offset, like L{netlog.core.paging}.

An exchange is found once it has ended: a search reads the lines after a
cursor, and each end line among them whose exchange matches is one result.
So a caller that asks again with the cursor it was handed sees each ended
exchange once, which is what waiting for one needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import urlsplit

from netlog.core.exchange import _ANY_HEAD, findExchange, lineAt
from netlog.core.filters import Filter
from netlog.core.har import buildEntry
from netlog.core.logline import decodeLine
from netlog.core.paging import BLOCK, ReadAt, page

#: The most summaries one search answers.
MAX_RESULTS = 1000
#: The summaries one search answers unless asked for more.
DEFAULT_RESULTS = 50
#: Bytes of lines one search reads at most; past them it hands back the
#: cursor it reached, to ask on from.
MAX_SEARCH = 64 << 20
#: Characters of a body one read of an exchange answers unless asked.
DEFAULT_BODY_CHARS = 16384
#: The most characters of a body one read answers.
MAX_BODY_CHARS = 1 << 20


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _headerPairs(value: object) -> list[tuple[str, str]]:
    if not isinstance(value, list):
        return []
    return [(str(p[0]), str(p[1])) for p in value if isinstance(p, (list, tuple)) and len(p) == 2]


class RecordFacts:
    """
    What a filter asks (L{netlog.core.filters.ExchangeFacts}), read from an
    exchange's open and end records (or their lines, parsed only when a term
    asks for what is in them); each fact is read once, when asked, and the
    bodies are decoded (as the HAR export decodes them) only for a term that
    reads them. A search asks most exchanges one or two facts.
    """

    def __init__(self, opened: dict[str, Any] | bytes, ended: dict[str, Any] | bytes | None) -> None:
        self._opened = opened
        self._ended = ended

    @cached_property
    def opened(self) -> dict[str, Any]:
        record = decodeLine(self._opened) if isinstance(self._opened, bytes) else self._opened
        return record or {}

    @cached_property
    def ended(self) -> dict[str, Any] | None:
        return decodeLine(self._ended) if isinstance(self._ended, bytes) else self._ended

    @cached_property
    def _request(self) -> dict[str, Any]:
        return _dict(self.opened.get("request"))

    @cached_property
    def response(self) -> dict[str, Any]:
        return _dict(_dict(self.ended).get("response"))

    @cached_property
    def tunnel(self) -> bool:
        return self.opened.get("kind") == "tunnel"

    @cached_property
    def method(self) -> str:
        method = self._request.get("method")
        return method if isinstance(method, str) and method else ("CONNECT" if self.tunnel else "")

    @cached_property
    def url(self) -> str:
        url = self._request.get("url")
        return url if isinstance(url, str) else ""

    @cached_property
    def host(self) -> str:
        try:
            host = urlsplit(self.url).hostname or ""
        except ValueError:
            host = ""
        return (host or str(_dict(self.opened.get("server")).get("host") or "")).lower()

    @cached_property
    def status(self) -> int | None:
        status = self.response.get("status")
        return status if isinstance(status, int) and not isinstance(status, bool) else None

    @cached_property
    def failed(self) -> bool:
        return bool(_dict(self.ended).get("_failed"))

    @cached_property
    def refused(self) -> bool:
        return bool(_dict(self.ended).get("_refused"))

    @cached_property
    def websocket(self) -> bool:
        return "_websocket" in _dict(self.ended) or self.url.startswith(("ws://", "wss://"))

    @cached_property
    def contentType(self) -> str:
        return next((v for n, v in self.responseHeaders() if n.lower() == "content-type"), "")

    @cached_property
    def entry(self) -> dict[str, Any]:
        """
        The exchange's HAR entry.
        """
        return buildEntry(self.opened, self.ended)

    def requestHeaders(self) -> list[tuple[str, str]]:
        return _headerPairs(self._request.get("headers"))

    def responseHeaders(self) -> list[tuple[str, str]]:
        return _headerPairs(self.response.get("headers"))

    def requestText(self) -> str:
        return str(_dict(self.entry["request"].get("postData")).get("text") or "")

    def responseText(self) -> str:
        content = _dict(_dict(self.entry.get("response")).get("content"))
        return "" if content.get("encoding") == "base64" else str(content.get("text") or "")


def summary(opened: dict[str, Any], ended: dict[str, Any] | None) -> dict[str, Any]:
    """
    What a list shows of an exchange: its id and line numbers, method, URL,
    status, content type, times and sizes, and why it failed or was refused.
    """
    return _summary(RecordFacts(opened, ended))


def _summary(facts: RecordFacts) -> dict[str, Any]:
    opened = facts.opened
    end = _dict(facts.ended)
    started = opened.get("started")
    finished = end.get("ended")
    out: dict[str, Any] = {
        "id": opened.get("id"),
        "open_line": opened.get("n"),
        "end_line": end.get("n"),
        "method": facts.method,
        "url": facts.url,
        "status": facts.status,
        "content_type": facts.contentType or None,
        "started": started,
        "ended": finished,
        "duration": (round(finished - started, 6)
                     if isinstance(started, (int, float)) and isinstance(finished, (int, float)) else None),
        "request_size": _dict(end.get("request_body")).get("size", 0),
        "response_size": _dict(facts.response.get("body")).get("size"),
        "bytes": end.get("bytes"),
    }
    for mark in ("_failed", "_refused", "_websocket"):
        if mark in end:
            out[mark.lstrip("_")] = end[mark]
    return out


@dataclass
class Found:
    """
    One search's answer: the matching exchanges' C{summaries}, the cursor
    to ask on from (C{next}: the last line read), whether the log was
    begun again since the cursor asked with, and whether the search
    stopped early (C{more}: a full list, or L{MAX_SEARCH} bytes read).
    """

    summaries: list[dict[str, Any]] = field(default_factory=list)
    next: int = 0
    begunAgain: bool = False
    more: bool = False

    def answer(self) -> dict[str, Any]:
        return {"exchanges": self.summaries, "next": self.next, "begun_again": self.begunAgain,
                "more": self.more}


def findExchanges(readAt: ReadAt, size: int, wanted: Filter, after: int = 0, limit: int = DEFAULT_RESULTS,
                  maxSearch: int = MAX_SEARCH, first: int = 0) -> Found:
    """
    The exchanges whose end line comes after line C{after} and that match
    C{wanted}, in the order they ended, at most C{limit} of them.

    @param first: the first line that counts (a session's log may begin with
        an earlier session's lines): exchanges opened before it are passed over.
    """
    found = Found(next=after)
    # Open lines by id, as text: a line is parsed only if a term asks.
    opens: dict[int, bytes] = {}
    cursor = after
    hint: int | None = None
    read = 0
    while read < maxSearch:
        got = page(readAt, size, cursor, min(BLOCK, maxSearch - read), hint)
        # Begun again with no line to read is nothing to tell yet: a log
        # cut while it was read (logrotate's copytruncate), or one begun
        # again that has no line yet; the next search sees its lines.
        if got.begunAgain and got.lines:
            found.begunAgain = True
            opens.clear()
        if not got.lines:
            return found
        hint = got.offset
        for line in got.lines:
            read += len(line) + 1
            head = _head(line)
            if head is None:
                continue
            n, kind, exchangeId = head
            cursor = found.next = n
            if kind == b"open":
                opens[exchangeId] = line
            elif kind == b"end":
                opened = opens.pop(exchangeId, None)
                if exchangeId < first:
                    continue
                if opened is None:
                    opened = lineAt(readAt, size, exchangeId)
                    if opened is None:
                        continue
                facts = RecordFacts(opened, line)
                if wanted.matches(facts) and facts.opened:
                    found.summaries.append(_summary(facts))
                    if len(found.summaries) >= limit:
                        found.more = True
                        return found
    found.more = True
    return found


def _head(line: bytes) -> tuple[int, bytes, int] | None:
    """
    A line's number, type and exchange id, read without parsing it (parsed
    only when it doesn't begin as the writer begins every line).
    """
    found = _ANY_HEAD.match(line)
    if found is not None:
        return int(found.group(1)), found.group(2), int(found.group(3))
    record = decodeLine(line)
    if record is None or not isinstance(record.get("id"), int) or not isinstance(record.get("type"), str):
        return None
    return int(record["n"]), record["type"].encode("ascii", "replace"), record["id"]


def _bodyPage(text: str | None, encoding: str | None, size: object, offset: int, chars: int) -> dict[str, Any]:
    """
    One page of a body's text: C{chars} characters from C{offset}.
    """
    if text is None:
        return {"size": size, "text": None}
    part = text[offset:offset + chars]
    end = offset + len(part)
    out: dict[str, Any] = {"size": size, "chars": len(text), "offset": offset, "text": part,
                           "next_offset": end if end < len(text) else None}
    if encoding:
        out["encoding"] = encoding
    return out


def exchangeWhole(readAt: ReadAt, size: int, exchangeId: int, offset: int = 0,
                  chars: int = DEFAULT_BODY_CHARS) -> dict[str, Any]:
    """
    One exchange whole: its summary, both heads, and its bodies as the HAR
    export decodes them, each cut to C{chars} characters from C{offset}
    (C{next_offset} says where the rest begins).

    @raise netlog.core.exchange.NoSuchExchange: the log has no such exchange.
    """
    opened, ended = findExchange(readAt, size, exchangeId)
    entry = buildEntry(opened, ended)
    request, response = entry["request"], _dict(entry.get("response"))
    post = _dict(request.get("postData"))
    content = _dict(response.get("content"))
    out = {
        "summary": summary(opened, ended),
        "request": {
            "method": request["method"], "url": request["url"], "version": request["httpVersion"],
            "headers": _headerPairs(_dict(opened.get("request")).get("headers")),
            "body": _bodyPage(post.get("text") if post else None, None, request.get("bodySize"), offset, chars),
        },
        "response": None if ended is None or not _dict(ended.get("response")) else {
            "status": _dict(ended.get("response")).get("status"),
            "reason": _dict(ended.get("response")).get("reason"),
            "version": _dict(ended.get("response")).get("version"),
            "headers": _headerPairs(_dict(ended.get("response")).get("headers")),
            "body": _bodyPage(content.get("text"), content.get("encoding"), content.get("size"), offset, chars),
        },
        "open": ended is None,
    }
    for mark in ("_rules", "_tunnel"):
        if mark in entry:
            out[mark.lstrip("_")] = entry[mark]
    return out
