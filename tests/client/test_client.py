"""
L{netlog.client}: its URL and token rules, what it sends, its errors, and
the whole client against a real supervised C{twistd netlog-standin}.
"""

from __future__ import annotations

import http.server
import json
import os
import signal
import socket
import threading
import time
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import ApiError, ApiUnreachable, Netlog, NoTokenFile, Session, api_url, read_token
from tests.client.support import Follower, get, startOrigin, startStandin
from tests.har.support import validate
from tests.standin.support import tempDirectory
from tests.supervise.running import alive, checkLog, readLog, waitFor
from tests.support import freePort


class URLTests(SynchronousTestCase):
    def test_forms(self) -> None:
        """
        The API's URL may be given with or without C{http://}; a trailing
        C{/} is dropped; C{$NETLOG_API} is read when none is given.
        """
        self.patch(os, "environ", {"NETLOG_API": "127.0.0.1:8090"})
        for given, expected in [
            ("http://127.0.0.1:8081", "http://127.0.0.1:8081"),
            ("http://127.0.0.1:8081/", "http://127.0.0.1:8081"),
            ("127.0.0.1:8081", "http://127.0.0.1:8081"),
            ("localhost:8081", "http://localhost:8081"),
            ("https://netlog.internal/api/", "https://netlog.internal/api"),
            (None, "http://127.0.0.1:8090"),
        ]:
            self.assertEqual(api_url(given), expected, given)

    def test_mistakes(self) -> None:
        """
        A bare port, twistd's endpoint description, another scheme or a bad
        port is refused with a message that shows how to write it; no URL and
        no C{$NETLOG_API} says to give one.
        """
        for given, shown in [
            ("8081", "http://127.0.0.1:8081"),
            ("tcp:8081", "http://127.0.0.1:8081"),
            ("tcp:8081:interface=127.0.0.1", "http://127.0.0.1:8081"),
            ("unix:/run/netlog.sock", "http://127.0.0.1:PORT"),
            ("ftp://127.0.0.1:8081", "http://127.0.0.1:PORT"),
            ("http://127.0.0.1:80x", "http://127.0.0.1:PORT"),
            ("http://", "http://127.0.0.1:PORT"),
        ]:
            with self.assertRaises(ValueError) as caught:
                api_url(given)
            self.assertIn(shown, str(caught.exception), given)
        self.patch(os, "environ", {})
        with self.assertRaises(ValueError) as caught:
            api_url(None)
        self.assertIn("NETLOG_API", str(caught.exception))


class TokenTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = tempDirectory(self)
        self.file = os.path.join(self.folder, "api-token")
        with open(self.file, "w") as f:
            f.write("from-the-file\n")

    def test_order(self) -> None:
        """
        The token given wins over C{$NETLOG_API_TOKEN}, which wins over the
        file; the file's token has its newline stripped.
        """
        self.patch(os, "environ", {"NETLOG_API_TOKEN": "from-env"})
        self.assertEqual(read_token("given", self.file), "given")
        self.assertEqual(read_token(None, self.file), "from-env")
        self.patch(os, "environ", {})
        self.assertEqual(read_token(None, self.file), "from-the-file")

    def test_defaultFile(self) -> None:
        """
        Without a file named, the token is read from C{api-token} in the
        state folder (C{$XDG_STATE_HOME/netlog} for a user but root).
        """
        if os.geteuid() == 0:
            from netlog.state import defaultState

            self.assertEqual(defaultState(), "/var/lib/netlog")
            return
        os.mkdir(os.path.join(self.folder, "netlog"))
        os.rename(self.file, os.path.join(self.folder, "netlog", "api-token"))
        self.patch(os, "environ", {"XDG_STATE_HOME": self.folder})
        self.assertEqual(read_token(), "from-the-file")

    def test_none(self) -> None:
        """
        No token anywhere (an empty file) is None: reads need none.
        """
        self.patch(os, "environ", {})
        with open(self.file, "w"):
            pass
        self.assertIsNone(read_token(None, self.file))

    def test_fileNamedIsMissing(self) -> None:
        """
        A token file named that does not exist, or is a folder, is a
        mistake (L{NoTokenFile}, saying which), not "no token": the token
        would never be sent.
        """
        self.patch(os, "environ", {})
        missing = os.path.join(self.folder, "missing")
        with self.assertRaises(NoTokenFile) as caught:
            read_token(None, missing)
        self.assertEqual(str(caught.exception), f"the token file {missing} does not exist")
        with self.assertRaises(NoTokenFile) as caught:
            Netlog("http://127.0.0.1:1", token_file=self.folder)
        self.assertEqual(str(caught.exception), f"the token file {self.folder} is a folder")


