"""
Both proxies are exactly as strict as each other: one table of malformed and
ambiguous raw requests (request smuggling, RFC 9112 framing) goes through a
real C{twistd netlog-standin} and a real C{twistd netlog-proxy}, and each must
answer the status the table names, close the connection, log the request as
C{_refused}, and let nothing reach the server: no byte and no connection.

Every case is sent whole in one write, so a proxy sees the body bytes that
came with a head before it decides anything; a proxy that sends the head up
first and looks at the body afterwards is caught by the origin, which records
every connection and every byte.

Each case is its own test method per proxy (so a run names every case that
fails); the proxy processes and the origin are started once per proxy and
shared by its cases, since a refused request closes its connection and each
case opens a new one.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import signal
import socket
import socketserver
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.support import freePort, sourceEnv, twistdArgv

#: Seconds a proxy process has to start listening.
STARTUP_TIMEOUT = 30.0
#: Seconds the client waits for more of an answer before it stops reading (a
#: refusal closes the connection at once; only a forwarded request waits).
ANSWER_IDLE = 3.0
#: Seconds a whole case may take to be answered, however it trickles.
ANSWER_LIMIT = 15.0
#: Seconds to wait for a case's end line in the log.
LOG_WAIT = 5.0
#: Seconds the origin waits after the last byte before it answers a head (so
#: a proxy that sends a head and then closes is seen doing so).
ORIGIN_QUIET = 0.3
#: Seconds an origin connection is kept at most.
ORIGIN_LIFETIME = 10.0
#: Seconds to let the origin's threads record a connection the proxy made.
ORIGIN_SETTLE = 0.1
#: The timeouts the proxies get, short so a request that is wrongly waited on
#: ends soon (seconds).
PROXY_TIMEOUT = "2"

#: The authority every case names; C{PORT} becomes the origin's port.
AUTHORITY = b"site.test:PORT"
_URL = b"http://" + AUTHORITY
_HOST = b"Host: " + AUTHORITY + b"\r\n"


def get(fields: bytes = b"", line: bytes = b"GET " + _URL + b"/strict HTTP/1.1") -> bytes:
    """
    A request without a body: C{line}, the Host field, then C{fields}.
    """
    return line + b"\r\n" + _HOST + fields + b"\r\n"


def post(fields: bytes, body: bytes = b"") -> bytes:
    """
    A POST with the Host field, then C{fields}, then C{body}.
    """
    return b"POST " + _URL + b"/upload HTTP/1.1\r\n" + _HOST + fields + b"\r\n" + body


def chunked(body: bytes) -> bytes:
    """
    A chunked POST whose body, as sent, is C{body}.
    """
    return post(b"Transfer-Encoding: chunked\r\n", body)


@dataclass(frozen=True)
class Case:
    """
    One malformed request: the bytes a browser sends and the status both
    proxies must answer.
    """

    name: str
    raw: bytes
    status: int


CASES: list[Case] = [
    # -- Chunk sizes.
    Case("chunk size negative", chunked(b"-5\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk size overflowing 64 bits", chunked(b"10000000000000000\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk size of 40 hex digits", chunked(b"f" * 40 + b"\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk size with 0x", chunked(b"0x5\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk size with a plus sign", chunked(b"+5\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk size with an underscore", chunked(b"1_0\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n"), 400),
    Case("chunk size not hex", chunked(b"zz\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk size empty", chunked(b"\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk size after a space", chunked(b" 5\r\nhello\r\n0\r\n\r\n"), 400),
    Case("second chunk size not hex", chunked(b"5\r\nhello\r\nzz\r\nhello\r\n0\r\n\r\n"), 400),
    # -- Chunk extensions.
    Case("chunk extension with a bare CR", chunked(b"5;a\rb\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk extension with a bare LF", chunked(b"5;a\nb\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk extension with a control character", chunked(b"5;a\x01b\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk extension with NUL", chunked(b"5;a=\x00\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk extension with DEL", chunked(b"5;a=b\x7f\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk extension with an unterminated quoted string", chunked(b'5;a="b\r\nhello\r\n0\r\n\r\n'), 400),
    Case("chunk extension with a control character quoted", chunked(b'5;a="\x01"\r\nhello\r\n0\r\n\r\n'), 400),
    Case("chunk extension without a semicolon", chunked(b"5 a=b\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk size then letters", chunked(b"5x\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk size then a space", chunked(b"5 \r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk extension without a name", chunked(b"5;\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk extension with an empty name", chunked(b"5;=b\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk extension of 64 KiB", chunked(b"5;a=" + b"b" * (64 * 1024) + b"\r\nhello\r\n0\r\n\r\n"), 400),
    # -- Chunk data not followed by CRLF.
    Case("chunk data longer than its size", chunked(b"5\r\nhelloXX\r\n0\r\n\r\n"), 400),
    Case("chunk data shorter than its size", chunked(b"3\r\nhello\r\n0\r\n\r\n"), 400),
    Case("chunk data then a bare LF", chunked(b"5\r\nhello\n0\r\n\r\n"), 400),
    Case("chunk data then a bare CR", chunked(b"5\r\nhello\r0\r\n\r\n"), 400),
    # -- Bare LF in chunk lines and trailers.
    Case("chunk line ending in a bare LF", chunked(b"5\nhello\r\n0\r\n\r\n"), 400),
    Case("last chunk ending in a bare LF", chunked(b"5\r\nhello\r\n0\n\r\n"), 400),
    Case("trailer section ending in a bare LF", chunked(b"5\r\nhello\r\n0\r\n\n"), 400),
    Case("trailer field ending in a bare LF", chunked(b"5\r\nhello\r\n0\r\nX-T: a\nX-U: b\r\n\r\n"), 400),
    # -- A trailer section that is really a request.
    Case("trailers that are an absolute-form request",
         chunked(b"0\r\nGET " + _URL + b"/admin HTTP/1.1\r\n" + _HOST + b"\r\n"), 400),
    Case("trailers that are an origin-form request",
         chunked(b"0\r\nGET /admin HTTP/1.1\r\n" + _HOST + b"\r\n"), 400),
    Case("trailer with obs-fold", chunked(b"5\r\nhello\r\n0\r\nX-T: a\r\n b\r\n\r\n"), 400),
    Case("trailer with space before the colon", chunked(b"5\r\nhello\r\n0\r\nX-T : a\r\n\r\n"), 400),
    # -- Content-Length.
    Case("Content-Length twice, equal", post(b"Content-Length: 5\r\nContent-Length: 5\r\n", b"hello"), 400),
    Case("Content-Length list, equal", post(b"Content-Length: 5, 5\r\n", b"hello"), 400),
    Case("Content-Length twice, differing", post(b"Content-Length: 5\r\nContent-Length: 6\r\n", b"hello"), 400),
    Case("Content-Length list, differing", post(b"Content-Length: 5, 6\r\n", b"hello"), 400),
    Case("Content-Length with a plus sign", post(b"Content-Length: +5\r\n", b"hello"), 400),
    Case("Content-Length negative", post(b"Content-Length: -5\r\n", b"hello"), 400),
    Case("Content-Length with a space inside", post(b"Content-Length: 5 5\r\n", b"hello"), 400),
    Case("Content-Length hex", post(b"Content-Length: 0x5\r\n", b"hello"), 400),
    Case("Content-Length with a trailing comma", post(b"Content-Length: 5,\r\n", b"hello"), 400),
    Case("Content-Length overflowing", post(b"Content-Length: 99999999999999999999\r\n"), 400),
    Case("Content-Length empty", post(b"Content-Length:\r\n"), 400),
    Case("Connection names Content-Length",
         post(b"Connection: Content-Length\r\nContent-Length: 42\r\n",
              b"GET " + _URL + b"/admin HTTP/1.1\r\n" + _HOST + b"\r\n"), 400),
    # -- Transfer-Encoding.
    Case("Content-Length and Transfer-Encoding",
         post(b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"), 400),
    Case("Transfer-Encoding and Content-Length",
         post(b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n", b"0\r\n\r\n"), 400),
    Case("Transfer-Encoding chunked, gzip", post(b"Transfer-Encoding: chunked, gzip\r\n", b"0\r\n\r\n"), 400),
    Case("Transfer-Encoding chunked twice", post(b"Transfer-Encoding: chunked, chunked\r\n", b"0\r\n\r\n"), 400),
    Case("Transfer-Encoding with an empty element", post(b"Transfer-Encoding: chunked,\r\n", b"0\r\n\r\n"), 400),
    Case("Transfer-Encoding quoted", post(b'Transfer-Encoding: "chunked"\r\n', b"0\r\n\r\n"), 400),
    Case("Transfer-Encoding empty", post(b"Transfer-Encoding:\r\n", b"0\r\n\r\n"), 400),
    Case("Transfer-Encoding gzip, chunked", post(b"Transfer-Encoding: gzip, chunked\r\n", b"0\r\n\r\n"), 501),
    Case("Transfer-Encoding unknown", post(b"Transfer-Encoding: identity\r\n", b"0\r\n\r\n"), 501),
    Case("Transfer-Encoding in HTTP/1.0",
         b"POST " + _URL + b"/upload HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400),
    Case("Connection names Transfer-Encoding",
         post(b"Connection: transfer-encoding\r\nTransfer-Encoding: chunked\r\n", b"0\r\n\r\n"), 400),
    # -- Field syntax.
    Case("space before a colon", get(b"X-A : 1\r\n"), 400),
    Case("tab before a colon", get(b"X-A\t: 1\r\n"), 400),
    Case("obs-fold", get(b"X-A: 1\r\n 2\r\n"), 400),
    Case("field line without a colon", get(b"X-A 1\r\n"), 400),
    Case("field with an empty name", get(b": 1\r\n"), 400),
    Case("field name with a slash", get(b"X/A: 1\r\n"), 400),
    Case("NUL in a value", get(b"X-A: a\x00b\r\n"), 400),
    Case("control character in a value", get(b"X-A: a\x01b\r\n"), 400),
    Case("bare CR in a value", get(b"X-A: a\rb\r\n"), 400),
    Case("bare LF ending a field", get(b"X-A: a\nX-B: b\r\n"), 400),
    Case("bare LF ending the head", get()[:-2] + b"\n", 400),
    # -- The request line and the target.
    Case("HTTP/0.9 request line", b"GET " + _URL + b"/strict\r\n\r\n", 505),
    Case("request line of four parts", get(line=b"GET " + _URL + b"/strict x HTTP/1.1"), 400),
    Case("two spaces in the request line", get(line=b"GET  " + _URL + b"/strict HTTP/1.1"), 400),
    Case("bare LF after the request line", b"GET " + _URL + b"/strict HTTP/1.1\n" + _HOST + b"\r\n", 400),
    Case("method not a token", get(line=b"G(T " + _URL + b"/strict HTTP/1.1"), 400),
    Case("lowercase version", get(line=b"GET " + _URL + b"/strict http/1.1"), 400),
    Case("HTTP/1.2", get(line=b"GET " + _URL + b"/strict HTTP/1.2"), 505),
    Case("HTTP/2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505),
    Case("origin-form target", get(line=b"GET /strict HTTP/1.1"), 400),
    Case("asterisk-form target", get(line=b"OPTIONS * HTTP/1.1"), 400),
    Case("URL with userinfo", get(line=b"GET http://u:p@" + AUTHORITY + b"/strict HTTP/1.1"), 400),
    Case("URL with a fragment", get(line=b"GET " + _URL + b"/strict#x HTTP/1.1"), 400),
    Case("Host disagrees with the URL",
         b"GET " + _URL + b"/strict HTTP/1.1\r\nHost: other.test\r\n\r\n", 400),
    Case("two Host fields", get(_HOST), 400),
    Case("no Host in HTTP/1.1", b"GET " + _URL + b"/strict HTTP/1.1\r\n\r\n", 400),
    # -- Limits.
    Case("request line over 8 KiB", get(line=b"GET " + _URL + b"/" + b"a" * 9000 + b" HTTP/1.1"), 414),
    Case("head over 64 KiB", get(b"".join(b"X-%d: %s\r\n" % (i, b"v" * 1000) for i in range(70))), 431),
    Case("over 100 fields", get(b"".join(b"X-%d: v\r\n" % (i,) for i in range(101))), 431),
    Case("trailers over 100 fields",
         chunked(b"0\r\n" + b"".join(b"X-%d: v\r\n" % (i,) for i in range(101)) + b"\r\n"), 431),
]


def _methodName(name: str) -> str:
    return "test_" + re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


# -- the origin -------------------------------------------------------------------


class _OriginHandler(socketserver.BaseRequestHandler):
    """
    Records every byte of one connection; once it has a head and the proxy
    has gone quiet, answers 200 and closes (so a forwarded request ends).
    """

    server: "Origin"

    def handle(self) -> None:
        received = self.server.opened()
        sock = self.request
        sock.settimeout(ORIGIN_QUIET)
        deadline = time.monotonic() + ORIGIN_LIFETIME
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except socket.timeout:
                with self.server.lock:
                    head = b"\r\n\r\n" in received
                if head:
                    try:
                        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                     b"Content-Length: 7\r\nConnection: close\r\n\r\nreached")
                    except OSError:
                        pass
                    return
                continue
            except OSError:
                return
            if not data:
                return
            with self.server.lock:
                received += data


class Origin(socketserver.ThreadingTCPServer):
    """
    A loopback server that keeps what each connection sent it.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _OriginHandler)
        self.lock = threading.Lock()
        self._connections: list[bytearray] = []
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def opened(self) -> bytearray:
        received = bytearray()
        with self.lock:
            self._connections.append(received)
        return received

    def connections(self) -> list[bytes]:
        """
        What each connection so far has sent, in the order they came.
        """
        with self.lock:
            return [bytes(c) for c in self._connections]

    def close(self) -> None:
        self.shutdown()
        self.server_close()


