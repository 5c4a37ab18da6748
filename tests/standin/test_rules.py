"""
Rules on the stand-in's session: a blind tunnel remapped and allowed or
refused by host and port, and the upload shaped, over a real
C{twistd netlog-standin} with its API.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

import pytest
from twisted.internet import defer
from twisted.trial import unittest

from tests.session.test_sessions import caller
from tests.standin.support import Standin, connectTunnel, inThread, listenOrigin, tempDirectory
from tests.supervise.running import readLog
from tests.support import freePort

#: The upload the bandwidth up is measured by, and the rate.
UPLOAD = 204800
UP = 102400
#: Seconds a client waits.
WAIT = 20.0


def tunnelGet(proxyPort: int, authority: str) -> tuple[int, bytes]:
    """
    A CONNECT to C{authority}, then C{GET /hello} in plain HTTP through it:
    the CONNECT's status and what came back through the tunnel.
    """
    s, head = connectTunnel(proxyPort, authority)
    with s:
        status = int(head.split(b" ")[1])
        if status != 200:
            return status, b""
        s.sendall(b"GET /hello HTTP/1.1\r\nHost: far.test\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        return status, answer


def tunnelDownload(proxyPort: int, authority: str, size: int) -> tuple[int, float]:
    """
    A CONNECT to C{authority}, then C{GET /size/SIZE} in plain HTTP through
    it: the body's bytes that came back and the seconds the answer took.
    """
    s, head = connectTunnel(proxyPort, authority)
    with s:
        began = time.monotonic()
        s.sendall(f"GET /size/{size} HTTP/1.1\r\nHost: far.test\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += s.recv(65536)
        got = len(answer.split(b"\r\n\r\n", 1)[1])
        while got < size:
            got += len(s.recv(65536))
        return got, time.monotonic() - began


def upload(proxyPort: int, originPort: int) -> tuple[bytes, float]:
    """
    POST L{UPLOAD} bytes through the proxy: the answer's head line and the
    seconds the whole exchange took.
    """
    with socket.create_connection(("127.0.0.1", proxyPort), timeout=WAIT) as s:
        began = time.monotonic()
        s.sendall(f"POST http://origin.test:{originPort}/upload HTTP/1.1\r\nHost: origin.test:{originPort}\r\n"
                  f"Content-Length: {UPLOAD}\r\nConnection: close\r\n\r\n".encode() + b"u" * UPLOAD)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        return answer.split(b"\r\n", 1)[0], time.monotonic() - began


@pytest.mark.slow
class StandinRulesTests(unittest.TestCase):
    timeout = 120

    @defer.inlineCallbacks
    def setUp(self) -> Any:
        self.origin, self.originPort = listenOrigin(self)
        self.apiPort = freePort()
        self.directory = tempDirectory(self)
        self.standin = Standin(self, self.directory, [
            "--resolve", "origin.test=127.0.0.1", "--connect-ports", f"443,{self.originPort}",
            "--api", f"tcp:{self.apiPort}", "--state", self.directory,
        ], alsoListening=[self.apiPort])
        self.call = caller(os.path.join(self.directory, "api-token"))
        yield self.standin.start()
        self.api = f"http://127.0.0.1:{self.apiPort}"

    @defer.inlineCallbacks
    def test_tunnelsAndUpload(self) -> Any:
        """
        A CONNECT to a remapped host (one no resolver knows) reaches the
        address the remap gives; one to a host the allow list doesn't name
        is refused with 403 before anything is resolved; both say so in
        C{_rules}. The upload of a request is shaped to C{bandwidth.up}, and
        a blind tunnel's download to C{bandwidth.down}.
        """
        status, made = yield inThread(self.call, "POST", self.api + "/sessions", {"name": "a", "rules": {
            "allow": ["far.test", f"origin.test:{self.originPort}"],
            "remap": {"far.test": f"127.0.0.1:{self.originPort}"},
            "bandwidth": {"up": UP},
        }})
        self.assertEqual(status, 201, made)
        status, answer = yield inThread(tunnelGet, made["port"], "far.test:443")
        self.assertEqual(status, 200)
        self.assertTrue(answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"hello"), answer)
        status, _ = yield inThread(tunnelGet, made["port"], "near.test:443")
        self.assertEqual(status, 403)
        line, took = yield inThread(upload, made["port"], self.originPort)
        self.assertEqual(line, b"HTTP/1.1 200 OK")
        self.assertLess(abs(took - UPLOAD / UP), 0.1 * UPLOAD / UP, took)

        status, shaped = yield inThread(self.call, "POST", self.api + "/sessions", {"name": "b", "rules": {
            "remap": {"far.test": f"127.0.0.1:{self.originPort}"}, "bandwidth": {"down": UP},
        }})
        self.assertEqual(status, 201, shaped)
        got, took = yield inThread(tunnelDownload, shaped["port"], "far.test:443", UPLOAD)
        self.assertEqual(got, UPLOAD)
        self.assertLess(abs(took - UPLOAD / UP), 0.1 * UPLOAD / UP, took)
        [tunnel] = [r for r in readLog(shaped["log"]) if r["type"] == "open"]
        self.assertEqual(tunnel["_rules"][-1], {"rule": "bandwidth.down", "action": f"shaped to {UP} bytes a second"})

        opens = [r for r in readLog(made["log"]) if r["type"] == "open"]
        self.assertEqual([(o["request"]["url"], o["server"]["port"], o.get("_rules")) for o in opens], [
            ("https://far.test:443/", self.originPort,
             [{"rule": "remap[far.test]", "action": f"remapped to 127.0.0.1:{self.originPort}"},
              {"rule": "bandwidth.up", "action": f"shaped to {UP} bytes a second"}]),
            ("https://near.test:443/", 443, [{"rule": "allow", "action": "blocked"}]),
            (f"http://origin.test:{self.originPort}/upload", self.originPort,
             [{"rule": "bandwidth.up", "action": f"shaped to {UP} bytes a second"}]),
        ])