class _Recorder(http.server.BaseHTTPRequestHandler):
    """
    An API that wants C{Bearer right} on what changes things, and records
    each request's method, path and headers.
    """

    protocol_version = "HTTP/1.1"
    seen: list[tuple[str, str, dict[str, str]]]

    def _answer(self) -> None:
        self.seen.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        body: dict[str, Any]
        if self.command != "GET" and self.headers.get("Authorization") != "Bearer right":
            status, body = 401, {"error": "this needs the API's token"}
        elif self.command == "POST":
            status, body = 201, {"name": "t", "port": 1, "proxy": "127.0.0.1:1", "log": "/x.jsonl"}
        elif self.command == "DELETE":
            status, body = 200, {"name": "t", "log": "/x.jsonl", "last": 0}
        else:
            status, body = 200, {"sessions": []}
        raw = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        pass


class RequestTests(SynchronousTestCase):
    """
    What the client sends and how it fails, against loopback servers of the
    test's own.
    """

    def setUp(self) -> None:
        self.seen: list[tuple[str, str, dict[str, str]]] = []
        handler = type("Handler", (_Recorder,), {"seen": self.seen})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}"
        self.patch(os, "environ", {"http_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"})

    def test_tokenAndType(self) -> None:
        """
        Every request carries C{Authorization: Bearer TOKEN}; a C{POST} and a
        C{DELETE} also C{Content-Type: application/json}. The environment's
        C{http_proxy} is not used (the API is on loopback).
        """
        nl = Netlog(self.url, token="right")
        nl.sessions()
        made = nl.create_session("t")
        self.assertEqual(made.proxy, "http://127.0.0.1:1")
        made.delete()
        self.assertEqual([(m, p) for m, p, _ in self.seen],
                         [("GET", "/sessions"), ("POST", "/sessions"), ("DELETE", "/sessions/t?timeout=10")])
        for method, _, headers in self.seen:
            self.assertEqual(headers["authorization"], "Bearer right", method)
            if method != "GET":
                self.assertEqual(headers["content-type"], "application/json", method)

    def test_deleteFailsToo(self) -> None:
        """
        When the block of C{with nl.session()} raises and the delete fails
        too (the API went away), the block's exception is the one raised,
        with a note that the delete failed; without an exception of the
        block's, the delete's own is raised.
        """
        nl = Netlog(self.url, token="right")
        with self.assertRaises(RuntimeError) as caught:
            with nl.session("t"):
                self.server.shutdown()
                self.server.server_close()
                raise RuntimeError("the task failed")
        self.assertEqual(len(caught.exception.__notes__), 1)
        self.assertIn("deleting session t failed too", caught.exception.__notes__[0])
        self.assertIn("can't be reached", caught.exception.__notes__[0])
        with self.assertRaises(ApiUnreachable):
            with Session(nl, {"name": "u", "port": 1, "proxy": "127.0.0.1:1", "log": "/u.jsonl"}):
                pass

    def test_wrongToken(self) -> None:
        """
        A wrong token is an L{ApiError} that carries the 401 and the API's
        JSON error, and says where a token comes from.
        """
        with self.assertRaises(ApiError) as caught:
            Netlog(self.url, token="wrong").create_session("t")
        self.assertEqual(caught.exception.status, 401)
        self.assertEqual(caught.exception.error, {"error": "this needs the API's token"})
        self.assertIn("NETLOG_API_TOKEN", str(caught.exception))
        self.assertIn("token=...", str(caught.exception))
        self.assertNotIsInstance(caught.exception, ApiUnreachable)

    def test_notRunning(self) -> None:
        """
        An API that is not running is L{ApiUnreachable}, not an L{ApiError}.
        """
        with self.assertRaises(ApiUnreachable) as caught:
            Netlog(f"http://127.0.0.1:{freePort()}").sessions()
        self.assertNotIsInstance(caught.exception, ApiError)
        self.assertIn("refused", caught.exception.reason.lower())

    def test_timeout(self) -> None:
        """
        An API that accepts and never answers is L{ApiUnreachable} once the
        call's timeout has passed.
        """
        silent = socket.socket()
        self.addCleanup(silent.close)
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        nl = Netlog(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5)
        with self.assertRaises(ApiUnreachable) as caught:
            nl.read()
        self.assertEqual(caught.exception.reason, "timed out")


