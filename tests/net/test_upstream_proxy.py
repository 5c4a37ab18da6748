"""
C{--upstream-proxy} end to end, with a real squid on loopback as the
upstream proxy (L{tests.support.squid}): the stand-in's tunnels and plain
requests and the site proxy's live hosts (blind tunnels, and the requests
inside a decrypted live host's tunnel) reach their origins through squid
only (squid's access log shows each; the origin's connections are held by
squid's process, never netlog's), squid's refusals (407, 403) reach the
browser and the entry says so, and netlog's credentials are sent but never
logged.

The proxies are given C{--resolve-only} and no C{--resolve} for the
origins' names: netlog can't reach them itself, only squid (its hosts file)
can.
"""

from __future__ import annotations

import base64
import http.client
import os
import ssl
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID
from twisted.internet import defer, reactor, threads
from twisted.trial import unittest

from netlog.core.upstreamproxy import UpstreamProxy, parseCredentials
from netlog.site.ca import CertificateAuthority
from netlog.site.tls import HostTLS
from tests.site.support import (
    RunningProxy,
    ScriptedServer,
    listenScripted,
    openSocket,
    pingThrough,
    readAll,
    request,
)
from tests.site.support import connectTunnel as siteTunnel
from tests.site.test_relay import sites
from tests.standin.support import (
    OriginFactory,
    Standin,
    connectTunnel,
    inThread,
    listenOrigin,
    makeCertificate,
    tempDirectory,
    tlsClientContext,
)
from tests.support.liveorigin import PAGE, Origin, makeCA, makeLeaf
from tests.support.squid import PASSWORD, USER, Squid, holders, sharedSquid

#: The origins' name: squid's hosts file has it, netlog is told nothing.
ORIGIN = "origin.test"
#: A live host of the site proxy's, as squid's hosts file names it.
LIVE = "echo.live.test"
#: A site's backend, as squid's hosts file names it.
BACKEND = "backend.test"


class _WatchedOrigin(OriginFactory):
    """
    The stand-in tests' origin, noting for each connection the processes
    that hold its other end, while it is open.

    @ivar holders: per connection, the holders' process ids.
    """

    port = 0

    def __init__(self) -> None:
        OriginFactory.__init__(self)
        self.holders: list[set[int]] = []

    def buildProtocol(self, addr: Any) -> Any:
        self.holders.append(holders(addr.port, self.port))
        return OriginFactory.buildProtocol(self, addr)


def _listen(case: unittest.TestCase, tls: tuple[str, str] | None = None) -> _WatchedOrigin:
    factory = _WatchedOrigin()
    _, factory.port = listenOrigin(case, tls, factory)
    return factory


