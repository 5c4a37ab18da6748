"""
The real stand-in's supervisor under faults: out of file descriptors,
workers killed in quick succession, and the supervisor itself killed; the
faults a worker slot must survive both with one worker and with
C{--workers 2} (made in slot 0, the other slot's worker left alone).
"""

from __future__ import annotations

import os
import re
import resource
import select
import signal
import socket
import time

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.api.service import MAX_API_CONNECTIONS
from netlog.supervise.supervisor import EXIT_GAVE_UP
from tests.supervise.running import (
    WAIT,
    Twistd,
    WorkerSlots,
    alive,
    checkLog,
    getJSON,
    killServing,
    readLog,
    waitFor,
)

#: How soon workers stop once their supervisor is killed, in seconds.
LIFELINE_NOTICE = 0.5
#: Idle connections a client holds open to the API.
HELD_API_CONNECTIONS = 300
#: The open files limit (soft and hard) the proxy starts under.
LOW_LIMIT = 256
#: Descriptors left free under the supervisor's limit once the API holds
#: all it may: fewer than starting a worker takes (its pipes and control
#: channel), even with those of the dead worker freed.
SPARE_FDS = 2
#: Failed starts to see logged before the API's connections are let go.
FAILED_STARTS = 2


def openFilesLimit(pid: int) -> tuple[int, int]:
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError(f"no open files limit for {pid}")


class _FaultCases:
    """
    The faults every worker slot must survive, with one worker or more (the
    classes below, each a C{SynchronousTestCase}).
    """

    #: C{--workers}: 1 (the default) unless a class says.
    workers = 1

    def setUp(self) -> None:
        self.slots = WorkerSlots(self.workers)
        # An origin that completes the handshake (in its backlog) and holds.
        self.origin = socket.socket()
        self.origin.bind(("127.0.0.1", 0))
        self.origin.listen(64)
        self.addCleanup(self.origin.close)
        self.originPort = self.origin.getsockname()[1]

    def start(self, *extra: str, openFiles: tuple[int, int] | None = None) -> Twistd:
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        self.logPath = os.path.join(folder, "network.jsonl")
        twistd = Twistd(
            folder,
            "netlog-standin",
            [
                "--log", self.logPath,
                "--listen", "tcp:0:interface=127.0.0.1",
                "--resolve", "origin.test=127.0.0.1",
                "--resolve-only",
                "--connect-ports", str(self.originPort),
                "--state", folder,
                *self.slots.options,
                *extra,
            ],
            openFiles=openFiles,
        )
        self.addCleanup(twistd.stop)
        self.port = twistd.listenerPort("forward")
        return twistd

    def tunnel(self) -> socket.socket:
        """
        A CONNECT tunnel to the origin through the proxy, established.
        """
        client = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)
        self.addCleanup(client.close)
        authority = f"origin.test:{self.originPort}"
        client.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = client.recv(4096)
            self.assertTrue(chunk, answer)
            answer += chunk
        self.assertTrue(answer.startswith(b"HTTP/1.1 200 "), answer)
        return client

    def test_supervisorKilled(self) -> None:
        """
        kill -9 of the supervisor: its workers (the serving one and the
        standby of each slot) stop within half a second, ending their open exchanges
        with "the proxy stopped" and closing the browser's connections.
        """
        twistd = self.start()
        self.slots.waitServing(twistd)
        waitFor(lambda: twistd.standingByCount() >= self.workers, "a standby in each slot")
        workers = twistd.workers()
        self.assertEqual(len(workers), 2 * self.workers)
        client = self.tunnel()
        waitFor(lambda: len(readLog(self.logPath)) == 1, "the tunnel's open line")
        killed = time.monotonic()
        twistd.process.kill()
        twistd.wait()
        # Noticed: the serving worker ended its exchange.
        waitFor(lambda: len(readLog(self.logPath)) == 2, "the tunnel's end line", timeout=LIFELINE_NOTICE)
        self.assertLess(time.monotonic() - killed, LIFELINE_NOTICE)
        records = readLog(self.logPath)
        checkLog(self, records)
        self.assertEqual([r["type"] for r in records], ["open", "end"])
        self.assertEqual(records[1]["_failed"], {"reason": "the proxy stopped"})
        waitFor(lambda: not any(alive(pid) for pid in workers), "the workers to stop")
        client.settimeout(WAIT)
        try:
            self.assertEqual(client.recv(4096), b"")
        except ConnectionResetError:
            pass  # closed, with a reset

    def test_quickKillsDontStopIt(self) -> None:
        """
        Six workers killed in quick succession: the supervisor keeps
        starting more (each quick death logged as an error, with a growing
        delay) and the proxy serves again; it doesn't give up. Another
        slot's worker serves on, untouched.
        """
        twistd = self.start()
        others = self.slots.others(twistd)
        killServing(twistd, 6, self.slots.slot)
        twistd.waitServing(7, self.slots.slot)
        self.assertIsNone(twistd.process.poll())
        text = twistd.text()
        self.assertNotIn("giving up", text)
        self.assertRegex(text, rf"#error\] worker \d+{self.slots.where} died \(killed by SIGKILL\) after [0-9.]+ s, "
                               r"6 quick deaths in a row; starting another in 4 s")
        client = self.tunnel()
        client.close()
        self.slots.checkUntouched(self, twistd, others)

    def test_giveUpAfter(self) -> None:
        """
        With --give-up-after 3, three quick deaths in a row stop the proxy
        with exit status 70, its workers gone (every slot's).
        """
        twistd = self.start("--give-up-after", "3")
        self.slots.waitServing(twistd)
        killed = killServing(twistd, 3, self.slots.slot)
        self.assertEqual(twistd.wait(WAIT), EXIT_GAVE_UP)
        self.assertIn("3 quick deaths in a row: giving up", twistd.text())
        for pid in twistd.workers():
            self.assertFalse(alive(pid), (pid, killed))

    def test_spawnOutOfFilesRetried(self) -> None:
        """
        A supervisor that has no descriptor left to start a worker (the API
        holding all it may, the open files limit just above) logs that it
        could not start one and tries again, more than once, instead of
        sitting with no worker; once the API's connections are let go, a
        worker serves again and the proxy answers. Another slot's worker
        serves on, untouched.
        """
        twistd = self.start("--api", "tcp:0", "--no-standby", "--api-idle-timeout", "300",
                            openFiles=(LOW_LIMIT, LOW_LIMIT))
        apiPort = twistd.apiPort()
        first = twistd.waitServing(1, self.slots.slot)
        others = self.slots.others(twistd)
        pid = twistd.process.pid
        self.assertEqual(openFilesLimit(pid), (LOW_LIMIT, LOW_LIMIT))
        held = []
        self.addCleanup(lambda: [s.close() for s in held])
        for _ in range(MAX_API_CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", apiPort), timeout=WAIT)
            held.append(s)
            s.sendall(f"GET /network HTTP/1.1\r\nHost: 127.0.0.1:{apiPort}\r\n\r\n".encode())
            self.assertTrue(s.recv(12).startswith(b"HTTP/1.1 200"))
        # The limit as low as it can be with what the supervisor holds now:
        # the next worker can't be started.
        tight = len(os.listdir(f"/proc/{pid}/fd")) + SPARE_FDS
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (tight, tight))
        os.kill(first, signal.SIGKILL)
        what = " its listeners" if self.slots.where else ""
        failed = (rf"#error\] could not start a worker{self.slots.where} \(Too many open files\); "
                  rf"nobody serves{what}; trying again in [0-9.]+ s")
        waitFor(lambda: len(re.findall(failed, twistd.text())) >= FAILED_STARTS, "failed starts, logged")
        self.assertEqual(twistd.servingCount(self.slots.slot), 1)
        self.assertIsNone(twistd.process.poll())
        for s in held:
            s.close()
        second = twistd.waitServing(2, self.slots.slot)
        self.assertNotEqual(first, second)
        self.assertRegex(twistd.text(), rf"worker {second} serving again, [0-9.]+ s after worker {first} died")
        self.tunnel().close()
        status, _ = waitFor(lambda: _tryJSON(f"http://127.0.0.1:{apiPort}/network"), "the API to answer")
        self.assertEqual(status, 200)
        self.slots.checkUntouched(self, twistd, others)