@pytest.mark.slow
class StandinTests(SynchronousTestCase):
    """
    The client against a real supervised C{twistd netlog-standin --api}.
    """

    def setUp(self) -> None:
        self.originPort, self.release = startOrigin(self.addCleanup)
        self.folder = tempDirectory(self)
        self.twistd, self.api = startStandin(self.folder, self.addCleanup, [
            "--resolve", "origin.test=127.0.0.1", "--connect-ports", f"443,{self.originPort}"])

    def url(self, path: str) -> str:
        return f"http://origin.test:{self.originPort}{path}"

    def test_sessions(self) -> None:
        """
        A session made, listed, used, exported and deleted through the
        client: its HAR (streamed to a file) holds its requests and passes
        the HAR schema; a deleted session is a 404 L{ApiError} with the API's
        error; the main log holds nothing.
        """
        with Netlog(self.api) as nl:
            made = nl.create_session("task-17")
            self.assertEqual(made.proxy, f"http://127.0.0.1:{made.port}")
            self.assertEqual([s.name for s in nl.sessions()], ["task-17"])
            self.assertEqual(nl.get_session("task-17").port, made.port)
            for i in range(3):
                self.assertEqual(get(made.proxy, self.url(f"/page-{i}")), 200)
            self.assertTrue(made.wait_ended())
            path = os.path.join(self.folder, "task-17.har")
            self.assertGreater(made.save_har(path), 0)
            self.assertFalse(os.path.exists(path + ".part"))
            with open(path, "rb") as f:
                har = f.read()
            self.assertEqual(validate(har), [])
            self.assertEqual([e["request"]["url"] for e in json.loads(har)["log"]["entries"]],
                             [self.url(f"/page-{i}") for i in range(3)])
            self.assertEqual(made.read().lines[0]["request"]["url"], self.url("/page-0"))
            deleted = made.delete()
            self.assertEqual(deleted["last"], 6)
            self.assertEqual(nl.sessions(), [])
            with self.assertRaises(ApiError) as caught:
                nl.delete_session("task-17")
            self.assertEqual(caught.exception.status, 404)
            self.assertIn("no session", caught.exception.message)
            with self.assertRaises(ApiError) as caught:
                nl.create_session("bad/name")
            self.assertEqual(caught.exception.status, 400)
            with self.assertRaises(ApiError) as caught:
                nl.ca()
            self.assertEqual(caught.exception.status, 404)
        self.assertEqual(readLog(os.path.join(self.folder, "network.jsonl")), [])

    def test_exceptionDeletes(self) -> None:
        """
        An exception inside C{with nl.session(...)} still deletes the
        session, and the delete waits for its open exchange as C{DELETE}
        does (here 1 s, then ends it as stopped); the exception is the one
        that leaves the block.
        """
        held: list[BaseException] = []

        def hold(proxy: str) -> None:
            try:
                get(proxy, self.url("/hold"))
            except OSError as e:  # the delete ends it
                held.append(e)

        with self.assertRaises(RuntimeError):
            with Netlog(self.api) as nl, nl.session("task-17", stop_timeout=1) as s:
                self.assertEqual(get(s.proxy, self.url("/before")), 200)
                holder = threading.Thread(target=hold, args=(s.proxy,), daemon=True)
                holder.start()
                waitFor(lambda: s.open_exchanges(), "the held request's open line")
                raise RuntimeError("the task failed")
        self.assertEqual(Netlog(self.api).sessions(), [])
        holder.join(10)
        self.assertEqual(len(held), 1)
        records = readLog(s.log)
        checkLog(self, records)
        self.assertEqual(s.deleted, {"name": "task-17", "log": s.log, "last": len(records)})
        [stopped] = [r for r in records if r["type"] == "end" and "_failed" in r]
        self.assertEqual(stopped["_failed"]["reason"], "the proxy stopped")
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()

    def test_followAcrossWorkerKill(self) -> None:
        """
        C{follow(after=0)} yields every line of the log once and in order,
        as they come, across a C{kill -9} of the serving worker: requests
        before and after, and the end line the next worker writes for the
        exchange the dead one left open.
        """
        nl = Netlog(self.api)
        proxy = f"http://127.0.0.1:{self.twistd.listenerPort('forward')}"
        follower = Follower(nl, lambda line: line["type"] == "open" and line["request"]["url"].endswith("/last"),
                            after=0, poll=0.05)
        seen = follower.seen
        for i in range(3):
            self.assertEqual(get(proxy, self.url(f"/before-{i}")), 200)
        waitFor(lambda: len(seen) >= 6, "the follower to see the first lines")
        hold = socket.create_connection(("127.0.0.1", int(proxy.rsplit(":", 1)[1])), timeout=10)
        self.addCleanup(hold.close)
        hold.sendall(f"GET {self.url('/hold')} HTTP/1.1\r\nHost: origin.test:{self.originPort}\r\n\r\n".encode())
        waitFor(lambda: len(seen) >= 7, "the held request's open line")
        worker = self.twistd.waitServing(1)
        os.kill(worker, signal.SIGKILL)
        waitFor(lambda: not alive(worker), "the worker to die")
        for i in range(3):
            self.assertEqual(get(proxy, self.url(f"/after-{i}")), 200)
        self.assertEqual(get(proxy, self.url("/last")), 200)
        follower.thread.join(30)
        self.assertFalse(follower.thread.is_alive())
        self.assertEqual(follower.failed, [])
        self.assertGreaterEqual(self.twistd.servingCount(), 2)
        records = readLog(os.path.join(self.folder, "network.jsonl"))
        self.assertEqual([r["n"] for r in seen], list(range(1, len(seen) + 1)))
        self.assertEqual(seen, records[:len(seen)])
        restarted = [r for r in seen if r["type"] == "end" and r.get("_failed", {}).get("reason") == "the proxy restarted"]
        self.assertEqual(len(restarted), 1)
        self.assertEqual(len([r for r in seen if r["type"] == "open"]), 8)
        # From a cursor: the lines after it.
        later = []
        for line in nl.follow(after=len(seen) - 2, poll=0.05):
            later.append(line["n"])
            if line["n"] == len(seen):
                break
        self.assertEqual(later, [len(seen) - 1, len(seen)])


