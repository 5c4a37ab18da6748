"""
Certificates for decrypted live hosts, minted on demand with the CA key in
no worker (and not in the supervisor either).

Supervised, with C{[live] decrypt} set, the supervisor's privileged step
forks the I{minter} (L{startMinter}) before it has loaded anything of the
CA: the child loads (or creates) the CA itself, answers first with what
L{netlog.site.ca.mintInChild} hands over (the sites' certificates and the
one leaf key), and then stays, signing on request a certificate for a host
name with that leaf key's public key. It holds the CA key and nothing
else: no listener, no log, no browser's bytes; it reads one line of JSON
at a time from the supervisor alone.

A worker that meets a live host with no certificate asks the supervisor
over its control channel (L{netlog.supervise.control}); the supervisor
checks that C{[live] decrypt} names the host (a worker is untrusted: it
gets certificates for those names only), asks the minter through a
L{MinterClient} and hands the certificate back. Each side keeps what it
got in a bounded cache (L{BoundedCache}). The worker builds its TLS
context from the certificate and the leaf key it already holds
(L{netlog.site.ca.HandedLeaves.liveContext}).

With C{--no-supervise} the one process holds the CA and mints in process.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import traceback
from collections import deque
from typing import Any

from cryptography.hazmat.primitives import serialization
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.protocol import Protocol
from twisted.logger import Logger

from netlog.core.bounded import BoundedCache
from netlog.net.coalesce import Coalesced
from netlog.proxy.mode import MintError
from netlog.site.ca import MAX_MINTED, CAError, CertificateAuthority, leafBundle

_log = Logger(namespace="netlog.minter")

#: The longest line the minter or its client reads.
MAX_MINT_LINE = 1 << 20
#: The longest host name a certificate is minted for (DNS's own limit).
MAX_HOST = 253

def mintableHost(host: str) -> str | None:
    """
    Why no certificate is minted for C{host} (not a plausible DNS name or
    address), or L{None}.
    """
    if not host or len(host) > MAX_HOST or not all(c.isalnum() or c in "-._:" for c in host):
        return f"{host[:80]!r} is not a host name"
    return None


# -- the minter process ----------------------------------------------------------


def startMinter(stateDir: str, hosts: list[str]) -> tuple[bytes, socket.socket, int]:
    """
    Fork the minter: it loads (or creates) the CA in C{stateDir}, mints the
    certificates of C{hosts} (the sites') and then serves mints until its
    socket closes.

    @return: the bundle for the workers (see L{netlog.site.ca.leafBundle}),
        the socket the minter serves on, and its PID.
    @raise CAError: the minter could not load the CA (its message says why).
    """
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            ours.close()
            _serve(theirs, stateDir, hosts)
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    theirs.close()
    first = b""
    while not first.endswith(b"\n"):
        chunk = ours.recv(1 << 16)
        if not chunk:
            break
        first += chunk
    try:
        answer = json.loads(first)
    except ValueError:
        ours.close()
        os.waitpid(pid, 0)
        raise CAError(f"the certificate minter for {stateDir} failed at start; see the output above") from None
    if "error" in answer:
        ours.close()
        os.waitpid(pid, 0)
        raise CAError(str(answer["error"]))
    return answer["bundle"].encode("ascii"), ours, pid


def _serve(sock: socket.socket, stateDir: str, hosts: list[str]) -> None:
    """
    In the minter: load the CA, send the bundle, then answer each line
    C{{"host": H}} with C{{"host": H, "cert": PEM}} (or C{"error"}), in the
    order asked, until the socket closes.
    """
    # Only the supervisor stops it (by closing the socket): not a Ctrl-C to
    # the process group, nor what twistd's signal handlers would do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    keep = sock.fileno()
    # Nothing of the supervisor's: its log, its listeners, its reactor.
    os.closerange(3, keep)
    os.closerange(keep + 1, max(resource.getrlimit(resource.RLIMIT_NOFILE)[0], keep + 1))

    def send(message: dict[str, Any]) -> None:
        sock.sendall(json.dumps(message).encode("ascii") + b"\n")

    try:
        ca = CertificateAuthority.loadOrCreate(stateDir)
    except CAError as e:
        send({"error": str(e)})
        return
    send({"bundle": leafBundle(ca, hosts).decode("ascii")})
    minted: BoundedCache[str, str] = BoundedCache(MAX_MINTED)
    buffer = b""
    while True:
        chunk = sock.recv(1 << 16)
        if not chunk:
            return
        buffer += chunk
        if len(buffer) > MAX_MINT_LINE:
            return
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            try:
                host = str(json.loads(line)["host"])
            except (ValueError, KeyError, TypeError):
                send({"host": None, "error": "a request that is not {\"host\": ...}"})
                continue
            why = mintableHost(host)
            if why is not None:
                send({"host": host, "error": why})
                continue
            pem = minted.get(host)
            if pem is None:
                pem = ca.mint(host).public_bytes(serialization.Encoding.PEM).decode("ascii")
                minted.put(host, pem)
            send({"host": host, "cert": pem})


# -- the supervisor's side --------------------------------------------------------


class MinterClient(Protocol):
    """
    The supervisor's end of the minter's socket: one line asked per host
    not yet minted (however many ask at once), the answers matched in
    order, the certificates kept (L{BoundedCache}).

    @ivar pid: the minter's process.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.minted: BoundedCache[str, str] = BoundedCache(MAX_MINTED)
        self._asked: deque[str] = deque()
        self._waiting: Coalesced[str, str] = Coalesced()
        self._buffer = b""
        self.gone = False

    def mint(self, host: str) -> Deferred[str]:
        """
        The certificate (PEM) for C{host}.
        """
        pem = self.minted.get(host)
        if pem is not None:
            return succeed(pem)
        if self.gone or self.transport is None:
            return fail(MintError("the certificate minter is gone"))
        d, first = self._waiting.join(host)
        if first:
            self._asked.append(host)
            self.transport.write(json.dumps({"host": host}).encode("ascii") + b"\n")
        return d

    def dataReceived(self, data: bytes) -> None:
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            if not self._asked:
                _log.error("the certificate minter answered what no one asked")
                continue
            host = self._asked.popleft()
            try:
                answer = json.loads(line)
            except ValueError:
                answer = {"error": "the minter's answer is not JSON"}
            if isinstance(answer.get("cert"), str):
                self.minted.put(host, answer["cert"])
                self._waiting.answer(host, answer["cert"])
            else:
                self._waiting.refuse(host, MintError(str(answer.get("error", "the minter gave no certificate"))))
        if len(self._buffer) > MAX_MINT_LINE:
            self.transport.loseConnection()  # type: ignore[union-attr]

    def connectionLost(self, reason: Any = None) -> None:
        self.gone = True
        _log.error("the certificate minter {pid} is gone: live hosts not yet minted get no certificate",
                   pid=self.pid)
        self._asked.clear()
        self._waiting.refuseAll(MintError("the certificate minter is gone"))
        try:
            os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pass


def adoptMinter(reactor: Any, sock: socket.socket, pid: int) -> MinterClient:
    """
    Serve the minter's socket C{sock} in C{reactor}.
    """
    from netlog.supervise.control import SideFactory

    client = MinterClient(pid)
    reactor.adoptStreamConnection(sock.fileno(), socket.AF_UNIX, SideFactory(lambda: client))
    sock.close()
    return client
