"""
The pytest plugin's C{netlog_session} finds and waits: pytest in a
subprocess over a test that fetches through its session and asks about
it, against a real supervised C{twistd netlog-standin}.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.client.support import startOrigin, startStandin
from tests.client.test_pytest_plugin import RUN_TIMEOUT, _entryPoints
from tests.standin.support import tempDirectory
from tests.support import sourceEnv

TEST_FILE = '''
import threading
import urllib.request


def fetch(proxy, url):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": proxy}))
    with opener.open(url, timeout=20) as response:
        return response.read()


def test_asks(netlog_session):
    url = "http://origin.test:%(port)d"
    fetch(netlog_session.proxy, url + "/seen")
    [seen] = netlog_session.find("url:/seen status:200").exchanges
    assert netlog_session.exchange(seen["id"])["request"]["url"] == url + "/seen"
    later = threading.Timer(0.3, fetch, (netlog_session.proxy, url + "/later"))
    later.start()
    waited = netlog_session.wait_for("url:/later", timeout=20)
    later.join()
    assert waited["status"] == 200
    assert netlog_session.wait_for("url:/never", timeout=1) is None
'''


@pytest.mark.slow
class SessionFixtureTests(SynchronousTestCase):

    def test_findAndWait(self) -> None:
        """A test that uses find, exchange and wait_for on its netlog_session passes."""
        folder = tempDirectory(self)
        originPort, _ = startOrigin(self.addCleanup)
        _, api = startStandin(folder, self.addCleanup, ["--resolve", "origin.test=127.0.0.1", "--state", folder])
        project = os.path.join(folder, "project")
        os.makedirs(project)
        with open(os.path.join(project, "test_asks.py"), "w") as f:
            f.write(textwrap.dedent(TEST_FILE % {"port": originPort}))
        with open(os.path.join(folder, "api-token")) as token:
            env = sourceEnv({"NETLOG_API_TOKEN": token.read().strip()})
        env["PYTHONPATH"] += os.pathsep + _entryPoints(os.path.join(folder, "entry-points"))
        for name in ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS"):
            env.pop(name, None)
        run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--netlog-api", api,
                              "test_asks.py"], cwd=project, env=env, capture_output=True, text=True,
                             timeout=RUN_TIMEOUT)
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        self.assertIn("1 passed", run.stdout)
