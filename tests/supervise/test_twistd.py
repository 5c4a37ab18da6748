"""
The supervisor as users run it: a real C{twistd -n netlog-dummy} (a tiny proxy
on the same contract as the real ones, see L{tests.supervise.dummy}) whose
worker is killed, stopped, and made to fail; the standby taking over, a hung
worker, SIGTERM and Ctrl-C both with one worker and with C{--workers 2}.
"""

from __future__ import annotations

import os
import pwd
import grp
import signal
import socket
import stat
import time

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.supervise.supervisor import EXIT_GAVE_UP
from tests.supervise.running import (
    Twistd,
    WorkerSlots,
    alive,
    ask,
    checkLog,
    getJSON,
    interpreterFor,
    readLog,
    uidOf,
    waitFor,
)


class _SupervisedCases:
    """
    What the supervisor does for every worker slot, with one worker or more
    (the classes below, each a C{SynchronousTestCase}): faults are made in
    slot 0, which serves the dummy's listener.
    """

    #: C{--workers}: 1 (the default) unless a class says.
    workers = 1

    def setUp(self) -> None:
        self.slots = WorkerSlots(self.workers)

    def start(self, *args: str, twistdArgs: list[str] = (), folder: str | None = None) -> Twistd:  # type: ignore[assignment]
        if folder is None:
            folder = os.path.abspath(self.mktemp())
            os.makedirs(folder)
        self.folder = folder
        self.logPath = os.path.join(folder, "log", "network.jsonl")
        # a --log by hand is in a folder that exists (netlog makes only its defaults')
        os.makedirs(os.path.dirname(self.logPath), exist_ok=True)
        os.chmod(os.path.dirname(self.logPath), 0o755)
        twistd = Twistd(
            folder,
            "netlog-dummy",
            ["--log", self.logPath, "--listen", "tcp:0:interface=127.0.0.1", "--api", "tcp:0",
             "--api-token-file", os.path.join(folder, "api-token"), *self.slots.options, *args],
            twistdArgs,
        )
        self.addCleanup(twistd.stop)
        self.port = twistd.listenerPort("answer")
        self.apiPort = twistd.apiPort()
        return twistd

    def test_killedWorkerComesBack(self) -> None:
        """
        A worker killed with SIGKILL while an exchange is open is started
        again at once; the new worker numbers on and ends the dead one's
        open exchange with "the proxy restarted"; the supervisor's log says
        which worker died of what and when the next one served. Another
        slot's worker serves on, untouched.
        """
        twistd = self.start()
        first = twistd.waitServing(1, self.slots.slot)
        others = self.slots.others(twistd)
        self.assertEqual(ask(self.port, b"one"), b"ok one %d\n" % first)
        held = socket.create_connection(("127.0.0.1", self.port))
        self.addCleanup(held.close)
        held.sendall(b"hold\n")
        waitFor(lambda: len(readLog(self.logPath)) == 3, "the held exchange's open line")
        os.kill(first, signal.SIGKILL)
        second = twistd.waitServing(2, self.slots.slot)
        self.assertNotEqual(first, second)
        self.assertEqual(ask(self.port, b"two"), b"ok two %d\n" % second)
        records = readLog(self.logPath)
        checkLog(self, records)
        self.assertEqual(
            [(r["type"], r["id"], r.get("_failed")) for r in records[2:4]],
            [("open", 3, None), ("end", 3, {"reason": "the proxy restarted"})],
        )
        self.assertEqual(records[-2]["pid"], second)
        text = twistd.text()
        self.assertIn(f"worker {first}{self.slots.where} died (killed by SIGKILL)", text)
        self.assertIn(f"worker {second} serving again", text)
        self.assertIn(f"after worker {first} died", text)
        self.slots.checkUntouched(self, twistd, others)

    def test_termStopsCleanly(self) -> None:
        """
        SIGTERM to the supervisor stops the worker (each slot's) with SIGTERM; its open
        exchanges end with "the proxy stopped"; twistd ends and no
        worker is left.
        """
        twistd = self.start()
        worker, *others = self.slots.waitServing(twistd)
        held = socket.create_connection(("127.0.0.1", self.port))
        self.addCleanup(held.close)
        held.sendall(b"hold\n")
        waitFor(lambda: len(readLog(self.logPath)) == 1, "the held exchange's open line")
        twistd.process.send_signal(signal.SIGTERM)
        # twistd, once cleanly shut down, ends itself by the signal it got.
        self.assertEqual(twistd.wait(), -signal.SIGTERM)
        self.assertEqual([pid for pid in twistd.workers() if alive(pid)], [])
        records = readLog(self.logPath)
        checkLog(self, records)
        self.assertEqual(records[-1]["_failed"], {"reason": "the proxy stopped"})
        for pid in [worker, *others]:
            self.assertIn(f"worker {pid} stopped (exited with 0)", twistd.text())

    def test_ctrlC(self) -> None:
        """
        Ctrl-C (SIGINT to the whole process group) stops the proxy once,
        cleanly: the workers leave it to the supervisor, no worker is started
        again, and open exchanges end with "the proxy stopped".
        """
        twistd = self.start()
        self.slots.waitServing(twistd)
        waitFor(lambda: twistd.standingByCount() >= self.workers, "a standby in each slot")
        held = socket.create_connection(("127.0.0.1", self.port))
        self.addCleanup(held.close)
        held.sendall(b"hold\n")
        waitFor(lambda: len(readLog(self.logPath)) == 1, "the held exchange's open line")
        os.killpg(twistd.process.pid, signal.SIGINT)
        self.assertEqual(twistd.wait(), -signal.SIGINT)
        text = twistd.text()
        self.assertEqual(len(twistd.workers()), 2 * self.workers)
        self.assertNotIn("died", text)
        self.assertNotRegex(text, r"worker \d+: Received SIGINT")
        self.assertRegex(text, r"worker \d+: Received SIGTERM")
        self.assertEqual([pid for pid in twistd.workers() if alive(pid)], [])
        records = readLog(self.logPath)
        checkLog(self, records)
        self.assertEqual(records[-1]["_failed"], {"reason": "the proxy stopped"})

    def test_hungWorkerReplaced(self) -> None:
        """
        A worker whose event loop is stuck is killed after --hang-timeout and
        replaced; the exchange it had open ends with "the proxy restarted".
        Another slot's worker, not stuck, serves on.
        """
        twistd = self.start("--hang-timeout", "1.5")
        first = twistd.waitServing(1, self.slots.slot)
        others = self.slots.others(twistd)
        stuck = socket.create_connection(("127.0.0.1", self.port))
        self.addCleanup(stuck.close)
        stuck.sendall(b"hang\n")
        second = twistd.waitServing(2, self.slots.slot)
        self.assertNotEqual(first, second)
        self.assertEqual(ask(self.port, b"after"), b"ok after %d\n" % second)
        text = twistd.text()
        self.assertRegex(text, rf"worker {first} has not answered for [0-9.]+ s \(its event loop is stuck\); killing it")
        self.assertIn(f"worker {first}{self.slots.where} died (killed by SIGKILL)", text)
        records = readLog(self.logPath)
        checkLog(self, records)
        self.assertEqual(records[1]["_failed"], {"reason": "the proxy restarted"})
        self.slots.checkUntouched(self, twistd, others)



