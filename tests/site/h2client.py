"""
A blocking HTTP/2 client for the tests (run in a thread): the C{h2}
library's client side over a real TLS socket that offers C{h2} by ALPN,
with each stream's answer gathered, and room to send frames no well-behaved
client would (floods, resets, malformed fields).
"""

from __future__ import annotations

import socket
import ssl
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    InformationalResponseReceived,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
)
from h2.exceptions import ProtocolError

from tests.site.support import CLIENT_TIMEOUT, openSocket


@dataclass
class Answer:
    """
    What one stream got.
    """

    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    interim: list[int] = field(default_factory=list)
    data: bytearray = field(default_factory=bytearray)
    trailers: list[tuple[bytes, bytes]] = field(default_factory=list)
    ended: bool = False
    reset: int | None = None

    @property
    def status(self) -> int:
        return int(dict(self.headers)[b":status"])

    @property
    def done(self) -> bool:
        return self.ended or self.reset is not None


def h2Context(caFile: str | None = None, protocols: tuple[str, ...] = ("h2", "http/1.1")) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=caFile) if caFile else ssl._create_unverified_context()
    context.set_alpn_protocols(list(protocols))
    return context


class H2Client:
    """
    One HTTP/2 connection to the proxy, read only when a test asks.

    @ivar goaway: the C{GOAWAY} error code, once the proxy sent one.
    @ivar closed: the proxy closed the connection.
    """

    def __init__(self, sock: ssl.SSLSocket, validate: bool = True, autoAck: bool = True) -> None:
        self.sock = sock
        self.alpn = sock.selected_alpn_protocol()
        config = H2Configuration(client_side=True, header_encoding=None, validate_outbound_headers=validate,
                                 normalize_outbound_headers=validate, validate_inbound_headers=False)
        self.h2 = H2Connection(config)
        self.autoAck = autoAck
        self.answers: dict[int, Answer] = {}
        self.goaway: int | None = None
        self.closed = False
        self.h2.initiate_connection()
        self.flush()

    @classmethod
    def toRoute(cls, port: int, serverName: str, caFile: str | None = None, **kw: Any) -> H2Client:
        sock = openSocket(port)
        return cls(h2Context(caFile).wrap_socket(sock, server_hostname=serverName), **kw)

    @classmethod
    def throughTunnel(cls, port: int, authority: str, caFile: str | None = None, **kw: Any) -> H2Client:
        from tests.site.support import connectTunnel

        host = authority.rsplit(":", 1)[0]
        sock = connectTunnel(port, authority, h2Context(caFile), host)
        assert isinstance(sock, ssl.SSLSocket)
        return cls(sock, **kw)

    def flush(self) -> None:
        data = self.h2.data_to_send()
        if data:
            try:
                self.sock.sendall(data)
            except OSError:
                self.closed = True

    def sendRaw(self, data: bytes) -> None:
        try:
            self.sock.sendall(data)
        except OSError:
            self.closed = True

    def get(self, path: str, authority: str = "shop.test", extra: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
            method: str = "GET", body: bytes | None = None) -> int:
        sid = self.h2.get_next_available_stream_id()
        fields = [(b":method", method.encode()), (b":scheme", b"https"), (b":authority", authority.encode()),
                  (b":path", path.encode())] + list(extra)
        self.answers[sid] = Answer()
        self.h2.send_headers(sid, fields, end_stream=body is None)
        if body is not None:
            self.sendBody(sid, body)
        self.flush()
        return sid

    def sendBody(self, sid: int, body: bytes, end: bool = True) -> None:
        """
        Send C{body} as the windows allow, reading the proxy's window
        updates meanwhile.
        """
        view = memoryview(body)
        deadline = time.monotonic() + CLIENT_TIMEOUT * 3
        while view:
            window = min(self.h2.local_flow_control_window(sid), self.h2.max_outbound_frame_size)
            if window <= 0:
                self.pump(lambda: self.h2.local_flow_control_window(sid) > 0, deadline - time.monotonic())
                continue
            self.h2.send_data(sid, bytes(view[:window]))
            view = view[window:]
            self.flush()
        if end:
            self.h2.end_stream(sid)
            self.flush()

    def pump(self, until: Callable[[], bool], timeout: float = CLIENT_TIMEOUT) -> bool:
        """
        Read and handle frames until C{until()} or the time runs out (or the
        connection closes); whether C{until()} came true.
        """
        deadline = time.monotonic() + timeout
        while not until():
            if self.closed:
                return until()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.sock.settimeout(min(left, 1.0))
            try:
                data = self.sock.recv(65536)
            except (socket.timeout, TimeoutError):
                continue
            except OSError:
                self.closed = True
                continue
            if not data:
                self.closed = True
                continue
            try:
                events = self.h2.receive_data(data)
            except ProtocolError:
                self.closed = True
                continue
            for event in events:
                self._event(event)
            self.flush()
        return True

    def _event(self, event: Any) -> None:
        answer = self.answers.get(getattr(event, "stream_id", 0) or 0)
        if isinstance(event, ResponseReceived) and answer is not None:
            answer.headers = list(event.headers)
        elif isinstance(event, InformationalResponseReceived) and answer is not None:
            answer.interim.append(int(dict(event.headers)[b":status"]))
        elif isinstance(event, DataReceived):
            if answer is not None:
                answer.data += event.data
            if self.autoAck:
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, TrailersReceived) and answer is not None:
            answer.trailers = list(event.headers)
        elif isinstance(event, StreamEnded) and answer is not None:
            answer.ended = True
        elif isinstance(event, StreamReset) and answer is not None:
            answer.reset = int(event.error_code)
        elif isinstance(event, ConnectionTerminated):
            self.goaway = int(event.error_code)

    def wait(self, *sids: int, timeout: float = CLIENT_TIMEOUT) -> list[Answer]:
        self.pump(lambda: all(self.answers[s].done for s in sids), timeout)
        return [self.answers[s] for s in sids]

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
