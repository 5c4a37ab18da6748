"""
The site proxy as users run it: a real C{twistd -n netlog-proxy} process,
started from the source tree, serving a site through its forward port; its
memory stays flat while 100 MB goes up and 100 MB comes down.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import ssl
import subprocess
import threading
import time
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.support import freePort, sourceEnv, startTwistd, twistdArgv

#: Bytes of each big body.
BIG = 100 * 1000 * 1000
#: Seconds to wait for the process to do what it should soon.
WAIT = 30.0
_ZEROS = b"\0" * (256 * 1024)


class _Backend(socketserver.BaseRequestHandler):
    """
    A backend that sends BIG bytes for C{GET /big}, counts an upload for
    C{POST}, and answers anything else with a short text.
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
            line = head.split(b"\r\n", 1)[0]
            length = 0
            for field in head.split(b"\r\n")[1:]:
                name, _, value = field.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if line.startswith(b"POST"):
                got = len(buffered)
                buffered = b""
                while got < length:
                    data = sock.recv(1 << 20)
                    if not data:
                        return
                    got += len(data)
                body = b"%d" % got
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                             % (len(body), body))
            elif b" /big " in line:
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                             b"Content-Length: %d\r\n\r\n" % BIG)
                left = BIG
                while left:
                    piece = _ZEROS if left >= len(_ZEROS) else _ZEROS[:left]
                    sock.sendall(piece)
                    left -= len(piece)
            else:
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok")


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


def descendants(pid: int) -> list[int]:
    """
    C{pid} and every process under it (twistd may serve from a worker it
    supervises).
    """
    found = [pid]
    for child in open(f"/proc/{pid}/task/{pid}/children").read().split():
        found += descendants(int(child))
    return found


