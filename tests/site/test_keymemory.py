"""
The CA's key is in no supervised process's memory (issue 20): the workers
parse untrusted traffic, and the supervisor serves the API. Each process's
memory is read whole through C{/proc/PID/mem} (as root) and searched for
the key's secret scalar (big-endian, little-endian) and its PEM body; the
same search finds it in a C{--no-supervise} proxy, which holds the key.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
import subprocess
import tempfile

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from twisted.trial.unittest import SynchronousTestCase

from tests.supervise.running import WAIT, Twistd, waitFor

#: Bytes read from a process's memory at a time.
CHUNK = 16 << 20


def needles(keyPath: str) -> dict[str, bytes]:
    """
    What gives the CA's key away: its secret scalar both ways round, and
    the PEM body's lines that carry it.
    """
    with open(keyPath, "rb") as f:
        pem = f.read()
    key = serialization.load_pem_private_key(pem, None)
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    scalar = key.private_numbers().private_value.to_bytes(32, "big")
    body = [line for line in pem.splitlines() if line and not line.startswith(b"-----")]
    return {"big-endian": scalar, "little-endian": scalar[::-1], "PEM line 1": body[0], "PEM line 2": body[1]}


def found(pid: int, wanted: dict[str, bytes]) -> set[str]:
    """
    Which of C{wanted} are anywhere in process C{pid}'s readable memory.
    """
    seen: set[str] = set()
    overlap = max(map(len, wanted.values())) - 1
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for line in maps:
            fields = line.split()
            if "r" not in fields[1] or (len(fields) > 5 and fields[5] in ("[vvar]", "[vsyscall]", "[vvar_vclock]")):
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            tail = b""
            at = start
            while at < end:
                try:
                    mem.seek(at)
                    data = mem.read(min(CHUNK, end - at))
                except OSError:
                    break
                if not data:
                    break
                window = tail + data
                for name, needle in wanted.items():
                    if needle in window:
                        seen.add(name)
                tail = window[-overlap:]
                at += len(data)
    return seen


def sitesFile(folder: str) -> str:
    path = os.path.join(folder, "sites.toml")
    with open(path, "w") as f:
        f.write('[[site]]\nname = "shop"\norigins = ["https://shop.test", "http://wiki.test:8080"]\n'
                'backend = "http://127.0.0.1:9"\n')
    return path


def handshake(port: int, host: str, caPath: str) -> bytes:
    """
    CONNECT to C{host:443} through the proxy on C{port} and complete a TLS
    handshake trusting netlog's CA: the certificate the worker presented.
    """
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    with sock:
        sock.sendall(f"CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n".encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = sock.recv(4096)
            assert chunk, head
            head += chunk
        assert b" 200 " in head.split(b"\r\n")[0], head
        context = ssl.create_default_context(cafile=caPath)
        with context.wrap_socket(sock, server_hostname=host) as tls:
            cert = tls.getpeercert(binary_form=True)
            assert cert is not None
            return cert


@pytest.mark.slow
class KeyMemoryTests(SynchronousTestCase):
    def setUp(self) -> None:
        if os.geteuid() != 0:
            raise self.skipTest("reading another process's memory takes root")  # type: ignore[misc]
        self.folder = tempfile.mkdtemp(prefix="netlog-keymemory-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.folder]))
        self.state = os.path.join(self.folder, "state")
        self.sites = sitesFile(self.folder)

    def start(self, name: str, *extra: str) -> Twistd:
        folder = os.path.join(self.folder, name)
        os.makedirs(folder)
        twistd = Twistd(folder, "netlog-proxy", [
            "--sites", self.sites, "--state", self.state, "--log", os.path.join(folder, "network.jsonl"),
            "--listen", "tcp:0:interface=127.0.0.1", "--resolve-only", "--api", "tcp:0", *extra,
        ])
        self.addCleanup(twistd.stop)
        return twistd

    def startSupervised(self, name: str) -> tuple[Twistd, int]:
        """
        A supervised proxy with its worker serving and its standby up, and
        its forward port.
        """
        supervised = self.start(name)
        port = supervised.listenerPort("forward")
        supervised.waitServing()
        waitFor(lambda: supervised.standingByCount() >= 1, "a standby")
        return supervised, port

    def assertKeyInNoServingProcess(self, supervised: Twistd) -> dict[str, bytes]:
        """
        Neither the supervisor, nor the serving worker, nor the standby
        holds the CA key; what was searched for.
        """
        wanted = needles(os.path.join(self.state, "ca.key"))
        workers = supervised.workers()
        self.assertEqual(len(workers), 2, supervised.text())
        processes = {"supervisor": supervised.process.pid, "worker": workers[0], "standby": workers[1]}
        for role, pid in processes.items():
            self.assertEqual(found(pid, wanted), set(), role)
        return wanted

    def test_onlyWithoutSupervisor(self) -> None:
        """
        Supervised, with its serving worker and its standby up and a TLS
        handshake for each site host served: neither the supervisor, nor
        the serving worker, nor the standby holds the CA key's scalar (either
        way round) or its PEM; the certificates the worker presents are
        signed by the CA. A C{--no-supervise} proxy on the same state holds
        it: the search finds what it looks for.
        """
        supervised, port = self.startSupervised("supervised")
        caPath = os.path.join(self.state, "ca.pem")
        for host in ("shop.test", "SHOP.test"):
            self.assertTrue(handshake(port, host, caPath))
        wanted = self.assertKeyInNoServingProcess(supervised)

        alone = self.start("alone", "--no-supervise")
        alonePort = alone.listenerPort("forward")
        self.assertTrue(handshake(alonePort, "shop.test", caPath))
        self.assertTrue(found(alone.process.pid, wanted) & {"big-endian", "little-endian"})

    def test_liveHostsMintedOnDemand(self) -> None:
        """
        With C{[live] decrypt}, after a TLS handshake through the worker for
        each of 100 live hosts no certificate was minted for at start (each
        minted on demand, signed by netlog's CA), neither the serving
        worker, nor the standby, nor the supervisor holds the CA key; the
        minter the supervisor started does (the search finds it there).
        """
        with open(self.sites, "a") as f:
            f.write('[live]\ndecrypt = ["*.live.test"]\n')
        supervised, port = self.startSupervised("live")
        caPath = os.path.join(self.state, "ca.pem")
        seen = {handshake(port, f"h{i}.live.test", caPath) for i in range(100)}
        self.assertEqual(len(seen), 100)
        # A host asked again is served from the worker's cache: the same
        # certificate.
        self.assertIn(handshake(port, "h7.live.test", caPath), seen)
        wanted = self.assertKeyInNoServingProcess(supervised)
        minter = int(re.search(r"started the certificate minter (\d+)", supervised.text()).group(1))  # type: ignore[union-attr]
        self.assertTrue(found(minter, wanted) & {"big-endian", "little-endian"})
