"""
Every socket the site proxy accepts or opens sends small writes at once
(C{TCP_NODELAY}): heads and short answers must not wait for the peer's delayed
ACK, whether plain, decrypted, behind TLS to a backend, or a blind tunnel.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from twisted.internet import defer, threads
from twisted.trial.unittest import TestCase

from netlog.site.ca import CertificateAuthority
from netlog.site.tls import HostTLS
from tests.site.support import (
    RunningProxy,
    ScriptedServer,
    connectTunnel,
    listenScripted,
    openSocket,
    request,
)


def noDelay(transport: Any) -> bool:
    """
    Whether the TCP socket under C{transport} (under its TLS layer, if any)
    has C{TCP_NODELAY}.
    """
    sock = getattr(transport, "socket", None)
    while not isinstance(sock, socket.socket):
        transport = transport.transport
        sock = getattr(transport, "socket", None)
    return bool(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))


class NoDelayTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_everySocket(self) -> Any:
        """
        With a plain request, a decrypted CONNECT to an https backend, a
        request on the HTTPS route and a live host's tunnel all open, every
        browser connection, every pooled backend connection and the tunnel's
        server side have C{TCP_NODELAY} set.
        """
        folder = os.path.abspath(self.mktemp())
        backendCA = CertificateAuthority.loadOrCreate(os.path.join(folder, "backend-ca"))
        # The scripted backend speaks HTTP/1.1 only, and its ALPN says so.
        backendCA.protocols = (b"http/1.1",)

        def answer(server: ScriptedServer, received: bytes) -> None:
            if received.endswith(b"\r\n\r\n"):
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                       b"Content-Length: 2\r\n\r\nok")
                server.received = b""

        def echo(server: ScriptedServer, received: bytes) -> None:
            server.transport.write(received)
            server.received = b""

        plainPort, _ = listenScripted(self, answer)
        tlsPort, _ = listenScripted(self, answer, HostTLS(backendCA, "backend.test"))
        echoPort, _ = listenScripted(self, echo)
        caFile = os.path.join(folder, "backend-ca.pem")
        with open(caFile, "wb") as f:
            f.write(backendCA.certPEM())
        running = RunningProxy(
            self,
            f"""
[[site]]
name = "shop"
origins = ["https://shop.test", "http://shop.test"]
backend = "http://127.0.0.1:{plainPort}"

[[site]]
name = "vault"
origins = ["https://vault.test"]
backend = "https://backend.test:{tlsPort}"
ca_file = "{caFile}"

[live]
hosts = ["*.live.test"]
connect_ports = [{echoPort}]
""",
            resolve={"backend.test": "127.0.0.1", "echo.live.test": "127.0.0.1"},
        )
        sockets: list[socket.socket] = []

        def closeAll() -> None:
            for s in sockets:
                s.close()

        self.addCleanup(closeAll)

        def client() -> list[int]:
            statuses = []
            plain = openSocket(running.ports["forward"])
            sockets.append(plain)
            statuses.append(request(plain, "GET", "http://shop.test/", [("Host", "shop.test")])[0])
            vault = connectTunnel(running.ports["forward"], "vault.test:443", running.sslContext())
            sockets.append(vault)
            statuses.append(request(vault, "GET", "/", [("Host", "vault.test")])[0])
            route = running.sslContext().wrap_socket(openSocket(running.ports["https-route"]),
                                                     server_hostname="shop.test")
            sockets.append(route)
            statuses.append(request(route, "GET", "/", [("Host", "shop.test")])[0])
            tunnel = connectTunnel(running.ports["forward"], f"echo.live.test:{echoPort}", None)
            sockets.append(tunnel)
            tunnel.sendall(b"ping")
            got = b""
            while len(got) < 4:
                got += tunnel.recv(4)
            return statuses

        self.assertEqual((yield threads.deferToThread(client)), [200, 200, 200])
        yield running.waitForEnds(3)
        browsers = list(running.proxy.connections)
        self.assertEqual(len(browsers), 4)
        self.assertEqual([noDelay(b.transport) for b in browsers], [True] * 4)
        upstreams = [p for idle in running.proxy.pool._idle.values() for p in idle]
        self.assertEqual(len(upstreams), 2)
        self.assertEqual([noDelay(u.transport) for u in upstreams], [True, True])
        [tunnel] = [b.rawPeer for b in browsers if b.rawPeer is not None]
        self.assertTrue(noDelay(tunnel.relay.server))