def vmHWM(pid: int) -> int:
    """
    The largest peak resident set, in kB, of C{pid} and the processes under it.
    """
    peak = 0
    for each in descendants(pid):
        with open(f"/proc/{each}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    peak = max(peak, int(line.split()[1]))
    return peak


def readHead(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(1)
        if not piece:
            raise AssertionError(f"closed after {data!r}")
        data += piece
    return data


@pytest.mark.slow
class ProcessTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.backend = _Server(("127.0.0.1", 0), _Backend)
        threading.Thread(target=self.backend.serve_forever, daemon=True).start()
        self.addCleanup(self.backend.server_close)
        self.addCleanup(self.backend.shutdown)
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        self.sites = os.path.join(self.folder, "sites.toml")
        with open(self.sites, "w") as f:
            f.write(f"""
[[site]]
name = "shop"
origins = ["https://shop.test", "http://shop.test"]
backend = "http://127.0.0.1:{self.backend.server_address[1]}"
""")
        self.logPath = os.path.join(self.folder, "network.jsonl")
        self.state = os.path.join(self.folder, "state")

    def startProxy(self, *extra: str) -> subprocess.Popen[bytes]:
        self.port = freePort()
        return startTwistd(self.addCleanup, self.folder, [
            "netlog-proxy", "--sites", self.sites, "--listen", f"tcp:{self.port}:interface=127.0.0.1",
            "--log", self.logPath, "--state", self.state,
            "--resolve", "shop.test=127.0.0.1", "--resolve-only", *extra,
        ], [self.port], WAIT)

    def twistdLog(self) -> str:
        path = os.path.join(self.folder, "twistd.log")
        return open(path).read() if os.path.exists(path) else ""

    def lines(self) -> list[dict[str, Any]]:
        with open(self.logPath, "rb") as f:
            return [json.loads(line) for line in f]

    def test_serves(self) -> None:
        """
        C{twistd -n netlog-proxy} creates its CA, decrypts a site's CONNECT
        with it, and logs the exchange; the log is 0644.
        """
        self.startProxy()
        context = ssl.create_default_context(cafile=os.path.join(self.state, "ca.pem"))
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)
        sock.sendall(b"CONNECT shop.test:443 HTTP/1.1\r\nHost: shop.test:443\r\n\r\n")
        self.assertTrue(readHead(sock).startswith(b"HTTP/1.1 200"))
        tls = context.wrap_socket(sock, server_hostname="shop.test")
        tls.sendall(b"GET /hi HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
        answer = b""
        while True:
            data = tls.recv(65536)
            if not data:
                break
            answer += data
        self.assertTrue(answer.endswith(b"\r\n\r\nok"), answer)
        deadline = time.monotonic() + WAIT
        while len(self.lines()) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        opened, ended = self.lines()
        self.assertEqual(opened["request"]["url"], "https://shop.test/hi")
        self.assertEqual(ended["response"]["status"], 200)
        self.assertEqual(os.stat(self.logPath).st_mode & 0o777, 0o644)
        self.assertEqual(os.stat(os.path.join(self.state, "ca.key")).st_mode & 0o777, 0o600)
        # Upstream connections don't each add a "Starting factory" line to
        # twistd's log (only listeners say they started).
        upstreamLines = [line for line in self.twistdLog().splitlines()
                         if "worker" in line and "Starting factory <twisted.internet.protocol.Factory" in line]
        self.assertEqual(upstreamLines, [])

    def test_badSites(self) -> None:
        """
        A bad sites.toml stops twistd at start with the line and what is
        wrong.
        """
        with open(self.sites, "w") as f:
            f.write('[[site]]\nname = "a"\norigins = ["ftp://a.test"]\nbackend = "http://127.0.0.1:1"\n')
        result = subprocess.run(
            twistdArgv() + ["-n", "--pidfile=", "netlog-proxy", "--sites", self.sites,
                            "--log", self.logPath, "--state", self.state],
            env=sourceEnv(), cwd=self.folder, capture_output=True, text=True, timeout=WAIT,
        )
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("line 3", result.stdout + result.stderr)
        self.assertIn("http:// or https://", result.stdout + result.stderr)

    def test_bigBodiesFlat(self) -> None:
        """
        100 MB down and 100 MB up pass through the real process while its
        peak RSS stays far below the bodies' size: nothing is held whole
        (the upload keeps its first 10 MB for the log, as it must).
        """
        process = self.startProxy()
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=WAIT)
        sock.sendall(b"GET http://shop.test/x HTTP/1.1\r\nHost: shop.test\r\n\r\n")
        readHead(sock)
        sock.recv(2)
        baseline = vmHWM(process.pid)

        sock.sendall(b"GET http://shop.test/big HTTP/1.1\r\nHost: shop.test\r\n\r\n")
        readHead(sock)
        got = 0
        while got < BIG:
            data = sock.recv(1 << 20)
            if not data:
                break
            got += len(data)
        self.assertEqual(got, BIG)
        afterDown = vmHWM(process.pid)

        sock.sendall(b"POST http://shop.test/upload HTTP/1.1\r\nHost: shop.test\r\n"
                     b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % BIG)
        left = BIG
        while left:
            piece = _ZEROS if left >= len(_ZEROS) else _ZEROS[:left]
            sock.sendall(piece)
            left -= len(piece)
        head = readHead(sock)
        body = sock.recv(64)
        self.assertIn(b"200 OK", head)
        self.assertEqual(body, b"%d" % BIG)
        deadline = time.monotonic() + WAIT
        while len(self.lines()) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        afterUp = vmHWM(process.pid)
        sock.close()
        lines = self.lines()
        down, up = lines[3], lines[5]
        self.assertEqual(down["response"]["body"]["size"], BIG)
        self.assertIn("sha256", down["response"]["body"])
        self.assertEqual(up["request_body"]["size"], BIG)
        self.assertTrue(up["request_body"]["_truncated"])
        print(f"VmHWM kB (largest of twistd and its worker): baseline {baseline}, "
              f"after 100 MB down {afterDown}, after 100 MB up {afterUp}")
        # Generous bounds: a body held whole would add over 100 MB.
        self.assertLess(afterDown - baseline, 30 * 1024)
        self.assertLess(afterUp - baseline, 90 * 1024)


@pytest.mark.slow
class UnprivilegedTests(SynchronousTestCase):
    """
    Run as root with C{--uid nobody --gid nogroup}, as in production.
    """

    def test_caKeyStaysRoots(self) -> None:
        """
        The CA is created as root in the privileged step (key 0600, root's);
        the worker runs as nobody, can't open the key file, and still
        decrypts a site's CONNECT with certificates the CA signs.
        """
        import grp
        import pwd

        from tests.supervise.running import Twistd, interpreterFor, uidOf

        if os.geteuid() != 0:
            raise self.skipTest("needs root to drop privileges")  # type: ignore[misc]
        try:
            uid = pwd.getpwnam("nobody").pw_uid
            gid = grp.getgrnam("nogroup").gr_gid
        except KeyError:
            raise self.skipTest("no nobody/nogroup on this system")  # type: ignore[misc]
        interpreter = interpreterFor(uid, gid)
        if interpreter is None:
            raise self.skipTest("no Python with this tree's packages that nobody can run")  # type: ignore[misc]
        backend = _Server(("127.0.0.1", 0), _Backend)
        threading.Thread(target=backend.serve_forever, daemon=True).start()
        self.addCleanup(backend.server_close)
        self.addCleanup(backend.shutdown)
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        os.chmod(os.path.dirname(folder), 0o755)
        os.chmod(folder, 0o755)
        sites = os.path.join(folder, "sites.toml")
        with open(sites, "w") as f:
            f.write(f'[[site]]\nname = "shop"\norigins = ["https://shop.test"]\n'
                    f'backend = "http://127.0.0.1:{backend.server_address[1]}"\n')
        state = os.path.join(folder, "state")
        port = freePort()
        # a --log by hand is in a folder that exists (netlog makes only its defaults')
        os.mkdir(os.path.join(folder, "log"))
        os.chmod(os.path.join(folder, "log"), 0o755)
        twistd = Twistd(folder, "netlog-proxy", [
            "--sites", sites, "--listen", f"tcp:{port}:interface=127.0.0.1",
            "--log", os.path.join(folder, "log", "network.jsonl"), "--state", state,
            "--resolve", "shop.test=127.0.0.1", "--resolve-only",
        ], ["--uid", "nobody", "--gid", "nogroup"], interpreter)
        self.addCleanup(twistd.stop)
        worker = twistd.waitServing(1)
        self.assertEqual(uidOf(worker), uid)
        key = os.stat(os.path.join(state, "ca.key"))
        self.assertEqual((key.st_uid, key.st_mode & 0o777), (0, 0o600))
        context = ssl.create_default_context(cafile=os.path.join(state, "ca.pem"))
        sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
        sock.sendall(b"CONNECT shop.test:443 HTTP/1.1\r\nHost: shop.test:443\r\n\r\n")
        self.assertTrue(readHead(sock).startswith(b"HTTP/1.1 200"))
        tls = context.wrap_socket(sock, server_hostname="shop.test")
        tls.sendall(b"GET /hi HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
        answer = b""
        while True:
            data = tls.recv(65536)
            if not data:
                break
            answer += data
        self.assertTrue(answer.endswith(b"\r\n\r\nok"), answer)
