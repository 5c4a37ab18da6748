"""
Live hosts for the tests of C{[live] decrypt}: a private CA made here, server
certificates it signs (good, for another name, expired), and local HTTPS
origins on loopback that count the connections, the handshakes and the
requests they got, and remember what they served.
"""

from __future__ import annotations

import datetime
import http.server
import os
import socket
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

#: The page an origin serves for every path when it is given no answers.
PAGE = b"<!doctype html><title>live</title><p>hello from the live web</p>"


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def makeCA(common: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """
    A self-signed CA named C{common}, valid from yesterday for 30 days.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(_name(common)).issuer_name(_name(common))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return key, cert


def makeLeaf(ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate], names: list[str],
             expired: bool = False) -> tuple[bytes, bytes]:
    """
    A server certificate for C{names} signed by C{ca}, and its key (PEM).
    """
    caKey, caCert = ca
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    start, end = ((now - datetime.timedelta(days=30), now - datetime.timedelta(days=1)) if expired
                  else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30)))
    cert = (x509.CertificateBuilder().subject_name(_name(names[0])).issuer_name(caCert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(caKey, hashes.SHA256()))
    return (cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


@dataclass
class Answer:
    """
    What an origin answers for one path: C{status}, C{body} and its
    C{contentType}, and more C{headers}.
    """

    body: bytes
    contentType: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


#: An origin's answer for a path it wasn't given.
NOT_FOUND = Answer(b"not found", "text/plain; charset=utf-8", 404)


class Origin:
    """
    A local HTTPS origin (HTTP/1.1 only) on 127.0.0.1, a port of its own, in
    threads: each connection's handshake in its own thread, so one that
    stalls stalls nothing else. With C{plain}, it speaks HTTP/1.1 without
    TLS, for a TLS server in front of it (L{tests.support.nghttpx}) that
    presents its certificate.

    @ivar answers: what it answers, by path (without the query); None:
        L{PAGE} for every path.
    @ivar requests: the request line and the body of each request it read.
    @ivar served: C{(method, path, request body, answer body)} of each
        answer it sent.
    @ivar connections: how many TCP connections it accepted.
    @ivar handshakes: how many TLS handshakes with it succeeded.
    @ivar certPath: the file of its certificate (PEM); C{keyPath} its key's.
    @ivar onAccept: when set, called with each connection's peer address
        as it is accepted (in the accepting thread).
    """

    def __init__(self, folder: str, name: str, certPEM: bytes, keyPEM: bytes,
                 answers: dict[str, Answer] | None = None, plain: bool = False) -> None:
        certPath = self.certPath = os.path.join(folder, f"{name}.pem")
        keyPath = self.keyPath = os.path.join(folder, f"{name}.key")
        with open(certPath, "wb") as f:
            f.write(certPEM)
        with open(keyPath, "wb") as f:
            f.write(keyPEM)
        self.certPEM = certPEM
        self.answers = answers
        self.requests: list[tuple[str, bytes]] = []
        self.served: list[tuple[str, str, bytes, bytes]] = []
        self.connections = 0
        self.handshakes = 0
        self.onAccept: Callable[[tuple[str, int]], None] | None = None
        origin = self
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certPath, keyPath)

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                origin.requests.append((self.requestline, body))
                path = self.path.split("?", 1)[0]
                answer = (Answer(PAGE) if origin.answers is None
                          else origin.answers.get(path, NOT_FOUND))
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.contentType)
                self.send_header("Content-Length", str(len(answer.body)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(answer.body)
                origin.served.append((self.command, path, body, answer.body))

            do_GET = do_POST = _answer

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True
            #: (The default backlog of 5 would leave some connections of a
            #: burst in the kernel's retries.)
            request_queue_size = 128

            def get_request(self) -> tuple[socket.socket, Any]:
                sock, address = self.socket.accept()
                origin.connections += 1
                if origin.onAccept is not None:
                    origin.onAccept(address)
                return sock, address

            def finish_request(self, request: Any, client_address: Any) -> None:
                request.settimeout(30)
                if plain:
                    connection = request
                else:
                    try:
                        connection = context.wrap_socket(request, server_side=True)
                    except OSError:
                        return
                    origin.handshakes += 1
                try:
                    Handler(connection, client_address, self)
                finally:
                    connection.close()

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
