"""
Write a log's HAR to a binary file object, streaming: the shell around
L{netlog.core.har}.

L{writeHar} does blocking file I/O and holds no reactor state, so the HTTP
API can run it in a thread (C{deferToThread(writeHar, path, out)}).
"""

from __future__ import annotations

import os
from bisect import bisect_left, bisect_right
from typing import BinaryIO, Callable

from netlog.core.har import JoinStats, LineIndex, encodeEntry, harHead, harTail, joinEntries

#: Bytes read from the log at a time: the first pass's chunks, and at most
#: the second pass's blocks (see L{_Reader}).
READ_SIZE = 1024 * 1024
#: Bytes of HAR gathered before a write to C{out}.
WRITE_SIZE = 256 * 1024

#: C{progress(bytesIndexed, entriesWritten, logSize, totalEntries)}.
Progress = Callable[[int, int, int, int], None]


class ExportResult:
    """
    What an export wrote: entries, and lines it could not use.
    """

    def __init__(self, entries: int, unreadable: int) -> None:
        self.entries = entries
        self.unreadable = unreadable

    def __repr__(self) -> str:
        return f"ExportResult(entries={self.entries}, unreadable={self.unreadable})"


def indexLog(fd: int, size: int, progress: Progress | None = None) -> LineIndex:
    """
    The first pass: index the lines in the first C{size} bytes of C{fd}
    (the size when the export began: lines written after it wait for the
    next export).
    """
    index = LineIndex()
    offset = 0
    carry = b""
    while offset < size:
        chunk = os.pread(fd, min(READ_SIZE, size - offset), offset)
        if not chunk:
            break
        lineStart = offset - len(carry)
        offset += len(chunk)
        data = carry + chunk if carry else chunk
        carry = data[index.addLines(lineStart, data) :]
        if progress is not None:
            progress(offset, 0, size, 0)
    if carry:
        index.add(offset - len(carry), carry)
    return index


class _Reader:
    """
    C{readAt} for the second pass, reading the log in blocks rather than a
    line at a time: reading an open line past the current block loads the
    block from it through the last open line that fits in C{READ_SIZE} (so
    a block never holds more than the log's next stretch), and lines within
    the block, most end lines among them, come from memory. Lines outside
    it are read alone, an open line before the block among them: the second
    pass goes in the order exchanges started, which is the log's order but
    for an open line written a little late, and such a line is read alone
    rather than moving the block back over what was just read. Whatever the
    order, each read returns the log's bytes there; the order only decides
    how often the log is read.
    """

    def __init__(self, fd: int, index: LineIndex) -> None:
        self._fd = fd
        self._offsets = index.openOffsets
        self._lengths = index.openLengths
        self._block = b""
        self._start = 0
        self._end = 0

    def readAt(self, offset: int, length: int) -> bytes:
        if self._start <= offset and offset + length <= self._end:
            start = offset - self._start
            return self._block[start : start + length]
        if offset < self._end:
            # behind the block's end: a line written before the block's
            # first, or one running past its end
            return os.pread(self._fd, length, offset)
        offsets = self._offsets
        i = bisect_left(offsets, offset)
        if i < len(offsets) and offsets[i] == offset:
            # an open line: load the stretch through the last open that fits
            j = bisect_right(offsets, offset + READ_SIZE) - 1
            while j > i and offsets[j] + self._lengths[j] > offset + READ_SIZE:
                j -= 1
            if j > i:
                self._block = b""  # free the old block before reading the next
                self._block = os.pread(self._fd, offsets[j] + self._lengths[j] - offset, offset)
                self._start = offset
                self._end = offset + len(self._block)
                return self._block[:length]
        return os.pread(self._fd, length, offset)


def writeHar(
    logPath: str, out: BinaryIO, progress: Progress | None = None, upTo: Callable[[int, int], int] | None = None
) -> ExportResult:
    """
    Write the HAR of the log at C{logPath} to C{out} (binary, UTF-8 JSON, no
    BOM). Memory: the largest entry, plus about 48 bytes per exchange for the
    index (see L{netlog.core.har}).

    @param upTo: C{upTo(fd, size)} gives how many of the log's first bytes
        to export (the log as it was at a reader's cursor); default all.
    """
    fd = os.open(logPath, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        if upTo is not None:
            size = min(size, upTo(fd, size))
        index = indexLog(fd, size, progress)
        stats = JoinStats()
        total = len(index)
        pending: list[bytes] = [harHead()]
        pendingSize = 0
        count = 0
        for entry in joinEntries(index, _Reader(fd, index).readAt, stats):
            encoded = encodeEntry(entry)
            if count:
                pending.append(b",")
            pending.append(encoded)
            pendingSize += len(encoded)
            count += 1
            if pendingSize >= WRITE_SIZE:
                out.write(b"".join(pending))
                pending = []
                pendingSize = 0
                if progress is not None:
                    progress(size, count, size, total)
        unreadable = index.unreadable + stats.unreadable
        pending.append(harTail(unreadable))
        out.write(b"".join(pending))
        if progress is not None:
            progress(size, count, size, total)
        return ExportResult(count, unreadable)
    finally:
        os.close(fd)
