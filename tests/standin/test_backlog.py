"""
A burst of connections while the stand-in can't accept: they wait in the
listen backlog (netlog asks for 1,024 where a listener names none), not for
their SYNs to be sent again.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import time
from typing import Any

from twisted.internet import defer
from twisted.trial import unittest

from netlog.net.options import LISTEN_BACKLOG
from tests.standin.support import Standin, inThread, listenOrigin, tempDirectory

from .test_load import _readAnswer

#: Connections opened at once: well over Twisted's default backlog of 50.
AT_ONCE = 200
#: Seconds the handshakes get to finish while the stand-in is stopped (a SYN
#: dropped for a full backlog is sent again only after a second).
HANDSHAKE_WAIT = 0.8


def _openAll(port: int, count: int) -> tuple[list[socket.socket], int]:
    """
    Start C{count} connections at once; return them and how many finished
    their handshake within L{HANDSHAKE_WAIT}.
    """
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        sockets.append(s)
    waiting = set(sockets)
    deadline = time.monotonic() + HANDSHAKE_WAIT
    while waiting and time.monotonic() < deadline:
        _, writable, _ = select.select([], list(waiting), [], max(0.0, deadline - time.monotonic()))
        for s in writable:
            waiting.discard(s)
    connected = sum(1 for s in sockets if s not in waiting and s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0)
    return sockets, connected


def _ask(sockets: list[socket.socket], url: str, host: str) -> list[bytes]:
    """
    One request on each connection; the status line of each answer.
    """
    statuses = []
    for s in sockets:
        s.setblocking(True)
        s.settimeout(20)
        s.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    for s in sockets:
        head, _ = _readAnswer(s)
        statuses.append(head.split(b"\r\n", 1)[0])
        s.close()
    return statuses


class BacklogTests(unittest.TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_burstWhileStopped(self) -> Any:
        """
        200 connections opened while the stand-in's process is stopped
        (SIGSTOP) all finish their handshake in the kernel's backlog; once it
        runs again (SIGCONT), each gets its answer.
        """
        self.assertGreaterEqual(LISTEN_BACKLOG, AT_ONCE)
        _, originPort = listenOrigin(self)
        standin = Standin(self, tempDirectory(self), ["--resolve", "origin.test=127.0.0.1"])
        yield standin.start()
        assert standin.process is not None
        pid = standin.process.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            sockets, connected = yield inThread(_openAll, standin.port, AT_ONCE)
        finally:
            os.kill(pid, signal.SIGCONT)
        self.addCleanup(lambda: [s.close() for s in sockets])
        self.assertEqual(connected, AT_ONCE)
        authority = f"origin.test:{originPort}"
        statuses = yield inThread(_ask, sockets, f"http://{authority}/hello", authority)
        self.assertEqual(statuses, [b"HTTP/1.1 200 OK"] * AT_ONCE)
