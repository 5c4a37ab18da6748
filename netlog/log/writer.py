"""
The LogWriter: the one service that owns the network log file.

Both proxies hand it open and end lines; it numbers them and appends each with a
single C{write} (a C{writev} of the line's pieces and its newline), before the
next event is handled.
"""

from __future__ import annotations

import heapq
import itertools
import os
import signal
import threading
import time
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any, Callable

from twisted.application.service import Service
from twisted.logger import Logger

from netlog.core.cut import linesAfter
from netlog.core.logline import (
    END,
    HEAD,
    MESSAGE,
    OPEN,
    REASON_LOG_FAILED,
    REASON_RESTARTED,
    REASON_STOPPED,
    Buffer,
    encodePieces,
)
from netlog.core.paging import page
from netlog.core.recovery import recover
from netlog.core.segments import Rotation, closingSize, segmentName
from netlog.log.logfile import UnsafeLogPath, openLogFile
from netlog.log.cut import CUT_CHECK_INTERVAL, copiedUpTo
from netlog.log.series import Housekeeper, SeriesBytes, followRotation, listing

if TYPE_CHECKING:
    from netlog.net.reactors import IProxyReactor

_log = Logger()

#: Lines held while writes fail, in bytes; past it new lines are dropped
#: (counted, and given no number, so the file's numbering stays whole).
MAX_PENDING_BYTES = 64 * 1024 * 1024
#: Seconds between tries to write held lines again.
RETRY_INTERVAL = 1.0
#: The most buffers one C{writev} takes.
#: Bytes of the most recent lines a writer keeps (twice: two halves, the
#: older dropped as the newer fills), to write them again when its file is
#: cut under it (see L{netlog.core.cut}).
RECENT_BYTES = 512 * 1024
_IOV_MAX = min(os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 16, 1024) or 16
_NEWLINE = b"\n"


