"""
Write a log's WARC to a binary file object, streaming: the shell around
L{netlog.warc.build}.

It reads the log as the HAR export does (L{netlog.har.export.indexLog}: an
index of where each exchange's lines lie, then each exchange's lines read
in the order the exchanges started), so memory is the index and one
exchange's lines, whatever the log's size. L{writeWarc} does blocking file
I/O and holds no reactor state: the HTTP API runs it in a thread.
"""

from __future__ import annotations

import os
import zlib
from collections import Counter
from typing import Any, BinaryIO, Callable

from warcio.warcwriter import WARCWriter

import netlog
from netlog.core.har import JoinStats, LineIndex, _parse, exchangeLines, joinRecords
from netlog.core.paging import _lastRecordBefore
from netlog.har.export import WRITE_SIZE, _Reader, exportSpan, indexLog
from netlog.warc.build import WARC_VERSION, exchangeRecords, infoRecord

#: zlib's level for each record's gzip member: warcio's own wrapper takes
#: 9, which on bodies that are mostly compressed already (images, fonts,
#: gzip answers) costs three times the CPU for a file a few percent smaller.
GZIP_LEVEL = 6


class WarcResult:
    """
    What an export wrote: exchanges archived, records, and exchanges left
    out by why (see L{netlog.warc.build}).
    """

    def __init__(self, exchanges: int, records: int, leftOut: Counter[str], unreadable: int) -> None:
        self.exchanges = exchanges
        self.records = records
        self.leftOut = leftOut
        self.unreadable = unreadable

    def summary(self) -> str:
        """
        One line: what was written and what was left out, and why.
        """
        line = f"{self.exchanges} exchanges in {self.records} records"
        if self.leftOut:
            line += "; left out " + ", ".join(f"{count} {why}" for why, count in sorted(self.leftOut.items()))
        if self.unreadable:
            line += f"; {self.unreadable} lines could not be used"
        return line


class _Sink:
    """
    What warcio writes to: gzipped one member from one C{flush} to the next
    (warcio flushes after each record, so each record is a member of its
    own, as WARC readers seek to them), or plain; gathered into writes of
    L{WRITE_SIZE} to C{out} (the API's stream hands each to the event loop).
    """

    def __init__(self, out: BinaryIO, gzip: bool) -> None:
        self._out = out
        self._gzip = gzip
        self._compressor: Any = None
        self._pending = bytearray()

    def write(self, data: bytes) -> int:
        if self._gzip:
            if self._compressor is None:
                self._compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, zlib.MAX_WBITS + 16)
            self._add(self._compressor.compress(data))
        else:
            self._add(data)
        return len(data)

    def flush(self) -> None:
        if self._compressor is not None:
            self._add(self._compressor.flush())
            self._compressor = None

    def _add(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) >= WRITE_SIZE:
            self.close()

    def close(self) -> None:
        """
        Write what is gathered.
        """
        if self._pending:
            self._out.write(bytes(self._pending))
            self._pending.clear()


def writeWarc(logPath: str, out: BinaryIO, upTo: Callable[[int, int], int] | None = None,
              fromLine: int = 0, wholeIfMissing: bool = False, gzip: bool = True,
              onExchange: Callable[[dict[str, Any], dict[str, Any] | None], None] | None = None) -> WarcResult:
    """
    Write the WARC 1.1 of the log at C{logPath} to C{out}: a C{warcinfo}
    record, then each exchange's records in the order they started.

    @param upTo: C{upTo(fd, size)} gives how many of the log's first bytes
        to export; default all.
    @param fromLine: only the exchanges whose open line is this one or
        later; 0 or 1 for all.
    @param wholeIfMissing: when the log has no line C{fromLine - 1}, export
        it whole rather than raise.
    @param gzip: one gzip member per record (C{.warc.gz}), else plain.
    @param onExchange: called with each exchange's open and end lines as
        it is archived (the WACZ's pages are found so).
    @raise MissingLine: the log has no line C{fromLine - 1}.
    """
    fd = os.open(logPath, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size, start = exportSpan(fd, upTo, fromLine, wholeIfMissing)

        def readAt(offset: int, length: int) -> bytes:
            return os.pread(fd, length, offset)

        index = indexLog(fd, max(size, start), None, start, fromLine if start else 0)
        sink = _Sink(out, gzip)
        writer = WARCWriter(sink, gzip=False, warc_version=WARC_VERSION)
        stats = JoinStats()
        exchanges = joinRecords(exchangeLines(index), _Reader(fd, index).readAt, stats)
        writer.write_record(infoRecord(writer, {
            "software": f"netlog {netlog.__version__}",
            "format": "WARC file version 1.1",
            "netlog-log": os.path.abspath(logPath),
            "netlog-lines": _lineRange(index.openIds[0] if len(index) else None, readAt, size),
            "netlog-proxy": _proxyMode(index, readAt),
        }))
        leftOut: Counter[str] = Counter()
        archived = records = 0
        for opened, ended, notes in exchanges:
            try:
                built = exchangeRecords(writer, opened, ended, notes)
            except (TypeError, ValueError, KeyError, AttributeError):
                stats.unreadable += 1 + (ended is not None)
                continue
            if built.leftOut is not None:
                leftOut[built.leftOut] += 1
                continue
            for record in built.records:
                writer.write_record(record)
            if onExchange is not None:
                onExchange(opened, ended)
            archived += 1
            records += len(built.records)
        sink.close()
        return WarcResult(archived, records + 1, leftOut, index.unreadable + stats.unreadable)
    finally:
        os.close(fd)


def _lineRange(first: int | None, readAt: Callable[[int, int], bytes], size: int) -> str:
    last = _lastRecordBefore(readAt, size)
    if first is None or last is None:
        return "none"
    return f"{first}-{last}"


def _proxyMode(index: LineIndex, readAt: Callable[[int, int], bytes]) -> str:
    """
    Which proxy wrote the log (its first open line's C{proxy}).
    """
    if not len(index):
        return ""
    opened = _parse(readAt(index.openOffsets[0], index.openLengths[0])) or {}
    return str(opened.get("proxy") or "")