@pytest.mark.slow
class SupervisedTests(_SupervisedCases, SynchronousTestCase):
    """
    One worker (the default).
    """

    def test_connectionsWaitForNextWorker(self) -> None:
        """
        Connections made while no worker runs are not refused: they wait in
        the listening socket's backlog and the next worker answers them.
        """
        twistd = self.start("--start-delay", "1.0")
        first = twistd.waitServing(1)
        os.kill(first, signal.SIGKILL)
        waitFor(lambda: not alive(first), "the worker's death")
        answers = [ask(self.port, b"w%d" % i) for i in range(3)]
        second = twistd.waitServing(2)
        self.assertEqual(answers, [b"ok w%d %d\n" % (i, second) for i in range(3)])
        checkLog(self, readLog(self.logPath))

    def test_killAfterGrace(self) -> None:
        """
        A worker that ignores SIGTERM is killed once the grace period is
        over; the supervisor ends the exchanges it left open with "the proxy
        stopped" and shuts down cleanly, saying so.
        """
        twistd = self.start("--ignore-term", "--grace", "0.5")
        worker = twistd.waitServing(1)
        held = socket.create_connection(("127.0.0.1", self.port))
        self.addCleanup(held.close)
        held.sendall(b"hold\n")
        waitFor(lambda: len(readLog(self.logPath)) == 1, "the held exchange's open line")
        twistd.process.send_signal(signal.SIGTERM)
        # twistd, once cleanly shut down, ends itself by the signal it got.
        self.assertEqual(twistd.wait(), -signal.SIGTERM)
        self.assertFalse(alive(worker))
        text = twistd.text()
        self.assertIn(f"worker {worker} did not stop within 0.5 s of SIGTERM; killing it", text)
        self.assertIn(f"worker {worker} stopped (killed by SIGKILL)", text)
        # The supervisor ended what the killed worker left open.
        records = readLog(self.logPath)
        checkLog(self, records)
        self.assertEqual(records[-1]["_failed"], {"reason": "the proxy stopped"})

    def test_givesUp(self) -> None:
        """
        With --give-up-after 6, a worker that dies at once every time is
        started again with growing delays, then the supervisor gives up and
        twistd exits non-zero.
        """
        twistd = self.start("--die-at-start", "--give-up-after", "6")
        self.assertEqual(twistd.wait(timeout=60), EXIT_GAVE_UP)
        text = twistd.text()
        self.assertIn("starting another at once", text)
        self.assertIn("starting another in 0.25 s", text)
        self.assertIn("starting another in 0.5 s", text)
        self.assertIn("quick deaths in a row: giving up", text)
        for pid in twistd.workers():
            self.assertFalse(alive(pid))

    def test_apiStaysUpWhileWorkerIsDown(self) -> None:
        """
        The API is served by the supervisor: it answers while no worker runs.
        """
        twistd = self.start("--start-delay", "2.0")
        first = twistd.waitServing(1)
        ask(self.port, b"one")
        os.kill(first, signal.SIGKILL)
        waitFor(lambda: not alive(first), "the worker's death")
        status, body = getJSON(f"http://127.0.0.1:{self.apiPort}/network?after=0")
        self.assertEqual(status, 200)
        self.assertEqual([line["n"] for line in body["lines"]], [1, 2])
        self.assertEqual(twistd.servingCount(), 1)

    def test_supervisorKilled(self) -> None:
        """
        Workers whose supervisor was killed with SIGKILL see their lifeline
        close and stop on their own (so a new supervisor can bind again).
        """
        twistd = self.start()
        twistd.waitServing(1)
        waitFor(lambda: twistd.standingByCount() >= 1, "a standby")
        workers = twistd.workers()
        self.assertEqual(len(workers), 2)
        twistd.process.kill()
        twistd.wait()
        waitFor(lambda: not any(alive(pid) for pid in workers), "the workers to stop")

    def test_noSupervise(self) -> None:
        """
        With --no-supervise the proxy runs in the twistd process itself: no
        worker, the same answers and the API.
        """
        twistd = self.start("--no-supervise")
        answer = waitFor(lambda: _tryAsk(self.port, b"one"), "the proxy to answer")
        self.assertEqual(answer, b"ok one %d\n" % twistd.process.pid)
        self.assertEqual(twistd.workers(), [])
        status, body = getJSON(f"http://127.0.0.1:{self.apiPort}/network?after=1")
        self.assertEqual((status, body["lines"][0]["n"], body["next"]), (200, 2, 2))
        twistd.process.send_signal(signal.SIGTERM)
        # twistd, once cleanly shut down, ends itself by the signal it got.
        self.assertEqual(twistd.wait(), -signal.SIGTERM)


