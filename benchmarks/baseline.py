"""
The baseline: a bare Twisted relay that logs nothing, parses nothing past the
first head, and so costs what relaying bytes through Twisted costs.

A CONNECT is answered C{200} and relayed; a plain-HTTP connection goes to the
host of its first request and is relayed blind from there on (so every request
on it must be for that host, as in the benchmarks). Each transport is the other's
producer, as C{twisted/protocols/portforward.py} does.

Run: C{python -m benchmarks.baseline --port P --resolve NAME=ADDRESS ...}.
"""

from __future__ import annotations

import argparse
import sys

from twisted.internet import reactor
from twisted.internet.protocol import ClientFactory, Factory, Protocol


class Upstream(Protocol):
    def connectionMade(self) -> None:
        client = self.factory.client  # type: ignore[attr-defined]
        self.peer = client
        client.peer = self
        self.transport.registerProducer(client.transport, True)
        client.transport.registerProducer(self.transport, True)
        if client.pending:
            self.transport.write(client.pending)
            client.pending = b""
        if client.answer:
            client.transport.write(client.answer)
        client.transport.resumeProducing()

    def dataReceived(self, data: bytes) -> None:
        self.peer.transport.write(data)

    def connectionLost(self, reason: object = None) -> None:
        self.peer.transport.loseConnection()


class UpstreamFactory(ClientFactory):
    protocol = Upstream

    def __init__(self, client: "Browser") -> None:
        self.client = client

    def clientConnectionFailed(self, connector: object, reason: object) -> None:
        self.client.transport.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        self.client.transport.loseConnection()


class Browser(Protocol):
    names: dict[str, str] = {}

    def connectionMade(self) -> None:
        self.buf = b""
        self.peer: Upstream | None = None
        self.pending = b""
        self.answer = b""

    def dataReceived(self, data: bytes) -> None:
        if self.peer is not None:
            self.peer.transport.write(data)
            return
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        line = self.buf[: self.buf.find(b"\r\n")]
        method, target, _ = line.split(b" ")
        if method == b"CONNECT":
            authority = target
            self.pending = self.buf[end + 4:]
            self.answer = b"HTTP/1.1 200 Connection established\r\n\r\n"
        else:
            authority = target.split(b"://", 1)[1].split(b"/", 1)[0]
            self.pending = self.buf
        host, _, port = authority.decode().rpartition(":")
        address = self.names.get(host, host)
        self.transport.pauseProducing()
        self.peer = None
        self.buf = b""
        reactor.connectTCP(address, int(port or 80), UpstreamFactory(self))

    def connectionLost(self, reason: object = None) -> None:
        if self.peer is not None:
            self.peer.transport.loseConnection()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--resolve", action="append", default=[])
    args = parser.parse_args(argv)
    Browser.names = dict(item.split("=", 1) for item in args.resolve)
    reactor.listenTCP(args.port, Factory.forProtocol(Browser), interface="127.0.0.1", backlog=1024)
    reactor.run()


if __name__ == "__main__":
    main(sys.argv[1:])
