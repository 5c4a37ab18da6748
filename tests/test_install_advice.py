"""
Every piece of install advice in the tree installs netlog from its clone:
on the package index, C{netlog} is another project (a 2012 gevent logging
server), so advice to install it by that name would install a stranger's code,
as root where the advice is for a service.
"""

from __future__ import annotations

import os
import re
import subprocess

from twisted.trial.unittest import SynchronousTestCase

from tests.support import REPO

#: Installing the index's "netlog" by name: pip, pip3, python -m pip, with
#: any options before it (written in two halves so this file doesn't match).
BY_NAME = re.compile(r"pip3?\s+install\s+(?:-\S+\s+)*" + "net" + r"log(?![\w./-])")


def treeFiles() -> list[str]:
    """
    The files of the tree (tracked, or new and not ignored), as git lists them.
    """
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO, capture_output=True, check=True)
    return [os.fsdecode(name) for name in listed.stdout.split(b"\0") if name]


class InstallAdviceTests(SynchronousTestCase):
    def test_patternMatches(self) -> None:
        """
        The pattern finds the advice in the forms it was and could be given,
        and not the advice to install from the clone.
        """
        for bad in ["/opt/netlog/bin/pip install " + "netlog", "pip3 install -U " + "netlog\n",
                    "python -m pip install --upgrade " + "netlog==0.1"]:
            self.assertIsNotNone(BY_NAME.search(bad), bad)
        for good in ["/opt/netlog/bin/pip install .", "pip install ./netlog-clone",
                     ".venv/bin/pip install -r examples/pytest_playwright/requirements.txt"]:
            self.assertIsNone(BY_NAME.search(good), good)

    def test_noInstallByName(self) -> None:
        """
        No file of the tree (code, docs, examples, the systemd unit, the
        pre-flight's line) tells anyone to install netlog from the index by
        its name.
        """
        files = treeFiles()
        self.assertIn("netlog/tap/preflight.py", files)
        found = []
        for name in files:
            path = os.path.join(REPO, name)
            if not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            found += [f"{name}: {m.group(0)!r}" for m in BY_NAME.finditer(text)]
        self.assertEqual(found, [])
