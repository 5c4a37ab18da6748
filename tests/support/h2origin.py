"""
A TLS origin on loopback for the tests of HTTP/2 toward backends: it speaks
HTTP/2 to a client whose ALPN offers C{h2} (the C{h2} library's server
side) and HTTP/1.1 otherwise (twisted.web), with answers scripted by path,
and counts its connections and the requests each protocol brought.

Paths (HTTP/2):

- C{/hello}: C{hello over h2}, with a C{content-length};
- C{/echo}: the request's body, without a length (chunked toward an
  HTTP/1.1 browser);
- C{/trailers}: a body, then the trailer C{x-checksum: c0ffee};
- C{/refuse-once}: the first time C{RST_STREAM} with C{REFUSED_STREAM},
  then an answer;
- C{/reset-mid}: a head that promises 100 bytes, C{partial}, then
  C{RST_STREAM} with C{INTERNAL_ERROR};
- C{/goaway-once}: the first time C{GOAWAY} naming the streams before
  this one as the last processed, and the connection closed; then an
  answer;
- C{/big}: L{BIG} bytes, sent as the client's windows allow (its
  C{bigSent} says how far it got);
- C{/gather}: held until L{H2Origin.gather} requests are held at once (on
  whatever connections), then each answered with its stream id.

Over HTTP/1.1 every path is answered C{hello over http/1.1}.

Run as a process (C{python -m tests.support.h2origin CA_FOLDER STATUS_FILE
[GATHER]}), it serves with a certificate for C{backend.test} from the CA in
C{CA_FOLDER} and keeps C{STATUS_FILE} up to date (JSON: its port, its
connections' protocols, each request's version and path).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Callable

from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.errors import ErrorCodes
from h2.events import DataReceived, RequestReceived, StreamEnded, WindowUpdated
from h2.settings import SettingCodes
from twisted.internet import reactor
from twisted.internet.interfaces import IHandshakeListener
from twisted.internet.protocol import Factory, Protocol
from twisted.trial.unittest import TestCase
from twisted.web import resource, server
from zope.interface import implementer

from tests.support import sourceEnv, stopProcess


#: The size of C{/big}.
BIG = 64 * 1024 * 1024


class _H2Server(Protocol):
    def __init__(self, origin: H2Origin) -> None:
        self.origin = origin
        self.h2 = H2Connection(config=H2Configuration(client_side=False, header_encoding=None))
        self.bodies: dict[int, bytearray] = {}
        self.paths: dict[int, bytes] = {}
        self.goneAway = False
        #: What is left to send of each C{/big} answer.
        self.big: dict[int, int] = {}

    def connectionMade(self) -> None:
        self.h2.local_settings = self.h2.local_settings.__class__(client=False, initial_values={
            SettingCodes.MAX_CONCURRENT_STREAMS: self.origin.maxStreams,
        })
        self.h2.initiate_connection()
        self.send()

    def send(self) -> None:
        data = self.h2.data_to_send()
        if data:
            self.transport.write(data)

    def dataReceived(self, data: bytes) -> None:
        if self.goneAway:
            return
        for event in self.h2.receive_data(data):
            if isinstance(event, RequestReceived):
                fields = dict(event.headers)
                self.paths[event.stream_id] = fields[b":path"]
                self.bodies[event.stream_id] = bytearray()
                self.origin.requests.append(("HTTP/2", list(event.headers)))
                self.origin.changed()
            elif isinstance(event, DataReceived):
                self.bodies[event.stream_id] += event.data
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, StreamEnded):
                self.answer(event.stream_id, self.paths[event.stream_id], bytes(self.bodies[event.stream_id]))
            elif isinstance(event, WindowUpdated):
                for sid in list(self.big):
                    self.sendBig(sid)
        self.send()

    def sendBig(self, sid: int) -> None:
        left = self.big[sid]
        while left:
            window = min(self.h2.local_flow_control_window(sid), self.h2.max_outbound_frame_size, left)
            if window <= 0:
                break
            left -= window
            self.h2.send_data(sid, b"z" * window, end_stream=not left)
            self.origin.bigSent += window
        if left:
            self.big[sid] = left
        else:
            del self.big[sid]

    def answer(self, sid: int, path: bytes, body: bytes) -> None:
        h2 = self.h2
        plain = [(b"content-type", b"text/plain")]
        if path == b"/hello":
            h2.send_headers(sid, [(b":status", b"200"), (b"content-length", b"13")] + plain)
            h2.send_data(sid, b"hello over h2", end_stream=True)
        elif path == b"/echo":
            # (At most the stream's window: the tests' bodies are smaller.)
            h2.send_headers(sid, [(b":status", b"200")] + plain)
            for at in range(0, len(body), 16384):
                h2.send_data(sid, body[at:at + 16384])
            h2.end_stream(sid)
        elif path == b"/trailers":
            h2.send_headers(sid, [(b":status", b"200"), (b"trailer", b"x-checksum")] + plain)
            h2.send_data(sid, b"with trailers")
            h2.send_headers(sid, [(b"x-checksum", b"c0ffee")], end_stream=True)
        elif path == b"/refuse-once" and not self.origin.refused:
            self.origin.refused += 1
            h2.reset_stream(sid, ErrorCodes.REFUSED_STREAM)
        elif path == b"/refuse-once":
            h2.send_headers(sid, [(b":status", b"200")] + plain)
            h2.send_data(sid, b"answered after a refusal", end_stream=True)
        elif path == b"/reset-mid":
            h2.send_headers(sid, [(b":status", b"200"), (b"content-length", b"100")] + plain)
            h2.send_data(sid, b"partial")
            self.send()
            reactor.callLater(0.2, self._reset, sid)  # type: ignore[attr-defined]
        elif path == b"/goaway-once" and not self.origin.wentAway:
            self.origin.wentAway += 1
            h2.close_connection(last_stream_id=max(sid - 2, 0))
            self.goneAway = True
            self.send()
            self.transport.loseConnection()
        elif path == b"/goaway-once":
            h2.send_headers(sid, [(b":status", b"200")] + plain)
            h2.send_data(sid, b"answered after a GOAWAY", end_stream=True)
        elif path == b"/big":
            h2.send_headers(sid, [(b":status", b"200"), (b"content-length", b"%d" % BIG),
                                  (b"content-type", b"application/octet-stream")])
            self.big[sid] = BIG
            self.sendBig(sid)
        elif path == b"/gather":
            self.origin.held.append((self, sid))
            if len(self.origin.held) >= self.origin.gather:
                held, self.origin.held = self.origin.held, []
                self.origin.peak = max(self.origin.peak, len(held))
                for connection, heldId in held:
                    connection.h2.send_headers(heldId, [(b":status", b"200")] + plain)
                    connection.h2.send_data(heldId, b"stream %d" % heldId, end_stream=True)
                    connection.send()
        else:
            h2.send_headers(sid, [(b":status", b"404"), (b"content-length", b"0")], end_stream=True)

    def _reset(self, sid: int) -> None:
        self.h2.reset_stream(sid, ErrorCodes.INTERNAL_ERROR)
        self.send()


class _HTTP11(resource.Resource):
    isLeaf = True

    def __init__(self, origin: H2Origin) -> None:
        resource.Resource.__init__(self)
        self.origin = origin

    def render(self, request: Any) -> bytes:
        self.origin.requests.append((request.clientproto.decode(), list(request.requestHeaders.getAllRawHeaders())))
        self.origin.changed()
        request.setHeader(b"content-type", b"text/plain")
        return b"hello over http/1.1"


@implementer(IHandshakeListener)
class _Switch(Protocol):
    """
    The connection until its handshake is done; then HTTP/2 or HTTP/1.1,
    as ALPN chose.
    """

    def __init__(self, origin: H2Origin) -> None:
        self.origin = origin

    def handshakeCompleted(self) -> None:
        chosen = getattr(self.transport, "negotiatedProtocol", None)
        inner: Any
        if chosen == b"h2":
            inner = _H2Server(self.origin)
        else:
            inner = self.origin.site.buildProtocol(None)
        self.origin.connections.append("h2" if chosen == b"h2" else "http/1.1")
        self.origin.changed()
        self.transport.wrappedProtocol = inner  # type: ignore[attr-defined]
        inner.makeConnection(self.transport)


class H2Origin:
    """
    The origin, listening on 127.0.0.1 for the test's length.

    @ivar port: its port.
    @ivar connections: the protocol each connection spoke, in order.
    @ivar requests: C{(version, fields)} of each request, in order.
    @ivar gather: how many C{/gather} requests are held before they are
        answered; C{peak} the most answered at once.
    """

    def __init__(self, case: TestCase | None, tls: Any, maxStreams: int = 128, gather: int = 1,
                 changed: Callable[[], None] = lambda: None) -> None:
        """
        @param tls: the server side of its TLS (offering C{h2} and
            C{http/1.1} by ALPN).
        @param changed: called when a connection or a request came.
        """
        self.changed = changed
        self.maxStreams = maxStreams
        self.gather = gather
        self.connections: list[str] = []
        self.requests: list[tuple[str, list[tuple[bytes, bytes]]]] = []
        self.refused = 0
        self.wentAway = 0
        self.bigSent = 0
        self.held: list[tuple[_H2Server, int]] = []
        self.peak = 0
        self.site = server.Site(_HTTP11(self))
        self.site.noisy = False
        factory = Factory.forProtocol(lambda: _Switch(self))  # type: ignore[arg-type]
        factory.noisy = False
        listening = reactor.listenSSL(0, factory, tls, interface="127.0.0.1")  # type: ignore[attr-defined]
        if case is not None:
            case.addCleanup(listening.stopListening)
        self.port: int = listening.getHost().port


class H2OriginProcess:
    """
    The origin run as a process (see the module's docstring), in C{folder}
    for the test's length: its CA in C{caFolder} (C{ca.pem} there is the
    certificate to trust), its status in C{statusFile}.

    @ivar port: its port.
    """

    def __init__(self, cleanup: Callable[..., Any], folder: str, gather: int = 1, wait: float = 30.0) -> None:
        """
        Start it, stopped at the test's C{cleanup}; return once it listens.

        @raise AssertionError: it stopped, or took longer than C{wait}
            seconds to start.
        """
        self.caFolder = os.path.join(folder, "backend-ca")
        self.statusFile = os.path.join(folder, "origin.json")
        process = subprocess.Popen([sys.executable, "-m", "tests.support.h2origin", self.caFolder, self.statusFile,
                                    str(gather)], env=sourceEnv(), cwd=folder)
        cleanup(stopProcess, process, wait)
        deadline = time.monotonic() + wait
        while not os.path.exists(self.statusFile):
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("the h2 origin didn't start")
            time.sleep(0.05)
        self.port: int = self.status()["port"]

    def status(self) -> dict[str, Any]:
        """
        Its status now: C{port}, C{connections} (the protocol of each),
        C{requests} (C{[version, path]} each).
        """
        with open(self.statusFile) as f:
            return json.load(f)  # type: ignore[no-any-return]


def main(caFolder: str, statusFile: str, gather: int = 1) -> None:
    from netlog.site.ca import CertificateAuthority
    from netlog.site.tls import HostTLS

    def write() -> None:
        status = {"port": origin.port, "connections": origin.connections,
                  "requests": [[version, dict(fields).get(b":path", b"").decode("latin-1")]
                               for version, fields in origin.requests]}
        with open(statusFile + ".new", "w") as f:
            json.dump(status, f)
        os.replace(statusFile + ".new", statusFile)

    ca = CertificateAuthority.loadOrCreate(caFolder)
    origin = H2Origin(None, HostTLS(ca, "backend.test"), gather=gather, changed=lambda: write())
    write()
    reactor.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], *[int(a) for a in sys.argv[3:4]])
