"""
Workers forked from the real supervisor (see L{netlog.supervise.fork}) hold
only what was handed to them: not the supervisor's twistd log, nor its API
listener; and they ignore C{SIGPIPE} as a Python does, so that a write to a
closed pipe is an error they handle, not their death.
"""

from __future__ import annotations

import os
import signal
from typing import Callable

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


class ForgottenRotationTests(SynchronousTestCase):
    """
    A forked worker forgets the supervisor's C{SIGUSR1} hand-on: the copy
    of it in the worker would wake the supervisor's reactor through a
    descriptor number that, in the worker, is another file: a worker
    started after a kill, then a C{SIGUSR1}, is when a compressed segment
    that is not zstd was seen in CI.
    """

    def followedBy(self, handOn: Callable[[], object]) -> None:
        """
        Hand this process's C{SIGUSR1} on as the supervisor does, to a
        supervisor whose reactor calls C{handOn}.
        """
        from netlog.log.supervised import followRotations, unfollowRotations

        class ParentsReactor:
            def callFromThread(self, f: object) -> None:
                handOn()

        class Supervisor:
            _reactor = ParentsReactor()
            worker = None

        supervisor = Supervisor()
        followRotations(supervisor)
        self.addCleanup(unfollowRotations, supervisor)
        previous = signal.getsignal(signal.SIGUSR1)
        self.addCleanup(signal.signal, signal.SIGUSR1, previous)

    def test_forkedChildForgetsParentsRotations(self) -> None:
        """
        In a child forked as a worker is, a C{SIGUSR1} reaches neither the
        parent's hand-on nor its writers.
        """
        from netlog.log.writer import rotatingWriters
        from netlog.supervise.fork import _forgetParent

        readEnd, writeEnd = os.pipe()
        self.addCleanup(os.close, readEnd)
        self.followedBy(lambda: os.write(writeEnd, b"parent's hand-on ran\n"))
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                _forgetParent()
                from netlog.log.writer import listenForRotation

                listenForRotation()
                signal.raise_signal(signal.SIGUSR1)
                os.write(writeEnd, f"child: {len(rotatingWriters())} writers\n".encode())
                code = 0
            finally:
                os._exit(code)
        os.close(writeEnd)
        _, status = os.waitpid(pid, 0)
        said = b""
        while True:
            piece = os.read(readEnd, 4096)
            if not piece:
                break
            said += piece
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, said)
        self.assertEqual(said, b"child: 0 writers\n")

    def test_parentStillHandsOn(self) -> None:
        """
        The parent's own C{SIGUSR1} still reaches its hand-on: the child's
        forgetting is the child's.
        """
        ran: list[bool] = []
        self.followedBy(lambda: ran.append(True))
        signal.raise_signal(signal.SIGUSR1)
        self.assertEqual(len(ran), 1)
