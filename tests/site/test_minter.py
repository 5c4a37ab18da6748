"""
Tests for L{netlog.site.minter} and the on-demand path of a live host's
certificate: the minter process (a real fork), the supervisor's client of it,
the control channel's C{mint}, a worker's cache, and a browser connection
that waits for its mint while another is served.
"""

from __future__ import annotations

import json
import os
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from twisted.internet import reactor
from twisted.internet.address import IPv4Address
from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.trial.unittest import SynchronousTestCase, TestCase

from netlog.core.bounded import BoundedCache
from netlog.net.policy import DestinationPolicy
from netlog.net.resolve import Resolver
from netlog.proxy.browser import BrowserConnection
from netlog.proxy.mode import MintError
from netlog.proxy.service import ProxyService
from netlog.site.ca import CertificateAuthority, HandedLeaves, createCA, leafBundle
from netlog.site.config import parseSites
from netlog.site.minter import adoptMinter, startMinter
from netlog.site.mode import SiteMode
from netlog.supervise.control import SupervisorSide, WorkerSide
from tests.standin.test_memory import RecordingWriter

SITES = ('[[site]]\nname = "shop"\norigins = ["https://shop.test"]\nbackend = "http://127.0.0.1:9"\n'
         '[live]\ndecrypt = ["*.live.test"]\n')


def readLine(lines: Any) -> dict[str, Any]:
    return json.loads(lines.readline())  # type: ignore[no-any-return]


class BoundedCacheTests(SynchronousTestCase):
    def test_leastRecentlyUsedGoes(self) -> None:
        """
        Past its size the least recently used value goes; a value read is
        used.
        """
        cache: BoundedCache[str, int] = BoundedCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        self.assertEqual(cache.get("a"), 1)
        cache.put("c", 3)
        self.assertEqual((cache.get("a"), cache.get("b"), cache.get("c"), len(cache)), (1, None, 3, 2))


class MinterProcessTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.state = os.path.abspath(self.mktemp())
        self.bundle, self.sock, self.pid = startMinter(self.state, ["shop.test"])
        self.addCleanup(self.end)

    def end(self) -> None:
        if self.sock.fileno() != -1:
            self.sock.close()
            os.waitpid(self.pid, 0)

    def test_bundleThenMints(self) -> None:
        """
        The minter made the CA, answers first with the sites' certificates
        and their leaf key, then signs a certificate for a host asked, for
        that same leaf key, by the CA; a name that can't be a host is
        refused; closing its socket ends it.
        """
        self.assertTrue(os.path.exists(os.path.join(self.state, "ca.key")))
        leaves = HandedLeaves(self.bundle)
        self.assertEqual(leaves.hosts(), ["shop.test"])
        self.sock.sendall(b'{"host": "a.live.test"}\n{"host": "a b"}\n')
        lines = self.sock.makefile("rb")
        minted = readLine(lines)
        self.assertEqual(minted["host"], "a.live.test")
        cert = x509.load_pem_x509_certificate(minted["cert"].encode("ascii"))
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        self.assertEqual(san.get_values_for_type(x509.DNSName), ["a.live.test"])
        self.assertEqual(cert.issuer, leaves.cert.subject)
        leafKey = serialization.load_pem_private_key(json.loads(self.bundle)["key"].encode("ascii"), None)
        self.assertEqual(cert.public_key().public_numbers(), leafKey.public_key().public_numbers())  # type: ignore[union-attr]
        self.assertIn("not a host name", readLine(lines)["error"])
        lines.close()
        self.sock.close()
        _, status = os.waitpid(self.pid, 0)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0)


