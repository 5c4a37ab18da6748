"""
Part of a log's series, read as one file: the lines an export of lines
C{first} to C{last} needs (see L{netlog.core.linerange}), and the lines a
time falls at. Only the segments that hold them are opened: where a segment
begins is in its name, and when it ended is its file's modification time
(a closed segment keeps the time of its last write through compression).
"""

from __future__ import annotations

import io
import os
import shutil
from contextlib import contextmanager
from typing import BinaryIO, Callable, Iterator

import zstandard

from netlog.core.linerange import Bound, numberOf, pastLast
from netlog.core.logline import decodeLine
from netlog.core.segments import COMPRESSED_SUFFIX, Segment, locate
from netlog.log.reader import _openForReading
from netlog.log.series import COPY_BLOCK, SeriesBytes, copiedSeries, listing, segmentPath, segmentSize

#: Reads C{length} bytes at C{offset}.
ReadAt = Callable[[int, int], bytes]
#: Times a part of the series is read again when its segments change meanwhile.
_TRIES = 5
#: Bytes read for a live file's first line (most often one read).
_HEAD = 4096


def _open(path: str, segment: Segment | None) -> BinaryIO:
    """
    A segment's lines as a binary file (decompressing), or the live file's
    for None; a segment compressed since it was listed is read packed.

    @raise FileNotFoundError: it is gone (retention).
    """
    if segment is None:
        return open(path, "rb")
    where = segmentPath(path, segment)
    compressed = segment.compressed
    try:
        raw = open(where, "rb")
    except FileNotFoundError:
        if compressed:
            raise
        raw = open(where + COMPRESSED_SUFFIX, "rb")
        compressed = True
    if not compressed:
        return raw
    return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, closefd=True), COPY_BLOCK)


def _lines(path: str, segment: Segment | None) -> Iterator[tuple[int, bytes]]:
    """
    A part's whole lines with their numbers (a line that isn't netlog's is
    passed over, as is the live file's last while it is being written).
    """
    with _open(path, segment) as f:
        for line in f:
            if not line.endswith(b"\n"):
                return
            n = numberOf(line)
            if n is None:
                record = decodeLine(line)
                if record is None:
                    continue
                n = int(record["n"])
            yield n, line