@pytest.mark.slow
class TwoWorkersSupervisedTests(_SupervisedCases, SynchronousTestCase):
    """
    The same with C{--workers 2}: slot 1's workers serve no listener (the
    dummy has no sessions) but are started, stood by and stopped as slot
    0's are.
    """

    workers = 2


def _tryAsk(port: int, line: bytes) -> bytes | None:
    try:
        return ask(port, line)
    except OSError:
        return None


@pytest.mark.slow
class UnprivilegedWorkerTests(SynchronousTestCase):
    """
    Run as root with C{--uid nobody --gid nogroup}, as in production.
    """

    def setUp(self) -> None:
        if os.geteuid() != 0:
            raise self.skipTest("needs root to drop privileges")  # type: ignore[misc]
        try:
            self.uid = pwd.getpwnam("nobody").pw_uid
            self.gid = grp.getgrnam("nogroup").gr_gid
        except KeyError:
            raise self.skipTest("no nobody/nogroup on this system")  # type: ignore[misc]
        self.interpreter = interpreterFor(self.uid, self.gid)
        if self.interpreter is None:
            raise self.skipTest("no Python with this tree's packages that nobody can run")  # type: ignore[misc]

    def test_workerCantTouchLog(self) -> None:
        """
        The worker runs as nobody and logs through the file it inherited, but
        as nobody the log can't be opened to append, truncated, or replaced;
        it is root's, 0644. A root-only file the proxy lists as privileged
        reaches the worker open.
        """
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        # mktemp's folder is made 0700; the log must be readable by nobody.
        os.chmod(os.path.dirname(folder), 0o755)
        logPath = os.path.join(folder, "log", "network.jsonl")
        os.mkdir(os.path.dirname(logPath))
        os.chmod(os.path.dirname(logPath), 0o755)
        secret = os.path.join(folder, "secret")
        with open(secret, "w") as f:
            f.write("only root reads this\n")
        os.chmod(secret, 0o600)
        twistd = Twistd(
            folder,
            "netlog-dummy",
            [
                "--log", logPath,
                "--listen", "tcp:0:interface=127.0.0.1",
                "--api", "tcp:0",
                "--api-token-file", os.path.join(folder, "api-token"),
                "--secret", secret,
            ],
            ["--uid", "nobody", "--gid", "nogroup"],
            self.interpreter,
        )
        self.addCleanup(twistd.stop)
        port, apiPort = twistd.listenerPort("answer"), twistd.apiPort()
        worker = twistd.waitServing(1)
        self.assertEqual(uidOf(worker), self.uid)
        self.assertEqual(uidOf(twistd.process.pid), self.uid)
        self.assertEqual(ask(port, b"one"), b"ok one %d\n" % worker)
        # A file only root may read, opened by the supervisor in the
        # privileged step, reached the unprivileged worker.
        self.assertEqual(ask(port, b"secret"), b"only root reads this\n")
        st = os.stat(logPath)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o644))

        pid = os.fork()
        if pid == 0:  # the child: become nobody and try
            code = 0
            try:
                os.setgroups([])
                os.setgid(self.gid)
                os.setuid(self.uid)
                tries = [
                    lambda: os.open(logPath, os.O_WRONLY | os.O_APPEND),
                    lambda: os.truncate(logPath, 0),
                    lambda: os.rename(logPath, logPath + ".old"),
                    lambda: os.unlink(logPath),
                    lambda: open(os.path.join(os.path.dirname(logPath), "new"), "w"),
                ]
                for bit, attempt in enumerate(tries):
                    try:
                        attempt()
                    except PermissionError:
                        continue
                    code |= 1 << bit
                with open(logPath, "rb") as f:  # but it can read it
                    f.read()
            except BaseException:
                code = 128
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)
        records = readLog(logPath)
        checkLog(self, records)
        self.assertEqual(len(records), 4)
        status, body = getJSON(f"http://127.0.0.1:{apiPort}/network")
        self.assertEqual(len(body["lines"]), 4)