class LogWriter(Service):
    """
    Numbers lines and appends them to the log, one C{write} (C{writev}) each.

    With no path, nothing is written: L{enabled} is false, and the proxies then
    count bodies without keeping them.

    How numbering stays whole when a write fails (disk full, I/O error, the
    file size limit): a line takes its number when the writer accepts it, and
    accepted lines are held, in order, and written as soon as the file takes
    them again (a retry every L{RETRY_INTERVAL} seconds on the reactor passed
    in, and on every new line when there is none). The file therefore only
    ever gets whole runs of numbers. When the held lines pass
    L{MAX_PENDING_BYTES}, new lines are dropped I{without} taking a number:
    L{open} returns 0 (and L{end} ignores 0), a dropped end line leaves its
    exchange open and it gets an end line with C{"the log could not be
    written"} once writing works again. A write cut short leaves part of a
    line on the file; the rest is written first when writing resumes, or, if
    the process dies first, the next start ends the cut line with a newline
    and numbers on after the last whole line (the cut line's number is given
    again: it never became a whole line).

    One writer per log: the counter and the open exchanges live in this
    object, so only one process may write a given file at a time. Under the
    supervisor, the workers of one worker slot alone are handed a log (see
    C{docs/engine.rst}, "One writer per log"), and a worker makes a writer
    only from a descriptor it was handed.

    A file cut under the writer (logrotate's C{copytruncate}) is noticed at
    the next write, whose end falls short of the bytes counted, or within
    L{CUT_CHECK_INTERVAL} seconds when idle; the lines after the end of
    logrotate's copy are then written again from the writer's most recent
    bytes (L{RECENT_BYTES}), so that no line is in neither file (see
    L{netlog.core.cut}).

    @ivar failedWrites: writes that failed (disk full, I/O error, size limit).
    @ivar droppedLines: lines given up because too many were held.
    @ivar restoredCuts: cuts under the writer it wrote lines again after.
    """

    name = "log-writer"

    def __init__(
        self,
        path: str | None,
        *,
        reactor: IProxyReactor | None = None,
        uid: int | None = None,
        gid: int | None = None,
        fd: int | None = None,
        clock: Callable[[], float] = time.time,
        recoveryReason: str = REASON_RESTARTED,
        rotation: Rotation | None = None,
        guardCuts: bool = True,
    ) -> None:
        """
        @param guardCuts: keep the most recent lines, to write them again
            when the file is cut under the writer (the main log's writer; a
            session's log, never rotated, keeps none: up to
            C{2 * RECENT_BYTES} saved per session).
        """
        self.path = path
        self.rotation = rotation or Rotation()
        self._closingSize = closingSize(self.rotation)
        #: Only a writer that opened its log itself closes segments: whoever
        #: handed a descriptor over (the supervisor, the session manager)
        #: holds it too, and would write on in the closed segment.
        self._rotates = fd is None and path is not None
        #: Bytes on the live file, as far as this writer knows.
        self._liveBytes = 0
        self._rotateWanted = False
        self._rotateTimer: Any = None
        self._housekeeper: Any = None
        self._recoveryReason = recoveryReason
        self._reactor = reactor
        self._uid = uid
        self._gid = gid
        self._fd: int | None = fd
        self._clock = clock
        self._next = 1
        self._open: set[int] = set()
        self._openHeap: list[int] = []
        #: Accepted lines not yet on the file, in order, each the list of its
        #: pieces (the newline last); the first may have been written in part.
        self._pending: deque[list[Buffer]] = deque()
        self._pendingBytes = 0
        self._lostEnds: set[int] = set()
        self._failing: str | None = None
        #: The most recent whole lines on the file, the older half first
        #: (only for a log with a path: one that can be cut).
        self._keepsRecent = guardCuts and path is not None
        self._recentOlder = bytearray()
        self._recent = bytearray()
        self._cutTimer: Any = None
        self.restoredCuts = 0
        self._retry: Any = None
        self._closing = False
        self._recovered = False
        self.failedWrites = 0
        self.droppedLines = 0

    @property
    def enabled(self) -> bool:
        return self.path is not None or self._fd is not None

    @property
    def heldBytes(self) -> int:
        """
        Bytes of accepted lines not yet on the file.
        """
        return self._pendingBytes

    @property
    def nextNumber(self) -> int:
        """
        The number the next accepted line will take.
        """
        return self._next

    # -- service ------------------------------------------------------------

    def privilegedStartService(self) -> None:
        self._ensureOpen()
        Service.privilegedStartService(self)

    def startService(self) -> None:
        self._ensureOpen()
        Service.startService(self)

    def stopService(self) -> None:
        _rotatable.discard(self)
        if self._cutTimer is not None and self._cutTimer.active():
            self._cutTimer.cancel()
        self._cutTimer = None
        if self._rotateTimer is not None and self._rotateTimer.active():
            self._rotateTimer.cancel()
        self._rotateTimer = None
        for exchangeId in sorted(self._open):
            self.end(exchangeId, {"_failed": {"reason": REASON_STOPPED}})
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        if self._fd is not None:
            self._closing = True
            self._flush()
            self._closing = False
            if self._pending:
                _log.error(
                    "netlog stops with {held} lines it could not write to its log "
                    "{path}; they are lost, the log's numbering stays whole",
                    held=len(self._pending),
                    path=self.path,
                )
            os.close(self._fd)
            self._fd = None
            self._pending.clear()
            self._pendingBytes = 0
        Service.stopService(self)

    def rotateHanded(self, rotation: Rotation) -> None:
        """
        Close segments of a log whose descriptor was handed over (by the
        supervisor, which follows a rotation before it hands the log again,
        see L{netlog.log.series.followRotation}).
        """
        self.rotation = rotation
        self._closingSize = closingSize(rotation)
        self._rotates = self.path is not None

    def _ensureOpen(self) -> None:
        if self._fd is not None and self._rotates and self.path is not None and not self._recovered:
            # Handed over before a rotation (a standby started ahead): the
            # log is the file at the path now.
            self._fd = followRotation(self.path, self._fd, self._uid, self._gid)
        if self._fd is None and self.path is not None:
            self._fd = openLogFile(self.path, self._uid, self._gid)
        # A write past RLIMIT_FSIZE must fail with EFBIG, not kill the proxy.
        if hasattr(signal, "SIGXFSZ") and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        if self._fd is not None and not self._recovered:
            self._recovered = True
            self._recover()
            self._startRotating()
            if self._keepsRecent and self._reactor is not None:
                self._cutTimer = self._reactor.callLater(CUT_CHECK_INTERVAL, self._checkCutOnTime)

    def _recover(self) -> None:
        assert self._fd is not None
        fd = self._fd
        size = os.fstat(fd).st_size
        self._liveBytes = size
        found = recover(*self._seriesTail(fd, size))
        if found.cut:
            self._pending.append([_NEWLINE])
            self._pendingBytes += 1
        self._next = found.lastNumber + 1
        for exchangeId in found.unended:
            self._open.add(exchangeId)
            heapq.heappush(self._openHeap, exchangeId)
        for exchangeId in found.unended:
            self.end(exchangeId, {"_failed": {"reason": self._recoveryReason}})
        self._flush()

    # -- lines --------------------------------------------------------------

    def _openFrom(self) -> int:
        heap = self._openHeap
        while heap and heap[0] not in self._open:
            heapq.heappop(heap)
        return heap[0] if heap else self._next

    def _encode(self, n: int, kind: str, exchangeId: int, fields: dict[str, Any]) -> list[Buffer]:
        """
        The line's pieces without its newline (written with them in one
        C{writev}, so a big line is not copied once more to add it, nor a
        body kept as L{netlog.core.logline.AsciiText} copied into it).
        """
        heap = self._openHeap
        # (Usually the oldest open exchange is still open: no call.)
        openFrom = heap[0] if heap and heap[0] in self._open else self._openFrom()
        now = self._clock()
        try:
            return encodePieces(n, kind, exchangeId, openFrom, now, fields)
        except (TypeError, ValueError) as e:
            # A field JSON can't hold is a bug in its writer; keep the line
            # (and the numbering) and say what went wrong.
            _log.failure("netlog could not encode a log line's fields")
            return encodePieces(n, kind, exchangeId, openFrom, now, {"_unencodable": str(e)})

    def _emit(self, kind: str, exchangeId: int | None, fields: dict[str, Any], ending: bool = True) -> int:
        """
        Number a line and write it; return its number, or 0 when it had to
        be dropped.

        @param exchangeId: L{None} for an open line (it opens an exchange);
            else the exchange the line belongs to, which C{ending} ends.
        """
        if not self.enabled:
            return 0
        if not self._recovered:
            # Numbers come from the file, which isn't open yet: a line now
            # would take a number the file may already hold.
            self.droppedLines += 1
            _log.error("netlog's LogWriter got a line before it started; the line is dropped")
            return 0
        if self._pendingBytes > MAX_PENDING_BYTES:
            self.droppedLines += 1
            if exchangeId is not None and ending:
                self._lostEnds.add(exchangeId)
            return 0
        n = self._next
        self._next += 1
        if exchangeId is None:
            exchangeId = n
            self._open.add(n)
            heapq.heappush(self._openHeap, n)
        elif ending:
            self._open.discard(exchangeId)
            self._lostEnds.discard(exchangeId)
        line = self._encode(n, kind, exchangeId, fields)
        line.append(_NEWLINE)
        self._pending.append(line)
        self._pendingBytes += sum(map(len, line))
        del line
        retry = self._retry
        if retry is None or not retry.active():
            self._flush()
        return n

    def open(self, fields: dict[str, Any]) -> int:
        """
        Write an exchange's open line.

        @return: the exchange's id (the line's C{n}); 0 when no log is kept
            or the line had to be dropped, and then L{end} ignores it.
        """
        return self._emit(OPEN, None, fields)

    def end(self, exchangeId: int, fields: dict[str, Any]) -> None:
        """
        Write the end line of the exchange C{exchangeId}.
        """
        if not exchangeId or exchangeId not in self._open:
            return
        self._emit(END, exchangeId, fields)

    def note(self, exchangeId: int, kind: str, fields: dict[str, Any]) -> int:
        """
        Write a line of type C{kind} (L{HEAD}, L{MESSAGE}) that belongs to
        the open exchange C{exchangeId} and leaves it open: numbered like
        every line; ignored (0) when the exchange isn't open, so it never
        follows the exchange's end line.
        """
        if not exchangeId or exchangeId not in self._open:
            return 0
        return self._emit(kind, exchangeId, fields, ending=False)

    def head(self, exchangeId: int, fields: dict[str, Any]) -> int:
        """
        Write the head line of the open exchange C{exchangeId}.
        """
        return self.note(exchangeId, HEAD, fields)

    def message(self, exchangeId: int, fields: dict[str, Any]) -> int:
        """
        Write a WebSocket message line of the open exchange C{exchangeId}.
        """
        return self.note(exchangeId, MESSAGE, fields)

    def refuse(self, openFields: dict[str, Any], endFields: dict[str, Any]) -> int:
        """
        Write an open line and its end line at once.
        """
        exchangeId = self.open(openFields)
        self.end(exchangeId, endFields)
        return exchangeId

    @property
    def openIds(self) -> set[int]:
        return set(self._open)

    # -- writing --------------------------------------------------------------

    def _flush(self) -> None:
        """
        Write the held lines, in order, until they are all on the file or a
        write fails: each line's pieces with its newline in one C{writev}
        (lines held while writes failed go several in one, whole lines only,
        as many as one C{writev} takes), so a line is one append.
        """
        fd = self._fd
        if fd is None:
            return
        pending = self._pending
        if self._keepsRecent and pending and self._liveBytes:
            # Cut under us since the last write? Then the lost lines go
            # back before these, so no reader sees a gap meanwhile.
            size = os.lseek(fd, 0, os.SEEK_END)
            if size < self._liveBytes:
                self._restoreCut()
                return
            self._liveBytes = size
        while pending:
            first = pending[0]
            if len(first) > _IOV_MAX:
                # More pieces than one writev takes (never with the pieces
                # encodePieces makes): joined, still one append.
                first[:] = [b"".join(first)]
            if len(pending) == 1:
                iov = first
            else:
                iov = list(first)
                for line in itertools.islice(pending, 1, None):
                    if len(iov) + len(line) > _IOV_MAX:
                        break
                    iov.extend(line)
            try:
                if len(iov) == 1:
                    written = os.write(fd, iov[0])
                else:
                    written = os.writev(fd, iov)
            except OSError as e:
                del iov
                self._writeFailed(e)
                return
            self._pendingBytes -= written
            self._liveBytes += written
            if self._keepsRecent:
                if written <= RECENT_BYTES and (not self._pendingBytes or written == sum(map(len, iov))):
                    # Kept among the most recent (inline: once a line).
                    recent = self._recent
                    for piece in iov:
                        recent += piece
                    if len(recent) >= RECENT_BYTES:
                        self._recentOlder = recent
                        self._recent = bytearray()
                else:
                    self._forgetRecent()
            del iov
            if not self._pendingBytes:
                # Every held byte went (the usual case: one line, whole).
                pending.clear()
                break
            while written:
                line = pending[0]
                while line:
                    data = line[0]
                    if written < len(data):
                        # Cut short: the rest of this piece goes first next
                        # time (a view: a big piece is not copied).
                        line[0] = memoryview(data)[written:]
                        written = 0
                        break
                    written -= len(data)
                    del line[0]
                if line:
                    break
                pending.popleft()
        if self._failing is not None:
            self._writesAgain()
        if self._rotateWanted or self._liveBytes >= self._closingSize:
            # Cut under us (copytruncate) it holds less than counted.
            self._liveBytes = os.fstat(fd).st_size
            if self._rotateWanted or self._liveBytes >= self._closingSize:
                self.rotate()

    # -- cuts under the writer -------------------------------------------------

    def _forgetRecent(self) -> None:
        """
        Keep no recent bytes (a write cut short, a line bigger than they
        hold): a cut now finds only what is written after.
        """
        self._recentOlder = bytearray()
        self._recent = bytearray()

    def _checkCutOnTime(self) -> None:
        assert self._reactor is not None
        self._cutTimer = self._reactor.callLater(CUT_CHECK_INTERVAL, self._checkCutOnTime)
        self.checkCut()

    def checkCut(self) -> bool:
        """
        Look whether the file was cut under the writer (it holds fewer bytes
        than the writer put there) and, if so, write the lost lines again;
        whether it was. Done within L{CUT_CHECK_INTERVAL} seconds of a cut
        on its own; while lines are held (writes failing), not at all.
        """
        fd = self._fd
        if fd is None or not self._keepsRecent or self._pending:
            return False
        size = os.fstat(fd).st_size
        if size >= self._liveBytes:
            self._liveBytes = size
            return False
        self._restoreCut()
        return True

    def _restoreCut(self) -> None:
        """
        The file was cut: write it again from the line after the end of
        logrotate's copy (every line still kept when no copy is found).
        """
        fd, path = self._fd, self.path
        assert fd is not None and path is not None
        last = self._next - 1
        copy = copiedUpTo(path, last)
        after = copy[1] if copy is not None else None
        restored = linesAfter(bytes(self._recentOlder + self._recent), after)
        self._forgetRecent()
        self.restoredCuts += 1
        try:
            os.ftruncate(fd, 0)
        except OSError as e:
            _log.error("netlog could not write its log {path} again after it was cut: {reason}",
                       path=path, reason=os.strerror(e.errno) if e.errno else str(e))
            return
        self._liveBytes = 0
        copied = f"its copy {copy[0]} ends at line {after}" if copy is not None else "no copy of it was found beside it"
        if restored.first is None:
            _log.info("netlog's log {path} was cut under it (copytruncate); {copied}: no line to write again",
                      path=path, copied=copied)
        else:
            _log.info("netlog's log {path} was cut under it (copytruncate); {copied}: it writes lines {first} "
                      "to {last} again", path=path, copied=copied, first=restored.first, last=restored.last)
        missing = restored.lost
        if missing:
            _log.error("netlog's log {path} was cut under it and {count} lines after line {after} are in "
                       "neither file: they were written before the most recent {bytes} bytes netlog keeps",
                       path=path, count=missing, after=after, bytes=RECENT_BYTES * 2)
        if restored.data:
            self._pending.appendleft([restored.data])
            self._pendingBytes += len(restored.data)
            self._flush()

    def _writeFailed(self, error: OSError) -> None:
        self.failedWrites += 1
        reason = os.strerror(error.errno) if error.errno else str(error)
        if reason != self._failing:
            _log.error(
                "netlog could not write to its log {path}: {reason}; the lines "
                "are held (up to {bound} bytes) and written when it can, in order; "
                "past that, new lines are dropped",
                path=self.path,
                reason=reason,
                errno=error.errno,
                bound=MAX_PENDING_BYTES,
            )
        self._failing = reason
        if self._closing:
            return
        if self._reactor is not None and (self._retry is None or not self._retry.active()):
            self._retry = self._reactor.callLater(RETRY_INTERVAL, self._retryWrite)

    def _writesAgain(self) -> None:
        _log.info(
            "netlog writes its log {path} again; {failed} writes failed and "
            "{dropped} lines were dropped so far",
            path=self.path,
            failed=self.failedWrites,
            dropped=self.droppedLines,
        )
        self._failing = None
        lost = sorted(self._lostEnds)
        self._lostEnds.clear()
        for exchangeId in lost:
            self.end(exchangeId, {"_failed": {"reason": REASON_LOG_FAILED}})

    def _retryWrite(self) -> None:
        self._retry = None
        self._flush()

    # -- segments -------------------------------------------------------------

    def _seriesTail(self, fd: int, size: int) -> tuple[Callable[[int, int], bytes], int]:
        """
        What recovery reads: the live file, after the log's closed segments
        when it has some (an exchange open at a rotation has its open line
        in an earlier segment).
        """
        if self.path is not None:
            segments = listing(self.path).segments
            if segments:
                tail = SeriesBytes(self.path, segments, fd)
                return tail.readAt, tail.size
        return (lambda offset, length: os.pread(fd, length, offset)), size

    def _startRotating(self) -> None:
        if not self._rotates:
            return
        _rotatable.add(self)
        listenForRotation()
        every = self.rotation.every
        if every is not None and self._reactor is not None:
            self._rotateTimer = self._reactor.callLater(every, self._rotateOnTime)
        self._tidy()

    def _rotateOnTime(self) -> None:
        every = self.rotation.every
        assert every is not None and self._reactor is not None
        self._rotateTimer = self._reactor.callLater(every, self._rotateOnTime)
        self.rotate()

    def _tidy(self) -> None:
        """
        Compress closed segments and apply retention, in the background.
        """
        assert self.path is not None
        if self._housekeeper is None:
            self._housekeeper = Housekeeper(self.path, self.rotation.keepSegments, self.rotation.keepFor, self._clock)
        self._housekeeper.ask()

    def waitForHousekeeping(self, timeout: float | None = None) -> bool:
        """
        Wait until closed segments are compressed and retention applied;
        whether that happened within C{timeout} seconds.
        """
        return self._housekeeper is None or bool(self._housekeeper.wait(timeout))

    def rotate(self) -> bool:
        """
        Close the live segment (renamed after its first line, then
        compressed in the background) and go on in a new one at the log's
        path, between two whole lines: while lines are held (writes
        failing), the rotation waits until they are written.

        @return: whether a segment was closed now.
        """
        self._rotateWanted = False
        path, fd = self.path, self._fd
        if not self._rotates or path is None or fd is None:
            return False
        if self._pending:
            self._rotateWanted = True
            return False
        path = os.path.abspath(path)
        # The file's own first line, not the one this writer remembers: an
        # outside rotation (copytruncate) may have cut it since.
        first = page(lambda offset, length: os.pread(fd, length, offset), os.fstat(fd).st_size, 0, 1)
        firstNumber = int(first.records()[0]["n"]) if first.lines else None
        ours = os.fstat(fd)
        try:
            there: os.stat_result | None = os.lstat(path)
        except FileNotFoundError:
            there = None
        movedAway = there is None or (ours.st_dev, ours.st_ino) != (there.st_dev, there.st_ino)
        if firstNumber is None and not movedAway:
            return False
        closed = None
        if firstNumber is not None:
            closed = os.path.join(os.path.dirname(path), segmentName(os.path.basename(path), firstNumber))
        try:
            if closed is not None and os.path.lexists(closed):
                raise UnsafeLogPath(f"{closed} is there already")
            if not movedAway:
                assert closed is not None
                os.rename(path, closed)
            elif closed is not None:
                # Renamed away by an outside rotation (logrotate, before its
                # postrotate SIGUSR1): the file keeps its new name, and gets
                # a segment's name too, so the series stays whole.
                _linkOpenFile(fd, closed)
        except (OSError, UnsafeLogPath) as e:
            _log.error("netlog could not close the segment of its log {path}: {reason}", path=path, reason=str(e))
            if not movedAway:
                return False
            closed = None
        try:
            newFd = openLogFile(path, self._uid, self._gid)
        except (OSError, UnsafeLogPath) as e:
            _log.error("netlog could not open a new segment of its log {path}: {reason}; it goes on "
                       "writing the old one", path=path, reason=str(e))
            if not movedAway and closed is not None:
                os.rename(closed, path)
            return False
        os.close(fd)
        self._fd = newFd
        self._liveBytes = os.fstat(newFd).st_size
        _log.info("netlog closed the log segment {closed} and goes on in {path}",
                  closed=closed or "renamed away", path=path)
        self._tidy()
        return True

    def rotateSoon(self) -> None:
        """
        Ask for a rotation from a signal handler: done by the reactor (or at
        the next line), never in the middle of a write.
        """
        self._rotateWanted = True
        if self._reactor is not None:
            self._reactor.callFromThread(self._rotateIfWanted)

    def _rotateIfWanted(self) -> None:
        if self._rotateWanted:
            self.rotate()


