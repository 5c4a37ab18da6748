"""
C{netlog session} on the client: the API's URL as C{host:port} or from
C{NETLOG_API}, one line for an API given wrong or not running, a HAR on
standard output. (Its other behaviour is C{tests/session/test_sessions.py}'s.)
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import Netlog
from tests.client.support import get, startOrigin, startStandin
from tests.standin.support import tempDirectory
from tests.support import freePort, netlogArgv, sourceEnv

#: Seconds one command may take.
COMMAND_TIMEOUT = 60


def session(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = sourceEnv()
    for name in ("NETLOG_API", "NETLOG_API_TOKEN"):
        base.pop(name, None)
    base.update(env or {})
    return subprocess.run([*netlogArgv(), "session", *args], env=base, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT)


class MistakeTests(SynchronousTestCase):
    def test_badApi(self) -> None:
        """
        A bare port, an endpoint description or no API at all is one line
        on stderr that says what to write, and exit status 1.
        """
        for args, env, said in [
            (["list", "--api", "8081"], {}, "write it as http://127.0.0.1:8081"),
            (["list", "--api", "tcp:8081"], {}, "write it as http://127.0.0.1:8081"),
            (["list"], {}, "set NETLOG_API"),
            (["list"], {"NETLOG_API": "8081"}, "write it as http://127.0.0.1:8081"),
        ]:
            done = session(*args, env=env)
            self.assertEqual(done.returncode, 1, (args, done.stderr))
            self.assertEqual(done.stdout, "")
            self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
            self.assertIn(said, done.stderr)

    def test_notRunning(self) -> None:
        """
        An API that is not running is one line that says it can't be
        reached, and exit status 1.
        """
        done = session("list", "--api", f"127.0.0.1:{freePort()}")
        self.assertEqual(done.returncode, 1)
        self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
        self.assertIn("the API can't be reached", done.stderr)


@pytest.mark.slow
class CommandTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.originPort, _ = startOrigin(self.addCleanup)
        self.folder = tempDirectory(self)
        self.twistd, self.api = startStandin(self.folder, self.addCleanup, [
            "--resolve", "origin.test=127.0.0.1", "--connect-ports", f"443,{self.originPort}"])

    def test_apiForms(self) -> None:
        """
        C{--api 127.0.0.1:PORT} (no scheme) works, and so does C{NETLOG_API}
        without C{--api}; C{har} without C{-o} writes the HAR on standard
        output.
        """
        hostPort = self.api.split("://", 1)[1]
        made = session("create", "by-shell", "--api", hostPort)
        self.assertEqual(made.returncode, 0, made.stderr)
        proxy = "http://" + json.loads(made.stdout)["proxy"]
        self.assertEqual(get(proxy, f"http://origin.test:{self.originPort}/x"), 200)
        Netlog(self.api).get_session("by-shell").wait_ended()
        env = {"NETLOG_API": self.api}
        listed = session("list", env=env)
        self.assertEqual([s["name"] for s in json.loads(listed.stdout)["sessions"]], ["by-shell"])
        har = session("har", "by-shell", env=env)
        self.assertEqual(har.returncode, 0, har.stderr)
        self.assertEqual([e["request"]["url"] for e in json.loads(har.stdout)["log"]["entries"]],
                         [f"http://origin.test:{self.originPort}/x"])
        deleted = session("delete", "by-shell", env=env)
        self.assertEqual(json.loads(deleted.stdout)["last"], 2)
