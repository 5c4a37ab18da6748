"""
HTTP/2 toward a site's C{https://} backend as users run it: a real C{twistd
-n netlog-proxy} process, a backend in its own process that speaks HTTP/2
when ALPN lets it (L{tests.support.h2origin}, its certificate from a private
CA named by the site's C{ca_file}, its name given with C{--resolve}), an
HTTP/1.1 browser through a decrypted C{CONNECT} and C{nghttp} (HTTP/2) on
the HTTPS route.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import ssl
import subprocess
import threading
import time
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.har import entriesFromLines
from netlog.site.ca import CertificateAuthority
from tests.site.support import readAll
from tests.site.test_process import WAIT, readHead
from tests.support import freePort, startTwistd
from tests.support.h2origin import H2OriginProcess
from tests.support.nghttpx import startNghttpx

NGHTTP = shutil.which("nghttp")


class _ThroughProxy:
    """
    The site proxy under C{twistd}, and the browsers the tests use on it
    (for a test case with C{folder}, C{sites}, C{logPath} and C{state}).
    """

    folder: str
    sites: str
    logPath: str
    state: str
    addCleanup: Any
    assertTrue: Any
    assertEqual: Any

    def startProxy(self, *extra: str) -> None:
        self.port, self.route = freePort(), freePort()
        startTwistd(self.addCleanup, self.folder, [
            "netlog-proxy", "--sites", self.sites, "--listen", f"tcp:{self.port}:interface=127.0.0.1",
            "--https-route", f"tcp:{self.route}:interface=127.0.0.1",
            "--log", self.logPath, "--state", self.state,
            "--resolve", "backend.test=127.0.0.1", "--resolve-only", *extra,
        ], [self.port, self.route], WAIT)

    def http11(self, path: str) -> bytes:
        """
        A GET from an HTTP/1.1 browser through a decrypted CONNECT: the
        answer's bytes.
        """
        context = ssl.create_default_context(cafile=os.path.join(self.state, "ca.pem"))
        context.set_alpn_protocols(["http/1.1"])
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)
        sock.sendall(b"CONNECT vault.test:443 HTTP/1.1\r\nHost: vault.test:443\r\n\r\n")
        self.assertTrue(readHead(sock).startswith(b"HTTP/1.1 200"))
        tls = context.wrap_socket(sock, server_hostname="vault.test")
        tls.sendall(f"GET {path} HTTP/1.1\r\nHost: vault.test\r\nConnection: close\r\n\r\n".encode())
        try:
            return readAll(tls)
        finally:
            tls.close()

    def nghttp(self, path: str, *options: str) -> str:
        """
        C{nghttp} (HTTP/2, ALPN C{h2}) on the HTTPS route, the site named by
        C{:authority}: its verbose output (frames and fields).
        """
        result = subprocess.run([NGHTTP, "-v", "-n", "-H", ":authority: vault.test", *options,  # type: ignore[list-item]
                                 f"https://127.0.0.1:{self.route}{path}"],
                                capture_output=True, timeout=WAIT * 2)
        return result.stdout.decode("latin-1")

    def ends(self, count: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        deadline = time.monotonic() + WAIT
        while True:
            lines = []
            if os.path.exists(self.logPath):
                with open(self.logPath, "rb") as f:
                    lines = [json.loads(line) for line in f]
            ends = {line["id"]: line for line in lines if line["type"] == "end"}
            pairs = [(line, ends[line["id"]]) for line in lines if line["type"] == "open" and line["id"] in ends]
            if len(pairs) >= count or time.monotonic() > deadline:
                return pairs
            time.sleep(0.05)

    def har(self) -> list[dict[str, Any]]:
        with open(self.logPath, "rb") as f:
            entries, unreadable = entriesFromLines(f.readlines())
        self.assertEqual(unreadable, 0)
        return entries


@pytest.mark.slow
class H2BackendProcessTests(_ThroughProxy, SynchronousTestCase):
    def setUp(self) -> None:
        if NGHTTP is None:
            raise AssertionError("nghttp is missing: apt-get install nghttp2-client")
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        self.h2origin = H2OriginProcess(self.addCleanup, self.folder, 100, WAIT)
        self.originPort = self.h2origin.port
        self.sites = os.path.join(self.folder, "sites.toml")
        with open(self.sites, "w") as f:
            f.write(f"""
