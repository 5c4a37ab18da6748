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

from netlog.core.paging import DEFAULT_LIMIT, Page, page

__all__ = ["DEFAULT_LIMIT", "FOLLOW_INTERVAL", "LogReader", "LogUnreadable", "Page", "follow", "read"]

#: Seconds between looks at the log while following it.
FOLLOW_INTERVAL = 0.2


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


class LogReader:
    """
    Pages through one log path, across calls.

    It keeps the identity (C{st_dev}, C{st_ino}) of the file it last read and
    the offset its last page ended at, for the cursor that page handed out.
    A call with that cursor on the same file starts at that offset; a
    different file at the path, or one shorter than that offset, is the log
    begun again.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._identity: tuple[int, int] | None = None
        self._cursor: int | None = None
        self._offset = 0

    def read(self, after: int = 0, limit: int = DEFAULT_LIMIT) -> Page:
        """
        The lines with C{n > after}; see L{netlog.core.paging.page}.

        @raise LogUnreadable: no file at the path, or not a regular file.
        """
        fd = _openForReading(self.path)
        try:
            st = os.fstat(fd)
            identity = (st.st_dev, st.st_ino)

            def readAt(offset: int, size: int) -> bytes:
                return os.pread(fd, size, offset)

            replaced = (
                after > 0
                and self._identity is not None
                and after == self._cursor
                and (identity != self._identity or st.st_size < self._offset)
            )
            if replaced:
                result = page(readAt, st.st_size, 0, limit)
                result.begunAgain = True
            else:
                hint = self._offset if identity == self._identity and after == self._cursor else None
                result = page(readAt, st.st_size, after, limit, hint=hint)
        finally:
            os.close(fd)
        self._identity = identity
        self._cursor = result.next
        self._offset = result.offset
        return result


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
