"""
What the stand-in's tests share: a loopback origin (plain and TLS) built on
h11 (so the proxy is checked against a parser that isn't ours), a real
C{twistd netlog-standin} process, and blocking clients run in threads.
"""

from __future__ import annotations

import datetime
import json
import os
import signal
import socket
import ssl
import subprocess
import time
from typing import Any, Callable

import h11
from twisted.internet import defer, reactor, task
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.threads import deferToThread

from tests.support import freePort, sourceEnv, twistdArgv

#: How long a test waits for a process to start or a line to appear.
STARTUP_TIMEOUT = 20.0
#: The bytes the origin writes per call when it sends a large body.
CHUNK = 64 * 1024
_BLOCK = bytes(range(256)) * (CHUNK // 256)


class OriginProtocol(Protocol):
    """
    A small HTTP/1.1 origin. Paths:

      - C{/hello}: C{hello}
      - C{/size/N}: N bytes, sent as the client reads them
      - C{/chunked}: a chunked answer
      - C{/close}: an answer framed by closing the connection
      - C{/echo-head}: the request head as the origin got it
      - C{/upload}: counts the request body, answers the count
      - C{/ws}: an C{Upgrade} answered C{101}, then an echo
      - C{/reset}: the connection is reset
      - C{/silent}: no answer at all
      - C{/garbage}: bytes that aren't HTTP
      - C{/gzip-json}: a gzip-coded JSON document
    """

    def connectionMade(self) -> None:
        self.conn = h11.Connection(h11.SERVER)
        self.echo = False
        self.target = b""
        self.received = 0
        self.head = b""
        self.sending = 0
        self.factory.connections += 1  # type: ignore[attr-defined]

    def dataReceived(self, data: bytes) -> None:
        if self.echo:
            self.transport.write(data)
            return
        self.conn.receive_data(data)
        self._drive()

    def _drive(self) -> None:
        while True:
            try:
                event = self.conn.next_event()
            except h11.RemoteProtocolError:
                self.transport.loseConnection()
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                if event is h11.PAUSED and self.conn.our_state is h11.DONE and self.conn.their_state is h11.DONE:
                    self.conn.start_next_cycle()
                    continue
                return
            if isinstance(event, h11.Request):
                self.target = event.target
                self.method = event.method
                self.headers = event.headers
                self.received = 0
                self.factory.requests.append((event.method, event.target, list(event.headers)))  # type: ignore[attr-defined]
                if self.target == b"/ws":
                    self._switch(event)
                    return
            elif isinstance(event, h11.Data):
                self.received += len(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._answer()
            elif isinstance(event, h11.ConnectionClosed):
                return

    def _switch(self, request: h11.Request) -> None:
        self.transport.write(
            self.conn.send(h11.InformationalResponse(
                status_code=101, headers=[(b"Upgrade", b"echo"), (b"Connection", b"Upgrade")]
            ))
        )
        self.echo = True
        rest, _ = self.conn.trailing_data
        if rest:
            self.transport.write(rest)

    def _send(self, status: int, body: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> None:
        headers = list(headers or [])
        headers.append((b"Content-Length", str(len(body)).encode()))
        self.transport.write(self.conn.send(h11.Response(status_code=status, headers=headers, reason=b"OK" if status == 200 else b"Other")))
        if self.method != b"HEAD":
            self.transport.write(self.conn.send(h11.Data(data=body)))
        self.transport.write(self.conn.send(h11.EndOfMessage()))
        if self.conn.our_state is h11.MUST_CLOSE:
            self.transport.loseConnection()

    def _answer(self) -> None:
        target = self.target
        if target == b"/hello":
            self._send(200, b"hello", [(b"Content-Type", b"text/plain"), (b"X-Origin", b"yes")])
        elif target.startswith(b"/size/"):
            self._sendLarge(int(target[6:]))
        elif target == b"/chunked":
            self.transport.write(self.conn.send(h11.Response(
                status_code=200, headers=[(b"Transfer-Encoding", b"chunked")]
            )))
            for piece in (b"one-", b"two-", b"three"):
                self.transport.write(self.conn.send(h11.Data(data=piece)))
            self.transport.write(self.conn.send(h11.EndOfMessage()))
            if self.conn.our_state is h11.MUST_CLOSE:
                self.transport.loseConnection()
        elif target == b"/close":
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil close")
            self.transport.loseConnection()
        elif target == b"/echo-head":
            body = json.dumps([[n.decode(), v.decode()] for n, v in self.headers]).encode()
            self._send(200, body, [(b"Content-Type", b"application/json")])
        elif target == b"/upload":
            self._send(200, str(self.received).encode(), [(b"Content-Type", b"text/plain")])
        elif target == b"/reset":
            self.transport.abortConnection()
        elif target == b"/silent":
            pass
        elif target == b"/cut-in-trailers":
            # A chunked answer cut inside its trailer section.
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"5\r\nhello\r\n0\r\nX-Trailer: a"
            )
            self.transport.loseConnection()
        elif target == b"/garbage":
            self.transport.write(b"SSH-2.0-not-http\r\nmore bytes")
            self.transport.loseConnection()
        elif target == b"/gzip-json":
            self._send(200, GZIP_JSON, [(b"Content-Type", b"application/json"),
                                        (b"Content-Encoding", b"gzip")])
        else:
            self._send(404, b"no such path")

    def _sendLarge(self, size: int) -> None:
        self.transport.write(self.conn.send(h11.Response(
            status_code=200,
            headers=[(b"Content-Length", str(size).encode()),
                     (b"Content-Type", b"application/octet-stream")],
        )))
        self.sending = size
        self.transport.registerProducer(self, False)

    def resumeProducing(self) -> None:
        if self.sending <= 0:
            return
        take = min(self.sending, CHUNK)
        self.sending -= take
        self.transport.write(self.conn.send(h11.Data(data=_BLOCK[:take])))
        if self.sending == 0:
            self.transport.unregisterProducer()
            self.transport.write(self.conn.send(h11.EndOfMessage()))
            self._drive()

    def stopProducing(self) -> None:
        self.sending = 0


def _gzipJson() -> bytes:
    import gzip

    doc = {"items": [{"id": i, "name": f"item {i}", "tags": ["a", "b", "c"]} for i in range(2000)]}
    return gzip.compress(json.dumps(doc).encode())


GZIP_JSON = _gzipJson()


class OriginFactory(Factory):
    protocol = OriginProtocol

    def __init__(self) -> None:
        self.requests: list[tuple[bytes, bytes, list[tuple[bytes, bytes]]]] = []
        self.connections = 0


def makeCertificate(hostname: str, directory: str) -> tuple[str, str]:
    """
    A self-signed certificate for C{hostname}: the paths of its PEM
    certificate and key.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(hostname)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certPath = os.path.join(directory, "origin.pem")
    keyPath = os.path.join(directory, "origin.key")
    with open(certPath, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(keyPath, "wb") as f:
        f.write(key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ))
    return certPath, keyPath


def listenOrigin(testCase: Any, tls: tuple[str, str] | None = None,
                 factory: OriginFactory | None = None) -> tuple[OriginFactory, int]:
    """
    Start an origin on 127.0.0.1 (TLS with C{tls=(cert, key)}); stopped at the
    test's end.

    @param factory: the origin's factory, when not a plain L{OriginFactory}.
    """
    factory = factory or OriginFactory()
    if tls is None:
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    else:
        from twisted.internet import ssl as tssl

        with open(tls[0]) as c, open(tls[1]) as k:
            cert = tssl.PrivateCertificate.loadPEM(c.read() + k.read())
        port = reactor.listenSSL(0, factory, cert.options(), interface="127.0.0.1")
    testCase.addCleanup(port.stopListening)
    return factory, port.getHost().port


def _unsupervised() -> list[str]:
    """
    C{--no-supervise} when the shared options have it: these tests check the
    proxy itself, and kill it themselves.
    """
    from netlog.tap.standin import Options

    return ["--no-supervise"] if "no-supervise" in Options().longOpt else []


def tempDirectory(testCase: Any) -> str:
    """
    A fresh folder outside the work tree, removed at the test's end.
    """
    import shutil
    import tempfile

    path = tempfile.mkdtemp(prefix="netlog-standin-")
    testCase.addCleanup(shutil.rmtree, path, True)
    return path


class Standin:
    """
    A real C{twistd -n netlog-standin} process.
    """

    def __init__(self, testCase: Any, directory: str, args: list[str], port: int | None = None,
                 twistdOptions: list[str] = [], alsoListening: list[int] = []) -> None:
        """
        @param alsoListening: other ports C{args} has it listen on (its
            API's): L{start} waits for them too, since the proxy's own may
            accept before they do.
        """
        self.twistdOptions = list(twistdOptions)
        self.alsoListening = list(alsoListening)
        self.testCase = testCase
        self.directory = directory
        self.args = args
        self.port = port or freePort()
        self.log = os.path.join(directory, "standin.jsonl")
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> defer.Deferred[None]:
        argv = twistdArgv() + [
            "-n", "--pidfile=", f"--logfile={os.path.join(self.directory, 'twistd.log')}",
            *self.twistdOptions,
            "netlog-standin", *_unsupervised(),
            "--listen", f"tcp:{self.port}:interface=127.0.0.1",
            "--log", self.log, "--resolve-only",
        ] + self.args
        self.process = subprocess.Popen(argv, env=sourceEnv(), cwd=self.directory,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        process = self.process
        self.testCase.addCleanup(self._end, process)
        return self._waitListening()

    @defer.inlineCallbacks
    def _waitListening(self) -> Any:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(
                    f"twistd netlog-standin exited {self.process.returncode}: "
                    f"{self.process.stderr.read().decode(errors='replace') if self.process.stderr else ''}"
                    f"{self.twistdLog()}"
                )
            try:
                for port in [self.port, *self.alsoListening]:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                yield task.deferLater(reactor, 0.05, lambda: None)
        raise AssertionError("twistd netlog-standin did not start listening:\n" + self.twistdLog())

    def twistdLog(self) -> str:
        try:
            with open(os.path.join(self.directory, "twistd.log"), errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def _end(self, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        if process.stderr:
            process.stderr.close()

    def kill9(self) -> None:
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        assert self.process is not None
        self._end(self.process)

    def peakRSS(self) -> int:
        """
        The process's peak resident set size in bytes (C{VmHWM}).
        """
        assert self.process is not None
        with open(f"/proc/{self.process.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def lines(self) -> list[dict[str, Any]]:
        try:
            with open(self.log, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        # Only whole lines: the last one may still be being written.
        return [json.loads(line) for line in data.split(b"\n")[:-1] if line]

    def entries(self) -> dict[int, tuple[dict[str, Any], dict[str, Any] | None]]:
        """
        Each exchange's open line and end line (L{None} while still open), by id.
        """
        out: dict[int, Any] = {}
        for line in self.lines():
            if line["type"] == "open":
                out[line["id"]] = [line, None]
            elif line["type"] == "end":
                out[line["id"]][1] = line
        return {k: (v[0], v[1]) for k, v in out.items()}

    @defer.inlineCallbacks
    def waitEnded(self, count: int, timeout: float = 10.0) -> Any:
        """
        Wait until at least C{count} exchanges have ended; return the entries.
        """
        deadline = time.monotonic() + timeout
        while True:
            entries = self.entries()
            if sum(1 for _, end in entries.values() if end is not None) >= count:
                return entries
            if time.monotonic() > deadline:
                raise AssertionError(f"expected {count} ended entries, log has: {self.lines()}")
            yield task.deferLater(reactor, 0.05, lambda: None)


def inThread(f: Callable[..., Any], *args: Any, **kwargs: Any) -> defer.Deferred[Any]:
    """
    Run blocking client code off the reactor thread, so the origin in this
    process can answer it.
    """
    return deferToThread(f, *args, **kwargs)


def rawExchange(port: int, data: bytes, timeout: float = 10.0) -> bytes:
    """
    Send C{data} to the proxy and read until it closes the connection.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        chunks = []
        while True:
            try:
                piece = s.recv(65536)
            except ConnectionResetError:
                break
            if not piece:
                break
            chunks.append(piece)
        return b"".join(chunks)


def connectTunnel(proxyPort: int, authority: str, timeout: float = 10.0) -> tuple[socket.socket, bytes]:
    """
    Open a CONNECT tunnel through the proxy; return the socket and the head
    of the proxy's answer.
    """
    s = socket.create_connection(("127.0.0.1", proxyPort), timeout=timeout)
    s.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        piece = s.recv(1)
        if not piece:
            break
        head += piece
    return s, head


def tlsClientContext(certPath: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certPath)
    return context
