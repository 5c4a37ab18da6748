"""
A WARC as a recording to replay (C{--replay FILE.warc.gz}): netlog's own,
or one another tool wrote (warcprox, browsertrix, pywb's recorder), matched
with the rules of a netlog log or a HAR (L{netlog.core.replay}).

The index is built in one pass with warcio's L{ArchiveIterator}, which
reads through each record's block without keeping it: per C{response}
record, its URL and its offset in the file; per C{request} record, its
method and body (for the body's digest, as a log's request is matched),
joined to the response its C{WARC-Concurrent-To} names (a response with no
request is a C{GET}). An answer is read back at its offset when it is
first served.
"""

from __future__ import annotations

from typing import Any, BinaryIO

from warcio.archiveiterator import ArchiveIterator
from warcio.bufferedreaders import ChunkedDataReader
from warcio.exceptions import ArchiveLoadFailed

from netlog.core.capture import MAX_REQUEST_BODY
from netlog.core.replay import (
    SKIP_UNANSWERED,
    SKIP_UNREADABLE,
    SKIP_WEBSOCKET,
    MatchRules,
    NotServed,
    Recorded,
    RecordedAnswer,
    ReplayIndex,
    bodyKey,
    requestKey,
)

#: Why a WARC's record isn't served, besides L{netlog.core.replay}'s: a
#: C{revisit} (it says an earlier capture's body was the same, and holds
#: none itself).
SKIP_REVISIT = "revisit"
_HTTP = ("http:", "https:")


def _body(record: Any, limit: int | None = None) -> bytes:
    """
    A request's or response's body as sent: the transfer coding undone (a
    WARC writer that records the wire, as warcprox does, keeps the chunks),
    the content coding kept.
    """
    head = record.http_headers
    coding = (head.get_header("transfer-encoding") or "").lower() if head is not None else ""
    stream = ChunkedDataReader(record.raw_stream) if "chunked" in coding else record.raw_stream
    return bytes(stream.read(limit))


def recordedFromWarc(stream: BinaryIO, rules: MatchRules, index: ReplayIndex) -> None:
    """
    Add to C{index} each response of the WARC read from C{stream} that may
    be replayed, in the file's order; C{where} and C{mark} are the response
    record's offset.
    """
    responses: list[tuple[int, str, str]] = []
    requests: dict[str, tuple[str, bytes, str | None]] = {}
    records = ArchiveIterator(stream)
    try:
        for record in records:
            kind = record.rec_type
            url = record.rec_headers.get_header("WARC-Target-URI") or ""
            if kind == "revisit":
                index.skip(SKIP_REVISIT)
            elif kind == "response" and url.startswith(("ws:", "wss:")):
                # (its messages, in a resource record, aren't replayed)
                index.skip(SKIP_WEBSOCKET)
            elif kind not in ("response", "request") or not url.startswith(_HTTP):
                continue
            elif record.http_headers is None:
                index.skip(SKIP_UNREADABLE)
            elif kind == "response":
                status = record.http_headers.get_statuscode()
                if status == "101":
                    index.skip(SKIP_WEBSOCKET)
                elif not status.isdigit() or int(status) < 200:
                    index.skip(SKIP_UNANSWERED)
                else:
                    responses.append((records.get_record_offset(), url,
                                      record.rec_headers.get_header("WARC-Record-ID") or ""))
            else:
                to = record.rec_headers.get_header("WARC-Concurrent-To")
                if to:
                    requests[to] = (record.http_headers.protocol, _body(record, MAX_REQUEST_BODY),
                                    record.http_headers.get_header("content-type"))
    except ArchiveLoadFailed:
        index.skip(SKIP_UNREADABLE)
    for offset, url, recordId in responses:
        method, body, contentType = requests.pop(recordId, ("GET", b"", None))
        try:
            index.add(Recorded(requestKey(method, url, rules), bodyKey(body, contentType, rules), offset, offset))
        except ValueError:
            index.skip(SKIP_UNREADABLE)


def answerFromWarc(stream: BinaryIO) -> RecordedAnswer:
    """
    The answer of the response record C{stream} is at: its status, reason
    and fields as recorded, its body with the transfer coding undone;
    C{WARC-Truncated} makes it a body the recording cut.

    @raise NotServed: the record can't be read.
    """
    try:
        # (the iterator kept until the body is read: dropped, it reads
        # through the record)
        records = iter(ArchiveIterator(stream))
        record = next(records)
        head = record.http_headers
        status = int(head.get_statuscode())
        reason = head.statusline.split(" ", 1)[1] if " " in head.statusline else ""
        body = _body(record)
    except (StopIteration, ArchiveLoadFailed, ValueError, AttributeError, IndexError):
        raise NotServed(SKIP_UNREADABLE) from None
    headers = [(name.encode("latin-1", "replace"), value.encode("latin-1", "replace"))
               for name, value in head.headers]
    cut = bool(record.rec_headers.get_header("WARC-Truncated"))
    length = head.get_header("content-length")
    address = record.rec_headers.get_header("WARC-IP-Address")
    return RecordedAnswer(status, reason.encode("latin-1", "replace"), headers, body, cut, 0.0,
                          size=int(length) if cut and length and length.isdigit() else None,
                          address=address or None)
