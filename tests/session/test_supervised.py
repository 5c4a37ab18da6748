"""
Sessions under the supervisor: sixteen sessions, half fixed at start with
C{--session}, half made over the API, their listeners and logs held by the
supervisor, a worker killed with C{kill -9} mid-way.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import pytest
from twisted.internet import defer
from twisted.trial import unittest

from tests.har.support import validate, wavLoad
from tests.session.test_sessions import PLAIN_REQUESTS, caller, drive, entries, getBytes
from tests.standin.support import inThread, listenOrigin, tempDirectory
from tests.supervise.running import Twistd, alive, checkLog, readLog, waitFor

#: Sessions in all; the first half fixed at start, the rest made over the API.
SESSIONS = 16


@pytest.mark.slow
class SupervisedSessionTests(unittest.TestCase):
    """
    A supervised C{twistd netlog-standin} with sessions given at start.
    """

    timeout = 180

    @defer.inlineCallbacks
    def test_sessionsSurviveWorkerKill(self) -> Any:
        """
        Each of sixteen sessions (eight given at start, eight made over the
        API) is driven by its own client before and after the worker is
        killed with C{kill -9} while a request of one session is still open:
        every session keeps its port, its log holds exactly its own
        exchanges numbered 1..N with no gap, every open ended (the killed
        one as "the proxy restarted"), and its HAR from the API passes the
        HAR schema and WebArena-Verified's loader. The main log holds
        nothing. A session made while the worker restarts serves once the
        next worker does; deleting one answers its last line, a second
        delete 404, a name in use 409.
        """
        origin, originPort = listenOrigin(self)
        folder = tempDirectory(self)
        log = os.path.join(folder, "network.jsonl")
        args = ["--listen", "tcp:0:interface=127.0.0.1", "--log", log, "--api", "tcp:0", "--state", folder,
                "--resolve-only", "--resolve", "origin.test=127.0.0.1",
                "--connect-ports", f"443,{originPort}"]
        for i in range(SESSIONS):
            args += ["--resolve", f"t{i}.test=127.0.0.1"]
        args += ["--resolve", "late.test=127.0.0.1"]
        for i in range(SESSIONS // 2):
            args += ["--session", f"task-{i}=0"]
        twistd = Twistd(folder, "netlog-standin", args)
        api = caller(os.path.join(folder, "api-token"))
        self.addCleanup(twistd.stop)
        first = yield inThread(twistd.waitServing, 1)
        apiBase = f"http://127.0.0.1:{twistd.apiPort()}"
        for i in range(SESSIONS // 2, SESSIONS):
            status, made = yield inThread(api, "POST", apiBase + "/sessions", {"name": f"task-{i}"})
            self.assertEqual(status, 201, made)
        status, listed = yield inThread(api, "GET", apiBase + "/sessions")
        self.assertEqual(status, 200, listed)
        sessions = {s["name"]: s for s in listed["sessions"]}
        self.assertEqual(sorted(sessions), sorted(f"task-{i}" for i in range(SESSIONS)))

        def driveAll() -> defer.Deferred[Any]:
            return defer.gatherResults([
                inThread(drive, sessions[f"task-{i}"]["port"], f"task-{i}", originPort, f"t{i}.test")
                for i in range(SESSIONS)
            ])

        results = yield driveAll()
        self.assertEqual(results, [[200] * (PLAIN_REQUESTS + 2)] * SESSIONS)

        # An exchange left open in task-0 when the worker dies.
        import socket

        client = socket.create_connection(("127.0.0.1", sessions["task-0"]["port"]), timeout=10)
        self.addCleanup(client.close)
        client.sendall(f"GET http://origin.test:{originPort}/silent HTTP/1.1\r\n"
                       f"Host: origin.test:{originPort}\r\n\r\n".encode())
        yield inThread(waitFor, lambda: len(readLog(sessions["task-0"]["log"])) == 2 * (PLAIN_REQUESTS + 1) + 1,
                       "the open line of the silent request")
        os.kill(first, signal.SIGKILL)
        # While the supervisor replaces the worker: a new session.
        status, late = yield inThread(api, "POST", apiBase + "/sessions", {"name": "late"})
        self.assertEqual(status, 201, late)
        yield inThread(waitFor, lambda: not alive(first), "the worker to die")
        # Straight after the kill: these connections wait for the next worker.
        results = yield driveAll()
        self.assertEqual(results, [[200] * (PLAIN_REQUESTS + 2)] * SESSIONS)
        self.assertGreaterEqual(twistd.servingCount(), 2)
        statuses = yield inThread(drive, late["port"], "late", originPort, "late.test")
        self.assertEqual(statuses, [200] * (PLAIN_REQUESTS + 2))

        status, answer = yield inThread(api, "POST", apiBase + "/sessions", {"name": "task-3"})
        self.assertEqual(status, 409, answer)
        status, answer = yield inThread(api, "POST", apiBase + "/sessions", {"name": "bad/name"})
        self.assertEqual(status, 400, answer)
        status, answer = yield inThread(api, "POST", apiBase + "/sessions",
                                        {"name": "taken", "port": sessions["task-0"]["port"]})
        self.assertEqual(status, 409, answer)
        self.assertFalse(os.path.exists(os.path.join(folder, "network.taken.jsonl")))
        status, deleted = yield inThread(api, "DELETE", late["urls"]["session"])
        self.assertEqual(status, 200, deleted)
        records = readLog(late["log"])
        checkLog(self, records)
        self.assertEqual(deleted["last"], len(records))
        self.assertEqual(len(entries(records)), PLAIN_REQUESTS + 1)
        status, answer = yield inThread(api, "DELETE", late["urls"]["session"])
        self.assertEqual(status, 404, answer)

        for i in range(SESSIONS):
            name = f"task-{i}"
            har = yield inThread(getBytes, sessions[name]["urls"]["har"])
            self.assertEqual(validate(har), [])
            self.assertEqual(len(wavLoad(har)["events"]), len(json.loads(har)["log"]["entries"]))
            records = readLog(sessions[name]["log"])
            checkLog(self, records)
            opened = entries(records)
            plain = [o for o in opened if o["kind"] == "exchange"]
            tunnels = [o for o in opened if o["kind"] != "exchange"]
            self.assertEqual(len(plain), 2 * PLAIN_REQUESTS + (1 if i == 0 else 0))
            for o in plain:
                if not o["request"]["url"].endswith("/silent"):
                    self.assertIn(["X-Session", name], o["request"]["headers"])
            self.assertEqual({t["request"]["url"] for t in tunnels}, {f"https://t{i}.test:{originPort}/"})
            self.assertEqual(len(tunnels), 2)
            if i == 0:
                silent = [o["id"] for o in plain if o["request"]["url"].endswith("/silent")]
                [end] = [r for r in records if r["type"] == "end" and r["id"] in silent]
                self.assertEqual(end["_failed"]["reason"], "the proxy restarted")
        self.assertEqual(readLog(log), [])
