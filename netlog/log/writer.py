"""
The LogWriter: the one service that owns the network log file.

Both proxies hand it open and end lines; it numbers them and appends each with a
single C{write}, before the next event is handled.
"""

from __future__ import annotations

import errno
import heapq
import os
import signal
import stat
import time
from typing import Any, Callable

from twisted.application.service import Service
from twisted.logger import Logger

from netlog.core.logline import END, OPEN, REASON_RESTARTED, REASON_STOPPED, encodeLine
from netlog.core.recovery import recover

_log = Logger()

#: Mode of the log file, whatever the umask.
FILE_MODE = 0o644
#: Mode of a folder the writer creates for it.
FOLDER_MODE = 0o755
#: Lines held while writes fail, in bytes; past it new lines are dropped
#: (counted, and given no number, so the file's numbering stays whole).
MAX_PENDING_BYTES = 64 * 1024 * 1024
#: Seconds between tries to write held lines again.
RETRY_INTERVAL = 1.0


class UnsafeLogPath(Exception):
    """
    The log's path can't be used safely; the message says why and what to do.
    """


def _checkFolder(folder: str, uid: int | None, gid: int | None) -> None:
    """
    Refuse a folder that the user the proxy drops to could write, since that
    user could then replace the log file.
    """
    if uid is None or uid == 0:
        return
    st = os.stat(folder)
    mode = st.st_mode
    writable = (
        (st.st_uid == uid and mode & stat.S_IWUSR)
        or (gid is not None and st.st_gid == gid and mode & stat.S_IWGRP)
        or (mode & stat.S_IWOTH and not mode & stat.S_ISVTX)
    )
    if writable:
        raise UnsafeLogPath(
            f"the log's folder {folder} can be written by uid {uid}, the user the "
            f"proxy runs as, who could then replace the log; make it root's and "
            f"not writable by others (chown root:root {folder}; chmod 755 {folder}) "
            f"or choose another --log"
        )


