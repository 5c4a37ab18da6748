"""
Write a log's WARC to a binary file object, streaming: the shell around
L{netlog.warc.build}.

It reads the log as the HAR export does (L{netlog.har.export.indexLog}: an
index of where each exchange's lines lie, then each exchange's lines read
in the order the exchanges started), so memory is the index and one
exchange's lines, whatever the log's size; with C{workers}, stretches of
exchanges are built in forked processes, as the HAR export's are, each
record a gzip member of its own wherever it was made. L{writeWarc} does blocking file
I/O and holds no reactor state: the HTTP API runs it in a thread.
"""

from __future__ import annotations

import io
import json
import os
from collections import Counter
from contextlib import nullcontext
from functools import partial
from typing import Any, BinaryIO, Callable, TextIO

from warcio.warcwriter import WARCWriter

import netlog
from netlog.core.har import JoinStats, LineIndex, _parse, exchangeLines, joinRecords
from netlog.core.paging import _lastRecordBefore
from netlog.log.series import openSeries
from netlog.har.export import SLOT_SIZE, WRITE_SIZE, _Reader, _SpanReader, _Workers, exportSpan, indexLog
from netlog.warc.build import WARC_VERSION, exchangeRecords, infoRecord, pageOf

#: The deflate each record's gzip member is made with, and its level: ISA-L
#: (the isal package) where it is installed, zlib's level 1 where not. The
#: export's speed is the compression's: on 16 MB of text, ISA-L's level 1
#: compresses at 411 MB/s to 36%, zlib's level 1 at 119 MB/s to 37% and its
#: level 6 at a third of that (warcio's own wrapper takes 9).
try:
    from isal import isal_zlib as _deflate
except ImportError:  # pragma: no cover
    import zlib as _deflate  # type: ignore[no-redef]
GZIP_LEVEL = 1


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
                self._compressor = _deflate.compressobj(GZIP_LEVEL, _deflate.DEFLATED, _deflate.MAX_WBITS + 16)
            self.add(self._compressor.compress(data))
        else:
            self.add(data)
        return len(data)

    def flush(self) -> None:
        if self._compressor is not None:
            self.add(self._compressor.flush())
            self._compressor = None

    def add(self, data: bytes | memoryview) -> None:
        """
        Add bytes as they are (gzip members made elsewhere).
        """
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


class _Archiver:
    """
    Builds each exchange's records and writes them with C{writer}, counting
    what went in and what was left out; with C{pages}, gathers the
    top-level navigations (L{pageOf}) for the caller to take.
    """

    def __init__(self, writer: WARCWriter, pages: bool) -> None:
        self.writer = writer
        self.archived = self.records = self.unreadable = 0
        self.leftOut: Counter[str] = Counter()
        self.pages: list[dict[str, Any]] | None = [] if pages else None

    def take(self, opened: dict[str, Any], ended: dict[str, Any] | None, notes: list[dict[str, Any]]) -> None:
        try:
            built = exchangeRecords(self.writer, opened, ended, notes)
        except (TypeError, ValueError, KeyError, AttributeError):
            self.unreadable += 1 + (ended is not None)
            return
        if built.leftOut is not None:
            self.leftOut[built.leftOut] += 1
            return
        for record in built.records:
            self.writer.write_record(record)
        self.archived += 1
        self.records += len(built.records)
        if self.pages is not None and ended is not None:
            page = pageOf(opened, ended)
            if page is not None:
                self.pages.append(page)


def writeWarc(logPath: str, out: BinaryIO, upTo: Callable[[int, int], int] | None = None,
              fromLine: int = 0, wholeIfMissing: bool = False, gzip: bool = True, workers: int = 1,
              pages: TextIO | None = None) -> WarcResult:
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
    @param workers: processes to build the records in, as the HAR export
        forks them (L{netlog.har.export}): call it with more than 1 only
        from a process that runs no other thread.
    @param pages: where the top-level navigations go, a JSON line each
        (the WACZ's pages).
    @raise MissingLine: the log has no line C{fromLine - 1}.
    """
    fd = openSeries(logPath)
    try:
        size, start = exportSpan(fd, upTo, fromLine, wholeIfMissing)
        build = partial(_buildBatch, gzip=gzip, pages=pages is not None)
        with _Workers(fd, workers, buildBatch=build) if workers > 1 else nullcontext() as pool:
            index = indexLog(fd, max(size, start), None, start, fromLine if start else 0, pool)

            def readAt(offset: int, length: int) -> bytes:
                return os.pread(fd, length, offset)

            sink = _Sink(out, gzip)
            archiver = _Archiver(WARCWriter(sink, gzip=False, warc_version=WARC_VERSION), pages is not None)
            archiver.writer.write_record(infoRecord(archiver.writer, {
                "software": f"netlog {netlog.__version__}",
                "format": "WARC file version 1.1",
                "netlog-log": os.path.abspath(logPath),
                "netlog-lines": _lineRange(index.openIds[0] if len(index) else None, readAt, size),
                "netlog-proxy": _proxyMode(index, readAt),
            }))
            stats = JoinStats()
            if pool is not None and len(index) > 1:
                for piece, archived, records, lost, leftOut, found in pool.build(index):
                    sink.add(piece)
                    archiver.archived += archived
                    archiver.records += records
                    stats.unreadable += lost
                    archiver.leftOut.update(leftOut)
                    _writePages(pages, found)
            else:
                for opened, ended, notes in joinRecords(exchangeLines(index), _Reader(fd, index).readAt, stats):
                    archiver.take(opened, ended, notes)
                    _writePages(pages, archiver.pages)
            sink.close()
        return WarcResult(archiver.archived, archiver.records + 1, archiver.leftOut,
                          index.unreadable + stats.unreadable + archiver.unreadable)
    finally:
        os.close(fd)


def _writePages(out: TextIO | None, pages: list[dict[str, Any]] | None) -> None:
    if out is not None and pages:
        for page in pages:
            out.write(json.dumps(page, ensure_ascii=False) + "\n")
        pages.clear()


def _buildBatch(batch: Any, slot: int, gzip: bool, pages: bool) -> tuple[Any, ...]:
    """
    In a worker (see L{netlog.har.export._Workers}): a stretch of
    exchanges' records, written into its slot of the shared memory (the
    bytes themselves when they don't fit), what went in (exchanges,
    records), the lines it could not use, what was left out, and the
    stretch's pages.
    """
    worker = _worker()
    stats = JoinStats()
    reader = _SpanReader(worker.fd, batch.start, batch.end, worker.buffer)
    built = io.BytesIO()
    sink = _Sink(built, gzip)
    archiver = _Archiver(WARCWriter(sink, gzip=False, warc_version=WARC_VERSION), pages)
    for opened, ended, notes in joinRecords(batch.exchanges, reader.readAt, stats):
        archiver.take(opened, ended, notes)
    sink.close()
    reader.close()
    data = built.getbuffer()
    told = (archiver.archived, archiver.records, stats.unreadable + archiver.unreadable,
            dict(archiver.leftOut), archiver.pages)
    if len(data) > SLOT_SIZE:
        return (bytes(data), *told)
    with memoryview(worker.slots) as slots:
        slots[slot * SLOT_SIZE : slot * SLOT_SIZE + len(data)] = data
    return (len(data), *told)


def _worker() -> Any:
    from netlog.har import export

    assert export._worker is not None
    return export._worker


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
