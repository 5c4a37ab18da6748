"""
Real proxies refuse an IPv6 literal that carries a refused IPv4 address
(NAT64, 6to4, IPv4-compatible, IPv4-translated) and, with
C{--refuse-private}, the private ranges: C{403}, a refusal in the log that
names the address inside, and no connection attempted.
"""

from __future__ import annotations

import os
import socket

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.supervise.running import WAIT, Twistd, readLog

#: Seconds a connection upstream may take: a proxy that tried to connect
#: instead of refusing would answer 502 or 504 soon.
CONNECT_TIMEOUT = 2


def exchange(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(head)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
            if b"\r\n\r\n" in answer and answer.startswith(b"HTTP/1.1 403 "):
                break
    return answer


@pytest.mark.slow
class EmbeddedTests(SynchronousTestCase):
    def start(self, plugin: str, extra: list[str]) -> int:
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        self.logPath = os.path.join(folder, "network.jsonl")
        args = [
            "--log", self.logPath,
            "--listen", "tcp:0:interface=127.0.0.1",
            "--resolve-only",
            "--connect-timeout", str(CONNECT_TIMEOUT),
            *extra,
        ]
        if plugin == "netlog-proxy":
            sites = os.path.join(folder, "sites.toml")
            with open(sites, "w") as f:
                f.write('[live]\nhosts = ["*"]\nconnect_ports = [80, 443]\n')
            args += ["--sites", sites, "--state", os.path.join(folder, "state")]
        twistd = Twistd(folder, plugin, args)
        self.addCleanup(twistd.stop)
        port = twistd.listenerPort("forward")
        twistd.waitServing(1)
        return port

    def check(self, plugin: str, cases: list[tuple[str, str]], extra: list[str] = ()) -> None:  # type: ignore[assignment]
        port = self.start(plugin, list(extra))
        for authority, why in cases:
            for head in [
                f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n",
                f"GET http://{authority}/ HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n",
            ]:
                answer = exchange(port, head.encode())
                self.assertTrue(answer.startswith(b"HTTP/1.1 403 "), (head, answer[:200]))
                refused = readLog(self.logPath)[-1]
                self.assertEqual(refused["type"], "end")
                self.assertIn(why, refused["_refused"]["reason"])

    EMBEDDED = [
        ("[64:ff9b::a9fe:a9fe]:443", "(which carries 169.254.169.254) is a link-local address"),
        ("[64:ff9b::7f00:1]:80", "(which carries 127.0.0.1) is a loopback address"),
        ("[2002:7f00:1::]:443", "(which carries 127.0.0.1) is a loopback address"),
        ("[2002:a9fe:a9fe::1]:80", "(which carries 169.254.169.254) is a link-local address"),
        ("[::127.0.0.1]:443", "(which carries 127.0.0.1) is a loopback address"),
        ("[::ffff:0:a9fe:a9fe]:80", "(which carries 169.254.169.254) is a link-local address"),
    ]
    PRIVATE = [
        ("10.1.2.3:443", "10.1.2.3 is a private address"),
        ("192.168.0.1:80", "192.168.0.1 is a private address"),
        ("[fd00::5]:443", "fd00::5 is a private address"),
        ("[64:ff9b::6464:1]:443", "(which carries 100.100.0.1) is a private address"),
    ]

    def test_standinEmbedded(self) -> None:
        """
        The stand-in refuses each embedded form of loopback and of the
        metadata service, for CONNECT and plain HTTP alike.
        """
        self.check("netlog-standin", self.EMBEDDED)

    def test_siteProxyEmbedded(self) -> None:
        """
        So does the site proxy, for a live host (any host is live here).
        """
        self.check("netlog-proxy", self.EMBEDDED)

    def test_refusePrivate(self) -> None:
        """
        With --refuse-private both proxies refuse the private ranges, in
        any form.
        """
        self.check("netlog-standin", self.PRIVATE, ["--refuse-private"])
        self.check("netlog-proxy", self.PRIVATE, ["--refuse-private"])