[[site]]
name = "vault"
origins = ["https://vault.test"]
backend = "https://backend.test:{self.originPort}"
ca_file = "{os.path.join(self.h2origin.caFolder, 'ca.pem')}"
""")
        self.logPath = os.path.join(self.folder, "network.jsonl")
        self.state = os.path.join(self.folder, "state")

    def test_eachSide(self) -> None:
        """
        An HTTP/1.1 browser's request and an HTTP/2 browser's both reach the
        backend in HTTP/2 over one connection; the HTTP/2 browser gets the
        answer's trailers; the log and the HAR say each side's protocol.
        """
        self.startProxy()
        answer = self.http11("/hello")
        self.assertTrue(answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer)
        self.assertTrue(answer.endswith(b"\r\n\r\nhello over h2"), answer)
        out = self.nghttp("/trailers")
        self.assertIn("recv (stream_id=13) :status: 200", out)
        self.assertIn("recv (stream_id=13) x-checksum: c0ffee", out)
        origin = self.h2origin.status()
        self.assertEqual(origin["connections"], ["h2"])
        self.assertEqual(origin["requests"], [["HTTP/2", "/hello"], ["HTTP/2", "/trailers"]])
        (opened1, ended1), (opened2, ended2) = self.ends(2)
        self.assertEqual((opened1["request"]["version"], ended1["response"]["version"],
                          ended1["response"]["server_version"]), ("HTTP/1.1", "HTTP/1.1", "HTTP/2"))
        self.assertEqual((opened2["request"]["version"], ended2["response"]["version"],
                          ended2["response"]["server_version"]), ("HTTP/2", "HTTP/2", "HTTP/2"))
        first, second = self.har()
        self.assertEqual((first["request"]["httpVersion"], first["response"]["httpVersion"],
                          first["response"]["_serverHttpVersion"]), ("HTTP/1.1", "HTTP/1.1", "HTTP/2.0"))
        self.assertEqual((second["request"]["httpVersion"], second["response"]["httpVersion"],
                          second["response"]["_serverHttpVersion"]), ("HTTP/2.0", "HTTP/2.0", "HTTP/2.0"))
        self.assertEqual(first["response"]["content"]["text"], "hello over h2")

    def test_hundredStreams(self) -> None:
        """
        A hundred requests at once (one HTTP/2 browser connection, the
        backend holding each until it has all) go as a hundred streams of
        one backend connection, the first one netlog opens to it.
        """
        self.startProxy()
        out = self.nghttp("/gather", "-m", "100")
        self.assertEqual(out.count(":status: 200"), 100, out[-2000:])
        self.assertEqual(self.h2origin.status()["connections"], ["h2"])
        self.assertEqual(len(self.ends(100)), 100)

    def test_refusedAndReset(self) -> None:
        """
        A stream the backend refused is sent again (the browser gets the
        answer, the entry no failure); one reset in the middle of its answer
        is reset toward the browser, and its entry is C{_failed} with the
        reset's code.
        """
        self.startProxy()
        out = self.nghttp("/refuse-once")
        self.assertIn(":status: 200", out)
        out = self.nghttp("/reset-mid")
        self.assertIn("recv RST_STREAM frame", out)
        (_, refused), (_, reset) = self.ends(2)
        self.assertEqual(refused["response"]["status"], 200)
        self.assertNotIn("_failed", refused)
        self.assertEqual(reset["_failed"]["reason"],
                         f"backend.test:{self.originPort} reset the stream (INTERNAL_ERROR) in the middle of the answer")
        self.assertEqual([r[1] for r in self.h2origin.status()["requests"]], ["/refuse-once", "/refuse-once", "/reset-mid"])

    def test_noH2Upstream(self) -> None:
        """
        With C{--no-h2-upstream} the backend is offered HTTP/1.1 alone and
        speaks it, whatever the browser speaks.
        """
        self.startProxy("--no-h2-upstream")
        self.assertTrue(self.http11("/hello").endswith(b"\r\n\r\nhello over http/1.1"))
        self.assertIn(":status: 200", self.nghttp("/hello"))
        origin = self.h2origin.status()
        self.assertEqual(set(origin["connections"]), {"http/1.1"})
        self.assertEqual([r[0] for r in origin["requests"]], ["HTTP/1.1", "HTTP/1.1"])
        for _, ended in self.ends(2):
            self.assertNotIn("server_version", ended["response"])


class _Origin(socketserver.BaseRequestHandler):
    """
    A plain HTTP/1.1 origin behind C{nghttpx}: C{/trailers} is chunked
    with the trailer C{x-checksum: c0ffee}, anything else C{hello through
    nghttpx}.
    """

    def handle(self) -> None:
        sock = self.request
        sock.settimeout(WAIT)
        buffered = b""
        while True:
            while b"\r\n\r\n" not in buffered:
                data = sock.recv(65536)
                if not data:
                    return
                buffered += data
            head, _, buffered = buffered.partition(b"\r\n\r\n")
            if b" /trailers " in head.split(b"\r\n", 1)[0]:
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                             b"Trailer: x-checksum\r\n\r\nd\r\nwith trailers\r\n0\r\nx-checksum: c0ffee\r\n\r\n")
            else:
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 21\r\n\r\n"
                             b"hello through nghttpx")


class _OriginServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    #: (socketserver's backlog of 5 would leave some of nghttpx's
    #: connections to it in the kernel's retries.)
    request_queue_size = 128


@pytest.mark.slow
class NghttpxBackendTests(_ThroughProxy, SynchronousTestCase):
    """
    The same, with C{nghttpx} (L{tests.support.nghttpx}) as the backend,
    in front of a plain HTTP/1.1 origin.
    """

    def setUp(self) -> None:
        if NGHTTP is None:
            raise AssertionError("nghttp is missing: apt-get install nghttp2-client")
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        plain = _OriginServer(("127.0.0.1", 0), _Origin)
        threading.Thread(target=plain.serve_forever, daemon=True).start()
        self.addCleanup(plain.server_close)
        self.addCleanup(plain.shutdown)
        ca = CertificateAuthority.loadOrCreate(os.path.join(self.folder, "backend-ca"))
        cert, key = os.path.join(self.folder, "backend.pem"), os.path.join(self.folder, "backend.key")
        with open(cert, "wb") as f:
            f.write(ca.mint("backend.test").public_bytes(serialization.Encoding.PEM))
        with open(key, "wb") as f:
            f.write(ca.leafKeyPEM())
        self.nghttpx = startNghttpx(self.addCleanup, self.folder, cert, key, plain.server_address[1], freePort(),
                                    WAIT)
        self.originPort = self.nghttpx.port
        self.sites = os.path.join(self.folder, "sites.toml")
        with open(self.sites, "w") as f:
            f.write(f"""
