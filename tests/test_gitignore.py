"""
What twistd leaves in the folder it ran in (C{twistd.pid}, C{twistd.log})
is ignored by git wherever that folder is: the docs run twistd from the
clone's root and from C{examples/pytest_playwright}.
"""

from __future__ import annotations

import subprocess

from twisted.trial.unittest import SynchronousTestCase

from tests.support import REPO


class IgnoredTests(SynchronousTestCase):
    def test_twistdFiles(self) -> None:
        """
        C{git check-ignore} says each of twistd's files is ignored, at the
        root and in any folder; a file of the project beside them is not.
        """
        paths = [f"{folder}{name}" for folder in ("", "examples/pytest_playwright/", "docs/")
                 for name in ("twistd.pid", "twistd.log", "twistd.log.1")]
        done = subprocess.run(["git", "check-ignore", "--no-index", *paths, "examples/sites.toml"],
                              cwd=REPO, capture_output=True, text=True)
        self.assertEqual(done.stdout.split(), paths)