def _get(proxyPort: int, url: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", proxyPort, timeout=10)
    try:
        conn.request("GET", url)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


def _tunnelGet(proxyPort: int, port: int, cert: str) -> tuple[bytes, bytes]:
    """
    CONNECT to the TLS origin, then a GET over TLS in the tunnel: the
    CONNECT's answer head, and the answer's (or b"" when refused).
    """
    sock, head = connectTunnel(proxyPort, f"{ORIGIN}:{port}")
    with sock:
        if b" 200 " not in head.split(b"\r\n", 1)[0]:
            return head + readAll(sock), b""
        with tlsClientContext(cert).wrap_socket(sock, server_hostname=ORIGIN) as tls:
            tls.sendall(f"GET /hello HTTP/1.1\r\nHost: {ORIGIN}\r\nConnection: close\r\n\r\n".encode())
            return head, readAll(tls)


class _SquidCase(unittest.TestCase):
    """
    Tests that share one squid, whose hosts file names C{squidHosts}.
    """

    timeout = 60
    squidHosts: list[str] = []
    squid: Squid

    def setUp(self) -> None:
        self.squid = sharedSquid(self.squidHosts)


class WiringTests(unittest.SynchronousTestCase):
    """
    Both plugins' options build a proxy whose live hosts go through the
    upstream proxy, its credentials read from the file, and handed to a
    supervisor's workers as the file's line; its sessions' engines go
    through it too.
    """

    def test_bothPlugins(self) -> None:
        from netlog.log.writer import LogWriter
        from netlog.session.manager import sessionProxy
        from netlog.site.service import buildProxy as buildSiteProxy
        from netlog.standin.service import buildProxy as buildStandin
        from netlog.tap.proxy import Options as ProxyOptions
        from netlog.tap.standin import Options as StandinOptions
        from tests.tap.test_mistakes import SITES

        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        auth = os.path.join(folder, "auth")
        sitesFile = os.path.join(folder, "sites.toml")
        with open(auth, "w") as f:
            f.write(f"{USER}:{PASSWORD}\n")
        with open(sitesFile, "w") as f:
            f.write(SITES)
        common = ["--no-supervise", "--log", os.path.join(folder, "x.jsonl"), "--state", folder,
                  "--upstream-proxy", "http://127.0.0.1:3129", "--upstream-proxy-auth-file", auth]
        for options, build, more in ((StandinOptions(), buildStandin, []),
                                     (ProxyOptions(), buildSiteProxy, ["--sites", sitesFile])):
            options.parseOptions([*common, *more])
            theReactor: Any = reactor
            proxy = build(options.config(), LogWriter(None, reactor=theReactor), theReactor)
            self.assertEqual(proxy.upstreamProxy, UpstreamProxy("127.0.0.1", 3129))
            assert proxy.upstreamProxy is not None
            self.assertEqual(proxy.upstreamProxy.authorization, parseCredentials(f"{USER}:{PASSWORD}"))
            self.assertEqual(proxy.handedData[auth], f"{USER}:{PASSWORD}\n".encode())
            session = sessionProxy(proxy, LogWriter(None, reactor=theReactor), theReactor, 0)
            self.assertIs(session.upstreamProxy, proxy.upstreamProxy)


@pytest.mark.slow
class StandinThroughSquidTests(_SquidCase):
    """
    The stand-in with C{--upstream-proxy} pointing at squid.
    """

    squidHosts = [ORIGIN]

    def setUp(self) -> None:
        _SquidCase.setUp(self)
        self.folder = tempDirectory(self)
        self.cert, key = makeCertificate(ORIGIN, self.folder)
        self.plain = _listen(self)
        self.tls = _listen(self, (self.cert, key))

    @defer.inlineCallbacks
    def _standin(self, port: str, *more: str) -> Any:
        standin = Standin(self, self.folder, [
            "--upstream-proxy", self.squid.url(port), "--connect-ports", str(self.tls.port), *more])
        yield standin.start()
        return standin

    def _authFile(self, line: str) -> str:
        path = os.path.join(self.folder, "upstream-auth")
        with open(path, "w") as f:
            f.write(line + "\n")
        return path

    def _onlySquid(self, origin: _WatchedOrigin, standin: Standin) -> None:
        """
        Every connection C{origin} took was held by squid, none by the
        stand-in.
        """
        assert self.squid.process is not None and standin.process is not None
        self.assertTrue(origin.holders)
        for held in origin.holders:
            self.assertIn(self.squid.process.pid, held)
            self.assertNotIn(standin.process.pid, held)

    @defer.inlineCallbacks
    def test_tunnelAndPlain(self) -> Any:
        """
        A CONNECT tunnel to a TLS origin and a plain GET both go through
        squid (its access log has each; the origins' connections are
        squid's), and are logged as usual; the entries' address is
        C{null}, since squid resolved the name.
        """
        standin = yield self._standin("open")
        head, answer = yield inThread(_tunnelGet, standin.port, self.tls.port, self.cert)
        self.assertIn(b"200", head.split(b"\r\n")[0])
        self.assertTrue(answer.endswith(b"hello"), answer)
        status, headers, body = yield inThread(_get, standin.port, f"http://{ORIGIN}:{self.plain.port}/hello")
        self.assertEqual((status, body), (200, b"hello"))
        self.assertIn("squid", headers.get("via", ""))
        entries = yield standin.waitEnded(2)
        (tunnelOpen, tunnelEnd), (getOpen, getEnd) = entries.values()
        self.assertEqual(tunnelOpen["kind"], "tunnel")
        self.assertEqual(tunnelOpen["server"], {"host": ORIGIN, "port": self.tls.port, "address": None})
        self.assertEqual(tunnelEnd["response"]["status"], 200)
        self.assertGreater(tunnelEnd["bytes"]["down"], 0)
        self.assertNotIn("_failed", tunnelEnd)
        self.assertEqual(getOpen["request"]["url"], f"http://{ORIGIN}:{self.plain.port}/hello")
        self.assertEqual(getEnd["response"]["status"], 200)
        self.assertNotIn("_upstreamProxy", getEnd)
        logged = yield threads.deferToThread(self.squid.waitLogged, f"{ORIGIN}:", 2)
        self.assertTrue(any(f"CONNECT {ORIGIN}:{self.tls.port}" in line for line in logged), logged)
        self.assertTrue(any(f"GET http://{ORIGIN}:{self.plain.port}/hello" in line for line in logged), logged)
        self._onlySquid(self.tls, standin)
        self._onlySquid(self.plain, standin)

    @defer.inlineCallbacks
    def test_authRequired(self) -> Any:
        """
        squid answering 407 (netlog sent no credentials) gives the browser
        407, for a tunnel (netlog's own answer, saying the upstream proxy
        refused, and no C{Proxy-Authenticate}: the browser can't answer
        it) and for a plain request (squid's answer); each entry says so
        in C{_upstreamProxy}, the tunnel's in C{_failed} too.
        """
        standin = yield self._standin("auth")
        head, _ = yield inThread(_tunnelGet, standin.port, self.tls.port, self.cert)
        self.assertTrue(head.startswith(b"HTTP/1.1 407 Proxy Authentication Required\r\n"), head)
        self.assertIn(b"upstream proxy", head)
        self.assertNotIn(b"proxy-authenticate", head.lower())
        status, headers, _ = yield inThread(_get, standin.port, f"http://{ORIGIN}:{self.plain.port}/hello")
        self.assertEqual(status, 407)
        self.assertNotIn("proxy-authenticate", headers)
        entries = yield standin.waitEnded(2)
        (_, tunnelEnd), (_, getEnd) = entries.values()
        label = f"127.0.0.1:{self.squid.ports['auth']}"
        self.assertEqual(tunnelEnd["_failed"]["status"], 407)
        self.assertIn(f"the upstream proxy {label} refused the tunnel: 407", tunnelEnd["_failed"]["reason"])
        self.assertEqual(tunnelEnd["_upstreamProxy"], {"proxy": label, "status": 407})
        self.assertEqual(getEnd["response"]["status"], 407)
        self.assertEqual(getEnd["_upstreamProxy"], {"proxy": label, "status": 407})
        self.assertEqual(self.tls.holders + self.plain.holders, [])

    @defer.inlineCallbacks
    def test_denied(self) -> Any:
        """
        squid refusing with 403 gives the browser 403: for a tunnel,
        netlog's answer saying the upstream proxy refused it, the entry's
        C{_failed} and C{_upstreamProxy} naming the status.
        """
        standin = yield self._standin("deny")
        head, _ = yield inThread(_tunnelGet, standin.port, self.tls.port, self.cert)
        self.assertTrue(head.startswith(b"HTTP/1.1 403 Forbidden\r\n"), head)
        status, _, _ = yield inThread(_get, standin.port, f"http://{ORIGIN}:{self.plain.port}/hello")
        self.assertEqual(status, 403)
        entries = yield standin.waitEnded(2)
        (_, tunnelEnd), _ = entries.values()
        self.assertEqual(tunnelEnd["_failed"]["status"], 403)
        self.assertEqual(tunnelEnd["_upstreamProxy"]["status"], 403)
        self.assertEqual(self.tls.holders + self.plain.holders, [])

    @defer.inlineCallbacks
    def test_credentials(self) -> Any:
        """
        With C{--upstream-proxy-auth-file}, squid takes netlog's
        credentials (its access log names the user) for tunnels and plain
        requests alike; the password is in neither netlog's log nor its
        twistd log.
        """
        standin = yield self._standin("auth", "--upstream-proxy-auth-file", self._authFile(f"{USER}:{PASSWORD}"))
        head, answer = yield inThread(_tunnelGet, standin.port, self.tls.port, self.cert)
        self.assertIn(b"200", head.split(b"\r\n")[0])
        self.assertTrue(answer.endswith(b"hello"), answer)
        status, _, body = yield inThread(_get, standin.port, f"http://{ORIGIN}:{self.plain.port}/hello")
        self.assertEqual((status, body), (200, b"hello"))
        yield standin.waitEnded(2)
        for needle in (f"CONNECT {ORIGIN}:{self.tls.port} {USER} ",
                       f"GET http://{ORIGIN}:{self.plain.port}/hello {USER} "):
            [line] = yield threads.deferToThread(self.squid.waitLogged, needle)
            self.assertIn("/200 ", line)
        self._onlySquid(self.tls, standin)
        self._onlySquid(self.plain, standin)
        secret = parseCredentials(f"{USER}:{PASSWORD}").split(b" ")[1].decode()
        with open(standin.log) as f:
            written = f.read()
        for text in (written, standin.twistdLog()):
            self.assertNotIn(PASSWORD, text)
            self.assertNotIn(secret, text)

    @defer.inlineCallbacks
    def test_wrongCredentials(self) -> Any:
        """
        Credentials squid refuses give the browser 407.
        """
        standin = yield self._standin("auth", "--upstream-proxy-auth-file", self._authFile(f"{USER}:wrong"))
        head, _ = yield inThread(_tunnelGet, standin.port, self.tls.port, self.cert)
        self.assertTrue(head.startswith(b"HTTP/1.1 407 "), head)
        status, _, _ = yield inThread(_get, standin.port, f"http://{ORIGIN}:{self.plain.port}/hello")
        self.assertEqual(status, 407)

    @defer.inlineCallbacks
    def test_loopbackStillRefused(self) -> Any:
        """
        The destination rules still judge what the browser asked for: a
        loopback address, or C{localhost}, is refused (403, C{_refused})
        before squid is asked.
        """
        standin = yield self._standin("open")
        for authority in (f"127.0.0.1:{self.tls.port}", f"localhost:{self.tls.port}"):
            sock, head = yield inThread(connectTunnel, standin.port, authority)
            sock.close()
            self.assertTrue(head.startswith(b"HTTP/1.1 403 "), head)
        entries = yield standin.waitEnded(2)
        for _, end in entries.values():
            self.assertIn("loopback", end["_refused"]["reason"])
        self.assertEqual(self.tls.holders, [])
        self.assertEqual([line for line in self.squid.accessLog() if f":{self.tls.port}" in line], [])


@pytest.mark.slow
class SiteProxyThroughSquidTests(_SquidCase):
    """
    The site proxy's live hosts through squid.
    """

    squidHosts = [LIVE]

    def _proxy(self, port: int, via: str, authorization: bytes | None = None) -> RunningProxy:
        running = RunningProxy(self, sites(1, connectPorts=(port,)))
        running.proxy.upstreamProxy = UpstreamProxy("127.0.0.1", self.squid.ports[via], authorization)
        return running

    @defer.inlineCallbacks
    def test_liveTunnel(self) -> Any:
        """
        A live host's blind tunnel goes through squid: squid logs the
        CONNECT, the origin's connection is squid's, bytes pass both ways.
        """
        peers: list[set[int]] = []
        origin: list[int] = []

        def echo(server: ScriptedServer, received: bytes) -> None:
            if not hasattr(server, "echoed"):
                peer = server.transport.getPeer().port  # type: ignore[union-attr]
                peers.append(holders(peer, origin[0]))
            echoed = getattr(server, "echoed", 0)
            server.transport.write(received[echoed:])  # type: ignore[union-attr]
            server.echoed = len(received)  # type: ignore[attr-defined]

        port, _ = listenScripted(self, echo)
        origin.append(port)
        running = self._proxy(port, "open")

        got = yield threads.deferToThread(pingThrough, running.ports["forward"], f"{LIVE}:{port}")
        self.assertEqual(got, b"ping")
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["kind"], "tunnel")
        self.assertIsNone(opened["server"]["address"])
        self.assertEqual(ended["bytes"], {"up": 4, "down": 4})
        logged = yield threads.deferToThread(self.squid.waitLogged, f"CONNECT {LIVE}:{port}")
        self.assertEqual(len(logged), 1)
        assert self.squid.process is not None
        self.assertEqual(len(peers), 1)
        self.assertIn(self.squid.process.pid, peers[0])
        self.assertNotIn(os.getpid(), peers[0])

    @defer.inlineCallbacks
    def test_liveTunnelRefused(self) -> Any:
        """
        squid's 407 to a live host's CONNECT reaches the browser as 407,
        and the entry says the upstream proxy refused.
        """
        running = self._proxy(443, "auth")

        def client() -> bytes:
            with openSocket(running.ports["forward"]) as sock:
                sock.sendall(f"CONNECT {LIVE}:443 HTTP/1.1\r\nHost: {LIVE}:443\r\n\r\n".encode())
                return readAll(sock)

        answer = yield threads.deferToThread(client)
        self.assertTrue(answer.startswith(b"HTTP/1.1 407 "), answer)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["_failed"]["status"], 407)
        self.assertEqual(ended["_upstreamProxy"]["status"], 407)


