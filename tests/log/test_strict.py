"""
Real proxies run as root without C{--uid} refuse a log folder that another
user could write (or one above it), as C{sshd}'s C{StrictModes} does, and
accept a sticky one (as C{/tmp}) whose log file is theirs.
"""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.supervise.running import WAIT, Twistd


@pytest.mark.slow
class StrictFolderTests(SynchronousTestCase):
    def setUp(self) -> None:
        if os.geteuid() != 0:
            raise self.failureException("this test is about netlog run as root and must run as root")
        self.top = os.path.abspath(self.mktemp())
        os.makedirs(self.top)

    def run_(self, plugin: str, log: str, extra: list[str] = ()) -> Twistd:  # type: ignore[assignment]
        folder = os.path.join(self.top, f"run{len(os.listdir(self.top))}")
        os.mkdir(folder)
        args = ["--log", log, "--listen", "tcp:0:interface=127.0.0.1", *extra]
        if plugin == "netlog-proxy":
            sites = os.path.join(folder, "sites.toml")
            with open(sites, "w") as f:
                f.write('[live]\nhosts = ["live.test"]\n')
            args += ["--sites", sites, "--state", os.path.join(folder, "state")]
        twistd = Twistd(folder, plugin, args)
        self.addCleanup(twistd.stop)
        return twistd

    def refused(self, plugin: str, log: str, words: str, extra: list[str] = ()) -> None:  # type: ignore[assignment]
        twistd = self.run_(plugin, log, extra)
        try:
            code = twistd.wait(WAIT)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{plugin} started with --log {log}:\n{twistd.text()}") from None
        self.assertNotEqual(code, 0)
        with open(twistd.output.name, encoding="utf-8") as f:
            said = f.read() + twistd.text()
        self.assertIn(words, said)
        self.assertNotIn(" bound on ", said)
        self.assertFalse(os.path.exists(log))

    def test_worldWritable(self) -> None:
        """
        A log folder every user can write, or a folder above it, is refused
        by both proxies, supervised or not: they exit non-zero, naming it,
        before binding, and no log file is made.
        """
        folder = os.path.join(self.top, "open")
        os.makedirs(os.path.join(folder, "logs"))
        os.chmod(folder, 0o777)
        log = os.path.join(folder, "logs", "network.jsonl")
        for plugin in ("netlog-standin", "netlog-proxy"):
            for extra in ([], ["--no-supervise"]):
                self.refused(plugin, log, f"the folder {folder}, above the log's folder", extra)
        self.refused("netlog-standin", os.path.join(folder, "network.jsonl"), "every user")

    def test_groupOfOthers(self) -> None:
        """
        A folder nobody's group may write is refused.
        """
        folder = os.path.join(self.top, "group")
        os.mkdir(folder)
        os.chown(folder, 0, pwd.getpwnam("nobody").pw_gid)
        os.chmod(folder, 0o775)
        self.refused("netlog-standin", os.path.join(folder, "network.jsonl"), "can be written by the group")

    def test_stickyOurs(self) -> None:
        """
        A sticky folder every user can write is accepted for a log file of
        our own, and refused when the file there is another user's.
        """
        folder = os.path.join(self.top, "sticky")
        os.mkdir(folder)
        os.chmod(folder, 0o1777)
        log = os.path.join(folder, "network.jsonl")
        twistd = self.run_("netlog-standin", log)
        twistd.listenerPort("forward")
        twistd.waitServing(1)
        self.assertEqual(os.stat(log).st_uid, 0)
        twistd.stop()
        theirs = os.path.join(folder, "theirs.jsonl")
        with open(theirs, "wb"):
            pass
        nobody = pwd.getpwnam("nobody")
        os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
        twistd = self.run_("netlog-standin", theirs)
        self.assertNotEqual(twistd.wait(WAIT), 0)
        self.assertIn("belongs to nobody", twistd.text() + open(twistd.output.name).read())
        self.assertEqual(os.path.getsize(theirs), 0)

    def test_systemFolderAboveSaysWhereInstead(self) -> None:
        """
        A log in a folder netlog makes under one a group of others may write
        (as Ubuntu's /var/log, root:syslog 0775) is refused in one line
        that names that folder and the group, and says which --log to give
        instead (one in /var/lib/netlog, which netlog makes), without
        advising to change the system's folder; the folder below is not
        made.
        """
        folder = os.path.join(self.top, "varlog")
        os.mkdir(folder)
        os.chown(folder, 0, pwd.getpwnam("nobody").pw_gid)
        os.chmod(folder, 0o775)
        log = os.path.join(folder, "netlog", "network.jsonl")
        twistd = self.run_("netlog-standin", log)
        self.assertNotEqual(twistd.wait(WAIT), 0)
        with open(twistd.output.name, encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertEqual(len(lines), 1, lines)
        self.assertIn(f"--log {log}: the folder {folder}, above the log's folder", lines[0])
        self.assertIn("can be written by the group", lines[0])
        self.assertIn("give a --log in a folder only root can write, such as "
                      "--log /var/lib/netlog/network.jsonl", lines[0])
        self.assertNotIn("chmod", lines[0])
        self.assertFalse(os.path.exists(os.path.dirname(log)))
