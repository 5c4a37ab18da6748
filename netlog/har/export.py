"""
Write a log's HAR to a binary file object, streaming: the shell around
L{netlog.core.har}.

L{writeHar} does blocking file I/O and holds no reactor state, so the HTTP
API can run it in a thread (C{deferToThread(writeHar, path, out)}).
"""

from __future__ import annotations

import os
from typing import BinaryIO, Callable

from netlog.core.har import JoinStats, LineIndex, encodeEntry, harHead, harTail, joinEntries

#: Bytes read from the log at a time in the first pass.
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
    add = index.add
    while offset < size:
        chunk = os.pread(fd, min(READ_SIZE, size - offset), offset)
        if not chunk:
            break
        lineStart = offset - len(carry)
        offset += len(chunk)
        data = carry + chunk if carry else chunk
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            add(lineStart + start, data[start : nl + 1])
            start = nl + 1
        carry = data[start:]
        if progress is not None:
            progress(offset, 0, size, 0)
    if carry:
        add(offset - len(carry), carry)
    return index


def writeHar(logPath: str, out: BinaryIO, progress: Progress | None = None) -> ExportResult:
    """
    Write the HAR of the log at C{logPath} to C{out} (binary, UTF-8 JSON, no
    BOM). Memory: the largest entry, plus about 40 bytes per exchange for the
    index (see L{netlog.core.har}).
    """
    fd = os.open(logPath, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        index = indexLog(fd, size, progress)
        stats = JoinStats()
        total = len(index)
        pending: list[bytes] = [harHead()]
        pendingSize = 0
        count = 0
        for entry in joinEntries(index, lambda o, n: os.pread(fd, n, o), stats):
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
