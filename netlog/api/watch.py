"""
Word that a log changed, for the API's waits: the kernel's (inotify) when
it can give it, so a wait costs nothing until a line is written, by
whichever process writes it (a worker, under the supervisor that serves the
API). Where there is no inotify, a look at the file's size every
L{FALLBACK_INTERVAL} seconds stands in for it.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from twisted.internet.task import LoopingCall
from twisted.logger import Logger
from twisted.python.filepath import FilePath

from netlog.net.reactors import IProxyReactor

_log = Logger()

#: Seconds between looks at a log's size where inotify is not to be had.
FALLBACK_INTERVAL = 0.05


class LogChanges:
    """
    Calls each subscriber (on the event loop) whenever the log at C{path}
    may have changed: appended to, truncated, replaced. Watches only while
    someone is subscribed.
    """

    def __init__(self, reactor: IProxyReactor, path: str) -> None:
        self._reactor = reactor
        self._path = path
        self._subscribers: list[Callable[[], None]] = []
        self._notifier: Any = None
        self._poll: LoopingCall | None = None
        self._lastSeen: tuple[int, int, int] | None = None

    def subscribe(self, callback: Callable[[], None]) -> Callable[[], None]:
        """
        Call C{callback} on each change until the function returned is called.
        """
        self._subscribers.append(callback)
        if len(self._subscribers) == 1:
            self._start()

        def unsubscribe() -> None:
            if callback in self._subscribers:
                self._subscribers.remove(callback)
                if not self._subscribers:
                    self._stop()

        return unsubscribe

    def _changed(self, *ignored: object) -> None:
        for callback in list(self._subscribers):
            callback()

    def _start(self) -> None:
        try:
            from twisted.internet import inotify

            notifier = inotify.INotify(reactor=self._reactor)
        except Exception:
            notifier = None
        if notifier is None:
            self._startPolling()
            return
        self._notifier = notifier
        notifier.startReading()
        self._watch()

    def _watch(self) -> None:
        from twisted.internet import inotify

        def changed(ignored: object, path: FilePath[Any], mask: int) -> None:
            if mask & (inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF):
                # Replaced or gone (and Twisted's notifier closes itself on a
                # deletion): watch what is at the path from now on.
                self._reactor.callLater(0, self._restart)
            self._changed()

        mask = (inotify.IN_MODIFY | inotify.IN_ATTRIB | inotify.IN_CLOSE_WRITE
                | inotify.IN_DELETE_SELF | inotify.IN_MOVE_SELF)
        # The folder too: a log made or moved into place after the wait began.
        folderMask = inotify.IN_CREATE | inotify.IN_MOVED_TO

        def inFolder(ignored: object, path: FilePath[Any], mask: int) -> None:
            if os.fsdecode(path.path) == self._path:
                self._reactor.callLater(0, self._restart)
                self._changed()

        try:
            self._notifier.watch(FilePath(os.path.dirname(self._path) or "."), folderMask, callbacks=[inFolder])
        except Exception:
            _log.warn("can't watch the folder of {path}", path=self._path)
        try:
            self._notifier.watch(FilePath(self._path), mask, callbacks=[changed])
        except Exception:
            pass  # no file yet: the folder's watch says when there is one

    def _restart(self) -> None:
        if self._notifier is None:
            return
        self._stop()
        if self._subscribers:
            self._start()

    def _seen(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self._path)
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def _startPolling(self) -> None:
        self._lastSeen = self._seen()

        def look() -> None:
            seen = self._seen()
            if seen != self._lastSeen:
                self._lastSeen = seen
                self._changed()

        self._poll = LoopingCall(look)
        self._poll.clock = self._reactor
        self._poll.start(FALLBACK_INTERVAL, now=False)

    def _stop(self) -> None:
        if self._notifier is not None:
            notifier, self._notifier = self._notifier, None
            # Unless Twisted's notifier closed itself (a deletion) already:
            # its descriptor is closed once, never a number reused since.
            if not (notifier.disconnecting or notifier.disconnected):
                notifier.stopReading()
                notifier.connectionLost(None)
        if self._poll is not None:
            self._poll.stop()
            self._poll = None
