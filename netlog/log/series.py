"""
The files of a log's series of segments: listing them, reading a closed one,
compressing and removing them. The decisions are L{netlog.core.segments}'.

Compression never stalls the writer: it runs in a thread of its own (the
zstandard library lets go of the GIL while it works), and a kill at any
point loses nothing: the compressed copy is written beside the segment under
a partial name, synced, renamed in place and its folder synced, and only
then is the uncompressed segment removed. Whatever a kill leaves half done
is finished (or cleared) by the next L{Housekeeper} pass.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from typing import BinaryIO, Callable, Sequence

import zstandard
from twisted.logger import Logger

from netlog.core.segments import (
    COMPRESSED_SUFFIX,
    Listing,
    Partial,
    Segment,
    expired,
    listSegments,
    partialName,
)
from netlog.log.logfile import openLogFile

_log = Logger()

#: The zstandard level closed segments are compressed at (fast, and about
#: ten to one on log lines).
COMPRESSION_LEVEL = 3
#: Bytes read from a segment at a time while compressing it.
COPY_BLOCK = 1 << 20
#: Times a series is copied again when its segments change meanwhile.
_COPY_TRIES = 5
#: The longest zstandard frame header (it holds the decompressed size).
_FRAME_HEADER_MAX = 18


#: The partial compressed copies this process is writing now (paths).
_compressing: set[str] = set()
_compressingLock = threading.Lock()


def _processLives(pid: int) -> bool:
    """
    Whether a process C{pid} is there (ours to signal or not).
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _beingWrittenIn(folder: str) -> Callable[[Partial], bool]:
    """
    Whether a partial compressed copy in C{folder} is still being written:
    by this process when it says so, by another while that process lives
    (a PID reused since is taken as alive: the copy is then kept, never
    another live process's removed).
    """

    def beingWritten(partial: Partial) -> bool:
        if partial.pid is None:
            return False
        if partial.pid == os.getpid():
            with _compressingLock:
                return os.path.join(folder, partial.name) in _compressing
        return _processLives(partial.pid)

    return beingWritten


def listing(path: str) -> Listing:
    """
    The closed segments beside the live log C{path}.
    """
    folder, name = os.path.split(os.path.abspath(path))
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        names = []
    return listSegments(name, names, _beingWrittenIn(folder))


def segmentPath(path: str, segment: Segment | str) -> str:
    """
    The path of a closed segment of the log C{path}.
    """
    name = segment.name if isinstance(segment, Segment) else segment
    return os.path.join(os.path.dirname(os.path.abspath(path)), name)


def readSegment(path: str, segment: Segment) -> bytes:
    """
    A closed segment's lines, decompressed if need be.

    @raise FileNotFoundError: it was removed (or compressed) meanwhile.
    """
    with open(segmentPath(path, segment), "rb") as f:
        data = f.read()
    if segment.compressed:
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    return data


def segmentSize(path: str, segment: Segment) -> int | None:
    """
    The bytes of a closed segment's lines, from its file's size or its
    compressed frame's header; None when the header doesn't say.

    @raise FileNotFoundError: it was removed meanwhile.
    """
    where = segmentPath(path, segment)
    if not segment.compressed:
        try:
            return os.stat(where).st_size
        except FileNotFoundError:
            where += COMPRESSED_SUFFIX
    with open(where, "rb") as f:
        size = zstandard.frame_content_size(f.read(_FRAME_HEADER_MAX))
    return None if size < 0 else int(size)