def _linkOpenFile(fd: int, name: str) -> None:
    """
    Give the file open at C{fd} one more name (C{linkat} through
    C{/proc/self/fd}, which C{os.link} does only when given a folder fd).
    """
    root = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.link(f"/proc/self/fd/{fd}", name, src_dir_fd=root, follow_symlinks=True)
    finally:
        os.close(root)


#: The writers a C{SIGUSR1} rotates.
_rotatable: "weakref.WeakSet[LogWriter]" = weakref.WeakSet()


def rotatingWriters() -> list[LogWriter]:
    """
    The running writers of this process that close segments, by log path.
    """
    return sorted(_rotatable, key=lambda writer: writer.path or "")


#: What else a C{SIGUSR1} (or C{POST /rotate}) does: the supervisor's
#: hand-on to the worker writing the log.
rotationForwarders: list[Callable[[], None]] = []


def forgetRotations() -> None:
    """
    Forget every writer and forwarder a C{SIGUSR1} reaches: in a process
    forked from another they are the other's, and rotating or waking them
    here would write to descriptors whose numbers now mean something else.
    """
    _rotatable.clear()
    del rotationForwarders[:]


def _onRotateSignal(signum: int, frame: Any) -> None:
    for writer in list(_rotatable):
        writer.rotateSoon()
    for forward in list(rotationForwarders):
        forward()


def listenForRotation() -> None:
    """
    Rotate every running writer's log on C{SIGUSR1} (as nginx reopens its
    logs), once installed in the main thread.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGUSR1, _onRotateSignal)
