"""
L{netlog.client}'s finding and waiting, and its patience with C{429}: against
a stub API on loopback for the back-off's rules, and against a real
supervised C{twistd netlog-standin} for sessions made 100 at once.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import struct
import threading
import time
from typing import Any, Callable

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import ApiError, ApiUnreachable, Netlog, TooManyRequests, retry_after
from tests.client.support import get, startOrigin, startStandin
from tests.standin.support import tempDirectory

#: Sessions the load test makes at once.
AT_ONCE = 100


def stubApi(addCleanup: Callable[..., Any], answers: list[tuple[int, dict[str, str], dict[str, Any]]]) -> tuple[str, list[float]]:
    """
    An API on loopback that answers each request with the next of
    C{answers} (the last one over and over); its URL, and when each
    request came (monotonic seconds).
    """
    seen: list[float] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            seen.append(time.monotonic())
            status, headers, body = answers[min(len(seen), len(answers)) - 1]
            data = json.dumps(body).encode()
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.answer()

        do_GET = answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    addCleanup(server.server_close)
    addCleanup(server.shutdown)
    return f"http://127.0.0.1:{server.server_address[1]}", seen


def closingApi(addCleanup: Callable[..., Any], closes: int) -> tuple[str, list[str]]:
    """
    An API on loopback that closes its first C{closes} connections as soon
    as it accepts them, with a reset (as the API does past its cap), and
    answers the later ones C{201} with a session; its URL, and what each
    connection got (C{"closed"} or C{"answered"}).
    """
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                if len(got) < closes:
                    got.append("closed")
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    continue
                data = b""
                while b"\r\n\r\n" not in data:
                    data += conn.recv(65536)
                head, _, body = data.partition(b"\r\n\r\n")
                length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                                   if line.lower().startswith(b"content-length:")), b"0"))
                while len(body) < length:
                    body += conn.recv(65536)
                answer = json.dumps(_SESSION).encode()
                got.append("answered")
                conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nConnection: close\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(answer), answer))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    addCleanup(listener.close)
    return f"http://127.0.0.1:{listener.getsockname()[1]}", got


_SESSION = {"name": "s", "port": 1, "proxy": "127.0.0.1:1", "log": "/x"}
_BUSY = (429, {"Retry-After": "1"}, {"error": "sessions are made at most 20 a second; try again"})


class BackOffTests(SynchronousTestCase):
    """
    A 429 is waited out as Retry-After says, within the caller's bound.
    """

    def test_waitsAndSucceeds(self) -> None:
        """Two 429s with Retry-After: 1, then 201: the call succeeds, each try a second (or a little more) apart."""
        url, seen = stubApi(self.addCleanup, [_BUSY, _BUSY, (201, {}, _SESSION)])
        made = Netlog(url, token="t").create_session()
        self.assertEqual(made.name, "s")
        self.assertEqual(len(seen), 3)
        for earlier, later in zip(seen, seen[1:]):
            self.assertGreaterEqual(later - earlier, 1.0)
            self.assertLess(later - earlier, 1.0 + 0.2 + 0.5)

    def test_givesUp(self) -> None:
        """Past retry_within the call raises TooManyRequests, which says how many tries, how long, and what to change."""
        url, seen = stubApi(self.addCleanup, [_BUSY])
        began = time.monotonic()
        with self.assertRaises(TooManyRequests) as caught:
            Netlog(url, token="t", retry_within=2.5).create_session()
        elapsed = time.monotonic() - began
        error = caught.exception
        # retry_within bounds the time spent waiting out the 429s, which it
        # did (each try's own round trip comes on top: tenths of a second on
        # a loaded machine)
        self.assertLessEqual(error.waited, 2.5)
        self.assertGreaterEqual(error.waited, 1.0 * (len(seen) - 1))
        self.assertGreaterEqual(elapsed, error.waited)
        self.assertIsInstance(error, ApiError)
        self.assertEqual((error.status, error.tries), (429, len(seen)))
        self.assertIn(len(seen), (2, 3))
        self.assertIn("sessions are made at most 20 a second", str(error))
        self.assertIn(f"gave up after {len(seen)} tries", str(error))
        self.assertIn("retry_within=2.5 s; give a larger one to wait longer", str(error))

    def test_noPatience(self) -> None:
        """retry_within=0 raises at the first 429."""
        url, seen = stubApi(self.addCleanup, [_BUSY])
        self.assertRaises(TooManyRequests, Netlog(url, token="t", retry_within=0).create_session)
        self.assertEqual(len(seen), 1)

    def test_withoutRetryAfter(self) -> None:
        """A 429 that doesn't say when to come back, and any other error, raise at once."""
        url, seen = stubApi(self.addCleanup, [(429, {}, {"error": "no"})])
        with self.assertRaises(ApiError) as caught:
            Netlog(url, token="t").create_session()
        self.assertNotIsInstance(caught.exception, TooManyRequests)
        self.assertEqual(len(seen), 1)

    def test_closedUnanswered(self) -> None:
        """A connection closed without an answer (the API past its cap) is tried again, after a moment."""
        url, got = closingApi(self.addCleanup, 3)
        self.assertEqual(Netlog(url, token="t").create_session().name, "s")
        self.assertEqual(got, ["closed", "closed", "closed", "answered"])

    def test_closedUnansweredGivesUp(self) -> None:
        """Past retry_within, a call whose connections keep being closed raises ApiUnreachable saying so."""
        url, got = closingApi(self.addCleanup, 1000)
        with self.assertRaises(ApiUnreachable) as caught:
            Netlog(url, token="t", retry_within=1).create_session()
        self.assertGreater(len(got), 2)
        self.assertRegex(str(caught.exception), r"Connection reset by peer\S*, \d+ times over \d\.\d s "
                                                r"\(retry_within=1 s\)")

    def test_refusedAtOnce(self) -> None:
        """An API that isn't listening is unreachable at once: no retrying."""
        from tests.support import freePort

        began = time.monotonic()
        with self.assertRaises(ApiUnreachable) as caught:
            Netlog(f"http://127.0.0.1:{freePort()}", token="t").create_session()
        self.assertLess(time.monotonic() - began, 1.0)
        self.assertIn("Connection refused", str(caught.exception))

    def test_retryAfterForms(self) -> None:
        """Retry-After is seconds or an HTTP date; anything else is not read."""
        self.assertEqual(retry_after("3"), 3.0)
        self.assertEqual(retry_after("Sun, 06 Nov 1994 08:49:40 GMT", now=784111770.0), 10.0)
        self.assertEqual(retry_after("Sun, 06 Nov 1994 08:49:40 GMT", now=784111790.0), 0.0)
        for bad in (None, "", "soon", "-1", "1.5"):
            self.assertIsNone(retry_after(bad), bad)