class SeriesBytes:
    """
    The closed segments and the live file of a log read as one run of bytes
    (the shape L{netlog.core.recovery.recover} reads), so that a writer
    started again finds the exchanges still open in earlier segments.
    A compressed segment is decompressed only when its bytes are asked for,
    and only the last C{keep} are kept.
    """

    def __init__(self, path: str, segments: Sequence[Segment], liveFd: int | None, keep: int = 2) -> None:
        """
        @param liveFd: the live file, after the segments; None for the
            segments alone.
        """
        self._path = path
        self._parts: list[tuple[int, int, Segment | None]] = []
        self._liveFd = liveFd
        self._unpacked: dict[str, bytes] = {}
        self._keep = keep
        start = 0
        for segment in segments:
            size = self._sizeOf(segment)
            self._parts.append((start, size, segment))
            start += size
        if liveFd is not None:
            self._parts.append((start, os.fstat(liveFd).st_size, None))
            start += self._parts[-1][1]
        self.size = start

    def _sizeOf(self, segment: Segment) -> int:
        size = segmentSize(self._path, segment)
        return len(self._bytesOf(segment)) if size is None else size

    def _bytesOf(self, segment: Segment) -> bytes:
        data = self._unpacked.get(segment.name)
        if data is None:
            data = readSegment(self._path, segment)
            if len(self._unpacked) >= self._keep:
                self._unpacked.pop(next(iter(self._unpacked)))
            self._unpacked[segment.name] = data
        return data

    def readAt(self, offset: int, length: int) -> bytes:
        pieces = []
        end = offset + length
        for start, size, segment in self._parts:
            if start + size <= offset or start >= end:
                continue
            lo, hi = max(offset, start) - start, min(end, start + size) - start
            if segment is None:
                assert self._liveFd is not None
                pieces.append(os.pread(self._liveFd, hi - lo, lo))
            elif segment.compressed:
                pieces.append(self._bytesOf(segment)[lo:hi])
            else:
                try:
                    with open(segmentPath(self._path, segment), "rb") as f:
                        f.seek(lo)
                        pieces.append(f.read(hi - lo))
                except FileNotFoundError:
                    # Compressed meanwhile: the same bytes, packed.
                    packed = Segment(segment.first, segment.name + COMPRESSED_SUFFIX, True)
                    pieces.append(self._bytesOf(packed)[lo:hi])
        return b"".join(pieces)


def followRotation(path: str, fd: int, uid: int | None = None, gid: int | None = None) -> int:
    """
    The descriptor to write the log C{path} with, given the one held: the
    same while it is still the file at the path, else (the writer closed
    that segment since) the file at the path now, opened (made if the
    writer died before making it) and the old descriptor closed.
    """
    ours = os.fstat(fd)
    try:
        there = os.lstat(path)
        if (there.st_dev, there.st_ino) == (ours.st_dev, ours.st_ino):
            return fd
    except FileNotFoundError:
        pass
    newFd = openLogFile(path, uid, gid)
    os.close(fd)
    return newFd


def openSeries(path: str) -> int:
    """
    A descriptor (read-only use, offset 0) of the whole series of the log
    C{path}, oldest line first, for readers that read a log as one file
    (the HAR export, replay's index): the log file itself while it has no
    closed segment, else an unlinked temporary file holding every segment,
    decompressed, then the live file.

    @raise FileNotFoundError: the log isn't there.
    """
    if not listing(path).segments:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    return copiedSeries(path, lambda out: _copyWhole(path, out))


def _copyWhole(path: str, out: BinaryIO) -> None:
    for segment in listing(path).segments:
        with open(segmentPath(path, segment), "rb") as src:
            if segment.compressed:
                with zstandard.ZstdDecompressor().stream_reader(src) as reader:
                    shutil.copyfileobj(reader, out, COPY_BLOCK)
            else:
                shutil.copyfileobj(src, out, COPY_BLOCK)
    try:
        with open(path, "rb") as live:
            shutil.copyfileobj(live, out, COPY_BLOCK)
    except FileNotFoundError:
        pass


def copiedSeries(path: str, fill: Callable[[BinaryIO], None]) -> int:
    """
    A descriptor (offset 0) of an unlinked temporary file that C{fill}
    writes from the log C{path}'s series; C{fill} is called again (after
    listing the series again) when a segment it read was compressed or
    removed meanwhile.
    """
    for _ in range(_COPY_TRIES):
        out = tempfile.TemporaryFile(prefix="netlog-series-")
        try:
            fill(out)
            out.flush()
            fd = os.dup(out.fileno())
        except FileNotFoundError:
            # A segment compressed or removed meanwhile: list again.
            continue
        finally:
            out.close()
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
    raise FileNotFoundError(f"the segments of the log {path} keep changing")


def removeSeries(path: str) -> list[str]:
    """
    Remove the log C{path} and its closed segments; the paths removed.
    """
    return _unlinkAll([segmentPath(path, s) for s in listing(path).segments] + [path])


def _unlinkAll(paths: list[str]) -> list[str]:
    """
    Remove each of C{paths} that is there; those removed.
    """
    removed = []
    for where in paths:
        try:
            os.unlink(where)
        except FileNotFoundError:
            continue
        removed.append(where)
    return removed