@pytest.mark.slow
class DecryptedLiveThroughSquidTests(_SquidCase):
    """
    A live host C{[live] decrypt} names, through squid: netlog decrypts the
    browser's CONNECT with a certificate it mints, and relays each request
    inside over a tunnel squid opens to the live host (TLS verified against
    C{[live] ca_file}).
    """

    squidHosts = [LIVE]

    def setUp(self) -> None:
        _SquidCase.setUp(self)
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        ca = makeCA("live test CA")
        self.caFile = os.path.join(folder, "live-ca.pem")
        with open(self.caFile, "wb") as f:
            f.write(ca[1].public_bytes(serialization.Encoding.PEM))
        self.origin = Origin(folder, "live", *makeLeaf(ca, [LIVE]))
        self.addCleanup(self.origin.stop)
        #: Per connection the origin accepted, the processes holding its
        #: other end.
        self.held: list[set[int]] = []
        self.origin.onAccept = lambda peer: self.held.append(holders(peer[1], self.origin.port))

    def _proxy(self, via: str) -> RunningProxy:
        running = RunningProxy(self, sites(1, connectPorts=(self.origin.port,))
                               + f'decrypt = ["{LIVE}"]\nca_file = "{self.caFile}"\n')
        running.proxy.upstreamProxy = UpstreamProxy("127.0.0.1", self.squid.ports[via])
        return running

    def _post(self, running: RunningProxy) -> tuple[tuple[int, dict[str, str], bytes, bytes], Any]:
        """
        CONNECT to the live host, TLS trusting netlog's CA alone, and a
        POST inside: its answer, and the certificate the client was shown.
        """
        authority = f"{LIVE}:{self.origin.port}"
        context = ssl.create_default_context(cafile=running.caFile)
        with siteTunnel(running.ports["forward"], authority, context, serverName=LIVE) as sock:
            answer = request(sock, "POST", "/page?q=1", [
                ("Host", authority), ("Connection", "close"),
                ("Content-Type", "application/x-www-form-urlencoded"), ("Content-Length", "18")],
                b"user=alice&q=shoes")
            assert isinstance(sock, ssl.SSLSocket)
            return answer, sock.getpeercert()

    @defer.inlineCallbacks
    def test_decrypted(self) -> Any:
        """
        The request inside a decrypted live host's tunnel goes through
        squid (its access log has the CONNECT; the origin's connection is
        squid's, never netlog's) and reaches the origin with its body; the
        client gets the origin's answer under a certificate netlog minted;
        the log keeps the request and the answer with their bodies, marked
        C{_liveDecrypted}, and no address (squid resolved the name).
        """
        running = self._proxy("open")
        (status, _, body, _), shown = yield threads.deferToThread(self._post, running)
        self.assertEqual((status, body), (200, PAGE))
        with open(running.caFile, "rb") as f:
            netlogCA = x509.load_pem_x509_certificate(f.read()).subject
        issuer = dict(pair for ((pair),) in shown["issuer"])
        self.assertEqual(issuer["commonName"], netlogCA.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)
        self.assertIn(("DNS", LIVE), shown["subjectAltName"])
        self.assertEqual(self.origin.requests, [("POST /page?q=1 HTTP/1.1", b"user=alice&q=shoes")])
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["kind"], "exchange")
        self.assertIs(opened["_liveDecrypted"], True)
        self.assertEqual(opened["request"]["url"], f"https://{LIVE}:{self.origin.port}/page?q=1")
        self.assertIsNone(opened["server"]["address"])
        self.assertEqual(ended["response"]["status"], 200)
        self.assertEqual(base64.b64decode(ended["request_body"]["data"]), b"user=alice&q=shoes")
        self.assertEqual(base64.b64decode(ended["response"]["body"]["data"]), PAGE)
        self.assertNotIn("_failed", ended)
        self.assertNotIn("_upstreamProxy", ended)
        # squid logs a tunnel once it ends: the kept-alive connection goes.
        running.proxy.pool.closeAll()
        logged = yield threads.deferToThread(self.squid.waitLogged, f"CONNECT {LIVE}:{self.origin.port}")
        self.assertEqual(len(logged), 1, logged)
        assert self.squid.process is not None
        self.assertEqual(len(self.held), 1)
        self.assertIn(self.squid.process.pid, self.held[0])
        self.assertNotIn(os.getpid(), self.held[0])

    @defer.inlineCallbacks
    def test_authRequired(self) -> Any:
        """
        squid answering 407 to the tunnel netlog asks for a decrypted live
        host's request gives the client 407 to that request, inside the
        tunnel netlog decrypted (its CONNECT was answered before any
        request was relayed): netlog's answer saying the upstream proxy
        refused, without C{Proxy-Authenticate} (the client can't answer
        it); the entry says so in C{_failed} and C{_upstreamProxy}, and
        nothing reached the origin.
        """
        running = self._proxy("auth")
        (status, headers, body, _), _ = yield threads.deferToThread(self._post, running)
        self.assertEqual(status, 407)
        self.assertNotIn("proxy-authenticate", headers)
        label = f"127.0.0.1:{self.squid.ports['auth']}"
        self.assertIn(f"the upstream proxy {label} refused the tunnel: 407".encode(), body)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertIs(opened["_liveDecrypted"], True)
        self.assertEqual(ended["response"]["status"], 407)
        self.assertEqual(ended["_failed"]["status"], 407)
        self.assertEqual(ended["_upstreamProxy"], {"proxy": label, "status": 407})
        self.assertEqual((self.held, self.origin.requests), ([], []))

    @defer.inlineCallbacks
    def test_denied(self) -> Any:
        """
        squid refusing with 403 gives the client 403 to its request inside
        the decrypted tunnel, the entry's C{_upstreamProxy} naming the
        status.
        """
        running = self._proxy("deny")
        (status, _, _, _), _ = yield threads.deferToThread(self._post, running)
        self.assertEqual(status, 403)
        [(_, ended)] = yield running.waitForEnds(1)
        self.assertEqual(ended["_failed"]["status"], 403)
        self.assertEqual(ended["_upstreamProxy"]["status"], 403)
        self.assertEqual((self.held, self.origin.requests), ([], []))


