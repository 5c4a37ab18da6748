"""
The HAR of lines a real proxy wrote: a C{twistd netlog-standin} turns
requests down and fails others, answering the browser itself; its log keeps
that answer as the response, and the HAR counts those entries as ones that
got no answer (status -1, netlog's status in C{_refused} or C{_failed}).
"""

from __future__ import annotations

from typing import Any

import pytest
from twisted.internet import defer
from twisted.trial import unittest

from tests.har.support import export, validate
from tests.standin.support import Standin, inThread, listenOrigin, rawExchange, tempDirectory
from tests.support import freePort


@pytest.mark.slow
class StandinLinesTests(unittest.TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def setUp(self) -> Any:
        self.origin, self.originPort = listenOrigin(self)
        self.closedPort = freePort()
        self.standin = Standin(self, tempDirectory(self), ["--resolve", "origin.test=127.0.0.1"])
        yield self.standin.start()

    @defer.inlineCallbacks
    def test_refusedAndFailed(self) -> Any:
        """
        A CONNECT to a port that isn't allowed (403) and a malformed request
        (400) are refused; a closed port and a host that doesn't resolve
        fail with netlog's 502. The proxy's log has each answer as the
        response; in the HAR the refusals have status -1 and the status in
        _refused, the failures status -1 and the reason and status in
        _failed; an answered request keeps its 200. The HAR passes the
        schema.
        """
        o = f"origin.test:{self.originPort}"
        closed = f"origin.test:{self.closedPort}"
        requests = [
            ("ok", f"GET http://{o}/hello HTTP/1.1\r\nHost: {o}\r\nConnection: close\r\n\r\n"),
            ("port", "CONNECT origin.test:25 HTTP/1.1\r\nHost: origin.test:25\r\n\r\n"),
            ("malformed", f"GET http://{o}/hello HTTP/1.1\r\nHost: {o}\r\nContent-Length: +1\r\n\r\n"),
            ("closed", f"GET http://{closed}/x HTTP/1.1\r\nHost: {closed}\r\n\r\n"),
            ("unresolved", "GET http://nowhere.test/x HTTP/1.1\r\nHost: nowhere.test\r\n\r\n"),
        ]

        def run() -> list[bytes]:
            return [rawExchange(self.standin.port, raw.encode()) for _, raw in requests]

        answers = yield inThread(run)
        statuses = [int(answer.split(b" ", 2)[1]) for answer in answers]
        self.assertEqual(statuses, [200, 403, 400, 502, 502])
        yield self.standin.waitEnded(len(requests))
        ends = [end for _, (_, end) in sorted(self.standin.entries().items())]
        # what the proxy logged: its own answer, as the browser got it
        self.assertEqual([end["response"]["status"] for end in ends], statuses)

        with open(self.standin.log, "rb") as f:
            har, raw, result = export(f.read())
        self.assertEqual(validate(raw), [])
        self.assertEqual((result.entries, result.unreadable), (len(requests), 0))
        entries = har["log"]["entries"]
        ok, port, malformed, closedEntry, unresolved = entries
        self.assertEqual(ok["response"]["status"], 200)
        self.assertEqual(ok["response"]["content"]["size"], len(b"hello"))
        for entry, status in ((port, 403), (malformed, 400)):
            self.assertEqual(entry["response"]["status"], -1)
            self.assertEqual(entry["response"]["headers"], [])
            self.assertEqual(entry["_refused"]["status"], status)
            self.assertTrue(entry["_refused"]["reason"])
        self.assertEqual(port["request"]["url"], "https://origin.test:25/")
        for entry, end in ((closedEntry, ends[3]), (unresolved, ends[4])):
            self.assertTrue(entry["_failed"]["reason"])
            self.assertNotIn("_refused", entry)
            self.assertEqual(end["_failed"]["status"], 502)
            self.assertEqual(entry["response"]["status"], -1)
            self.assertEqual(entry["_failed"]["status"], 502)
