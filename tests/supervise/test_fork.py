"""
Workers forked from the real supervisor (see L{netlog.supervise.fork}) hold
only what was handed to them: not the supervisor's twistd log, nor its API
listener; and they ignore C{SIGPIPE} as a Python does, so that a write to a
closed pipe is an error they handle, not their death.
"""

from __future__ import annotations

import os
import signal

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.supervise.running import Twistd, waitFor


def listeningInode(port: int) -> str:
    """
    The socket inode listening on C{127.0.0.1:port}, from C{/proc/net/tcp}.
    """
    wanted = f"0100007F:{port:04X}"
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == wanted and fields[3] == "0A":
                return fields[9]
    raise AssertionError(f"nothing listens on 127.0.0.1:{port}")


def descriptors(pid: int) -> set[str]:
    """
    What each of a process's descriptors is (C{socket:[123]}, a path).
    """
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return found


def ignoredSignals(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("SigIgn:"):
                return int(line.split()[1], 16)
    raise AssertionError(f"no SigIgn line for {pid}")


@pytest.mark.slow
class ForkedWorkerTests(SynchronousTestCase):
    def test_workersHoldOnlyWhatIsHanded(self) -> None:
        """
        The serving worker and the standby hold the forward listener and
        the log, but not the supervisor's twistd log nor the API's
        listener, and both ignore SIGPIPE.
        """
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        log = os.path.join(folder, "network.jsonl")
        twistd = Twistd(folder, "netlog-standin", [
            "--log", log, "--listen", "tcp:0:interface=127.0.0.1", "--resolve-only", "--api", "tcp:0",
            "--api-token-file", os.path.join(folder, "api-token"),
        ])
        self.addCleanup(twistd.stop)
        forward = listeningInode(twistd.listenerPort("forward"))
        api = listeningInode(twistd.apiPort())
        twistd.waitServing(1)
        waitFor(lambda: twistd.standingByCount() >= 1, "a standby")
        supervisor = descriptors(twistd.process.pid)
        self.assertIn(twistd.twistdLog, supervisor)
        self.assertIn(f"socket:[{api}]", supervisor)
        workers = twistd.workers()
        self.assertEqual(len(workers), 2)
        for pid in workers:
            held = descriptors(pid)
            self.assertIn(f"socket:[{forward}]", held)
            self.assertIn(log, held)
            self.assertNotIn(twistd.twistdLog, held)
            self.assertNotIn(f"socket:[{api}]", held)
            self.assertTrue(ignoredSignals(pid) & (1 << (signal.SIGPIPE - 1)), f"worker {pid} dies of SIGPIPE")
