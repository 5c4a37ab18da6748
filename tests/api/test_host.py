"""
The API answers only requests whose C{Host} is its own (loopback, its
address, or a name given with C{--api-host}): a web page that points a name
of its own at 127.0.0.1 (DNS rebinding) gets C{421}, never the log or the CA.
"""

from __future__ import annotations

import json
import os
import socket

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.supervise.running import WAIT, Twistd


def ask(port: int, host: bytes | None, path: str = "/network") -> tuple[int, dict[str, str], bytes]:
    """
    Send one GET with the given C{Host} (none if None) over a real socket;
    the status, the headers and the body of the answer.
    """
    head = f"GET {path} HTTP/1.1\r\n".encode()
    if host is not None:
        head += b"Host: " + host + b"\r\n"
    head += b"Connection: close\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(head)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    top, _, body = answer.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


@pytest.mark.slow
class ApiHostTests(SynchronousTestCase):
    def start(self, plugin: str, extra: list[str]) -> int:
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        self.folder = folder
        args = [
            "--log", os.path.join(folder, "network.jsonl"),
            "--listen", "tcp:0:interface=127.0.0.1",
            "--api", "tcp:0",
            "--api-token-file", os.path.join(folder, "api-token"),
            "--resolve-only",
            *extra,
        ]
        if plugin == "netlog-proxy":
            sites = os.path.join(folder, "sites.toml")
            with open(sites, "w") as f:
                f.write('[live]\nhosts = ["live.test"]\n')
            args += ["--sites", sites, "--state", os.path.join(folder, "state")]
        twistd = Twistd(folder, plugin, args)
        self.addCleanup(twistd.stop)
        return twistd.apiPort()

    def checkRefused(self, port: int, host: bytes | None, path: str) -> None:
        status, headers, body = ask(port, host, path)
        self.assertEqual(status, 421, (host, path, body[:200]))
        self.assertEqual(headers["content-type"], "application/json")
        self.assertNotIn("access-control-allow-origin", headers)
        error = json.loads(body)
        self.assertIn("--api-host", error["error"])
        self.assertNotIn("lines", error)
        self.assertNotIn(b"BEGIN CERTIFICATE", body)

    def checkAnswered(self, port: int, host: bytes, path: str) -> bytes:
        status, headers, body = ask(port, host, path)
        self.assertEqual(status, 200, (host, path, body[:200]))
        self.assertNotIn("access-control-allow-origin", headers)
        return body

    def check(self, plugin: str, extra: list[str] = ()) -> int:  # type: ignore[assignment]
        port = self.start(plugin, ["--api-host", "Netlog.Test", *extra])
        paths = ["/network", "/network.har", "/", "/nothing"]
        if plugin == "netlog-proxy":
            paths.append("/ca.pem")
        for path in paths:
            for host in [
                b"rebound.test:%d" % port,
                b"rebound.test",
                b"127.0.0.1.rebound.test:%d" % port,
                b"localhost.:%d" % port,
                b"netlog.test.rebound.test",
                b"",
                None,
            ]:
                self.checkRefused(port, host, path)
        for host in [
            b"127.0.0.1:%d" % port,
            b"localhost:%d" % port,
            b"LocalHost:%d" % port,
            b"[::1]:%d" % port,
            b"127.0.0.1",
            b"netlog.test:%d" % port,
            b"netlog.test",
            b"localhost:9000",  # through an SSH tunnel
        ]:
            self.assertIn(b'"lines"', self.checkAnswered(port, host, "/network"))
        if plugin == "netlog-proxy":
            self.assertIn(b"BEGIN CERTIFICATE", self.checkAnswered(port, b"localhost:%d" % port, "/ca.pem"))
        return port

    def test_standin(self) -> None:
        """
        The stand-in's API answers 421 with a JSON error, and no CORS
        header, to a Host that is not its own, and serves its own names.
        """
        self.check("netlog-standin")

    def test_standinUnsupervised(self) -> None:
        """
        So does the API of a stand-in run with --no-supervise.
        """
        self.check("netlog-standin", ["--no-supervise"])

    def test_siteProxy(self) -> None:
        """
        The site proxy's API refuses another Host for the log, the HAR and
        the CA certificate alike.
        """
        self.check("netlog-proxy")

    def test_twoRequestsOneConnection(self) -> None:
        """
        A refused request and an answered one on the same connection are
        each judged by their own Host.
        """
        port = self.start("netlog-standin", [])
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
            s.sendall(
                b"GET /network HTTP/1.1\r\nHost: rebound.test\r\n\r\n"
                b"GET /network HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            )
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        self.assertTrue(answer.startswith(b"HTTP/1.1 421 Misdirected Request\r\n"), answer[:100])
        self.assertIn(b"HTTP/1.1 200 OK\r\n", answer)


class ApiHostOptionTests(SynchronousTestCase):
    def test_badName(self) -> None:
        """
        --api-host refuses a name with a port or that is no host name, and
        wants --api.
        """
        from twisted.python import usage

        from netlog.tap.standin import Options

        for value in ["netlog.test:8081", "http://netlog.test", "a b", ""]:
            self.assertRaises(usage.UsageError, Options().parseOptions, ["--api", "tcp:0", "--api-host", value])
        self.assertRaises(usage.UsageError, Options().parseOptions, ["--api-host", "netlog.test"])
        options = Options()
        options.parseOptions(["--api", "tcp:0", "--api-host", "NetLog.Test", "--api-host", "[::1]"])
        self.assertEqual(options["api-host"], ["netlog.test", "::1"])
