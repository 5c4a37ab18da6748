"""
The pytest plugin run the way a user runs it: pytest in a subprocess over
C{examples/pytest_playwright} (a test that passes and one that fails, both
in Chromium through pytest-playwright's C{page} and the plugin's
C{netlog_session}), against a real supervised C{twistd netlog-standin}.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import Netlog
from netlog.pytest_plugin import har_file_name, session_name
from tests.browser.browser import CHROMIUM, chromiumArgs
from tests.client.support import startStandin
from tests.har.support import validate
from tests.standin.support import tempDirectory
from tests.support import REPO, sourceEnv

#: The example the plugin's tests run.
EXAMPLE = os.path.join(REPO, "examples", "pytest_playwright")
#: Seconds one pytest run of the example may take.
RUN_TIMEOUT = 240
#: The failing test's HAR, as the plugin names it.
FAILED_HAR = "test_shop.py-test_teapots-chromium.har"
PASSED_HAR = "test_shop.py-test_mugs-chromium.har"


class NameTests(SynchronousTestCase):
    def test_sessionNames(self) -> None:
        """
        A session's name holds the worker, the run and the test's id with
        its hash: within netlog's 64 characters and alphabet, different for
        two ids that read the same once cut or cleaned, and for two workers.
        """
        long = "tests/" + "a" * 100 + "/test_x.py::test_y[" + "p" * 50 + "]"
        names = {
            session_name(nodeid, worker, "abc123")
            for nodeid in ("t.py::test_a", "t.py::test_a[1]", "t.py::test_a-1", long, long + "x")
            for worker in ("main", "gw0", "gw1")
        }
        self.assertEqual(len(names), 15)
        for name in names:
            self.assertRegex(name, r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
        self.assertTrue(session_name("t.py::test_a", "gw1", "abc123").startswith("gw1-abc123-t.py-test_a-"))

    def test_harFileNames(self) -> None:
        """
        A kept HAR is named after the test's id, its separators and brackets
        made C{-}; a very long id is cut and ends with its hash.
        """
        self.assertEqual(har_file_name("test_shop.py::test_teapots[chromium]"), FAILED_HAR)
        long = har_file_name("t.py::test_" + "x" * 300)
        self.assertLessEqual(len(long), 220)
        self.assertNotEqual(long, har_file_name("t.py::test_" + "x" * 301))


class ExampleOutputTests(SynchronousTestCase):
    def test_keptHar(self) -> None:
        """
        The HAR the example shows is its failed test's, as the plugin keeps
        it: named after the test, passing the HAR schema, holding that
        test's requests and none of the other's.
        """
        folder = os.path.join(EXAMPLE, "example-output")
        self.assertEqual(os.listdir(folder), [FAILED_HAR])
        urls = entries(os.path.join(folder, FAILED_HAR))
        self.assertIn("q=teapot", urls[0])
        self.assertFalse([u for u in urls if "q=mug" in u], urls)


def _entryPoints(folder: str) -> str:
    """
    Make the plugin findable as an installed netlog finds it (by the
    C{pytest11} entry point setup.cfg declares), for this source tree: a
    distribution's metadata in C{folder}, to put on C{PYTHONPATH}.
    """
    setup = configparser.ConfigParser()
    setup.read(os.path.join(REPO, "setup.cfg"))
    declared = setup["options.entry_points"]["pytest11"].strip()
    info = os.path.join(folder, "netlog_source_tree-0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\nName: netlog-source-tree\nVersion: 0\n")
    with open(os.path.join(info, "entry_points.txt"), "w") as f:
        f.write(f"[pytest11]\n{declared}\n")
    return folder


def entries(path: str) -> list[str]:
    """
    A HAR's request URLs, once it passed the HAR schema.
    """
    with open(path, "rb") as f:
        har = f.read()
    assert validate(har) == [], validate(har)
    return [e["request"]["url"] for e in json.loads(har)["log"]["entries"]]


@pytest.mark.slow
class PluginTests(SynchronousTestCase):
    """
    pytest over the example, in a subprocess.
    """

    def setUp(self) -> None:
        self.folder = tempDirectory(self)
        self.project = os.path.join(self.folder, "project")
        shutil.copytree(EXAMPLE, self.project)
        self.results = os.path.join(self.project, "test-results")
        entryPoints = _entryPoints(os.path.join(self.folder, "entry-points"))
        self.env = sourceEnv({
            "CHROMIUM": CHROMIUM,
            "CHROMIUM_FLAGS": shlex.join(chromiumArgs()),
        })
        self.env["PYTHONPATH"] += os.pathsep + entryPoints
        for name in ("NETLOG_API", "NETLOG_API_TOKEN", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS"):
            self.env.pop(name, None)

    def startNetlog(self) -> str:
        """
        Start the stand-in the example's browser goes out through; its API.
        """
        _, api = startStandin(self.folder, self.addCleanup, ["--resolve", "shop.test=127.0.0.1"])
        return api

    def pytest(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=self.project,
                              env=env or self.env, capture_output=True, text=True, timeout=RUN_TIMEOUT)

    def sessionLogs(self) -> list[str]:
        return sorted(n for n in os.listdir(self.folder) if re.fullmatch(r"network\..+\.jsonl", n))

    def test_failedTestKeepsItsHar(self) -> None:
        """
        C{--netlog-api host:port}: the failing test leaves exactly one HAR,
        named after it, holding its own requests (its page and its page's
        fetch) and none of the passing test's; the passing test leaves
        none; the summary names the HAR; both sessions are deleted.
        """
        self.api = self.startNetlog()
        apiHostPort = self.api.split("://", 1)[1]
        done = self.pytest("--netlog-api", apiHostPort)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("1 failed, 1 passed", done.stdout)
        self.assertEqual(os.listdir(self.results), [FAILED_HAR])
        urls = entries(os.path.join(self.results, FAILED_HAR))
        self.assertIn(f"test-results/{FAILED_HAR}", done.stdout)
        paths = [u.split("/", 3)[3] for u in urls if u.startswith("http://shop.test:")]
        self.assertEqual(paths[0], "search?q=teapot")
        self.assertIn("api/items?q=teapot", paths)
        self.assertFalse([u for u in urls if "mug" in u], urls)
        self.assertEqual(Netlog(self.api).sessions(), [])
        self.assertEqual(len(self.sessionLogs()), 2)

    def test_xdistWorkers(self) -> None:
        """
        With C{-n 2} (the API from C{NETLOG_API}, every HAR kept in
        C{--netlog-output}), each
        worker runs one test in its own session, named with its worker and
        the run: the two HARs each hold their own test's requests only.
        """
        self.api = self.startNetlog()
        env = dict(self.env, NETLOG_API=self.api)
        # Not pytest-playwright's --output: each of its workers empties that
        # when it starts, maybe after the other kept a HAR there.
        done = self.pytest("-n", "2", "--netlog-keep", "all", "--netlog-output", "hars", env=env)
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("1 failed, 1 passed", done.stdout)
        hars = os.path.join(self.project, "hars")
        self.assertEqual(sorted(os.listdir(hars)), sorted([FAILED_HAR, PASSED_HAR]))
        for har, mine, other in ((FAILED_HAR, "teapot", "mug"), (PASSED_HAR, "mug", "teapot")):
            urls = entries(os.path.join(hars, har))
            self.assertIn(f"q={mine}", " ".join(urls))
            self.assertFalse([u for u in urls if f"q={other}" in u], urls)
        logs = self.sessionLogs()
        self.assertEqual(len(logs), 2, logs)
        workers = sorted(name.split(".")[1].split("-")[0] for name in logs)
        self.assertEqual(workers, ["gw0", "gw1"])
        runs = {name.split(".")[1].split("-")[1] for name in logs}
        self.assertEqual(len(runs), 1, logs)
        self.assertEqual(Netlog(self.api).sessions(), [])

    def test_notAsked(self) -> None:
        """
        Without C{--netlog-api} or C{NETLOG_API}, a test that asks for a
        session is an error that says what to give, before any browser
        starts; nothing is kept.
        """
        done = self.pytest()
        self.assertEqual(done.returncode, 1, done.stdout + done.stderr)
        self.assertIn("2 errors", done.stdout)
        self.assertIn("netlog's fixtures need its API: give --netlog-api URL or set NETLOG_API", done.stdout)
        self.assertFalse(os.path.exists(self.results))

    def test_badApi(self) -> None:
        """
        A C{--netlog-api} that is not a URL stops the run at once with one
        line that shows how to write it.
        """
        done = self.pytest("--netlog-api", "8081")
        self.assertEqual(done.returncode, 4, done.stdout + done.stderr)
        self.assertIn("--netlog-api: '8081' is not the API's URL: write it as http://127.0.0.1:8081",
                      done.stderr)