class MinterClientTests(TestCase):
    def test_askedOnceThenCached(self) -> None:
        """
        Two asks for one host at once get the same certificate from one
        line asked; a third is answered from the cache at once.
        """
        bundle, sock, pid = startMinter(os.path.abspath(self.mktemp()), [])
        client = adoptMinter(reactor, sock, pid)
        self.addCleanup(client.transport.loseConnection)  # type: ignore[union-attr]
        first, second = client.mint("b.live.test"), client.mint("b.live.test")

        def check(pems: list[str]) -> None:
            self.assertEqual(pems[0], pems[1])
            self.assertEqual(len(client.minted), 1)
            third = client.mint("b.live.test")
            self.assertEqual(third.result, pems[0])  # type: ignore[attr-defined]

        from twisted.internet.defer import gatherResults

        return gatherResults([first, second]).addCallback(check)


class ControlMintTests(SynchronousTestCase):
    def test_workerAsksSupervisorAnswers(self) -> None:
        """
        A worker's C{mint} is one line to the supervisor (many asks for one
        host, one line); the supervisor answers with what its C{mint}
        gives, a certificate or why not; the worker's Deferreds fire with it.
        """
        worker = WorkerSide(lambda *a: None, lambda m: succeed(None), lambda m: None)
        workerWire = StringTransport()
        worker.makeConnection(workerWire)
        asked = [worker.mint("c.live.test"), worker.mint("c.live.test"), worker.mint("d.live.test")]
        lines = workerWire.value().splitlines()
        self.assertEqual([json.loads(line) for line in lines],
                         [{"op": "mint", "host": "c.live.test"}, {"op": "mint", "host": "d.live.test"}])

        def mint(host: str) -> Deferred[str]:
            return succeed("PEM") if host == "c.live.test" else fail(MintError("not allowed"))

        supervisor = SupervisorSide(mint)
        supervisorWire = StringTransport()
        supervisor.makeConnection(supervisorWire)
        supervisor.dataReceived(workerWire.value())
        worker.dataReceived(supervisorWire.value())
        self.assertEqual([self.successResultOf(d) for d in asked[:2]], ["PEM", "PEM"])
        self.assertIn("not allowed", str(self.failureResultOf(asked[2], MintError).value))


def workerMode(ask: Any) -> SiteMode:
    """
    A worker's site mode: the certificates a bundle handed it, live hosts'
    asked for with C{ask}.
    """
    key, cert = createCA()
    bundle = leafBundle(CertificateAuthority(key, cert), ["shop.test"])
    mode = SiteMode(parseSites(SITES), "/nonexistent", ca=HandedLeaves(bundle))  # type: ignore[arg-type]
    mode.mintVia(ask)
    return mode


