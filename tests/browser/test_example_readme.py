"""
C{examples/pytest_playwright/README.rst}'s commands, run as written: its
install of the example's own requirements, the stand-in in the foreground,
then pytest over the example in Debian's Chromium (C{CHROMIUM=/usr/bin/chromium}),
which must keep the failing test's HAR and print what the README shows.

What is changed, and only that, so the test runs sealed on any machine:
the install is checked, not done (C{pip install --dry-run --no-index} of
the requirements file into this environment must find them all there: CI's
C{.ci/install.d/40-example-requirements.sh} installs them);
C{.venv/bin/twistd} and C{../../.venv/bin/pytest} run this source tree with
this interpreter; the example is copied to the test's folder (pytest writes
C{test-results/} beside it); the API's port is a free one; the stand-in is
given a listener on a free port, a log, a state folder and
C{--resolve-only} in the test's folder, and the tests its token
(C{NETLOG_API_TOKEN}), as that state folder is not the default one; and
Chromium is told to look no name up (C{CHROMIUM_FLAGS}).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser.browser import resolverRules
from tests.browser.foreground import startForeground, waitServing
from tests.browser.test_readme import literalBlocks
from tests.client.test_pytest_plugin import FAILED_HAR, _entryPoints, entries
from tests.standin.support import tempDirectory
from tests.support import REPO, freePort, sourceEnv, twistdArgv

#: The example, and its README.
EXAMPLE = os.path.join(REPO, "examples", "pytest_playwright")
#: The README's section with the commands.
SECTION = "Running it"
#: Seconds the stand-in has to serve, and pytest to run both tests.
WAIT = 240.0


@pytest.mark.slow
class ExampleReadmeTests(SynchronousTestCase):
    def test_commandsAsWritten(self) -> None:
        """
        The install names the example's requirements file, which this
        environment satisfies; the stand-in's command serves; the pytest
        command, from the example's folder with C{CHROMIUM=/usr/bin/chromium},
        exits 1 (one test fails on purpose) and prints what the README says
        it ends with; the failed test's HAR holds its own requests; no
        C{twistd.pid} is left anywhere.
        """
        with open(os.path.join(EXAMPLE, "README.rst"), encoding="utf-8") as f:
            [install], [standin], [cd, run], shown = literalBlocks(f.read(), SECTION)
        self.assertEqual(install, "python3 -m venv .venv && .venv/bin/pip install . "
                                  "-r examples/pytest_playwright/requirements.txt")
        self.assertTrue(standin.startswith(".venv/bin/twistd -n --pidfile= netlog-standin "), standin)
        self.assertEqual(cd, "cd examples/pytest_playwright")
        self.assertTrue(run.startswith("CHROMIUM=/usr/bin/chromium ../../.venv/bin/pytest "), run)

        folder = tempDirectory(self)
        requirements = install.split(" -r ", 1)[1]
        checked = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--no-index", "--disable-pip-version-check",
             "-r", requirements], cwd=REPO, capture_output=True, text=True, timeout=WAIT)
        self.assertEqual(checked.returncode, 0, checked.stdout + checked.stderr)
        self.assertNotIn("Would install", checked.stdout)

        project = os.path.join(folder, "project")
        shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("test-results"))
        apiPort = freePort()
        state = os.path.join(folder, "state")
        standin = standin.replace(".venv/bin/twistd", shlex.join(twistdArgv())).replace("tcp:8081", f"tcp:{apiPort}")
        standin += " " + shlex.join(["--listen", "tcp:0:interface=127.0.0.1", "--log",
                                     os.path.join(folder, "network.jsonl"), "--state", state, "--resolve-only"])
        said = os.path.join(folder, "standin.out")
        env = sourceEnv({"TMPDIR": folder})
        for name in ("NETLOG_API", "NETLOG_API_TOKEN", "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_ADDOPTS",
                     "CHROMIUM", "CHROMIUM_FLAGS"):
            env.pop(name, None)
        process = startForeground(standin, folder, env, said, None, self.addCleanup, WAIT)
        waitServing(process, said, WAIT)

        with open(os.path.join(state, "api-token"), encoding="ascii") as f:
            env["NETLOG_API_TOKEN"] = f.read().strip()
        env["CHROMIUM_FLAGS"] = shlex.join(["--host-resolver-rules=" + resolverRules()])
        env["PYTHONPATH"] += os.pathsep + _entryPoints(os.path.join(folder, "entry-points"))
        script = "set -e\n" + cd.replace("examples/pytest_playwright", shlex.quote(project)) + "\n" + run.replace(
            "../../.venv/bin/pytest", shlex.join([sys.executable, "-m", "pytest"])).replace(
            "127.0.0.1:8081", f"127.0.0.1:{apiPort}") + "\n"
        done = subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=WAIT, stdin=subprocess.DEVNULL)
        self.assertEqual(done.returncode, 1, done.stdout[-6000:] + done.stderr[-4000:])
        for line in shown:
            self.assertIn(line.split("...", 1)[0].strip("-").strip(), done.stdout)
        urls = entries(os.path.join(project, "test-results", FAILED_HAR))
        self.assertIn("q=teapot", urls[0])
        self.assertFalse([u for u in urls if "q=mug" in u], urls)
        for where in (folder, project, REPO, EXAMPLE):
            self.assertFalse(os.path.exists(os.path.join(where, "twistd.pid")), where)