def openLogFile(path: str, uid: int | None = None, gid: int | None = None) -> int:
    """
    Open (creating it if need be) the log file for appending, safely.

    Never through a symbolic link, nothing but a regular file, mode 0644
    whatever the umask, root's own when run as root.

    @param uid: the user the process will drop to, if any; its folder must not
        be writable by that user.
    @return: a file descriptor open for reading and appending.
    """
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        os.makedirs(folder, mode=FOLDER_MODE, exist_ok=True)
        os.chmod(folder, FOLDER_MODE)
    _checkFolder(folder, uid, gid)
    flags = (
        os.O_RDWR
        | os.O_APPEND
        | os.O_CREAT
        | os.O_NOFOLLOW
        | os.O_CLOEXEC
        | os.O_NONBLOCK
        | getattr(os, "O_NOCTTY", 0)
    )
    try:
        fd = os.open(path, flags, FILE_MODE)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise UnsafeLogPath(
                f"the log path {path} is a symbolic link; netlog never writes "
                f"through one: remove it or choose another --log"
            ) from None
        if e.errno == errno.ENXIO:
            raise UnsafeLogPath(
                f"the log path {path} is not a regular file; remove it or "
                f"choose another --log"
            ) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeLogPath(
                f"the log path {path} is not a regular file; remove it or "
                f"choose another --log"
            )
        os.set_blocking(fd, True)
        os.fchmod(fd, FILE_MODE)
        if os.geteuid() == 0:
            os.fchown(fd, 0, 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


class LogWriter(Service):
    """
    Numbers lines and appends them to the log, one C{write} each.

    With no path, nothing is written: L{enabled} is false, and the proxies then
    count bodies without keeping them.

    @ivar failedWrites: writes that failed (disk full, I/O error, size limit).
    @ivar droppedLines: lines given up because too many were held.
    """

    name = "log-writer"

    def __init__(
        self,
        path: str | None,
        *,
        reactor: Any = None,
        uid: int | None = None,
        gid: int | None = None,
        fd: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self._reactor = reactor
        self._uid = uid
        self._gid = gid
        self._fd: int | None = fd
        self._clock = clock
        self._next = 1
        self._open: set[int] = set()
        self._openHeap: list[int] = []
        self._pending: list[bytes] = []
        self._pendingBytes = 0
        self._retry: Any = None
        self._recovered = False
        self.failedWrites = 0
        self.droppedLines = 0

    @property
    def enabled(self) -> bool:
        return self.path is not None or self._fd is not None

    # -- service ------------------------------------------------------------

    def privilegedStartService(self) -> None:
        self._ensureOpen()
        Service.privilegedStartService(self)

    def startService(self) -> None:
        self._ensureOpen()
        Service.startService(self)

    def stopService(self) -> None:
        for exchangeId in sorted(self._open):
            self.end(exchangeId, {"_failed": {"reason": REASON_STOPPED}})
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._retry = None
        if self._fd is not None:
            self._flush()
            os.close(self._fd)
            self._fd = None
        Service.stopService(self)

    def _ensureOpen(self) -> None:
        if self._fd is None and self.path is not None:
            self._fd = openLogFile(self.path, self._uid, self._gid)
        if self._fd is not None and not self._recovered:
            self._recovered = True
            self._recover()
        # A write past RLIMIT_FSIZE must fail with EFBIG, not kill the proxy.
        if hasattr(signal, "SIGXFSZ"):
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def _recover(self) -> None:
        assert self._fd is not None
        fd = self._fd
        size = os.fstat(fd).st_size
        found = recover(lambda offset, length: os.pread(fd, length, offset), size)
        if found.cut:
            self._pending.append(b"\n")
            self._pendingBytes += 1
        self._next = found.lastNumber + 1
        for exchangeId in found.unended:
            self._open.add(exchangeId)
            heapq.heappush(self._openHeap, exchangeId)
        for exchangeId in found.unended:
            self.end(exchangeId, {"_failed": {"reason": REASON_RESTARTED}})
        self._flush()

    # -- lines --------------------------------------------------------------

    def _openFrom(self) -> int:
        heap = self._openHeap
        while heap and heap[0] not in self._open:
            heapq.heappop(heap)
        return heap[0] if heap else self._next

    def _emit(self, kind: str, exchangeId: int | None, fields: dict[str, Any]) -> int:
        """
        Number a line and write it; return its number, or 0 when it had to
        be dropped.
        """
        if not self.enabled:
            return 0
        if self._pendingBytes > MAX_PENDING_BYTES:
            self.droppedLines += 1
            return 0
        n = self._next
        self._next += 1
        if exchangeId is None:
            exchangeId = n
            self._open.add(n)
            heapq.heappush(self._openHeap, n)
        else:
            self._open.discard(exchangeId)
        line = encodeLine(n, kind, exchangeId, self._openFrom(), self._clock(), fields)
        self._pending.append(line)
        self._pendingBytes += len(line)
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
        fd = self._fd
        if fd is None:
            return
        while self._pending:
            data = self._pending[0]
            try:
                written = os.write(fd, data)
            except OSError as e:
                self._writeFailed(e)
                return
            self._pendingBytes -= written
            if written < len(data):
                self._pending[0] = data[written:]
                continue
            self._pending.pop(0)

    def _writeFailed(self, error: OSError) -> None:
        self.failedWrites += 1
        _log.error(
            "netlog could not write to its log {path}: {reason}; "
            "{held} lines are held and will be written when it can",
            path=self.path,
            reason=os.strerror(error.errno) if error.errno else str(error),
            held=len(self._pending),
        )
        if self._reactor is not None and (self._retry is None or not self._retry.active()):
            self._retry = self._reactor.callLater(RETRY_INTERVAL, self._retryWrite)

    def _retryWrite(self) -> None:
        self._retry = None
        self._flush()
