"""
What the site proxy's tests share: a proxy started in this process on
loopback ports, tiny backends, and blocking clients run in threads.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
from typing import Any, Callable

from twisted.internet import defer, reactor, task
from twisted.internet.protocol import Factory, Protocol
from twisted.trial.unittest import TestCase
from twisted.web import resource, server

from netlog.log.writer import LogWriter
from netlog.net.policy import DestinationPolicy
from netlog.net.resolve import Resolver
from netlog.proxy.service import ProxyService
from netlog.site.config import parseSites
from netlog.site.mode import SiteMode

#: Seconds a test client waits on a socket before giving up.
CLIENT_TIMEOUT = 10.0


class RunningProxy:
    """
    The site proxy (L{ProxyService} over L{SiteMode}) listening on loopback, with its log in a temporary folder.

    @ivar ports: the port of each listener, by role.
    """

    def __init__(self, case: TestCase, sitesToml: str, resolve: dict[str, str] | None = None,
                 logging: bool = True, routes: bool = True, modeOptions: dict[str, Any] | None = None,
                 **timeouts: float) -> None:
        """
        @param modeOptions: more keyword arguments for L{SiteMode}.
        @param timeouts: C{idleTimeout}, C{headerTimeout} for the proxy.
        """
        self.case = case
        self.folder = os.path.abspath(case.mktemp())
        os.makedirs(self.folder)
        self.logPath = os.path.join(self.folder, "network.jsonl") if logging else None
        self.stateDir = os.path.join(self.folder, "state")
        self.config = parseSites(sitesToml)
        self.writer = LogWriter(self.logPath, reactor=reactor)
        self.writer.startService()
        self.mode = SiteMode(self.config, self.stateDir, **(modeOptions or {}))
        self.proxy = ProxyService(
            self.mode, self.writer, reactor,
            Resolver(reactor, resolve or {}, resolveOnly=True), DestinationPolicy(),
            ["forward"], "https" if routes else None, "http" if routes else None,
            connectTimeout=5.0, **timeouts,  # type: ignore[arg-type]
        )
        self.proxy.startService()
        self.ports: dict[str, int] = {}
        for role, _, factory in self.proxy.listeners:
            port = reactor.listenTCP(0, factory, interface="127.0.0.1")
            self.ports[role] = port.getHost().port
            case.addCleanup(port.stopListening)
        case.addCleanup(self.stop)
        self.caFile = os.path.join(self.stateDir, "ca.pem")

    def stop(self) -> Any:
        self.proxy.stopService()
        if self.writer.running:
            self.writer.stopService()
        return task.deferLater(reactor, 0.01, lambda: None)

    def lines(self) -> list[dict[str, Any]]:
        if self.logPath is None or not os.path.exists(self.logPath):
            return []
        with open(self.logPath, "rb") as f:
            return [json.loads(line) for line in f]

    def entries(self) -> list[tuple[dict[str, Any], dict[str, Any] | None]]:
        """
        Each exchange's open line with its end line (or L{None}), in order.
        """
        lines = self.lines()
        ends = {line["id"]: line for line in lines if line["type"] == "end"}
        return [(line, ends.get(line["id"])) for line in lines if line["type"] == "open"]

    def ended(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        return [(o, e) for o, e in self.entries() if e is not None]

    @defer.inlineCallbacks
    def waitForEnds(self, count: int, timeout: float = CLIENT_TIMEOUT) -> Any:
        """
        Wait (bounded) until C{count} exchanges have ended.
        """
        for _ in range(int(timeout / 0.02)):
            if len(self.ended()) >= count:
                return self.ended()
            yield task.deferLater(reactor, 0.02, lambda: None)
        raise AssertionError(f"only {len(self.ended())} of {count} exchanges ended")

    def sslContext(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.caFile)
        context.set_alpn_protocols(["http/1.1"])
        return context


def listenWeb(case: TestCase, root: resource.Resource) -> int:
    """
    Serve C{root} with twisted.web on a loopback port; return the port.
    """
    port = reactor.listenTCP(0, server.Site(root), interface="127.0.0.1")
    case.addCleanup(port.stopListening)
    return port.getHost().port


class ScriptedServer(Protocol):
    """
    A raw backend: calls C{script(protocol, data)} with everything received so
    far each time bytes arrive.
    """

    def __init__(self, script: Callable[["ScriptedServer", bytes], None], record: list[Any]) -> None:
        self.script = script
        self.received = b""
        self.record = record

    lost = False

    def connectionMade(self) -> None:
        self.record.append(self)

    def connectionLost(self, reason: Any = None) -> None:
        self.lost = True

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        self.script(self, self.received)


def listenScripted(case: TestCase, script: Callable[[ScriptedServer, bytes], None],
                   contextFactory: Any = None) -> tuple[int, list[ScriptedServer]]:
    record: list[ScriptedServer] = []
    factory = Factory.forProtocol(lambda: ScriptedServer(script, record))
    if contextFactory is not None:
        port = reactor.listenSSL(0, factory, contextFactory, interface="127.0.0.1")
    else:
        port = reactor.listenTCP(0, factory, interface="127.0.0.1")
    case.addCleanup(port.stopListening)

    def closeAll() -> None:
        for p in record:
            if p.transport is not None and not p.lost:
                p.transport.abortConnection()

    case.addCleanup(closeAll)
    return port.getHost().port, record


# -- blocking clients (run them with threads.deferToThread) ----------------------


def openSocket(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT)
    return sock


def connectTunnel(port: int, authority: str, context: ssl.SSLContext | None, serverName: str | None = None
                  ) -> socket.socket:
    """
    CONNECT through the forward port; with C{context}, TLS over the tunnel.
    """
    sock = openSocket(port)
    sock.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    head = readHead(sock)
    if not head.startswith(b"HTTP/1.1 200"):
        raise AssertionError(head)
    if context is None:
        return sock
    return context.wrap_socket(sock, server_hostname=serverName or authority.rsplit(":", 1)[0])


def pingThrough(port: int, authority: str) -> bytes:
    """
    C{ping} through a blind tunnel to an echoing live host; what came back.
    """
    sock = connectTunnel(port, authority, None)
    sock.sendall(b"ping")
    got = b""
    while len(got) < 4:
        got += sock.recv(4)
    sock.close()
    return got


def readHead(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(1)
        if not piece:
            break
        data += piece
    return data


def readAll(sock: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            piece = sock.recv(65536)
        except (ConnectionResetError, ssl.SSLError):
            break
        if not piece:
            break
        chunks.append(piece)
    return b"".join(chunks)


def readResponse(sock: socket.socket, method: str = "GET") -> tuple[int, dict[str, str], bytes, bytes]:
    """
    Read one response (length, chunked or to EOF); return status, headers
    (lowercased names, last wins), body (chunked undone) and the raw bytes.
    """
    import h11

    conn = h11.Connection(h11.CLIENT)
    conn.send(h11.Request(method=method, target="/", headers=[("Host", "x")]))
    conn.send(h11.EndOfMessage())
    raw = b""
    body = b""
    status = 0
    headers: dict[str, str] = {}
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = sock.recv(65536)
            raw += data
            conn.receive_data(data)
            continue
        if isinstance(event, h11.InformationalResponse):
            continue
        if isinstance(event, h11.Response):
            status = event.status_code
            headers = {k.decode().lower(): v.decode("latin-1") for k, v in event.headers}
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, (h11.EndOfMessage, h11.ConnectionClosed)):
            break
    return status, headers, body, raw


def request(sock: socket.socket, method: str, target: str, headers: list[tuple[str, str]],
            body: bytes = b"") -> tuple[int, dict[str, str], bytes, bytes]:
    head = f"{method} {target} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    sock.sendall(head.encode("latin-1") + body)
    return readResponse(sock, method)