def _syncFolder(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def compressSegment(path: str, segment: Segment) -> str | None:
    """
    Compress the closed segment C{segment} of the log C{path}; the
    uncompressed file is removed once the compressed one is on disk.

    @return: the compressed file's path; None when another thread of this
        process is compressing it now (it is left to that one).
    """
    source = segmentPath(path, segment)
    target = source + COMPRESSED_SUFFIX
    # a name of this process's own: a second process compressing the same
    # segment (a worker started after a kill, beside the one still at it)
    # must never truncate this one's file under it, nor rename it half
    # written; the last rename wins, and each file renamed is whole
    partial = segmentPath(path, partialName(segment.name, os.getpid()))
    with _compressingLock:
        # a second writer of the same log in this process (one started
        # again) shares the name: it would truncate the first's copy
        if partial in _compressing:
            return None
        _compressing.add(partial)
    try:
        _compressInto(source, partial)
        os.replace(partial, target)
    except BaseException:
        # ours, and no longer being written: never left behind
        try:
            os.unlink(partial)
        except FileNotFoundError:
            pass
        raise
    finally:
        with _compressingLock:
            _compressing.discard(partial)
    folder = os.path.dirname(source)
    _syncFolder(folder)
    try:
        os.unlink(source)
    except FileNotFoundError:
        pass  # the other process's compression finished first
    _syncFolder(folder)
    return target


def _compressInto(source: str, partial: str) -> None:
    """
    Write C{source} compressed to C{partial}, synced, with its mode and times.
    """
    with open(source, "rb") as src:
        size = os.fstat(src.fileno()).st_size
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), os.fstat(src.fileno()).st_mode & 0o777)
            compressor = zstandard.ZstdCompressor(level=COMPRESSION_LEVEL, write_content_size=True)
            compressor.copy_stream(src, out, size=size, read_size=COPY_BLOCK, write_size=COPY_BLOCK)
            out.flush()
            os.fsync(out.fileno())
    stat = os.stat(source)
    os.utime(partial, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def tidy(path: str, keepSegments: int | None, keepFor: float | None, now: float) -> list[str]:
    """
    One pass over the log C{path}'s closed segments: clear what a kill left
    half done, compress those not yet compressed, and remove those past
    retention.

    @return: the paths removed by retention.
    """
    found = listing(path)
    for name in found.leftovers:
        try:
            os.unlink(segmentPath(path, name))
        except FileNotFoundError:
            pass
    for segment in found.toCompress:
        try:
            compressSegment(path, segment)
        except FileNotFoundError:
            continue
    if keepSegments is None and keepFor is None:
        return []
    found = listing(path)
    dated = []
    for segment in found.segments:
        try:
            dated.append((segment, os.stat(segmentPath(path, segment)).st_mtime))
        except FileNotFoundError:
            continue
    return _unlinkAll([segmentPath(path, segment) for segment in expired(dated, keepSegments, keepFor, now)])


class Housekeeper:
    """
    Runs L{tidy} for a log in a thread of its own, one pass at a time:
    asking again while a pass runs makes one more pass after it.

    @ivar passes: passes finished (for tests and the curious).
    """

    def __init__(
        self,
        path: str,
        keepSegments: int | None = None,
        keepFor: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.keepSegments = keepSegments
        self.keepFor = keepFor
        self._clock = clock
        self._lock = threading.Condition()
        self._asked = 0
        self._done = 0
        self._thread: threading.Thread | None = None
        self.passes = 0

    def ask(self) -> None:
        """
        Ask for a pass soon; returns at once.
        """
        with self._lock:
            self._asked += 1
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name=f"netlog-segments {self.path}", daemon=True
                )
                self._thread.start()
            self._lock.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """
        Wait until no pass is asked for or running; whether it got there.
        """
        with self._lock:
            return self._lock.wait_for(lambda: self._done == self._asked, timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._done != self._asked)
                target = self._asked
            try:
                for removed in tidy(self.path, self.keepSegments, self.keepFor, self._clock()):
                    _log.info("removed the log segment {path} (retention)", path=removed)
            except OSError:
                _log.failure("netlog could not compress or remove a segment of its log {path}", path=self.path)
            with self._lock:
                self.passes += 1
                self._done = target
                self._lock.notify_all()