class WorkerMintTests(SynchronousTestCase):
    def test_supervisorRefusesOtherNames(self) -> None:
        """
        The supervisor mints only names C{[live] decrypt} gives: a worker
        asking for another (a site's, or any) gets a refusal.
        """
        mode = SiteMode(parseSites(SITES), "/nonexistent")
        for host in ("shop.test", "www.bank.test"):
            self.failureResultOf(mode.mint(host), MintError)

    def test_cachedContexts(self) -> None:
        """
        A worker asks once per live host however many handshakes wait for
        it; the certificate then comes from its cache at once; a failed mint
        fails each waiter and is asked again next time.
        """
        asks: dict[str, list[Deferred[str]]] = {}

        def ask(host: str) -> Deferred[str]:
            d: Deferred[str] = Deferred()
            asks.setdefault(host, []).append(d)
            return d

        mode = workerMode(ask)
        mode.prepare()
        first, second = mode.serverTLS("e.live.test"), mode.serverTLS("E.live.test")
        self.assertEqual(list(asks), ["e.live.test"])
        self.assertEqual(len(asks["e.live.test"]), 1)
        pem = self.mintWith(mode, "e.live.test")
        asks["e.live.test"][0].callback(pem)
        self.successResultOf(first)
        self.successResultOf(second)
        self.assertNotIsInstance(mode.serverTLS("e.live.test"), Deferred)
        failing = mode.serverTLS("f.live.test")
        asks["f.live.test"][0].errback(MintError("the minter is gone"))
        self.failureResultOf(failing, MintError)
        self.assertIsInstance(mode.serverTLS("f.live.test"), Deferred)
        self.assertEqual(len(asks["f.live.test"]), 2)
        # A certificate for another key than the worker's leaf key can't
        # serve: refused when it comes, not at each handshake.
        other = mode.serverTLS("i.live.test")
        key, cert = createCA()
        asks["i.live.test"][0].callback(
            CertificateAuthority(key, cert).mint("i.live.test").public_bytes(serialization.Encoding.PEM).decode())
        self.assertIn("can't be used", str(self.failureResultOf(other, MintError).value))

    @staticmethod
    def mintWith(mode: SiteMode, host: str) -> str:
        """
        A certificate for C{host} for the leaf key C{mode}'s bundle holds
        (as the minter would sign it; the CA here is another, which the
        worker doesn't check).
        """
        key, cert = createCA()
        ca = CertificateAuthority(key, cert)
        assert isinstance(mode.ca, HandedLeaves)
        ca._leafKey = mode.ca._leafKey  # type: ignore[assignment]
        return ca.mint(host).public_bytes(serialization.Encoding.PEM).decode("ascii")

    def test_mintDoesNotStallOthers(self) -> None:
        """
        A CONNECT to a live host whose certificate is being minted gets no
        C{200} until it is ready, and its connection isn't read meanwhile;
        another browser's CONNECT to a host already minted is answered at
        once; a mint that fails gets the browser a C{502} and a C{_failed}
        tunnel entry.
        """
        pending: dict[str, Deferred[str]] = {}

        def ask(host: str) -> Deferred[str]:
            d = pending[host] = Deferred()
            return d

        mode = workerMode(ask)
        memory = MemoryReactorClock()
        writer = RecordingWriter()
        proxy = ProxyService(mode, writer, memory, Resolver(memory, {}, resolveOnly=True), DestinationPolicy(),
                             ["forward"], connectTimeout=5, idleTimeout=60, headerTimeout=10)
        proxy.startService()
        [(_, _, factory)] = proxy.listeners

        def browser() -> tuple[BrowserConnection, StringTransport]:
            connection = factory.buildProtocol(None)
            wire = StringTransport(hostAddress=IPv4Address("TCP", "127.0.0.1", 3128),
                                   peerAddress=IPv4Address("TCP", "127.0.0.1", 50000))
            connection.makeConnection(wire)
            return connection, wire

        slow, slowWire = browser()
        slow.dataReceived(b"CONNECT g.live.test:443 HTTP/1.1\r\nHost: g.live.test:443\r\n\r\n")
        self.assertEqual(slowWire.value(), b"")
        self.assertEqual(slowWire.producerState, "paused")
        pending["g.live.test"].callback(WorkerMintTests.mintWith(mode, "g.live.test"))
        self.assertTrue(slowWire.value().startswith(b"HTTP/1.1 200"))
        self.assertEqual(slowWire.producerState, "producing")

        waiting, waitingWire = browser()
        waiting.dataReceived(b"CONNECT h.live.test:443 HTTP/1.1\r\nHost: h.live.test:443\r\n\r\n")
        fast, fastWire = browser()
        fast.dataReceived(b"CONNECT g.live.test:443 HTTP/1.1\r\nHost: g.live.test:443\r\n\r\n")
        self.assertTrue(fastWire.value().startswith(b"HTTP/1.1 200"))
        self.assertEqual(waitingWire.value(), b"")
        pending["h.live.test"].errback(MintError("the minter is gone"))
        self.assertTrue(waitingWire.value().startswith(b"HTTP/1.1 502"))
        [(_, _, opened), (_, _, ended)] = writer.lines
        self.assertEqual((opened["kind"], opened["_liveDecrypted"]), ("tunnel", True))
        self.assertIn("no certificate could be minted for h.live.test", ended["_failed"]["reason"])