[[site]]
name = "vault"
origins = ["https://vault.test"]
backend = "https://backend.test:{self.originPort}"
ca_file = "{os.path.join(self.folder, 'backend-ca', 'ca.pem')}"
""")
        self.logPath = os.path.join(self.folder, "network.jsonl")
        self.state = os.path.join(self.folder, "state")

    def test_eachSide(self) -> None:
        """
        An HTTP/1.1 browser's request and an HTTP/2 browser's both reach
        C{nghttpx} over HTTP/2, one connection; the HTTP/2 browser gets the
        origin's trailers; the log says each side's protocol.
        """
        self.startProxy()
        self.assertTrue(self.http11("/hello").endswith(b"\r\n\r\nhello through nghttpx"))
        out = self.nghttp("/trailers")
        self.assertIn("recv (stream_id=13) x-checksum: c0ffee", out)
        lines = self.nghttpx.access(2)
        self.assertEqual([(line[0], line[3], line[5]) for line in lines],
                         [("h2", "/hello", "200"), ("h2", "/trailers", "200")])
        self.assertEqual(len({line[1] for line in lines}), 1, "one connection")
        (opened1, ended1), (opened2, ended2) = self.ends(2)
        self.assertEqual((opened1["request"]["version"], ended1["response"]["server_version"]),
                         ("HTTP/1.1", "HTTP/2"))
        self.assertEqual((opened2["request"]["version"], ended2["response"]["server_version"]),
                         ("HTTP/2", "HTTP/2"))

    def test_hundredStreams(self) -> None:
        """
        A hundred requests at once from one HTTP/2 browser connection reach
        C{nghttpx} on one connection.
        """
        self.startProxy()
        out = self.nghttp("/hello", "-m", "100")
        self.assertEqual(out.count(":status: 200"), 100, out[-2000:])
        lines = self.nghttpx.access(100)
        self.assertEqual(len(lines), 100)
        self.assertEqual({line[0] for line in lines}, {"h2"})
        self.assertEqual(len({line[1] for line in lines}), 1, "one backend connection")

    def test_noH2Upstream(self) -> None:
        """
        With C{--no-h2-upstream}, C{nghttpx} is spoken to in HTTP/1.1.
        """
        self.startProxy("--no-h2-upstream")
        self.assertTrue(self.http11("/hello").endswith(b"\r\n\r\nhello through nghttpx"))
        self.assertIn(":status: 200", self.nghttp("/hello"))
        self.assertEqual([line[0] for line in self.nghttpx.access(2)], ["http/1.1", "http/1.1"])