class FollowRestartTests(SynchronousTestCase):
    @pytest.mark.slow
    def test_followWaitsForTheApi(self) -> None:
        """
        C{follow} started before the proxy (as across a restart of an
        unsupervised one) keeps asking, and yields the lines once the API
        answers.
        """
        folder = tempDirectory(self)
        originPort, _ = startOrigin(self.addCleanup)
        apiPort = freePort()
        nl = Netlog(f"http://127.0.0.1:{apiPort}", timeout=2)
        follower = Follower(nl, lambda line: line["type"] == "end", poll=0.05, patience=60)
        time.sleep(0.5)
        twistd, _ = startStandin(folder, self.addCleanup, [
            "--resolve", "origin.test=127.0.0.1", "--connect-ports", f"443,{originPort}"],
            api=f"tcp:{apiPort}:interface=127.0.0.1")
        proxy = f"http://127.0.0.1:{twistd.listenerPort('forward')}"
        self.assertEqual(get(proxy, f"http://origin.test:{originPort}/late"), 200)
        follower.thread.join(30)
        self.assertEqual(follower.failed, [])
        self.assertEqual([(r["n"], r["type"]) for r in follower.seen], [(1, "open"), (2, "end")])
        self.assertTrue(os.path.exists(os.path.join(folder, "network.jsonl")))
