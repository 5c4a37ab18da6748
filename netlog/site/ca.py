"""
netlog's own certificate authority, and the certificates it mints for sites.

The CA lives in C{--state}: C{ca.key} (0600) and C{ca.pem} (0644). It is
loaded in the privileged step, so the worker that serves the browser never
needs to read the key file. Site certificates are minted on demand (ECDSA
P-256, one leaf key per process, one certificate per host) and cached.
"""

from __future__ import annotations

import functools

import base64
import datetime
import hashlib
import ipaddress
import os
import stat
from typing import Any, Callable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from OpenSSL import SSL

KEY_FILE = "ca.key"
CERT_FILE = "ca.pem"
KEY_MODE = 0o600
CERT_MODE = 0o644
STATE_MODE = 0o755
#: How long the CA is valid.
CA_DAYS = 3650
#: How long a minted certificate is valid (under the 398 days browsers cap).
LEAF_DAYS = 397
#: Minted certificates kept; past it the oldest are dropped.
MAX_CACHED = 4096


class CAError(Exception):
    """
    The CA can't be created or loaded; the message says what to fix.
    """


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _writeFile(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
    finally:
        os.close(fd)


def createCA(commonName: str = "netlog CA") -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([
        x509.NameAttribute(NameOID.COMMON_NAME, commonName),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "netlog"),
    ])
    now = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def spkiHash(cert: x509.Certificate) -> str:
    """
    The base64 SHA-256 of a certificate's SubjectPublicKeyInfo, as Chromium's
    C{--ignore-certificate-errors-spki-list} wants it.
    """
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode("ascii")


class CertificateAuthority:
    """
    The CA and its minted certificates.

    @ivar cert: the CA certificate.
    """

    def __init__(self, key: ec.EllipticCurvePrivateKey, cert: x509.Certificate,
                 clock: Callable[[], datetime.datetime] = _now) -> None:
        self.key = key
        self.cert = cert
        self._clock = clock
        self._leafKey = ec.generate_private_key(ec.SECP256R1())
        self._leafKeyPEM = self._leafKey.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self._contexts: dict[str, SSL.Context] = {}
        #: What ALPN offers the browser, in netlog's order of preference.
        self.protocols: tuple[bytes, ...] = PROTOCOLS

    @classmethod
    def loadOrCreate(cls, stateDir: str, openKey: Callable[[str, int], int] | None = None
                     ) -> "CertificateAuthority":
        """
        Load the CA from C{stateDir}, creating it (and the folder) on first use.

        @param openKey: opens the key file (C{os.open} by default; a
            supervised worker opens the descriptor its supervisor inherited
            to it, since it may not read the file itself).

        @raise CAError: the files can't be read, are unsafe, or don't match.
        """
        try:
            if not os.path.isdir(stateDir):
                os.makedirs(stateDir, mode=STATE_MODE, exist_ok=True)
            keyPath = os.path.join(stateDir, KEY_FILE)
            certPath = os.path.join(stateDir, CERT_FILE)
            if openKey is None and not os.path.lexists(keyPath) and not os.path.lexists(certPath):
                key, cert = createCA()
                _writeFile(keyPath, key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption()), KEY_MODE)
                _writeFile(certPath, cert.public_bytes(serialization.Encoding.PEM), CERT_MODE)
                return cls(key, cert)
            if openKey is None and (not os.path.lexists(keyPath) or not os.path.lexists(certPath)):
                raise CAError(
                    f"{stateDir} holds only one of {KEY_FILE} and {CERT_FILE}; restore the other "
                    f"or remove both to make a new CA"
                )
            return cls.load(keyPath, certPath, openKey)
        except OSError as e:
            raise CAError(f"netlog can't use its CA in {stateDir}: {e.strerror} ({e.filename})") from None

    @classmethod
    def load(cls, keyPath: str, certPath: str, openKey: Callable[[str, int], int] | None = None
             ) -> "CertificateAuthority":
        fd = (openKey or os.open)(keyPath, os.O_RDONLY | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise CAError(f"{keyPath} is not a regular file")
            if st.st_mode & 0o077:
                raise CAError(
                    f"{keyPath} can be read by others (mode {stat.S_IMODE(st.st_mode):04o}); "
                    f"chmod 600 {keyPath}"
                )
            keyData = b""
            while chunk := os.read(fd, 65536):
                keyData += chunk
        finally:
            os.close(fd)
        with open(certPath, "rb") as f:
            certData = f.read()
        try:
            key = serialization.load_pem_private_key(keyData, None)
            cert = x509.load_pem_x509_certificate(certData)
        except ValueError as e:
            raise CAError(f"{keyPath} or {certPath} can't be read: {e}") from None
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise CAError(f"{keyPath} is not an EC key")
        if key.public_key().public_numbers() != cert.public_key().public_numbers():  # type: ignore[union-attr]
            raise CAError(f"{keyPath} is not the key of {certPath}")
        return cls(key, cert)

    def certPEM(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def spkiHash(self) -> str:
        return spkiHash(self.cert)

    def mint(self, host: str) -> x509.Certificate:
        """
        A certificate for C{host} (a name or an IP address), signed by the CA.
        """
        try:
            san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            san = x509.DNSName(host)
        now = self._clock()
        ski = self.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        return (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]))
            .issuer_name(self.cert.subject)
            .public_key(self._leafKey.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=LEAF_DAYS))
            .add_extension(x509.SubjectAlternativeName([san]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ski), critical=False
            )
            .sign(self.key, hashes.SHA256())
        )

    def contextFor(self, host: str) -> SSL.Context:
        """
        A server TLS context presenting a certificate minted for C{host},
        offering L{protocols} in ALPN; cached.
        """
        context = self._contexts.get(host)
        if context is not None:
            return context
        cert = self.mint(host)
        context = newServerContext(self.protocols)
        context.use_certificate(cert)
        context.use_privatekey(self._leafKey)
        context.add_extra_chain_cert(self.cert)
        context.check_privatekey()
        if len(self._contexts) >= MAX_CACHED:
            self._contexts.pop(next(iter(self._contexts)))
        self._contexts[host] = context
        return context


#: What ALPN offers the browser by default, preferred first: HTTP/2, then
#: HTTP/1.1 (C{--no-h2} leaves HTTP/1.1 alone).
PROTOCOLS = (b"h2", b"http/1.1")
HTTP1_ONLY = (b"http/1.1",)


def _selectALPN(protocols: tuple[bytes, ...], connection: SSL.Connection, offered: list[bytes]) -> Any:
    for protocol in protocols:
        if protocol in offered:
            return protocol
    return SSL.NO_OVERLAPPING_PROTOCOLS


def newServerContext(protocols: tuple[bytes, ...] = PROTOCOLS) -> SSL.Context:
    """
    A TLS 1.2+ server context offering C{protocols} in ALPN (the first the
    browser also offers is chosen).
    """
    context = SSL.Context(SSL.TLS_SERVER_METHOD)
    context.set_min_proto_version(SSL.TLS1_2_VERSION)
    context.set_options(SSL.OP_NO_COMPRESSION | SSL.OP_CIPHER_SERVER_PREFERENCE)
    context.set_alpn_select_callback(functools.partial(_selectALPN, protocols))
    context.set_session_cache_mode(SSL.SESS_CACHE_SERVER)
    context.set_session_id(b"netlog")
    return context
