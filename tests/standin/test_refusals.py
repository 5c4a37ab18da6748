"""
Strict parsing before connecting anywhere: each malformed request a real
stand-in gets is answered with the right status, logged with C{_refused}, never
reaches the origin, and nothing after it on the connection is read.

(The reader's own exhaustive byte tables and hypothesis tests are in
C{tests/core}; these check that the proxy acts on what it says.)
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import pytest
from twisted.internet import defer
from twisted.trial import unittest

from tests.standin.support import Standin, inThread, listenOrigin, rawExchange, tempDirectory

#: How long a client waits for the origin to see a request's head.
WAIT_FOR_ORIGIN = 10.0


def cases(o: str) -> list[tuple[str, bytes, int]]:
    """
    (name, raw bytes, status) for an origin at authority C{o}.
    """
    def req(extra: str, body: str = "") -> bytes:
        return (f"POST http://{o}/upload HTTP/1.1\r\nHost: {o}\r\n" + extra + "\r\n" + body).encode()

    return [
        ("CL and TE", req("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", "0\r\n\r\n"), 400),
        ("differing CL", req("Content-Length: 5\r\nContent-Length: 6\r\n", "hello"), 400),
        ("CL sign", req("Content-Length: +5\r\n", "hello"), 400),
        ("CL space inside", req("Content-Length: 5 5\r\n", "hello"), 400),
        ("CL hex", req("Content-Length: 0x5\r\n", "hello"), 400),
        ("CL overflow", req("Content-Length: 99999999999999999999\r\n"), 400),
        ("CL empty", req("Content-Length: \r\n"), 400),
        # Smuggling: dropping a Connection-listed Content-Length would let the
        # body be read upstream as a second request that the log never saw.
        ("Connection names CL", req("Connection: Content-Length\r\nContent-Length: 33\r\n",
                                    f"GET /admin HTTP/1.1\r\nHost: {o}\r\n\r\n"), 400),
        ("TE gzip then chunked", req("Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n"), 501),
        ("TE chunked not last", req("Transfer-Encoding: chunked, gzip\r\n", "0\r\n\r\n"), 400),
        ("TE unknown", req("Transfer-Encoding: identity\r\n"), 501),
        ("bad chunk size", req("Transfer-Encoding: chunked\r\n", "zz\r\nhello\r\n0\r\n\r\n"), 400),
        ("bad chunk line", req("Transfer-Encoding: chunked\r\n", "5\nhello\r\n0\r\n\r\n"), 400),
        ("space before colon", req("X-A : 1\r\n"), 400),
        ("obs-fold", req("X-A: 1\r\n 2\r\n"), 400),
        ("NUL", req("X-A: a\x00b\r\n"), 400),
        ("bare CR", req("X-A: a\rb\r\n"), 400),
        ("bare LF", req("X-A: a\nX-B: b\r\n"), 400),
        ("two-part line", f"GET http://{o}/\r\n\r\n".encode(), 505),
        ("four-part line", f"GET http://{o}/ x HTTP/1.1\r\nHost: {o}\r\n\r\n".encode(), 400),
        ("origin form", f"GET / HTTP/1.1\r\nHost: {o}\r\n\r\n".encode(), 400),
        ("asterisk", f"OPTIONS * HTTP/1.1\r\nHost: {o}\r\n\r\n".encode(), 400),
        ("Host disagrees", f"GET http://{o}/ HTTP/1.1\r\nHost: other.test\r\n\r\n".encode(), 400),
        ("two Hosts", f"GET http://{o}/ HTTP/1.1\r\nHost: {o}\r\nHost: {o}\r\n\r\n".encode(), 400),
        ("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
        ("HTTP/1.2", f"GET http://{o}/ HTTP/1.2\r\nHost: {o}\r\n\r\n".encode(), 505),
        ("long request line", f"GET http://{o}/{'a' * 9000} HTTP/1.1\r\nHost: {o}\r\n\r\n".encode(), 414),
        ("large head", req("".join(f"X-{i}: {'v' * 1000}\r\n" for i in range(70))), 431),
        ("many fields", req("".join(f"X-{i}: v\r\n" for i in range(101))), 431),
    ]


@pytest.mark.slow
class RefusalTests(unittest.TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def setUp(self) -> Any:
        self.origin, self.originPort = listenOrigin(self)
        directory = tempDirectory(self)
        self.standin = Standin(self, directory, ["--resolve", "origin.test=127.0.0.1",
                                                 "--header-timeout", "1"])
        yield self.standin.start()
        self.o = f"origin.test:{self.originPort}"

    @defer.inlineCallbacks
    def test_table(self) -> Any:
        """
        Every malformed message gets its status, a closed connection, a
        C{_refused} entry, and never reaches the origin.
        """
        table = cases(self.o)

        def run() -> list[bytes]:
            return [rawExchange(self.standin.port, raw) for _, raw, _ in table]

        answers = yield inThread(run)
        for (name, _, status), answer in zip(table, answers):
            self.assertTrue(answer.startswith(b"HTTP/1.1 %d " % status), (name, answer[:80]))
            self.assertIn(b"Connection: close\r\n", answer, name)
        entries = yield self.standin.waitEnded(len(table))
        ended = [end for _, end in entries.values()]
        self.assertEqual([e["_refused"]["status"] for e in ended], [s for _, _, s in table])
        for opened, end in entries.values():
            self.assertEqual(opened["type"], "open")
            self.assertTrue(end["_refused"]["reason"])
            self.assertEqual(end["response"]["status"], end["_refused"]["status"])
        # Each entry says what was refused: the request line as sent.
        opens = [opened["request"] for opened, _ in entries.values()]
        for (name, raw, _), request in zip(table, opens):
            line = raw.split(b"\r\n", 1)[0].split(b"\n", 1)[0].split(b" ")
            self.assertEqual(request["method"], line[0].decode("latin-1"), name)
            if len(line) >= 2 and line[1].startswith(b"http://"):
                target = line[1].decode("latin-1")
                if len(raw.split(b"\r\n", 1)[0]) > 8192:
                    # A request line past its limit is logged as far as 8 KiB.
                    self.assertTrue(target.startswith(request["url"]) and len(request["url"]) > 8000, name)
                else:
                    self.assertEqual(request["url"], target, name)
        self.assertEqual(self.origin.requests, [])
        self.assertEqual(self.origin.connections, 0)

    @defer.inlineCallbacks
    def test_nothingReadAfterRefusal(self) -> Any:
        """
        A valid request after a refused one on the same connection is never
        read as a request.
        """
        o = self.o
        raw = (
            f"GET http://{o}/hello HTTP/1.1\r\nHost: {o}\r\nContent-Length: +1\r\n\r\n"
            f"GET http://{o}/hello HTTP/1.1\r\nHost: {o}\r\n\r\n"
        ).encode()
        answer = yield inThread(rawExchange, self.standin.port, raw)
        self.assertEqual(answer.count(b"HTTP/1.1 "), 1)
        self.assertTrue(answer.startswith(b"HTTP/1.1 400 "))
        entries = yield self.standin.waitEnded(1)
        self.assertEqual(len(entries), 1)
        self.assertEqual(self.origin.requests, [])

    @defer.inlineCallbacks
    def test_pipelinedThenRefused(self) -> Any:
        """
        A good request answered, then a malformed one pipelined behind it
        refused: one answer each, and only the first reached the origin.
        """
        o = self.o
        raw = (
            f"GET http://{o}/hello HTTP/1.1\r\nHost: {o}\r\n\r\n"
            f"GET http://{o}/hello HTTP/1.1\r\nHost : {o}\r\n\r\n"
        ).encode()
        answer = yield inThread(rawExchange, self.standin.port, raw)
        self.assertTrue(answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer)
        self.assertIn(b"hello", answer)
        self.assertEqual(answer.count(b"HTTP/1.1 400 "), 1)
        yield self.standin.waitEnded(2)
        self.assertEqual(len(self.origin.requests), 1)

    @defer.inlineCallbacks
    def test_badChunkAfterHeadWentUp(self) -> Any:
        """
        A chunk that turns out malformed after the head went up cuts both
        connections; the browser gets 400 and the entry says why.
        """
        o = self.o

        def run() -> bytes:
            with socket.create_connection(("127.0.0.1", self.standin.port), timeout=10) as s:
                s.sendall(
                    f"POST http://{o}/upload HTTP/1.1\r\nHost: {o}\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".encode()
                )
                # The bad chunk must come after the head went up: wait
                # until the origin has it (bounded), not for a fixed time.
                deadline = time.monotonic() + WAIT_FOR_ORIGIN
                while not self.origin.requests:
                    if time.monotonic() > deadline:
                        raise AssertionError("the head never reached the origin")
                    time.sleep(0.01)
                s.sendall(b"nothex\r\n")
                data = b""
                while True:
                    piece = s.recv(4096)
                    if not piece:
                        return data
                    data += piece

        answer = yield inThread(run)
        self.assertTrue(answer.startswith(b"HTTP/1.1 400 "), answer)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["_refused"]["status"], 400)
        self.assertEqual(ended["request_body"]["size"], 5)

    @defer.inlineCallbacks
    def test_headerTimeout(self) -> Any:
        """
        A head begun and not finished within C{--header-timeout} gets 408 and
        a C{_refused} entry whose response is that 408.
        """
        def run() -> bytes:
            with socket.create_connection(("127.0.0.1", self.standin.port), timeout=10) as s:
                s.sendall(f"GET http://{self.o}/hello HTTP/1.1\r\n".encode())
                data = b""
                while True:
                    piece = s.recv(4096)
                    if not piece:
                        return data
                    data += piece

        answer = yield inThread(run)
        self.assertTrue(answer.startswith(b"HTTP/1.1 408 "), answer)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["_refused"]["status"], 408)
        # The logged response is the answer the browser got.
        self.assertEqual(ended["response"]["status"], 408)
        self.assertEqual(ended["bytes"]["down"], len(answer))
        self.assertEqual(ended["bytes"]["up"], len(f"GET http://{self.o}/hello HTTP/1.1\r\n"))
