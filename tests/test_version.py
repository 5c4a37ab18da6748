"""
C{netlog --version} prints the version and how the hot path runs.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import types
from typing import Callable

from twisted.trial.unittest import SynchronousTestCase

import netlog
from netlog.compiled import COMPILED_MODULES
from netlog.version import versionLine
from tests.support import REPO, netlogArgv, sourceEnv
from tests.support.build import compiledExpected


class VersionTests(SynchronousTestCase):
    def test_command(self) -> None:
        """
        C{netlog --version} prints C{netlog VERSION (pure Python)} (or
        C{(hot path compiled)} on the compiled build), the version setup.cfg
        builds the package with, and exits 0.
        """
        setup = configparser.ConfigParser()
        setup.read(os.path.join(REPO, "setup.cfg"))
        self.assertEqual(setup["metadata"]["version"], "attr: netlog.__version__")
        done = subprocess.run([*netlogArgv(), "--version"], capture_output=True, text=True, env=sourceEnv(),
                              timeout=60)
        how = "hot path compiled" if compiledExpected() else "pure Python"
        self.assertEqual((done.returncode, done.stdout, done.stderr), (0, f"netlog {netlog.__version__} ({how})\n", ""))

    def test_compiled(self) -> None:
        """
        The line says how the modules of the hot path were loaded: all from
        extension modules, some, or none.
        """
        def specs(compiled: set[str]) -> Callable[[str], object]:
            def findSpec(name: str) -> object:
                suffix = ".cpython-311-x86_64-linux-gnu.so" if name in compiled else ".py"
                return types.SimpleNamespace(origin=f"/x/{name.rsplit('.', 1)[1]}{suffix}")
            return findSpec

        self.assertEqual(versionLine(specs(set(COMPILED_MODULES))), f"netlog {netlog.__version__} (hot path compiled)")
        self.assertEqual(versionLine(specs({COMPILED_MODULES[0]})),
                         f"netlog {netlog.__version__} (hot path partly compiled)")
        self.assertEqual(versionLine(specs(set())), f"netlog {netlog.__version__} (pure Python)")
