"""
The benchmarks' origin: a small, fast HTTP/1.1 server (plain and TLS) in its
own process, so that it costs every target the same.

Paths: C{/small} (a short text), C{/size/N} (N bytes), C{/gzip-json} (a
gzip-coded JSON document), C{/upload} (counts the request body); a query is
ignored. Targets may be origin-form or absolute-form; keep-alive is honoured.

Run: C{python -m benchmarks.origin --port P --tls-port Q --cert PEM --key PEM}.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys

from twisted.internet import reactor, ssl
from twisted.internet.protocol import Factory, Protocol

CHUNK = 256 * 1024
_BLOCK = b"d" * CHUNK
SMALL = b"hello from the benchmark origin\n" * 3
GZIP_JSON = gzip.compress(json.dumps(
    {"items": [{"id": i, "name": f"item {i}", "price": i * 1.5, "tags": ["a", "b"]}
               for i in range(3000)]}
).encode())


class Origin(Protocol):
    def connectionMade(self) -> None:
        self.buf = b""
        self.remaining = 0
        self.received = 0
        self.path = b""
        self.close = False
        self.sending = 0

    def dataReceived(self, data: bytes) -> None:
        if self.remaining:
            take = min(self.remaining, len(data))
            self.remaining -= take
            self.received += take
            data = data[take:]
            if self.remaining:
                return
            self.answer()
        self.buf += data
        while not self.remaining and not self.sending:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head, self.buf = self.buf[:end], self.buf[end + 4:]
            lines = head.split(b"\r\n")
            method, target, version = lines[0].split(b" ")
            if target.startswith(b"http://"):
                target = b"/" + target[7:].split(b"/", 1)[1] if b"/" in target[7:] else b"/"
            # A query (a client's marker, say) doesn't change the answer.
            self.path = target.split(b"?", 1)[0]
            self.method = method
            length = 0
            self.close = version == b"HTTP/1.0"
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                name = name.strip().lower()
                if name == b"content-length":
                    length = int(value)
                elif name == b"connection" and b"close" in value.lower():
                    self.close = True
            self.received = 0
            take = min(length, len(self.buf))
            self.received = take
            self.remaining = length - take
            self.buf = self.buf[take:]
            if self.remaining:
                return
            self.answer()

    def send(self, body: bytes, contentType: bytes, extra: bytes = b"") -> None:
        self.transport.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: " + contentType + b"\r\n" + extra
            + b"Content-Length: %d\r\n%s\r\n" % (len(body), b"Connection: close\r\n" if self.close else b"")
            + body
        )
        if self.close:
            self.transport.loseConnection()

    def answer(self) -> None:
        path = self.path
        if path == b"/small":
            self.send(SMALL, b"text/plain")
        elif path == b"/gzip-json":
            self.send(GZIP_JSON, b"application/json", b"Content-Encoding: gzip\r\n")
        elif path == b"/upload":
            self.send(str(self.received).encode(), b"text/plain")
        elif path.startswith(b"/size/"):
            size = int(path[6:])
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                b"Content-Length: %d\r\n\r\n" % size
            )
            self.sending = size
            self.transport.registerProducer(self, False)
        else:
            self.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    def resumeProducing(self) -> None:
        take = min(self.sending, CHUNK)
        self.sending -= take
        self.transport.write(_BLOCK[:take] if take < CHUNK else _BLOCK)
        if not self.sending:
            self.transport.unregisterProducer()
            if self.close:
                self.transport.loseConnection()
            elif self.buf:
                self.dataReceived(b"")

    def stopProducing(self) -> None:
        self.sending = 0


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls-port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args(argv)
    factory = Factory.forProtocol(Origin)
    reactor.listenTCP(args.port, factory, interface="127.0.0.1", backlog=1024)
    with open(args.cert) as c, open(args.key) as k:
        cert = ssl.PrivateCertificate.loadPEM(c.read() + k.read())
    # It speaks HTTP/1.1 and says so: a client that offers ALPN (netlog's
    # site proxy re-encrypting, say) is otherwise refused with an alert.
    options = ssl.CertificateOptions(privateKey=cert.privateKey.original, certificate=cert.original,
                                     acceptableProtocols=[b"http/1.1"])
    reactor.listenSSL(args.tls_port, factory, options, interface="127.0.0.1", backlog=1024)
    reactor.run()


if __name__ == "__main__":
    main(sys.argv[1:])
