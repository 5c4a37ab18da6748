"""
Twisted's ports' own start and stop lines are dropped from what netlog logs
(L{netlog.net.chatter}), and nothing else is: real ports on loopback, with
Twisted's real log calls.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import reactor
from twisted.internet.defer import inlineCallbacks
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger, globalLogPublisher
from twisted.python import log as legacyLog
from twisted.trial.unittest import SynchronousTestCase, TestCase

from netlog.net.chatter import isPortChatter, withoutPortChatter


def texts(events: list[dict[str, Any]]) -> list[str]:
    return [event.get("log_text") or event.get("log_format", "") for event in events]


class PortLinesTests(TestCase):
    @inlineCallbacks
    def test_portStartAndStop(self) -> None:
        """
        A real TCP port's C{... starting on N} and C{(TCP Port N Closed)}
        reach an observer as they are, and not one behind
        L{withoutPortChatter}.
        """
        everything: list[dict[str, Any]] = []
        quiet: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(everything.append)
        self.addCleanup(globalLogPublisher.removeObserver, everything.append)
        filtered = withoutPortChatter(quiet.append)
        globalLogPublisher.addObserver(filtered)
        self.addCleanup(globalLogPublisher.removeObserver, filtered)
        port = reactor.listenTCP(0, Factory.forProtocol(Protocol), interface="127.0.0.1")  # type: ignore[attr-defined]
        number = port.getHost().port
        yield port.stopListening()
        said = texts(everything)
        self.assertIn(f"Factory starting on {number}", said)
        self.assertIn(f"(TCP Port {number} Closed)", said)
        self.assertEqual([t for t in texts(quiet) if str(number) in t], [])


class WhatIsChatterTests(SynchronousTestCase):
    def caught(self, say: Any) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        globalLogPublisher.addObserver(events.append)
        try:
            say()
        finally:
            globalLogPublisher.removeObserver(events.append)
        return events

    def test_portLines(self) -> None:
        """
        The shapes Twisted's ports say, through Twisted's legacy C{log.msg}.
        """
        for line in ["BrowserFactory starting on 3128", "Factory starting on 0",
                     "Site (CappedFactory) starting on 45751",
                     "(TCP Port 3128 Closed)", "(UNIX Port /tmp/s Closed)"]:
            [event] = self.caught(lambda: legacyLog.msg(line))
            self.assertTrue(isPortChatter(event), line)

    def test_otherLines(self) -> None:
        """
        Lines of other shapes, netlog's own (with a format) even when their
        words match, and errors are kept.
        """
        for line in ["worker 12: BrowserFactory starting on 3128", "Factory starting on 3128 now",
                     "(TCP Port 3128 Closed) again", "Received SIGTERM, shutting down."]:
            [event] = self.caught(lambda: legacyLog.msg(line))
            self.assertFalse(isPortChatter(event), line)
        [event] = self.caught(lambda: Logger(namespace="netlog.test").info("{what}", what="Factory starting on 1"))
        self.assertFalse(isPortChatter(event))
        [event] = self.caught(lambda: Logger(namespace="netlog.test").info("Factory starting on 1"))
        self.assertFalse(isPortChatter(event))
        [event] = self.caught(lambda: legacyLog.msg("Factory starting on 1", isError=True))
        self.assertFalse(isPortChatter(event))
