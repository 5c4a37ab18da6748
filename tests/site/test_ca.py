"""
Tests for L{netlog.site.ca} and C{netlog ca}.
"""

from __future__ import annotations

import os
import stat
import subprocess

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from OpenSSL import crypto
from twisted.trial.unittest import SynchronousTestCase

from netlog.site.ca import CAError, CertificateAuthority, spkiHash
from tests.support import netlogArgv, sourceEnv


def verifies(ca: CertificateAuthority, cert: x509.Certificate, host: str) -> None:
    """
    Check C{cert} chains to C{ca} (with OpenSSL's own verifier) and names
    C{host}.
    """
    store = crypto.X509Store()
    store.add_cert(crypto.X509.from_cryptography(ca.cert))
    crypto.X509StoreContext(store, crypto.X509.from_cryptography(cert)).verify_certificate()
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert host in [str(v) for v in names.get_values_for_type(x509.DNSName)] + [
        str(v) for v in names.get_values_for_type(x509.IPAddress)
    ]


class CATests(SynchronousTestCase):
    def test_createdWithModes(self) -> None:
        """
        On first use the CA is created in the state folder: the key 0600, the
        certificate 0644, whatever the umask.
        """
        state = self.mktemp()
        old = os.umask(0o077)
        try:
            CertificateAuthority.loadOrCreate(state)
        finally:
            os.umask(old)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(state, "ca.key")).st_mode), 0o600)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(state, "ca.pem")).st_mode), 0o644)

    def test_loadedAgain(self) -> None:
        """
        A second start loads the same CA rather than making a new one.
        """
        state = self.mktemp()
        first = CertificateAuthority.loadOrCreate(state)
        second = CertificateAuthority.loadOrCreate(state)
        self.assertEqual(first.certPEM(), second.certPEM())
        self.assertEqual(first.spkiHash(), second.spkiHash())

    def test_keyReadableByOthers(self) -> None:
        """
        A key file others can read is refused with the command that fixes it.
        """
        state = self.mktemp()
        CertificateAuthority.loadOrCreate(state)
        os.chmod(os.path.join(state, "ca.key"), 0o644)
        with self.assertRaises(CAError) as caught:
            CertificateAuthority.loadOrCreate(state)
        self.assertIn("chmod 600", str(caught.exception))

    def test_halfMissing(self) -> None:
        """
        A state folder with a certificate but no key is an error, not a new CA.
        """
        state = self.mktemp()
        CertificateAuthority.loadOrCreate(state)
        os.remove(os.path.join(state, "ca.key"))
        self.assertRaises(CAError, CertificateAuthority.loadOrCreate, state)

    def test_mint(self) -> None:
        """
        Minted certificates are ECDSA P-256, chain to the CA, and name the
        host (a DNS name or an IP address).
        """
        ca = CertificateAuthority.loadOrCreate(self.mktemp())
        for host in ("shop.test", "127.0.0.1"):
            cert = ca.mint(host)
            key = cert.public_key()
            assert isinstance(key, ec.EllipticCurvePublicKey)
            self.assertEqual(key.curve.name, "secp256r1")
            verifies(ca, cert, host)

    def test_contextCached(self) -> None:
        """
        A host's TLS context is minted once and then reused.
        """
        ca = CertificateAuthority.loadOrCreate(self.mktemp())
        self.assertIs(ca.contextFor("shop.test"), ca.contextFor("shop.test"))
        self.assertIsNot(ca.contextFor("shop.test"), ca.contextFor("wiki.test"))


class CACommandTests(SynchronousTestCase):
    def test_prints(self) -> None:
        """
        C{netlog ca --state DIR} prints the CA certificate and its SPKI hash,
        the one Chromium's C{--ignore-certificate-errors-spki-list} takes.
        """
        state = self.mktemp()
        out = subprocess.run(netlogArgv() + ["ca", "--state", state], env=sourceEnv(),
                             capture_output=True, text=True, timeout=60, check=True).stdout
        ca = CertificateAuthority.loadOrCreate(state)
        self.assertIn(ca.certPEM().decode("ascii"), out)
        self.assertIn(spkiHash(ca.cert), out)
        only = subprocess.run(netlogArgv() + ["ca", "--state", state, "--spki-only"], env=sourceEnv(),
                              capture_output=True, text=True, timeout=60, check=True).stdout
        self.assertEqual(only.strip(), ca.spkiHash())


class MintedAheadTests(SynchronousTestCase):
    def test_bundle(self) -> None:
        """
        A child process makes the CA on first use and mints a certificate
        for each host, each chaining to the CA; what it hands back has the
        leaf key and the certificates, never the CA's key, and serves each
        host in any case, and no other host.
        """
        import json

        from netlog.site.ca import HandedLeaves, mintInChild

        state = os.path.abspath(self.mktemp())
        bundle = mintInChild(state, ["shop.test", "127.0.0.1"])
        ca = CertificateAuthority.loadOrCreate(state)
        data = json.loads(bundle)
        self.assertEqual(sorted(data["certs"]), ["127.0.0.1", "shop.test"])
        for host, pem in data["certs"].items():
            verifies(ca, x509.load_pem_x509_certificate(pem.encode()), host)
        from cryptography.hazmat.primitives import serialization

        leafKey = serialization.load_pem_private_key(data["key"].encode(), None)
        assert isinstance(leafKey, ec.EllipticCurvePrivateKey)
        self.assertNotEqual(leafKey.private_numbers(), ca.key.private_numbers())
        with open(os.path.join(state, "ca.key"), "rb") as f:
            secondLine = f.read().splitlines()[2]
        self.assertNotIn(secondLine.decode(), bundle.decode())
        leaves = HandedLeaves(bundle)
        self.assertEqual(leaves.hosts(), ["127.0.0.1", "shop.test"])
        self.assertIs(leaves.contextFor("SHOP.test."), leaves.contextFor("shop.test"))
        with self.assertRaises(CAError):
            leaves.contextFor("other.test")

    def test_childError(self) -> None:
        """
        What stops the child (a state folder with a certificate and no key)
        is the parent's L{CAError}, with the child's message.
        """
        from netlog.site.ca import mintInChild

        state = os.path.abspath(self.mktemp())
        os.makedirs(state)
        with open(os.path.join(state, "ca.pem"), "w") as f:
            f.write("x")
        with self.assertRaises(CAError) as caught:
            mintInChild(state, ["shop.test"])
        self.assertIn("holds only one of", str(caught.exception))