@pytest.mark.slow
class RealApiTests(SynchronousTestCase):
    """
    The client against a real supervised stand-in.
    """

    def setUp(self) -> None:
        folder = tempDirectory(self)
        self.originPort, self.release = startOrigin(self.addCleanup)
        self.twistd, self.api = startStandin(folder, self.addCleanup,
                                             ["--resolve", "origin.test=127.0.0.1", "--state", folder])
        self.client = Netlog(self.api, token_file=os.path.join(folder, "api-token"))

    def test_findExchangeWaitFor(self) -> None:
        """
        find, exchange and wait_for on a session: the one exchange a filter
        names, read whole; a wait that a later request ends; None after a
        timeout with nothing to find.
        """
        with self.client.session("agents") as session:
            url = f"http://origin.test:{self.originPort}"
            self.assertEqual(get(session.proxy, url + "/first"), 200)
            found = session.find("url:/first")
            [summary] = found.exchanges
            self.assertEqual((summary["url"], summary["status"], found.more), (url + "/first", 200, False))
            whole = session.exchange(summary["id"])
            self.assertEqual(whole["request"]["url"], url + "/first")
            self.assertEqual(whole["response"]["status"], 200)
            self.assertEqual(session.wait_for("url:/first", 5)["id"], summary["id"])
            later = threading.Timer(0.5, get, (session.proxy, url + "/later"))
            later.start()
            began = time.monotonic()
            waited = session.wait_for("url:/later", 20, after=found.next)
            later.join()
            self.assertEqual(waited["url"], url + "/later")
            self.assertLess(time.monotonic() - began, 5)
            began = time.monotonic()
            self.assertIsNone(session.wait_for("url:/never", 1, after=found.next))
            self.assertGreaterEqual(time.monotonic() - began, 1.0)
            with self.assertRaises(ApiError) as caught:
                session.find("status:abc")
            self.assertEqual(caught.exception.status, 400)
            self.assertIn("status takes 200, 4xx or 400-499", str(caught.exception))
            self.assertEqual(self.client.find("url:/first").exchanges, [])

    def test_hundredAtOnce(self) -> None:
        """
        100 sessions made at once, each from its own thread, all succeed: the
        API's 429s (20 a second) are waited out, and the connections it closes
        past its 64 are tried again. The time it took is printed.
        """
        made: list[Any] = [None] * AT_ONCE
        failed: list[BaseException] = []
        start = threading.Barrier(AT_ONCE)

        def make(i: int) -> None:
            start.wait()
            try:
                made[i] = self.client.create_session(f"a{i}")
            except BaseException as e:
                failed.append(e)

        threads = [threading.Thread(target=make, args=(i,)) for i in range(AT_ONCE)]
        began = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        took = time.monotonic() - began
        print(f"\n{AT_ONCE} sessions made at once in {took:.2f} s")
        self.assertEqual(failed, [])
        self.assertEqual(sorted(s.name for s in made), sorted(f"a{i}" for i in range(AT_ONCE)))
        self.assertEqual(len({s.port for s in made}), AT_ONCE)
        self.assertEqual(sorted(s.name for s in self.client.sessions()), sorted(f"a{i}" for i in range(AT_ONCE)))