# -- the proxies ------------------------------------------------------------------


class ProxyProcess:
    """
    A real C{twistd -n} proxy on a loopback forward port, its origin, its log.
    """

    def __init__(self, plugin: str, directory: str, origin: Origin, args: list[str]) -> None:
        self.plugin = plugin
        self.directory = directory
        self.origin = origin
        self.port = freePort()
        self.log = os.path.join(directory, "network.jsonl")
        argv = twistdArgv() + [
            "-n", "--pidfile=", f"--logfile={os.path.join(directory, 'twistd.log')}",
            plugin, "--no-supervise",
            "--listen", f"tcp:{self.port}:interface=127.0.0.1", "--log", self.log,
            "--resolve", "site.test=127.0.0.1", "--resolve-only",
            "--header-timeout", PROXY_TIMEOUT, "--idle-timeout", PROXY_TIMEOUT, *args,
        ]
        self.process = subprocess.Popen(argv, env=sourceEnv(), cwd=directory,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise AssertionError(f"twistd {plugin} did not start:\n{self.twistdLog()}")
                time.sleep(0.05)

    def twistdLog(self) -> str:
        try:
            with open(os.path.join(self.directory, "twistd.log"), errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def lines(self) -> list[dict[str, Any]]:
        try:
            with open(self.log, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        # Only whole lines: one may be being written.
        return [json.loads(line) for line in data.split(b"\n")[:-1] if line]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        if self.process.stderr:
            self.process.stderr.close()


def _startStandin(directory: str, origin: Origin) -> ProxyProcess:
    return ProxyProcess("netlog-standin", directory, origin, [])


def _startSiteProxy(directory: str, origin: Origin) -> ProxyProcess:
    sites = os.path.join(directory, "sites.toml")
    with open(sites, "w") as f:
        f.write(f"""
[[site]]
name = "site"
origins = ["http://site.test:{origin.port}"]
backend = "http://127.0.0.1:{origin.port}"
""")
    return ProxyProcess("netlog-proxy", directory, origin,
                        ["--sites", sites, "--state", os.path.join(directory, "state")])


#: The running proxy of each kind, started by the first case that needs it.
_running: dict[str, ProxyProcess] = {}


def _shared(kind: str, start: Callable[[str, Origin], ProxyProcess]) -> ProxyProcess:
    """
    The proxy every case of C{kind} shares, with its own origin and folder;
    both are stopped and removed when the test run's process exits.
    """
    if kind not in _running:
        directory = tempfile.mkdtemp(prefix=f"netlog-strict-{kind}-")
        atexit.register(shutil.rmtree, directory, True)
        origin = Origin()
        atexit.register(origin.close)
        _running[kind] = start(directory, origin)
        atexit.register(_running[kind].stop)
    return _running[kind]


# -- the client -------------------------------------------------------------------


def exchange(port: int, raw: bytes) -> tuple[bytes, bool]:
    """
    Send C{raw} in one write and read the answer: the bytes, and whether the
    proxy closed the connection (rather than going quiet).
    """
    with socket.create_connection(("127.0.0.1", port), timeout=ANSWER_IDLE) as sock:
        try:
            sock.sendall(raw)
        except OSError:
            # Refused before it read everything: the answer may still be there.
            pass
        answer = b""
        deadline = time.monotonic() + ANSWER_LIMIT
        while time.monotonic() < deadline:
            try:
                piece = sock.recv(65536)
            except socket.timeout:
                return answer, False
            except ConnectionResetError:
                return answer, True
            if not piece:
                return answer, True
            answer += piece
        return answer, False


def statusOf(answer: bytes) -> int | None:
    match = re.match(rb"HTTP/1\.[01] ([0-9]{3}) ", answer)
    return int(match.group(1)) if match else None


class _StrictnessMixin:
    """
    Runs a L{Case} through the proxy of C{kind}.
    """

    kind: str
    start: Callable[[str, Origin], ProxyProcess]

    def check(self, case: Case) -> None:
        proxy = _shared(self.kind, type(self).start)
        raw = case.raw.replace(AUTHORITY, b"site.test:%d" % (proxy.origin.port,))
        connectionsBefore = len(proxy.origin.connections())
        linesBefore = len(proxy.lines())
        answer, closed = exchange(proxy.port, raw)

        # The log's end line for this case (bounded wait).
        ended: list[dict[str, Any]] = []
        deadline = time.monotonic() + LOG_WAIT
        while time.monotonic() < deadline:
            ended = [line for line in proxy.lines()[linesBefore:] if line["type"] == "end"]
            if ended:
                break
            time.sleep(0.02)
        time.sleep(ORIGIN_SETTLE)
        reached = proxy.origin.connections()[connectionsBefore:]

        problems = []
        status = statusOf(answer)
        if status != case.status:
            problems.append(f"answered {answer[:40]!r} (expected {case.status})")
        if not closed:
            problems.append("the connection was left open")
        if reached:
            problems.append(f"the server got {len(reached)} connection(s), "
                            f"{sum(map(len, reached))} bytes: {[c[:80] for c in reached]!r}")
        refusals = [e.get("_refused", {}).get("status") for e in ended]
        if refusals != [case.status]:
            problems.append(f"logged end lines {[{k: e.get(k) for k in ('_refused', '_failed')} for e in ended]!r}"
                            f" (expected one _refused {case.status})")
        if problems:
            raise self.failureException(f"{self.kind}, {case.name}: " + "; ".join(problems))  # type: ignore[attr-defined]


def _addCases(cls: type) -> type:
    """
    Give C{cls} a test method per case.
    """
    for case in CASES:
        def test(self: _StrictnessMixin, case: Case = case) -> None:
            self.check(case)

        test.__name__ = _methodName(case.name)
        test.__doc__ = (f"{case.name}: answered {case.status} and logged C{{_refused}}, "
                        f"and nothing reaches the server.")
        setattr(cls, test.__name__, test)
    return cls


assert len({_methodName(c.name) for c in CASES}) == len(CASES), "case names must differ"


@pytest.mark.slow
@_addCases
class StandinStrictnessTests(_StrictnessMixin, SynchronousTestCase):
    """
    The table through C{twistd netlog-standin}.
    """

    kind = "standin"
    start = staticmethod(_startStandin)


@pytest.mark.slow
@_addCases
class SiteProxyStrictnessTests(_StrictnessMixin, SynchronousTestCase):
    """
    The table through C{twistd netlog-proxy}, the site's origin
    C{http://site.test:PORT} served by the same kind of recording origin.
    """

    kind = "site"
    start = staticmethod(_startSiteProxy)
