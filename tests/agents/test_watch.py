"""
L{netlog.api.watch.LogChanges} on the real reactor and a real file: word
of each write, through a replacement of the file and its making, and
nothing after the last subscriber leaves; and its stand-in where there is
no inotify, on a L{Clock}.
"""

from __future__ import annotations

import os
from typing import Any

from twisted.internet import defer, reactor
from twisted.internet.task import Clock, deferLater
from twisted.trial.unittest import SynchronousTestCase, TestCase

from netlog.api.watch import FALLBACK_INTERVAL, LogChanges

#: Seconds within which word of a write is expected.
PROMPT = 5.0


class InotifyTests(TestCase):

    def setUp(self) -> None:
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        self.path = os.path.join(self.folder, "network.jsonl")
        self.changes = LogChanges(reactor, self.path)  # type: ignore[arg-type]
        self.calls = 0
        self.waiting: defer.Deferred[None] | None = None

    def changed(self) -> None:
        self.calls += 1
        if self.waiting is not None:
            waiting, self.waiting = self.waiting, None
            waiting.callback(None)

    def word(self, act: Any) -> defer.Deferred[None]:
        """
        Do C{act} and fire once word of a change came (or time out).
        """
        self.waiting = defer.Deferred()
        act()
        return self.waiting.addTimeout(PROMPT, reactor)

    def append(self, path: str | None = None) -> None:
        with open(path or self.path, "ab") as f:
            f.write(b'{"n":1}\n')

    @defer.inlineCallbacks
    def test_writesReplacementsAndMaking(self) -> Any:
        """
        Each append is told; a file replaced (renamed over the path) and then
        appended to is told; a log deleted and made again is told; after
        unsubscribing, nothing is.
        """
        self.append()
        unsubscribe = self.changes.subscribe(self.changed)
        yield self.word(self.append)
        yield self.word(self.append)
        other = self.path + ".new"
        yield self.word(lambda: (self.append(other), os.replace(other, self.path)))
        yield deferLater(reactor, 0.05, lambda: None)  # (the watch moves to the new file)
        yield self.word(self.append)
        yield self.word(lambda: os.unlink(self.path))
        yield deferLater(reactor, 0.05, lambda: None)
        yield self.word(self.append)
        yield deferLater(reactor, 0.05, lambda: None)
        yield self.word(self.append)
        unsubscribe()
        before = self.calls
        self.append()
        yield deferLater(reactor, 0.2, lambda: None)
        self.assertEqual(self.calls, before)
        self.assertIsNone(self.changes._notifier)


class FallbackTests(SynchronousTestCase):

    def test_polls(self) -> None:
        """
        Without inotify, the file's size and time are looked at every
        L{FALLBACK_INTERVAL}: a change is told once, no change not at all,
        and the looking stops with the last subscriber.
        """
        import twisted.internet.inotify as inotify

        def broken(**kwargs: Any) -> Any:
            raise OSError("no inotify here")

        self.patch(inotify, "INotify", broken)
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        path = os.path.join(folder, "network.jsonl")
        clock = Clock()
        changes = LogChanges(clock, path)  # type: ignore[arg-type]
        calls: list[None] = []
        unsubscribe = changes.subscribe(lambda: calls.append(None))
        clock.advance(FALLBACK_INTERVAL)
        self.assertEqual(calls, [])
        with open(path, "wb") as f:
            f.write(b"x\n")
        clock.advance(FALLBACK_INTERVAL)
        self.assertEqual(len(calls), 1)
        clock.advance(FALLBACK_INTERVAL)
        self.assertEqual(len(calls), 1)
        with open(path, "ab") as f:
            f.write(b"y\n")
        clock.advance(FALLBACK_INTERVAL)
        self.assertEqual(len(calls), 2)
        unsubscribe()
        self.assertEqual(clock.getDelayedCalls(), [])
