"""
Reading the network log from its file: the shell around L{netlog.core.paging}.

L{read} pages once; a L{LogReader} remembers the file it read (its device and
inode) and where it stopped, so that following a log costs only the new lines
and a log replaced or truncated under it is seen as I{begun again}.

Lines come back as their raw JSON text (bytes, without the newline): the
HTTP API and C{netlog read} send them on as they are, and L{Page.records}
parses them for Python callers.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from typing import Callable, Iterator

from netlog.core.logline import decodeLine
from netlog.core.paging import DEFAULT_LIMIT, Page, ReadAt, lastNumber, page
from netlog.core.recovery import recover
from netlog.core.segments import Segment, locate
from netlog.log.cut import WRITTEN_AGAIN_WITHIN, copiedUpTo
from netlog.log.series import listing, readSegment, segmentPath

__all__ = ["DEFAULT_LIMIT", "FOLLOW_INTERVAL", "LogReader", "LogUnreadable", "Page", "follow", "read"]

#: Seconds between looks at the log while following it.
FOLLOW_INTERVAL = 0.2
#: Bytes read to find a file's first line, most often enough.
_HEAD = 4096
#: Times a page is tried again when the segments change under it.
_RELISTS = 5


class LogUnreadable(Exception):
    """
    The log can't be read; the message says why.
    """


def _openForReading(path: str) -> int:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    except FileNotFoundError:
        raise LogUnreadable(f"there is no log at {path}") from None
    except OSError as e:
        raise LogUnreadable(f"the log {path} can't be read: {os.strerror(e.errno or errno.EIO)}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise LogUnreadable(f"{path} is not a regular file, so not a netlog log")
    except BaseException:
        os.close(fd)
        raise
    return fd


class _ListAgain(Exception):
    """
    The segments changed under the reader: one went (compressed or removed)
    between listing and opening it, or lines seem missing, which a rotation
    between listing and reading also looks like, or the live file was cut
    while it was read. List again.
    """


class LogReader:
    """
    Pages through one log path, across calls, and across the log's closed
    segments (see L{netlog.core.segments}).

    It keeps the identity (C{st_dev}, C{st_ino}) of the live file it last
    read and the offset its last page ended at, for the cursor that page
    handed out. A call with that cursor on the same file starts at that
    offset. While the log has no closed segment, a different file at the
    path is the log begun again, and so is a file shorter than that offset
    unless its first line goes on from the cursor's numbers (cut by an
    outside rotation, as logrotate's C{copytruncate} does). With closed
    segments, the numbers alone decide: the live file is replaced at each
    rotation.

    A file cut in place that still holds the last line read, byte for byte,
    goes on from it (its writer wrote the lines after the copy again). One
    that begins past the cursor this reader handed out, with lines between
    that no copy beside it holds, is waited for, up to
    L{WRITTEN_AGAIN_WITHIN} seconds: logrotate's cut landed between the
    writer's look and its write, and the writer is about to write those
    lines again. Only then is the reader told they are gone. A file cut
    while a page was read from it (shorter after than before, or begun with
    another line) is read again.

    @param clock: the time now, in seconds (for that wait).
    """

    def __init__(self, path: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._identity: tuple[int, int] | None = None
        self._cursor: int | None = None
        self._offset = 0
        self._fileFirst: int | None = None
        self._lastLine: bytes | None = None
        self._gap: tuple[tuple[int, int] | None, int, float] | None = None
        self._unpacked: tuple[str, bytes] | None = None

    def read(self, after: int = 0, limit: int = DEFAULT_LIMIT) -> Page:
        """
        The lines with C{n > after}; see L{netlog.core.paging.page}. With
        closed segments, the page comes from the one segment that holds
        line C{after + 1} (a page never spans two segments).

        @raise LogUnreadable: no file at the path, or not a regular file.
        """
        for attempt in range(_RELISTS):
            final = attempt > 0
            found = listing(self.path)
            try:
                if not found.segments:
                    return self._readLive(after, limit, series=False, final=final)
                return self._readSeries(found.segments, after, limit, final)
            except _ListAgain:
                continue
        raise LogUnreadable(f"the log {self.path} keeps changing under the reader (cut or rotated at every look)")

    def _readSeries(self, segments: tuple[Segment, ...], after: int, limit: int, final: bool) -> Page:
        liveFirst = self._liveFirst()
        starts = [s.first for s in segments] + ([liveFirst] if liveFirst is not None else [])
        where = locate(after, starts[: len(segments)], liveFirst)
        index, cursor, removed = where.index, where.after, where.removedUpTo
        if removed is not None and not final:
            raise _ListAgain()
        while True:
            if index < len(segments):
                result = self._readClosed(segments[index], cursor, limit, goesOn=index + 1 < len(starts))
            elif liveFirst is None:
                # Rotated a moment ago: no line after the closed ones yet.
                return Page(next=cursor, removedUpTo=removed)
            else:
                result = self._readLive(cursor, limit, series=True)
            if result.begunAgain and cursor > 0:
                if not final:
                    raise _ListAgain()
                # The numbers don't fit the cursor: the numbering began again.
                result = self._readSeries(segments, 0, limit, True)
                result.begunAgain = True
                return result
            result.begunAgain = False
            if result.lines or index >= len(segments):
                result.removedUpTo = removed
                return result
            index += 1
            if index < len(starts) and starts[index] > cursor + 1:
                if not final:
                    raise _ListAgain()
                if index == len(segments) and after == self._cursor and self._toBeWrittenAgain(None, starts[index]):
                    # (Waited for only by a reader that read up to here.)
                    return Page(next=cursor, removedUpTo=removed)
                # Lines between the two segments are not kept (an outside
                # rotation cut the live file).
                removed, cursor = starts[index] - 1, 0

    def _readClosed(self, segment: Segment, after: int, limit: int, goesOn: bool) -> Page:
        """
        The page of a closed segment from C{after}; with C{goesOn} (a later
        file begins past the cursor), an empty page when the cursor is at
        or past the segment's last line (the lines after it were cut away
        from the live file by an outside rotation), not one begun again.
        """
        if segment.compressed:
            if self._unpacked is None or self._unpacked[0] != segment.name:
                try:
                    self._unpacked = (segment.name, readSegment(self.path, segment))
                except FileNotFoundError:
                    raise _ListAgain() from None
            data = self._unpacked[1]
            return _pastItsEnd(lambda offset, size: data[offset : offset + size], len(data), after, limit, goesOn)
        try:
            fd = os.open(segmentPath(self.path, segment), os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            raise _ListAgain() from None
        try:
            return _pastItsEnd(lambda offset, size: os.pread(fd, size, offset), os.fstat(fd).st_size, after, limit,
                               goesOn)
        finally:
            os.close(fd)

    def _liveFirst(self) -> int | None:
        """
        The live file's first line's number; None when it has none (or
        isn't there: a rotation is between closing it and opening the next).
        """
        try:
            fd = _openForReading(self.path)
        except LogUnreadable:
            return None
        try:
            return _firstLineNumber(lambda offset, size: os.pread(fd, size, offset), os.fstat(fd).st_size)
        finally:
            os.close(fd)

    def _readLive(self, after: int, limit: int, series: bool, final: bool = True) -> Page:
        try:
            fd = _openForReading(self.path)
        except LogUnreadable:
            if series:
                return Page(next=after)
            raise
        try:
            st = os.fstat(fd)
            identity = (st.st_dev, st.st_ino)

            def readAt(offset: int, size: int) -> bytes:
                return os.pread(fd, size, offset)

            fileFirst = _firstLineNumber(readAt, st.st_size)
            same = identity == self._identity and after == self._cursor
            # Cut under us, even if written past where we were since.
            shrunk = same and (
                st.st_size < self._offset or (self._fileFirst is not None and fileFirst != self._fileFirst)
            )
            replaced = (
                not series
                and after > 0
                and self._identity is not None
                and after == self._cursor
                and (identity != self._identity or shrunk)
            )
            result = None
            if replaced:
                # Cut under us (copytruncate) or renamed away (logrotate):
                # the same log if its numbers go on past the cursor.
                first = fileFirst
                if first is None:
                    # Nothing in it yet: the next look tells.
                    return Page(next=after)
                if first > after:
                    if not final:
                        # A file renamed away may be a segment by now.
                        raise _ListAgain()
                    if first > after + 1 and self._toBeWrittenAgain(identity, first):
                        return Page(next=after)
                    result = page(readAt, st.st_size, 0, limit)
                    if first > after + 1:
                        result.removedUpTo = first - 1
                elif (self._fileFirst is not None and first > self._fileFirst) or (
                    shrunk and self._holdsLastLine(readAt, st.st_size, after)
                ):
                    # Cut under us after we read past its copy's end, and
                    # the lines since written again by the writer: the
                    # numbers go on from the file we read, so we do too.
                    result = page(readAt, st.st_size, after, limit)
            if result is None and replaced:
                result = page(readAt, st.st_size, 0, limit)
                result.begunAgain = True
            elif result is None:
                hint = self._offset if same and not shrunk else None
                result = page(readAt, st.st_size, after, limit, hint=hint)
            if _cutSince(fd, readAt, st.st_size, fileFirst):
                # Cut in place (copytruncate) between the look above and the
                # page's reads, which then found too little or other lines:
                # look again.
                raise _ListAgain()
        finally:
            os.close(fd)
        self._identity = identity
        self._fileFirst = fileFirst
        if result.lines:
            self._lastLine = result.lines[-1]
        elif result.next != after:
            self._lastLine = None
        self._cursor = result.next
        self._offset = result.offset
        self._gap = None
        return result

    def _toBeWrittenAgain(self, identity: tuple[int, int] | None, first: int) -> bool:
        """
        Whether the lines before C{first}, the first line of the live file
        cut under the reader, are still to be written again: no copy beside
        it ends just before C{first}, and the cut is younger than
        L{WRITTEN_AGAIN_WITHIN} seconds (as first seen).

        @param identity: the live file's, when known.
        """
        copy = copiedUpTo(self.path, first - 1)
        if copy is not None and copy[1] == first - 1:
            return False
        now = self._clock()
        if self._gap is None or self._gap[:2] != (identity, first):
            self._gap = (identity, first, now)
        return now - self._gap[2] < WRITTEN_AGAIN_WITHIN

    def _holdsLastLine(self, readAt: ReadAt, size: int, after: int) -> bool:
        """
        Whether the file's line C{after} is the last line read, byte for
        byte: the same log, going on.
        """
        if self._lastLine is None:
            return False
        found = page(readAt, size, after - 1, 1)
        return not found.begunAgain and found.lines[:1] == [self._lastLine]


def _pastItsEnd(readAt: ReadAt, size: int, after: int, limit: int, goesOn: bool) -> Page:
    """
    L{page}, but an empty page rather than one begun again when C{goesOn}
    and the file's lines end at or before C{after}.
    """
    result = page(readAt, size, after, limit)
    if result.begunAgain and goesOn and after > 0:
        last = lastNumber(readAt, size)
        if last is not None and last <= after:
            return Page(next=after)
    return result


def _cutSince(fd: int, readAt: ReadAt, size: int, first: int | None) -> bool:
    """
    Whether the file open at C{fd}, which was C{size} bytes long and began
    with line C{first}, was cut in place since: it is shorter now, or
    begins with another line.
    """
    now = os.fstat(fd).st_size
    return now < size or _firstLineNumber(readAt, now) != first


def _firstLineNumber(readAt: Callable[[int, int], bytes], size: int) -> int | None:
    """
    The number of a file's first netlog line (None for none), most often
    from one small read.
    """
    head = readAt(0, min(size, _HEAD))
    end = head.find(b"\n")
    record = decodeLine(head[:end]) if end >= 0 else None
    if record is not None:
        return int(record["n"])
    first = page(readAt, size, 0, 1)
    return int(first.records()[0]["n"]) if first.lines else None


def lastLineOf(fd: int) -> int:
    """
    The number of the last whole line of the log open at C{fd} (0 for
    none): a session's lines begin after it.
    """
    return recover(lambda offset, length: os.pread(fd, length, offset), os.fstat(fd).st_size, onlyLast=True).lastNumber


def read(path: str, after: int = 0, limit: int = DEFAULT_LIMIT) -> Page:
    """
    One page of the log at C{path}: the whole lines with C{n > after}, in
    order, at most C{limit} bytes but at least one line, with the cursor to
    ask next and whether the log was begun again.

    @raise LogUnreadable: no file at the path, or not a regular file.
    """
    return LogReader(path).read(after, limit)


def follow(
    path: str,
    after: int = 0,
    limit: int = DEFAULT_LIMIT,
    interval: float = FOLLOW_INTERVAL,
    sleep: Callable[[float], None] = time.sleep,
    reader: LogReader | None = None,
) -> Iterator[Page]:
    """
    Pages of new lines as they come, like C{tail -f}, forever: the caller
    stops iterating. A page is yielded only when it has lines or says the log
    was begun again. A log missing for a while is waited for.

    @param reader: the reader that handed out C{after}, if any, so that a log
        replaced since is seen.
    """
    if reader is None:
        reader = LogReader(path)
    cursor = after
    while True:
        try:
            result = reader.read(cursor, limit)
        except LogUnreadable:
            sleep(interval)
            continue
        cursor = result.next
        if result.lines or result.begunAgain:
            yield result
        if not result.lines:
            sleep(interval)
