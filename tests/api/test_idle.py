"""
The API closes connections that sit idle (C{--api-idle-timeout}, 15 s by
default) and holds at most L{MAX_API_CONNECTIONS} at once: the supervisor
serves it, and every descriptor an idle client holds is one it can't use to
start a worker.
"""

from __future__ import annotations

import os
import re
import select
import socket
import time

import pytest
from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from netlog.api import API_IDLE_TIMEOUT, MAX_API_CONNECTIONS
from netlog.tap.standin import Options
from tests.supervise.running import WAIT, Twistd, waitFor

#: The idle timeout the tests give (seconds): short, so the tests are.
SHORT_IDLE = 2.0
#: The idle timeout of the test of the cap: longer than the test takes.
LONG_IDLE = 120.0
#: How much later than its idle timeout the server may close, at most.
CLOSE_MARGIN = 10.0


def request(s: socket.socket, port: int) -> bytes:
    """
    One keep-alive GET of the log's first page on C{s}; the whole answer.
    """
    s.sendall(f"GET /network HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = s.recv(65536)
        if not chunk:
            raise AssertionError(f"closed before the answer's head: {answer!r}")
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(re.search(rb"(?i)\r\ncontent-length: *(\d+)", head).group(1))  # type: ignore[union-attr]
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            raise AssertionError("closed in the middle of the answer's body")
        body += chunk
    return head


def closedByServer(s: socket.socket) -> bool:
    """
    Whether the server has closed C{s} (reading it says end of file, or
    reset), without waiting.
    """
    readable, _, _ = select.select([s], [], [], 0)
    if not readable:
        return False
    try:
        return s.recv(1, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


class DefaultTests(SynchronousTestCase):
    def test_defaultIdleTimeout(self) -> None:
        """
        Without --api-idle-timeout an API connection may be idle 15 s;
        the option takes seconds, and refuses what isn't a positive number.
        """
        self.assertEqual(API_IDLE_TIMEOUT, 15.0)
        config = Options()
        config.parseOptions(["--api", "tcp:0", "--no-log"])
        self.assertEqual(config["api-idle-timeout"], 15.0)
        config = Options()
        config.parseOptions(["--api", "tcp:0", "--no-log", "--api-idle-timeout", "2.5"])
        self.assertEqual(config["api-idle-timeout"], 2.5)
        for bad in ("0", "-1", "soon"):
            with self.assertRaises(usage.UsageError) as caught:
                Options().parseOptions(["--api", "tcp:0", "--no-log", "--api-idle-timeout", bad])
            self.assertIn("--api-idle-timeout wants", str(caught.exception))


@pytest.mark.slow
class IdleTests(SynchronousTestCase):
    def start(self, idle: float) -> Twistd:
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        twistd = Twistd(
            folder,
            "netlog-standin",
            [
                "--log", os.path.join(folder, "network.jsonl"),
                "--listen", "tcp:0:interface=127.0.0.1",
                "--resolve-only",
                "--no-standby",
                "--api", "tcp:0",
                "--api-token-file", os.path.join(folder, "api-token"),
                "--api-idle-timeout", str(idle),
            ],
        )
        self.addCleanup(twistd.stop)
        self.apiPort = twistd.apiPort()
        return twistd

    def connect(self) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", self.apiPort), timeout=WAIT)
        self.addCleanup(s.close)
        return s

    def assertClosedAfterIdle(self, s: socket.socket, idleSince: float) -> None:
        """
        C{s} is still open halfway through the idle timeout, and closed by
        the server after it (not much later).
        """
        time.sleep(max(0.0, idleSince + SHORT_IDLE / 2 - time.monotonic()))
        self.assertFalse(closedByServer(s), "closed before the idle timeout")
        waitFor(lambda: closedByServer(s), "the server to close the idle connection",
                timeout=SHORT_IDLE + CLOSE_MARGIN)
        self.assertGreaterEqual(time.monotonic() - idleSince, SHORT_IDLE)

    def test_silentConnectionClosed(self) -> None:
        """
        A connection to the API that sends nothing is closed by the server
        once it has been idle for --api-idle-timeout seconds.
        """
        self.start(SHORT_IDLE)
        s = self.connect()
        self.assertClosedAfterIdle(s, time.monotonic())

    def test_keepAliveConnectionClosed(self) -> None:
        """
        A connection that asked for a page and was answered (keep-alive),
        then sends nothing more, is closed by the server once it has been
        idle for --api-idle-timeout seconds after the answer.
        """
        self.start(SHORT_IDLE)
        s = self.connect()
        head = request(s, self.apiPort)
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), head)
        self.assertNotIn(b"connection: close", head.lower())
        self.assertClosedAfterIdle(s, time.monotonic())

    def test_connectionsCapped(self) -> None:
        """
        The API holds at most 64 connections: with 64 served and kept
        alive, a 65th is accepted and closed at once, without an answer,
        and the supervisor says so in its log; the 64 stay open and
        answer, and once one of them is let go a new connection is served.
        """
        twistd = self.start(LONG_IDLE)
        held = []
        for _ in range(MAX_API_CONNECTIONS):
            s = self.connect()
            self.assertTrue(request(s, self.apiPort).startswith(b"HTTP/1.1 200 "))
            held.append(s)
        extra = self.connect()
        extra.sendall(f"GET /network HTTP/1.1\r\nHost: 127.0.0.1:{self.apiPort}\r\n\r\n".encode())
        try:
            self.assertEqual(extra.recv(65536), b"")
        except ConnectionResetError:
            pass  # closed, with a reset: no answer either way
        waitFor(lambda: f"the API holds {MAX_API_CONNECTIONS} connections already; closed 1 more so far"
                in twistd.text(), "the supervisor to log the closed connection")
        self.assertFalse(any(closedByServer(s) for s in held))
        self.assertTrue(request(held[-1], self.apiPort).startswith(b"HTTP/1.1 200 "))
        held.pop(0).close()

        def served() -> bool:
            s = self.connect()
            try:
                return request(s, self.apiPort).startswith(b"HTTP/1.1 200 ")
            except (AssertionError, ConnectionResetError):
                return False
            finally:
                s.close()

        waitFor(served, "a new connection to be served once one is let go")