@pytest.mark.slow
class SiteBackendThroughSquidTests(_SquidCase):
    """
    A site's C{upstream_proxy}: its backend, plain or https (TLS over the
    tunnel squid opens), is reached through squid; netlog can't resolve
    the backend's name itself.
    """

    squidHosts = [BACKEND]

    def setUp(self) -> None:
        _SquidCase.setUp(self)
        self.backendCA = CertificateAuthority.loadOrCreate(os.path.join(os.path.abspath(self.mktemp()), "ca"))
        self.held: list[set[int]] = []

        def serve(server: ScriptedServer, received: bytes) -> None:
            if not hasattr(server, "noted"):
                server.noted = True  # type: ignore[attr-defined]
                peer = server.transport.getPeer().port  # type: ignore[union-attr]
                self.held.append(holders(peer, server.transport.getHost().port))  # type: ignore[union-attr]
            if received.endswith(b"\r\n\r\n"):
                server.transport.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"  # type: ignore[union-attr]
                                       b"Content-Length: 6\r\n\r\nbehind")

        self.tlsPort, _ = listenScripted(self, serve, HostTLS(self.backendCA, BACKEND))
        self.plainPort, _ = listenScripted(self, serve)

    @defer.inlineCallbacks
    def test_backends(self) -> Any:
        """
        An https backend and a plain one, each through squid: the answers
        come, squid logs a CONNECT and an absolute-form GET, and the
        backends' connections are squid's.
        """
        caFile = os.path.abspath(self.mktemp())
        with open(caFile, "wb") as f:
            f.write(self.backendCA.certPEM())
        via = self.squid.url("open")
        running = RunningProxy(self, f"""
[[site]]
name = "vault"
origins = ["https://vault.test"]
backend = "https://{BACKEND}:{self.tlsPort}"
ca_file = "{caFile}"
upstream_proxy = "{via}"

[[site]]
name = "plain"
origins = ["http://plain.test"]
backend = "http://{BACKEND}:{self.plainPort}"
upstream_proxy = "{via}"
""")

        def client() -> Any:
            sock = siteTunnel(running.ports["forward"], "vault.test:443", running.sslContext())
            secure = request(sock, "GET", "/", [("Host", "vault.test")])
            with openSocket(running.ports["forward"]) as plainSock:
                plain = request(plainSock, "GET", "http://plain.test/", [("Host", "plain.test")])
            return secure, plain

        secure, plain = yield threads.deferToThread(client)
        self.assertEqual((secure[0], secure[2]), (200, b"behind"))
        self.assertEqual((plain[0], plain[2]), (200, b"behind"))
        # squid logs a tunnel once it ends: the kept-alive connections go.
        running.proxy.pool.closeAll()
        logged = yield threads.deferToThread(self.squid.waitLogged, BACKEND, 2)
        self.assertTrue(any(f"CONNECT {BACKEND}:{self.tlsPort}" in line for line in logged), logged)
        self.assertTrue(any(f"GET http://{BACKEND}:{self.plainPort}/" in line for line in logged), logged)
        assert self.squid.process is not None
        self.assertEqual(len(self.held), 2)
        for held in self.held:
            self.assertIn(self.squid.process.pid, held)
            self.assertNotIn(os.getpid(), held)