def _liveFirst(path: str) -> int | None:
    """
    The live file's first line number; None when it has none.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD)
            while head and b"\n" not in head:
                more = f.read(_HEAD)
                if not more:
                    return None
                head += more
    except FileNotFoundError:
        return None
    line = head[: head.find(b"\n") + 1]
    if not line:
        return None
    n = numberOf(line)
    if n is None:
        record = decodeLine(line)
        n = None if record is None else int(record["n"])
    return n


class _Parts:
    """
    The series as listed once: its closed segments and the live file, each
    with its first line (the next part's first less one is its last).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.segments: list[Segment | None] = [*listing(path).segments, None]
        self.firsts: list[int | None] = [s.first for s in self.segments if s is not None]
        self.firsts.append(_liveFirst(path))

    def nextFirst(self, index: int) -> int | None:
        return self.firsts[index + 1] if index + 1 < len(self.firsts) else None

    def endedAt(self, index: int) -> float | None:
        """
        When a closed part was last written; None for the live file.
        """
        segment = self.segments[index]
        if segment is None:
            return None
        where = segmentPath(self.path, segment)
        for name in (where, where + COMPRESSED_SUFFIX):
            try:
                return os.stat(name).st_mtime
            except FileNotFoundError:
                continue
        raise FileNotFoundError(where)


def oldestLine(path: str) -> int | None:
    """
    The series' first line still kept; None for an empty log.
    """
    found = listing(path).segments
    return found[0].first if found else _liveFirst(path)


def lineAtTime(path: str, when: float, fromSide: bool) -> int | None:
    """
    The first line written at C{when} or later (C{fromSide}), or the last
    line written at C{when} or before; None when there is none. A closed
    segment ended before C{when} is never opened.
    """
    for _ in range(_TRIES):
        try:
            return _lineAtTime(_Parts(path), when, fromSide)
        except FileNotFoundError:
            continue
    raise FileNotFoundError(f"the segments of the log {path} keep changing")


def _lineAtTime(parts: _Parts, when: float, fromSide: bool) -> int | None:
    found: int | None = None
    for index, segment in enumerate(parts.segments):
        ended = parts.endedAt(index)
        nextFirst = parts.nextFirst(index)
        if ended is not None and ended < when:
            # every line of it was written before: none is the first after
            if not fromSide and nextFirst is not None:
                found = nextFirst - 1
                continue
            if fromSide:
                continue
        for n, line in _lines(parts.path, segment):
            record = decodeLine(line)
            written = record.get("time") if record is not None else None
            if not isinstance(written, (int, float)):
                continue
            if fromSide and written >= when:
                return n
            if not fromSide:
                if written > when:
                    return found
                found = n
    return None if fromSide else found


def openSeriesRange(path: str, first: int, last: int | None) -> int:
    """
    A descriptor (offset 0) of an unlinked temporary file holding the lines
    of the log C{path} that an export of lines C{first} to C{last} (None:
    to the end) reads: from line C{first} (or the oldest kept, if it is no
    longer), through C{last}, then the later lines of exchanges opened by
    then, until they have all ended. The segments before the one holding
    C{first} are not opened, nor those after the lines needed.

    @raise FileNotFoundError: the log isn't there.
    """
    if not os.path.exists(path) and not listing(path).segments:
        raise FileNotFoundError(path)
    return copiedSeries(path, lambda out: _copyRange(_Parts(path), first, last, out))


def _copyRange(parts: _Parts, first: int, last: int | None, out: BinaryIO) -> None:
    if last is not None and last < first:
        return
    closed = [f for f in parts.firsts[:-1] if f is not None]
    start = locate(first - 1, closed, parts.firsts[-1]).index
    for index in range(start, len(parts.segments)):
        segment = parts.segments[index]
        partFirst, nextFirst = parts.firsts[index], parts.nextFirst(index)
        inside = (
            segment is not None
            and partFirst is not None
            and partFirst >= first
            and nextFirst is not None
            and (last is None or nextFirst - 1 <= last)
        )
        if inside or (segment is None and last is None and partFirst is not None and partFirst >= first):
            with _open(parts.path, segment) as f:
                shutil.copyfileobj(f, out, COPY_BLOCK)
            continue
        for n, line in _lines(parts.path, segment):
            if n < first:
                continue
            if last is None or n <= last:
                out.write(line)
                continue
            record = decodeLine(line)
            if record is None:
                continue
            keep, done = pastLast(record, last)
            if keep:
                out.write(line)
            if done:
                return


def resolveRange(path: str, start: Bound | None, end: Bound | None) -> tuple[int, int | None]:
    """
    The lines C{(first, last)} an export from C{start} to C{end} holds
    (either None: from the start, to the end); first above last when no
    line was written in the times asked.
    """
    first, last = 1, None
    if start is not None:
        if start.line is not None:
            first = max(start.line, 1)
        else:
            assert start.time is not None
            found = lineAtTime(path, start.time, True)
            if found is None:
                return 1, 0
            first = found
    if end is not None:
        if end.line is not None:
            last = end.line
        else:
            assert end.time is not None
            last = lineAtTime(path, end.time, False)
            if last is None:
                return 1, 0
    return first, last


@contextmanager
def seriesFrom(path: str, line: int, atLeast: int, through: int | None = None) -> Iterator[tuple[ReadAt, int]]:
    """
    The lines of the log C{path} from the segment that holds line C{line}
    on, as one run of bytes (C{readAt} and its size), for the readers that
    look an exchange up by its id: that segment, and as many after it as
    hold C{atLeast} bytes more and line C{through}; the live file when they
    run on to it. A line in the live file reads the live file alone, as
    before segments; segments before the one that holds C{line} are not
    opened.

    @raise LogUnreadable: there is no live file.
    """
    fd = _openForReading(path)
    try:
        segments = listing(path).segments
        index = locate(line - 1, [s.first for s in segments], _liveFirst(path)).index
        if index >= len(segments):
            yield (lambda offset, length: os.pread(fd, length, offset)), os.fstat(fd).st_size
            return
        chosen = [segments[index]]
        more = 0
        reachesLive = True
        for segment in segments[index + 1:]:
            if more >= atLeast and (through is None or segment.first > through):
                reachesLive = False
                break
            chosen.append(segment)
            more += segmentSize(path, segment) or atLeast
        tail = SeriesBytes(path, chosen, fd if reachesLive else None, keep=len(chosen))
        yield tail.readAt, tail.size
    finally:
        os.close(fd)
