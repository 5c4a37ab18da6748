"""
How the stand-in ends what it cuts itself, and what C{_failed} says: a clean
stop ends open tunnels and exchanges with C{"the proxy stopped"}, an idle
tunnel says it was idle, and C{_failed.status} is there exactly when netlog
answered the browser itself. Also that upstream connections don't flood
twistd's log. Real C{twistd} processes, real loopback sockets.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

import pytest
from twisted.internet import defer, reactor, task
from twisted.trial import unittest

from netlog.core.logline import REASON_STOPPED
from tests.standin.support import Standin, connectTunnel, inThread, listenOrigin, tempDirectory
from tests.support import freePort

#: How long a test waits for a line to appear.
WAIT = 10.0


def _readAll(s: socket.socket) -> bytes:
    data = b""
    while True:
        try:
            piece = s.recv(65536)
        except OSError:
            return data
        if not piece:
            return data
        data += piece


@defer.inlineCallbacks
def _waitOpened(standin: Standin, count: int) -> Any:
    """
    Wait until the log has C{count} open lines.
    """
    deadline = time.monotonic() + WAIT
    while sum(1 for line in standin.lines() if line["type"] == "open") < count:
        if time.monotonic() > deadline:
            raise AssertionError(f"expected {count} open lines, log has: {standin.lines()}")
        yield task.deferLater(reactor, 0.05, lambda: None)


@pytest.mark.slow
class EndingTests(unittest.TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def setUp(self) -> Any:
        self.origin, self.originPort = listenOrigin(self)
        self.o = f"origin.test:{self.originPort}"
        self.standin = Standin(self, tempDirectory(self), [
            "--resolve", "origin.test=127.0.0.1",
            "--connect-ports", f"443,{self.originPort}",
        ])
        yield self.standin.start()

    def _tunnel(self) -> tuple[socket.socket, bytes]:
        s, head = connectTunnel(self.standin.port, self.o)
        self.addCleanup(s.close)
        return s, head

    @defer.inlineCallbacks
    def test_stopEndsTunnel(self) -> Any:
        """
        A tunnel still open when the proxy stops cleanly ends closed by the
        proxy, with C{_failed} saying it stopped (no status: the browser got
        the server's C{200} long before), and the bytes that passed.
        """
        s, head = yield inThread(self._tunnel)
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), head)
        yield _waitOpened(self.standin, 1)
        self.standin.stop()
        entries = self.standin.entries()
        [(_, ended)] = entries.values()
        self.assertIsNotNone(ended)
        self.assertEqual(ended["closed_by"], "proxy")
        self.assertEqual(ended["_failed"], {"reason": REASON_STOPPED})
        self.assertEqual(ended["response"]["status"], 200)
        self.assertIn("bytes", ended)

    @defer.inlineCallbacks
    def test_stopEndsExchange(self) -> Any:
        """
        A plain-HTTP exchange still waiting for its answer when the proxy
        stops ends with C{_failed} saying it stopped, and no C{response}.
        """
        def go() -> socket.socket:
            s = socket.create_connection(("127.0.0.1", self.standin.port), timeout=10)
            self.addCleanup(s.close)
            s.sendall(f"GET http://{self.o}/silent HTTP/1.1\r\nHost: {self.o}\r\n\r\n".encode())
            return s

        yield inThread(go)
        yield _waitOpened(self.standin, 1)
        self.standin.stop()
        [(_, ended)] = self.standin.entries().values()
        self.assertIsNotNone(ended)
        self.assertEqual(ended["_failed"], {"reason": REASON_STOPPED})
        self.assertNotIn("response", ended)
        self.assertGreater(ended["bytes"]["up"], 0)

    @defer.inlineCallbacks
    def test_idleTunnel(self) -> Any:
        """
        A tunnel that passes nothing for C{--idle-timeout} is cut by the
        proxy, and its entry says why.
        """
        fast = Standin(self, tempDirectory(self), [
            "--resolve", "origin.test=127.0.0.1",
            "--connect-ports", str(self.originPort), "--idle-timeout", "1",
        ])
        yield fast.start()

        def go() -> tuple[bytes, bytes]:
            s, head = connectTunnel(fast.port, self.o)
            with s:
                return head, _readAll(s)

        head, rest = yield inThread(go)
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), head)
        self.assertEqual(rest, b"")
        entries = yield fast.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["closed_by"], "proxy")
        self.assertEqual(ended["_failed"], {"reason": "idle for 1 s (see --idle-timeout)"})

    @defer.inlineCallbacks
    def test_tunnelResetAfter200(self) -> Any:
        """
        A tunnel the server resets after the proxy's C{200}: C{_failed} has
        the reason and no status (the browser's answer was the C{200}).
        """
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(WAIT)
        port = listener.getsockname()[1]
        standin = Standin(self, tempDirectory(self), [
            "--resolve", "origin.test=127.0.0.1", "--connect-ports", str(port),
        ])
        yield standin.start()

        def serve() -> None:
            server, _ = listener.accept()
            server.settimeout(WAIT)
            server.recv(100)
            # Close with a reset (RST), not a FIN.
            server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            server.close()

        def go() -> bytes:
            s, head = connectTunnel(standin.port, f"origin.test:{port}")
            with s:
                s.sendall(b"hello")
                _readAll(s)
            return head

        served = inThread(serve)
        head = yield inThread(go)
        yield served
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), head)
        entries = yield standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["closed_by"], "server")
        self.assertEqual(ended["_failed"], {"reason": "the server reset the connection"})

    @defer.inlineCallbacks
    def test_tunnelRefusedStatus(self) -> Any:
        """
        A CONNECT whose server refuses the connection: the browser gets
        C{502}, the logged response is that C{502}, and C{_failed.status}
        says so.
        """
        closed = freePort()
        standin = Standin(self, tempDirectory(self), [
            "--resolve", "origin.test=127.0.0.1", "--connect-ports", str(closed),
        ])
        yield standin.start()

        def go() -> bytes:
            s, head = connectTunnel(standin.port, f"origin.test:{closed}")
            s.close()
            return head

        head = yield inThread(go)
        self.assertTrue(head.startswith(b"HTTP/1.1 502 "), head)
        entries = yield standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertIn("refused the connection", ended["_failed"]["reason"])
        self.assertEqual(ended["_failed"]["status"], 502)
        self.assertEqual(ended["response"]["status"], 502)
        self.assertEqual(ended["closed_by"], "proxy")

    @defer.inlineCallbacks
    def test_upstreamConnectionsQuiet(self) -> Any:
        """
        Upstream connections (plain HTTP and tunnels) add no "Starting
        factory" / "Stopping factory" lines to twistd's log, and nor does
        the listener's own factory, nor its port ("BrowserFactory starting
        on ..."): netlog's own line says where it listens.
        """
        def go() -> None:
            for _ in range(3):
                with socket.create_connection(("127.0.0.1", self.standin.port), timeout=10) as s:
                    s.sendall(f"GET http://{self.o}/hello HTTP/1.1\r\nHost: {self.o}\r\n"
                              "Connection: close\r\n\r\n".encode())
                    _readAll(s)
                s, head = connectTunnel(self.standin.port, self.o)
                with s:
                    s.sendall(f"GET /hello HTTP/1.1\r\nHost: {self.o}\r\nConnection: close\r\n\r\n".encode())
                    _readAll(s)

        yield inThread(go)
        yield self.standin.waitEnded(6)
        self.standin.stop()
        with open(os.path.join(self.standin.directory, "twistd.log"), errors="replace") as f:
            log = f.read()
        self.assertIn("forward listener tcp:", log)
        self.assertIn(" bound on ", log)
        self.assertNotIn("BrowserFactory", log)
        starting = [line for line in log.splitlines() if "Starting factory" in line]
        stopping = [line for line in log.splitlines() if "Stopping factory" in line]
        self.assertEqual(starting, [], log)
        self.assertEqual(stopping, [], log)
