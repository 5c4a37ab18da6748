"""
The proxies refuse to relay to their own API listener, even where loopback
is allowed: a browser behind the proxy can't read the log through it.
"""

from __future__ import annotations

import os
import socket

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.supervise.running import Twistd, readLog


@pytest.mark.slow
class RefuseApiTests(SynchronousTestCase):
    def relayToApi(self, plugin: str, extra: list[str]) -> bytes:
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        self.logPath = os.path.join(folder, "network.jsonl")
        twistd = Twistd(
            folder,
            plugin,
            [
                "--log", self.logPath,
                "--listen", "tcp:0:interface=127.0.0.1",
                "--api", "tcp:0",
                "--api-token-file", os.path.join(folder, "api-token"),
                "--resolve", "api.test=127.0.0.1",
                "--allow", "127.0.0.0/8",
                *extra,
            ],
        )
        self.addCleanup(twistd.stop)
        port, api = twistd.listenerPort("forward"), twistd.apiPort()
        twistd.waitServing(1)
        with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
            s.sendall(
                f"GET http://api.test:{api}/network HTTP/1.1\r\nHost: api.test:{api}\r\n"
                f"Connection: close\r\n\r\n".encode()
            )
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        return answer

    def check(self, answer: bytes) -> None:
        self.assertTrue(answer.startswith(b"HTTP/1.1 403 "), answer[:200])
        self.assertNotIn(b'"lines"', answer)
        records = readLog(self.logPath)
        self.assertEqual([r["type"] for r in records], ["open", "end"])
        self.assertIn("_refused", records[1])

    def test_standin(self) -> None:
        """
        The stand-in answers 403 and logs a refusal.
        """
        self.check(self.relayToApi("netlog-standin", []))

    def test_siteProxy(self) -> None:
        """
        The site proxy answers 403 and logs a refusal.
        """
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        sites = os.path.join(folder, "sites.toml")
        with open(sites, "w") as f:
            f.write('[live]\nhosts = ["api.test"]\n')
        self.check(self.relayToApi("netlog-proxy", ["--sites", sites, "--state", os.path.join(folder, "state")]))
