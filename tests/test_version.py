"""
C{netlog --version} prints the version and how the hot path runs.
"""

from __future__ import annotations

import configparser
import os
import subprocess
import sys
import types

from twisted.trial.unittest import SynchronousTestCase

import netlog
from netlog.version import HOT_PATH, isCompiled, versionLine
from tests.support import REPO, netlogArgv, sourceEnv


class VersionTests(SynchronousTestCase):
    def test_command(self) -> None:
        """
        C{netlog --version} prints C{netlog VERSION (pure Python)}, the
        version setup.cfg builds the package with, and exits 0.
        """
        setup = configparser.ConfigParser()
        setup.read(os.path.join(REPO, "setup.cfg"))
        self.assertEqual(setup["metadata"]["version"], "attr: netlog.__version__")
        done = subprocess.run([*netlogArgv(), "--version"], capture_output=True, text=True, env=sourceEnv(),
                              timeout=60)
        self.assertEqual((done.returncode, done.stdout, done.stderr),
                         (0, f"netlog {netlog.__version__} (pure Python)\n", ""))

    def test_compiled(self) -> None:
        """
        A hot path module loaded from an extension module counts as
        compiled; all of them make the line say so.
        """
        self.assertFalse(isCompiled("netlog.core.http1"))
        for name in HOT_PATH:
            fake = types.ModuleType(name)
            fake.__file__ = f"/x/{name.rsplit('.', 1)[1]}.cpython-311-x86_64-linux-gnu.so"
            self.patch(sys, "modules", dict(sys.modules, **{name: fake}))
            self.assertTrue(isCompiled(name))
        self.assertEqual(versionLine(), f"netlog {netlog.__version__} (hot path compiled)")
