"""
Segments with real processes: a stand-in run by twistd rotating its log by
size and on SIGUSR1, killed with SIGKILL and started again, while
C{netlog read --follow} and a poller of C{GET /network} read along.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.request
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.log.series import listing
from tests.chaos.burst import Origin
from tests.supervise.running import Twistd, alive, waitFor
from tests.support import netlogArgv, sourceEnv

from .test_rotation import WAIT, seriesLines
from .test_writer import publicTempDir

#: Requests sent in all; the kill comes after two thirds of them.
REQUESTS = 240


class Follower:
    """
    C{netlog read LOG --follow --json}, its pages gathered by a thread.
    """

    def __init__(self, log: str) -> None:
        self.process = subprocess.Popen(
            netlogArgv() + ["read", log, "--follow", "--json", "--limit", "8000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sourceEnv(),
        )
        self.numbers: list[int] = []
        self.pages: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._gather, daemon=True)
        self.thread.start()

    def _gather(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            page = json.loads(line)
            self.pages.append(page)
            self.numbers.extend(record["n"] for record in page["lines"])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(WAIT)
        self.thread.join(WAIT)


class Poller:
    """
    Polls C{GET /network?after=N} on whichever API port the proxy has now.
    """

    def __init__(self) -> None:
        self.port: int | None = None
        self.numbers: list[int] = []
        self.pages: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()

    def _poll(self) -> None:
        cursor = 0
        while not self._stop.is_set():
            if self.port is None:
                time.sleep(0.05)
                continue
            try:
                url = f"http://127.0.0.1:{self.port}/network?after={cursor}&limit=8000"
                with urllib.request.urlopen(url, timeout=10) as answer:
                    page = json.loads(answer.read())
            except OSError:
                time.sleep(0.05)
                continue
            self.pages.append(page)
            self.numbers.extend(record["n"] for record in page["lines"])
            cursor = page["next"]
            if not page["lines"]:
                time.sleep(0.05)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(WAIT)


def ask(port: int, originPort: int, index: int) -> bytes:
    host = f"origin.test:{originPort}"
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"GET http://{host}/r/{index} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.slow
class RotatingProxyTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = publicTempDir(self)
        logs = os.path.join(self.folder, "logs")
        os.mkdir(logs, 0o755)
        self.log = os.path.join(logs, "network.jsonl")
        self.origin = Origin()
        self.addCleanup(self.origin.stop)

    def start(self, run: int) -> Twistd:
        folder = os.path.join(self.folder, f"run{run}")
        os.mkdir(folder)
        twistd = Twistd(folder, "netlog-standin", [
            "--no-supervise", "--log", self.log, "--listen", "tcp:0:interface=127.0.0.1",
            "--api", "tcp:0:interface=127.0.0.1", "--api-token-file", os.path.join(self.folder, "token"),
            "--resolve", "origin.test=127.0.0.1", "--resolve-only", "--rotate-size", "24KiB",
        ])
        self.addCleanup(twistd.stop)
        return twistd

    def test_killAndSignal(self) -> None:
        """
        Through a stand-in closing a segment every 24 KiB and on SIGUSR1,
        killed with SIGKILL and started again: C{netlog read --follow} and
        an API poller each see every line once, in order, with no gap and no
        page saying the log began again; every closed segment ends up
        compressed, and the numbering goes on across the restart.
        """
        twistd = self.start(1)
        port = twistd.listenerPort("forward")
        poller = Poller()
        poller.port = twistd.apiPort()
        self.addCleanup(poller.stop)
        follower = Follower(self.log)
        self.addCleanup(follower.stop)
        for index in range(REQUESTS):
            if index == REQUESTS // 3:
                before = len(listing(self.log).segments)
                os.kill(twistd.process.pid, signal.SIGUSR1)
                waitFor(lambda: len(listing(self.log).segments) == before + 1, "a rotation on SIGUSR1")
            if index == 2 * REQUESTS // 3:
                pid = twistd.process.pid
                os.kill(pid, signal.SIGKILL)
                twistd.process.wait(WAIT)
                self.assertFalse(alive(pid))
                twistd = self.start(2)
                port = twistd.listenerPort("forward")
                poller.port = twistd.apiPort()
            answer = ask(port, self.origin.port, index)
            self.assertTrue(answer.startswith(b"HTTP/1.1 200 "), answer[:200])
        lines = seriesLines(self.log)
        last = lines[-1]["n"]
        self.assertEqual([r["n"] for r in lines], list(range(1, last + 1)))
        self.assertGreaterEqual(sum(1 for r in lines if r["type"] == "open"), REQUESTS)
        waitFor(lambda: follower.numbers[-1:] == [last] and poller.numbers[-1:] == [last], "the readers")
        self.assertEqual(follower.numbers, list(range(1, last + 1)))
        self.assertEqual(poller.numbers, list(range(1, last + 1)))
        for page in follower.pages + poller.pages:
            self.assertFalse(page["begun_again"])
            self.assertNotIn("removed_up_to", page)
        waitFor(lambda: not listing(self.log).toCompress, "every closed segment compressed")
        found = listing(self.log)
        self.assertGreaterEqual(len(found.segments), 10)
        self.assertTrue(all(s.compressed for s in found.segments))
