"""
Sessions end to end: a real C{twistd netlog-standin --no-supervise} process
with its API, sessions made over the API, a client per session through its
own port (plain HTTP and CONNECT), and the logs and HARs each session keeps.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import urllib.error
import urllib.request
from typing import Any, Callable

import pytest
from twisted.internet import defer
from twisted.trial import unittest

from tests.har.support import validate, wavLoad
from tests.standin.support import Standin, connectTunnel, inThread, listenOrigin, tempDirectory
from tests.support import freePort, netlogArgv, sourceEnv
from tests.supervise.running import checkLog, readLog

#: Sessions the big test makes, as the issue asks.
SESSIONS = 16
#: Plain requests each session's client makes.
PLAIN_REQUESTS = 3
#: How long one API call may take.
API_TIMEOUT = 20.0


def api(method: str, url: str, body: Any = None, host: str | None = None,
        token: str | None = None) -> tuple[int, Any]:
    """
    One API call, with C{token} if given: its status and its JSON.
    """
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if host is not None:
        request.add_header("Host", host)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=API_TIMEOUT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def caller(tokenPath: str) -> Callable[..., tuple[int, Any]]:
    """
    L{api} with the token the proxy keeps in C{tokenPath} (read at each call).
    """
    def call(method: str, url: str, body: Any = None, host: str | None = None) -> tuple[int, Any]:
        with open(tokenPath) as f:
            return api(method, url, body, host, f.read().strip())

    return call


def getBytes(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=API_TIMEOUT) as response:
        return bytes(response.read())


def drive(proxyPort: int, name: str, originPort: int, tunnelName: str) -> list[int]:
    """
    A session's client: plain requests marked with the session's name, then
    a request through a CONNECT tunnel to the session's own host name.
    """
    statuses = []
    conn = http.client.HTTPConnection("127.0.0.1", proxyPort, timeout=10)
    for _ in range(PLAIN_REQUESTS):
        conn.request("GET", f"http://origin.test:{originPort}/hello", headers={"X-Session": name})
        response = conn.getresponse()
        response.read()
        statuses.append(response.status)
    conn.close()
    s, head = connectTunnel(proxyPort, f"{tunnelName}:{originPort}")
    with s:
        statuses.append(int(head.split(b" ")[1]))
        s.sendall(f"GET /hello HTTP/1.1\r\nHost: {tunnelName}\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    statuses.append(int(answer.split(b" ")[1]))
    return statuses


def entries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["type"] == "open"]


@pytest.mark.slow
class SessionTests(unittest.TestCase):
    """
    Sessions of one in-process stand-in.
    """

    timeout = 120

    @defer.inlineCallbacks
    def setUp(self) -> Any:
        self.origin, self.originPort = listenOrigin(self)
        self.apiPort = freePort()
        resolve = ["--resolve", "origin.test=127.0.0.1"]
        for i in range(SESSIONS):
            resolve += ["--resolve", f"t{i}.test=127.0.0.1"]
        self.directory = tempDirectory(self)
        self.standin = Standin(self, self.directory, [
            *resolve,
            "--connect-ports", f"443,{self.originPort}",
            "--api", f"tcp:{self.apiPort}",
            "--session", "fixed=0",
            "--state", self.directory,
        ], alsoListening=[self.apiPort])
        self.tokenPath = os.path.join(self.directory, "api-token")
        self.call = caller(self.tokenPath)
        yield self.standin.start()
        self.api = f"http://127.0.0.1:{self.apiPort}"

    @defer.inlineCallbacks
    def test_sixteenSessions(self) -> Any:
        """
        Sixteen sessions made over the API, each driven at once by its own
        client through its own port: each session's log holds exactly its
        own exchanges (its marked requests and its own tunnel), numbered from
        1 with no gap, every open ended; its HAR from the API passes the HAR
        schema and WebArena-Verified's loader; the main log holds nothing;
        deleting a session answers its last line and leaves its file.
        """
        made = {}
        for i in range(SESSIONS):
            status, body = yield inThread(self.call, "POST", self.api + "/sessions", {"name": f"task-{i}"})
            self.assertEqual(status, 201, body)
            self.assertEqual(body["name"], f"task-{i}")
            host, port = body["proxy"].rsplit(":", 1)
            self.assertEqual(host, "127.0.0.1")
            made[body["name"]] = (int(port), body)
        status, listed = yield inThread(self.call, "GET", self.api + "/sessions")
        self.assertEqual(sorted(s["name"] for s in listed["sessions"]), sorted([*made, "fixed"]))

        results = yield defer.gatherResults([
            inThread(drive, port, name, self.originPort, f"t{i}.test")
            for i, (name, (port, _)) in enumerate(made.items())
        ])
        for statuses in results:
            self.assertEqual(statuses, [200] * PLAIN_REQUESTS + [200, 200])

        for i, (name, (port, body)) in enumerate(made.items()):
            har = yield inThread(getBytes, body["urls"]["har"])
            self.assertEqual(validate(har), [])
            loaded = wavLoad(har)
            self.assertEqual(len(loaded["events"]), PLAIN_REQUESTS + 1)
            status, deleted = yield inThread(self.call, "DELETE", body["urls"]["session"])
            self.assertEqual(status, 200, deleted)
            records = readLog(body["log"])
            checkLog(self, records)
            self.assertEqual(deleted["last"], len(records))
            opened = entries(records)
            plain = [o for o in opened if o["kind"] == "exchange"]
            tunnels = [o for o in opened if o["kind"] != "exchange"]
            self.assertEqual(len(plain), PLAIN_REQUESTS)
            for o in plain:
                self.assertIn(["X-Session", name], o["request"]["headers"])
            self.assertEqual([t["request"]["url"] for t in tunnels], [f"https://t{i}.test:{self.originPort}/"])
            self.assertEqual(len(json.loads(har)["log"]["entries"]), PLAIN_REQUESTS + 1)
            self.assertEqual(oct(os.stat(body["log"]).st_mode & 0o777), oct(0o644))
        self.assertEqual(self.standin.lines(), [])
        status, listed = yield inThread(self.call, "GET", self.api + "/sessions")
        self.assertEqual([s["name"] for s in listed["sessions"]], ["fixed"])

    @defer.inlineCallbacks
    def test_fixedSession(self) -> Any:
        """
        A session given with C{--session NAME=PORT} is listed, serves, and
        reads back through C{/sessions/NAME/network} with the same cursor
        rules as C{/network}.
        """
        status, body = yield inThread(self.call, "GET", self.api + "/sessions/fixed")
        self.assertEqual(status, 200, body)
        statuses = yield inThread(drive, body["port"], "fixed", self.originPort, "t0.test")
        self.assertEqual(statuses, [200] * (PLAIN_REQUESTS + 2))
        status, page = yield inThread(self.call, "GET", body["urls"]["network"] + "?after=0")
        self.assertEqual(status, 200)
        self.assertEqual([line["n"] for line in page["lines"]], list(range(1, 2 * (PLAIN_REQUESTS + 1) + 1)))
        status, rest = yield inThread(self.call, "GET", body["urls"]["network"] + f"?after={page['next']}")
        self.assertEqual((rest["lines"], rest["next"]), ([], page["next"]))
        self.assertEqual(os.path.basename(body["log"]), "standin.fixed.jsonl")

    @defer.inlineCallbacks
    def test_badInput(self) -> Any:
        """
        A bad name gets 400, a name in use and a port taken 409, a second
        delete and an unknown session 404, a bad body 400, a foreign Host
        421, each as JSON; and the session made before still serves and
        still logs only its own exchanges.
        """
        status, first = yield inThread(self.call, "POST", self.api + "/sessions", {"name": "keep"})
        self.assertEqual(status, 201, first)
        cases = [
            ({"name": "bad/name"}, 400),
            ({"name": "x" * 65}, 400),
            ({"name": ""}, 400),
            ({"name": 17}, 400),
            ({"port": -1}, 400),
            ({"colour": "red"}, 400),
            ([1, 2], 400),
            ({"name": "keep"}, 409),
            ({"name": "other", "port": first["port"]}, 409),
            ({"name": "other", "port": self.standin.port}, 409),
        ]
        for body, expected in cases:
            status, answer = yield inThread(self.call, "POST", self.api + "/sessions", body)
            self.assertEqual(status, expected, (body, answer))
            self.assertIsInstance(answer["error"], str)
        self.assertFalse(os.path.exists(os.path.join(self.directory, "standin.other.jsonl")))
        status, answer = yield inThread(self.call, "GET", self.api + "/sessions", None, "evil.test")
        self.assertEqual(status, 421, answer)
        status, answer = yield inThread(self.call, "GET", self.api + "/sessions/nobody/network.har")
        self.assertEqual(status, 404, answer)

        status, made = yield inThread(self.call, "POST", self.api + "/sessions", {})
        self.assertEqual(status, 201, made)
        self.assertEqual(made["name"], "session-1")
        status, answer = yield inThread(self.call, "DELETE", made["urls"]["session"])
        self.assertEqual((status, answer["last"]), (200, 0))
        status, answer = yield inThread(self.call, "DELETE", made["urls"]["session"])
        self.assertEqual(status, 404, answer)

        statuses = yield inThread(drive, first["port"], "keep", self.originPort, "t1.test")
        self.assertEqual(statuses, [200] * (PLAIN_REQUESTS + 2))
        records = readLog(first["log"])
        checkLog(self, records)
        self.assertEqual(len(entries(records)), PLAIN_REQUESTS + 1)

    @defer.inlineCallbacks
    def test_deleteEndsOpenExchanges(self) -> Any:
        """
        Deleting a session with an exchange still open waits its timeout,
        then ends the exchange as stopped and answers the last line; the
        port then refuses connections.
        """
        status, made = yield inThread(self.call, "POST", self.api + "/sessions", {"name": "slow"})
        self.assertEqual(status, 201, made)
        client = socket.create_connection(("127.0.0.1", made["port"]), timeout=10)
        self.addCleanup(client.close)
        client.sendall(f"GET http://origin.test:{self.originPort}/silent HTTP/1.1\r\n"
                       f"Host: origin.test:{self.originPort}\r\n\r\n".encode())

        def opened() -> bool:
            return bool(os.path.exists(made["log"]) and readLog(made["log"]))

        for _ in range(200):
            if opened():
                break
            yield deferLater(0.05)
        status, answer = yield inThread(self.call, "DELETE", made["urls"]["session"] + "?timeout=1")
        self.assertEqual(status, 200, answer)
        records = readLog(made["log"])
        checkLog(self, records)
        self.assertEqual(answer["last"], 2)
        self.assertEqual(records[1]["_failed"]["reason"], "the proxy stopped")
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", made["port"]), timeout=2).close()

    @defer.inlineCallbacks
    def test_commandLine(self) -> Any:
        """
        C{netlog session create|list|har|delete} drive the API; an error is
        the API's JSON on stderr and exit status 1.
        """
        def run(*args: str) -> subprocess.CompletedProcess[bytes]:
            return subprocess.run([*netlogArgv(), "session", *args, "--api", self.api,
                                   "--token-file", self.tokenPath],
                                  env=sourceEnv(), capture_output=True, timeout=60)

        made = yield inThread(run, "create", "from-shell")
        self.assertEqual(made.returncode, 0, made.stderr)
        port = json.loads(made.stdout)["port"]
        statuses = yield inThread(drive, port, "from-shell", self.originPort, "t2.test")
        self.assertEqual(statuses, [200] * (PLAIN_REQUESTS + 2))
        listed = yield inThread(run, "list")
        self.assertIn("from-shell", [s["name"] for s in json.loads(listed.stdout)["sessions"]])
        out = os.path.join(self.directory, "from-shell.har")
        har = yield inThread(run, "har", "from-shell", "-o", out)
        self.assertEqual(har.returncode, 0, har.stderr)
        with open(out, "rb") as f:
            self.assertEqual(len(json.load(f)["log"]["entries"]), PLAIN_REQUESTS + 1)
        deleted = yield inThread(run, "delete", "from-shell")
        self.assertEqual(json.loads(deleted.stdout)["last"], 2 * (PLAIN_REQUESTS + 1))
        again = yield inThread(run, "delete", "from-shell")
        self.assertEqual(again.returncode, 1)
        self.assertIn(b"404", again.stderr)
        self.assertIn(b"no session", again.stderr)


def deferLater(seconds: float) -> defer.Deferred[None]:
    from twisted.internet import reactor, task

    return task.deferLater(reactor, seconds, lambda: None)


@pytest.mark.slow
class StartTests(unittest.SynchronousTestCase):
    def test_sessionPortInUse(self) -> None:
        """
        A C{--session} whose port is taken ends the start with one line
        naming the option and the port, supervised or not, before anything
        is bound or opened.
        """
        from tests.support import twistdArgv

        directory = tempDirectory(self)
        taken = socket.socket()
        self.addCleanup(taken.close)
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        for extra in ([], ["--no-supervise"]):
            done = subprocess.run(
                [*twistdArgv(), "-n", "--pidfile=", "--logfile", os.path.join(directory, "twistd.log"),
                 "netlog-standin", *extra, "--listen", "tcp:0:interface=127.0.0.1",
                 "--log", os.path.join(directory, "network.jsonl"), "--session", f"task-1={port}"],
                env=sourceEnv(), capture_output=True, timeout=60, cwd=directory,
            )
            self.assertEqual(done.returncode, 1, extra)
            self.assertIn(f"--session task-1={port}".encode(), done.stderr)
            self.assertIn(b"in use already", done.stderr)
            self.assertFalse(os.path.exists(os.path.join(directory, "network.task-1.jsonl")))
