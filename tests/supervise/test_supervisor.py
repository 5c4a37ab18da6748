"""
The supervisor's decisions, with a fake reactor and fake worker processes:
when workers start, which one serves, when it gives up, how it stops.
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any

from twisted.internet.error import ProcessDone, ProcessTerminated
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from netlog.supervise.policy import RestartPolicy
from netlog.supervise.supervisor import EXIT_GAVE_UP, STANDBY_DELAY, Supervisor, describeEnd, importRoot
from netlog.supervise.worker import ALIVE, GO, READY, STANDING_BY, STATUS_FD


class FakeProcess:
    def __init__(self, pid: int, protocol: Any, args: list[str], childFDs: dict[int, Any]) -> None:
        self.pid = pid
        self.protocol = protocol
        self.args = args
        self.spec = json.loads(args[-1])
        self.childFDs = childFDs
        self.signals: list[str] = []
        self.written: list[bytes] = []
        self.ended = False

    def signalProcess(self, name: str) -> None:
        self.signals.append(name)

    def writeToChild(self, fd: int, data: bytes) -> None:
        self.written.append(data)

    # what the process does
    def say(self, line: bytes) -> None:
        self.protocol.childDataReceived(STATUS_FD, line)

    def die(self, sig: int | None = 9, code: int | None = None) -> None:
        self.ended = True
        if sig is None and code == 0:
            reason = Failure(ProcessDone(0))
        else:
            reason = Failure(ProcessTerminated(exitCode=code, signal=sig))
        self.protocol.processEnded(reason)


class FakeReactor(MemoryReactorClock):
    def __init__(self) -> None:
        super().__init__()
        self.processes: list[FakeProcess] = []
        self.running = True
        self.stopped = False
        #: Errors the next spawns raise, in order (as out of descriptors).
        self.spawnErrors: list[OSError] = []

    def spawnProcess(self, protocol: Any, executable: str, args: list[str], env: Any = None, childFDs: Any = None, **kw: Any) -> FakeProcess:
        if self.spawnErrors:
            raise self.spawnErrors.pop(0)
        process = FakeProcess(1000 + len(self.processes), protocol, args, childFDs)
        self.processes.append(process)
        protocol.makeConnection(process)
        return process

    def stop(self) -> None:
        self.stopped = True


class SupervisorTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.reactor = FakeReactor()
        self.gaveUp: list[int] = []

    def supervisor(self, standby: bool = True, hangTimeout: float = 0, policy: RestartPolicy | None = None,
                   **kw: Any) -> Supervisor:
        """
        A started supervisor of dummy workers, restarting them by C{policy}
        (by default one that gives up after 4 quick deaths).
        """
        supervisor = Supervisor(
            reactor=self.reactor,
            optionsClass="tests.supervise.dummy.Options",
            buildProxy="tests.supervise.dummy.buildProxy",
            argv=["--x"],
            logPath=None,
            listeners=[],
            onGiveUp=self.gaveUp.append,
            standby=standby,
            hangTimeout=hangTimeout,
            policy=policy or RestartPolicy(quick=1.0, minDelay=0.25, maxDelay=8.0, maxQuickDeaths=4),
            grace=5.0,
            **kw,
        )
        supervisor.startService()
        return supervisor

    def test_startsOneWorkerThenStandby(self) -> None:
        """
        It starts one serving worker at once, and a standby a moment later
        (told to stand by in its spec).
        """
        self.supervisor()
        self.assertEqual([p.spec["standby"] for p in self.reactor.processes], [False])
        self.assertEqual(self.reactor.processes[0].spec["argv"], ["--x"])
        self.assertEqual(self.reactor.processes[0].args[1:4], ["-P", "-m", "netlog.supervise.worker"])
        self.reactor.advance(STANDBY_DELAY)
        self.assertEqual([p.spec["standby"] for p in self.reactor.processes], [False, True])

    def test_standbyTakesOver(self) -> None:
        """
        When the serving worker dies, a standby that is standing by is told
        to go, and no new process is needed to serve.
        """
        supervisor = self.supervisor()
        first = self.reactor.processes[0]
        first.say(READY)
        self.reactor.advance(STANDBY_DELAY)
        standby = self.reactor.processes[1]
        standby.say(STANDING_BY)
        self.reactor.advance(10)
        first.die()
        self.assertEqual(standby.written, [GO])
        self.assertIs(supervisor.worker.transport, standby)  # type: ignore[union-attr]
        self.assertEqual(len(self.reactor.processes), 2)
        self.reactor.advance(STANDBY_DELAY)
        self.assertEqual(len(self.reactor.processes), 3)
        self.assertTrue(self.reactor.processes[2].spec["standby"])

    def test_waitsForStartingStandby(self) -> None:
        """
        A worker that dies while its standby is still starting is replaced
        by that standby once it stands by, not by yet another process.
        """
        supervisor = self.supervisor()
        first = self.reactor.processes[0]
        first.say(READY)
        self.reactor.advance(STANDBY_DELAY)
        standby = self.reactor.processes[1]
        self.reactor.advance(10)
        first.die()
        self.assertEqual(len(self.reactor.processes), 2)
        self.assertIsNone(supervisor.worker)
        standby.say(STANDING_BY)
        self.assertEqual(standby.written, [GO])
        self.assertIs(supervisor.worker.transport, standby)  # type: ignore[union-attr]

    def test_startingStandbyDiesToo(self) -> None:
        """
        If that standby dies before it stands by, it counts as a worker that
        died: the policy starts another.
        """
        supervisor = self.supervisor()
        first = self.reactor.processes[0]
        first.say(READY)
        self.reactor.advance(STANDBY_DELAY)
        standby = self.reactor.processes[1]
        self.reactor.advance(10)
        first.die()
        standby.die(sig=None, code=3)
        self.assertEqual(len(self.reactor.processes), 3)
        self.assertFalse(self.reactor.processes[2].spec["standby"])
        self.assertIs(supervisor.worker.transport, self.reactor.processes[2])  # type: ignore[union-attr]

    def test_coldStartWithoutStandby(self) -> None:
        """
        With no standby ready, a dead worker is replaced by a new process.
        """
        supervisor = self.supervisor(standby=False)
        first = self.reactor.processes[0]
        first.say(READY)
        self.reactor.advance(10)
        first.die()
        self.assertEqual(len(self.reactor.processes), 2)
        self.assertFalse(self.reactor.processes[1].spec["standby"])
        self.assertIs(supervisor.worker.transport, self.reactor.processes[1])  # type: ignore[union-attr]

    def test_quickDeathsDelayStandby(self) -> None:
        """
        After a second quick death in a row, even a standby ready to go
        waits out the policy's delay before it serves.
        """
        supervisor = self.supervisor()
        self.reactor.advance(STANDBY_DELAY)
        first, standby = self.reactor.processes
        standby.say(STANDING_BY)
        first.die()  # never served: a quick death, the first: at once
        self.assertEqual(standby.written, [GO])
        self.reactor.advance(STANDBY_DELAY)
        nextStandby = self.reactor.processes[2]
        nextStandby.say(STANDING_BY)
        standby.die()  # the second quick death: 0.25 s
        self.assertIsNone(supervisor.worker)
        self.reactor.advance(0.24)
        self.assertEqual(nextStandby.written, [])
        self.reactor.advance(0.01)
        self.assertEqual(nextStandby.written, [GO])

    def test_givesUp(self) -> None:
        """
        Quick deaths in a row are restarted at once, then after 0.25 and
        0.5 s; at the policy's limit it gives up: no new worker, the exit
        code set, the reactor stopped.
        """
        supervisor = self.supervisor(standby=False)
        for delay in [0.0, 0.25, 0.5]:
            before = len(self.reactor.processes)
            self.reactor.processes[-1].die(sig=None, code=1)
            if delay:
                self.reactor.advance(delay - 0.01)
                self.assertEqual(len(self.reactor.processes), before)
                self.reactor.advance(0.01)
            self.assertEqual(len(self.reactor.processes), before + 1)
        count = len(self.reactor.processes)
        self.assertEqual(self.gaveUp, [])
        self.reactor.processes[-1].die(sig=None, code=1)
        self.assertEqual(self.gaveUp, [EXIT_GAVE_UP])
        self.assertEqual(supervisor.exitCode, EXIT_GAVE_UP)
        self.assertTrue(self.reactor.stopped)
        self.reactor.advance(100)
        self.assertEqual(len(self.reactor.processes), count)

    def test_spawnFailsThenRetries(self) -> None:
        """
        A worker that can't be started (out of file descriptors) is tried
        again after growing delays, never at once and never left undone:
        the supervisor ends up with a serving worker.
        """
        supervisor = self.supervisor(standby=False)
        first = self.reactor.processes[-1]
        first.say(READY)
        self.reactor.advance(10)
        self.reactor.spawnErrors = [OSError(errno.EMFILE, "Too many open files")] * 3
        # It served long: replaced at once; that spawn fails, then two more.
        first.die()
        self.assertIsNone(supervisor.worker)
        self.assertEqual(len(self.reactor.processes), 1)
        for delay in [0.25, 0.25, 0.5]:
            self.reactor.advance(delay - 0.01)
            self.assertIsNone(supervisor.worker)
            self.reactor.advance(0.01)
        self.assertEqual(self.reactor.spawnErrors, [])
        self.assertEqual(len(self.reactor.processes), 2)
        self.assertIs(supervisor.worker.transport, self.reactor.processes[-1])
        self.assertEqual(self.gaveUp, [])

    def test_standbySpawnFails(self) -> None:
        """
        A standby that can't be started is tried again later; the serving
        worker is left alone.
        """
        supervisor = self.supervisor(standby=True)
        serving = supervisor.worker
        self.reactor.spawnErrors = [OSError(errno.EMFILE, "Too many open files")]
        self.reactor.advance(STANDBY_DELAY)
        self.assertIsNone(supervisor.standby)
        self.assertIs(supervisor.worker, serving)
        self.reactor.advance(STANDBY_DELAY * 2)
        self.assertIsNotNone(supervisor.standby)

    def test_neverGivesUpByDefault(self) -> None:
        """
        With the default policy, many quick deaths in a row never stop it:
        it starts another after at most 30 s, each time.
        """
        # (RestartPolicy() is the policy a Supervisor makes when given none.)
        supervisor = self.supervisor(standby=False, policy=RestartPolicy())
        for _ in range(20):
            before = len(self.reactor.processes)
            self.reactor.processes[-1].die()
            self.reactor.advance(30.0)
            self.assertEqual(len(self.reactor.processes), before + 1)
        self.assertEqual(self.gaveUp, [])
        self.assertIsNone(supervisor.exitCode)

    def test_stopTermThenKill(self) -> None:
        """
        Stopping sends TERM to every worker, KILL to those still running
        after the grace period, and finishes once all have ended.
        """
        supervisor = self.supervisor()
        self.reactor.advance(STANDBY_DELAY)
        serving, standby = self.reactor.processes
        done = supervisor.stopService()
        results: list[Any] = []
        done.addBoth(results.append)
        self.assertEqual((serving.signals, standby.signals), (["TERM"], ["TERM"]))
        standby.die(sig=15)
        self.assertEqual(results, [])
        self.reactor.advance(5.0)
        self.assertEqual(serving.signals, ["TERM", "KILL"])
        serving.die(sig=9)
        self.assertEqual(len(results), 1)
        self.assertNotIsInstance(results[0], Failure)
        self.reactor.advance(100)
        self.assertEqual(len(self.reactor.processes), 2)

    def test_standbyDeathBacksOff(self) -> None:
        """
        A standby that keeps dying is started again later and later, and
        never makes the supervisor give up while a worker serves.
        """
        self.supervisor()
        self.reactor.processes[0].say(READY)
        self.reactor.advance(STANDBY_DELAY)
        gaps = []
        for _ in range(4):
            self.reactor.processes[-1].die(sig=None, code=3)
            before = len(self.reactor.processes)
            waited = 0.0
            while len(self.reactor.processes) == before:
                self.reactor.advance(0.5)
                waited += 0.5
            gaps.append(waited)
        self.assertEqual(gaps, sorted(gaps))
        self.assertGreater(gaps[-1], gaps[0])
        self.assertEqual(self.gaveUp, [])

    def test_hungWorkerKilled(self) -> None:
        """
        A serving worker whose heartbeat stops for longer than the hang
        timeout is killed (and then replaced as any dead worker); one that
        keeps beating is left alone.
        """
        self.supervisor(standby=False, hangTimeout=3.0)
        worker = self.reactor.processes[0]
        worker.say(READY)
        for _ in range(10):
            self.reactor.advance(1.0)
            worker.say(ALIVE)
        self.assertEqual(worker.signals, [])
        self.reactor.advance(3.0)
        self.assertEqual(worker.signals, [])
        self.reactor.advance(1.0)
        self.assertEqual(worker.signals, ["KILL"])
        self.reactor.advance(5.0)
        self.assertEqual(worker.signals, ["KILL"])
        worker.die(sig=9)
        self.assertEqual(len(self.reactor.processes), 2)

    def test_workerRunsSameCode(self) -> None:
        """
        A worker is started with -P (nothing imported from the working
        folder) and with the folders this process imported netlog and the
        plugin from first on PYTHONPATH.
        """
        supervisor = Supervisor(
            reactor=self.reactor,
            optionsClass="tests.supervise.dummy.Options",
            buildProxy="tests.supervise.dummy.buildProxy",
            argv=[],
            logPath=None,
            listeners=[],
            env={"PYTHONPATH": "/elsewhere"},
            hangTimeout=0,
        )
        env = supervisor._workerEnv()
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.assertEqual(env["PYTHONPATH"].split(os.pathsep), [here, "/elsewhere"])
        self.assertEqual(importRoot("nothing.here"), None)

    def test_describeEnd(self) -> None:
        """
        How a worker ended, in words.
        """
        self.assertEqual(describeEnd(Failure(ProcessDone(0))), "exited with 0")
        self.assertEqual(describeEnd(Failure(ProcessTerminated(exitCode=3))), "exited with 3")
        self.assertEqual(describeEnd(Failure(ProcessTerminated(signal=9))), "killed by SIGKILL")
        self.assertEqual(describeEnd(Failure(ProcessTerminated(signal=15))), "killed by SIGTERM")
