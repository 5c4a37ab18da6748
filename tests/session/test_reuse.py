"""
A session's HAR holds its own traffic only: an automatic name is never one
whose log is there already, every create answer says where the session's
lines begin, and a session made again by name appends to its log while its
HAR begins at its new beginning (C{?from=0}: the whole file). Over a real
C{twistd netlog-standin}, supervised and with C{--no-supervise}.
"""

from __future__ import annotations

import http.client
import json
import os

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import Netlog
from tests.client.support import startOrigin
from tests.session.test_sessions import api, getBytes
from tests.standin.support import tempDirectory
from tests.supervise.running import Twistd

#: Requests sent through each session.
REQUESTS = 3


def send(proxyPort: int, originPort: int, mark: str) -> None:
    """
    L{REQUESTS} plain requests through a session's port, each path marked.
    """
    conn = http.client.HTTPConnection("127.0.0.1", proxyPort, timeout=10)
    try:
        for i in range(REQUESTS):
            conn.request("GET", f"http://origin.test:{originPort}/{mark}/{i}")
            response = conn.getresponse()
            response.read()
            assert response.status == 200, response.status
    finally:
        conn.close()


def harPaths(har: bytes) -> list[str]:
    return [entry["request"]["url"].split("/", 3)[3] for entry in json.loads(har)["log"]["entries"]]


@pytest.mark.slow
class ReuseTests(SynchronousTestCase):
    def run_proxy(self, extra: list[str]) -> tuple[str, str, str]:
        originPort, _ = startOrigin(self.addCleanup)
        folder = tempDirectory(self)
        log = os.path.join(folder, "network.jsonl")
        twistd = Twistd(folder, "netlog-standin", [
            *extra, "--listen", "tcp:0:interface=127.0.0.1", "--log", log, "--api", "tcp:0",
            "--state", folder, "--resolve-only", "--resolve", "origin.test=127.0.0.1",
        ])
        self.addCleanup(twistd.stop)
        if not extra:
            twistd.waitServing(1)
        base = f"http://127.0.0.1:{twistd.apiPort()}"
        with open(os.path.join(folder, "api-token")) as f:
            token = f.read().strip()
        self.originPort = originPort
        return base, token, folder

    def check(self, extra: list[str]) -> None:
        base, token, folder = self.run_proxy(extra)
        status, one = api("POST", base + "/sessions", {}, token=token)
        self.assertEqual(status, 201, one)
        self.assertEqual((one["name"], one["first"], one["last"]), ("session-1", 1, 0))
        send(one["port"], self.originPort, "old")
        status, deleted = api("DELETE", one["urls"]["session"], token=token)
        self.assertEqual((status, deleted["last"]), (200, 2 * REQUESTS), deleted)

        # An automatic name skips the ended session's: another name, another file.
        status, two = api("POST", base + "/sessions", {}, token=token)
        self.assertEqual(status, 201, two)
        self.assertEqual((two["name"], two["first"], two["last"]), ("session-2", 1, 0))
        self.assertNotEqual(two["log"], one["log"])
        send(two["port"], self.originPort, "new")
        self.assertEqual(harPaths(getBytes(two["urls"]["har"])), [f"new/{i}" for i in range(REQUESTS)])

        # Made again by name: the log goes on, the HAR begins at its new first line.
        status, again = api("POST", base + "/sessions", {"name": "session-1"}, token=token)
        self.assertEqual(status, 201, again)
        self.assertEqual(again["log"], one["log"])
        self.assertEqual((again["first"], again["last"]), (2 * REQUESTS + 1, 2 * REQUESTS))
        send(again["port"], self.originPort, "again")
        self.assertEqual(harPaths(getBytes(again["urls"]["har"])), [f"again/{i}" for i in range(REQUESTS)])
        whole = [f"old/{i}" for i in range(REQUESTS)] + [f"again/{i}" for i in range(REQUESTS)]
        self.assertEqual(harPaths(getBytes(again["urls"]["har"] + "?from=0")), whole)
        status, described = api("GET", again["urls"]["session"], token=token)
        self.assertEqual((described["first"], described["last"]), (2 * REQUESTS + 1, 4 * REQUESTS))

        # The client and the command line hold the same.
        client = Netlog(base, token=token)
        self.assertEqual(client.get_session("session-1").first, 2 * REQUESTS + 1)
        saved = os.path.join(folder, "saved.har")
        client.get_session("session-1").save_har(saved)
        with open(saved, "rb") as f:
            self.assertEqual(harPaths(f.read()), [f"again/{i}" for i in range(REQUESTS)])
        client.get_session("session-1").save_har(saved, from_line=0)
        with open(saved, "rb") as f:
            self.assertEqual(harPaths(f.read()), whole)
        status, answer = api("GET", again["urls"]["har"] + "?from=999", token=token)
        self.assertEqual((status, answer["parameter"]), (400, "from"), answer)

    def test_supervised(self) -> None:
        """
        Supervised (the default): the create answer has C{first} and
        C{last}; an automatic name is never an ended session's; each HAR
        holds only its session's exchanges unless C{?from=0}.
        """
        self.check([])

    def test_inProcess(self) -> None:
        """
        The same with C{--no-supervise}.
        """
        self.check(["--no-supervise"])