@pytest.mark.slow
class FaultTests(_FaultCases, SynchronousTestCase):
    """
    One worker (the default).
    """

    def test_fileLimitRaised(self) -> None:
        """
        Started with a soft limit of 256 open files under a higher hard one,
        the supervisor raises its soft limit to the hard one, and its workers
        have it too.
        """
        twistd = self.start(openFiles=(LOW_LIMIT, 4096))
        worker = twistd.waitServing(1)
        self.assertEqual(openFilesLimit(twistd.process.pid), (4096, 4096))
        self.assertEqual(openFilesLimit(worker), (4096, 4096))
        self.assertIn(f"raised the open files limit from {LOW_LIMIT} to 4096", twistd.text())

    def test_idleApiConnectionsDontStarveIt(self) -> None:
        """
        With 256 open files at most and 300 idle connections held to the
        API, the API keeps at most MAX_API_CONNECTIONS of them (closing the
        rest at once), so a killed worker is still replaced and serves; the
        API answers once they are let go.
        """
        twistd = self.start("--api", "tcp:0", "--no-standby", openFiles=(LOW_LIMIT, LOW_LIMIT))
        apiPort = twistd.apiPort()
        first = twistd.waitServing(1)
        held = []
        for _ in range(HELD_API_CONNECTIONS):
            s = socket.create_connection(("127.0.0.1", apiPort), timeout=WAIT)
            held.append(s)
        self.addCleanup(lambda: [s.close() for s in held])

        def closedByServer() -> int:
            closed = 0
            for s in held:
                readable, _, _ = select.select([s], [], [], 0)
                if readable and s.recv(1, socket.MSG_PEEK) == b"":
                    closed += 1
            return closed

        waitFor(lambda: closedByServer() >= HELD_API_CONNECTIONS - MAX_API_CONNECTIONS, "the extra connections closed")
        self.assertEqual(closedByServer(), HELD_API_CONNECTIONS - MAX_API_CONNECTIONS)
        self.assertLess(len(os.listdir(f"/proc/{twistd.process.pid}/fd")), LOW_LIMIT - 32)
        os.kill(first, signal.SIGKILL)
        second = twistd.waitServing(2)
        self.assertNotEqual(first, second)
        self.tunnel().close()
        for s in held:
            s.close()
        status, body = waitFor(lambda: _tryJSON(f"http://127.0.0.1:{apiPort}/network"), "the API to answer")
        self.assertEqual(status, 200)
        self.assertTrue(re.search(r"worker \d+ serving again", twistd.text()))

def _tryJSON(url: str) -> tuple[int, object] | None:
    try:
        return getJSON(url)
    except OSError:
        return None


@pytest.mark.slow
class TwoWorkersFaultTests(_FaultCases, SynchronousTestCase):
    """
    The same faults with C{--workers 2}, made in slot 0 (the main
    listener's).
    """

    workers = 2
