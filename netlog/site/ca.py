"""
netlog's own certificate authority, and the certificates it mints for sites.

The CA lives in C{--state}: C{ca.key} (0600) and C{ca.pem} (0644). Site
certificates are minted (ECDSA P-256, one leaf key per process, one
certificate per host) and cached.

Supervised, no long-lived process holds the CA's key: in twistd's privileged
step the supervisor forks a child (L{mintInChild}) that loads the key, mints a
certificate for every host of every site, and hands back the certificates and
their leaf key (L{leafBundle}); the supervisor passes them to each worker,
which serves from them (L{HandedLeaves}) and can't mint. The workers parse
untrusted traffic: what they hold can impersonate the configured sites only,
never sign for another name. With C{--no-supervise} the one process loads
the CA (L{CertificateAuthority.loadOrCreate}) and holds the key.
"""

from __future__ import annotations

import functools

import base64
import datetime
import hashlib
import ipaddress
import json
import os
import stat
from typing import Any, Callable, Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from OpenSSL import SSL
from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from netlog.core.bounded import BoundedCache
from netlog.net.coalesce import Coalesced
from netlog.proxy.mode import MintError

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
#: Live hosts' certificates kept on demand (host -> certificate, or TLS
#: context), by the minter, the supervisor and each worker; past it the
#: least recently used go first (see L{netlog.site.minter}).
MAX_MINTED = 4096


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


#: What ALPN offers the browser by default, preferred first: HTTP/2, then
#: HTTP/1.1 (C{--no-h2} leaves HTTP/1.1 alone).
PROTOCOLS = (b"h2", b"http/1.1")
HTTP1_ONLY = (b"http/1.1",)


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
    def loadOrCreate(cls, stateDir: str) -> "CertificateAuthority":
        """
        Load the CA from C{stateDir}, creating it (and the folder) on first use.

        @raise CAError: the files can't be read, are unsafe, or don't match.
        """
        try:
            if not os.path.isdir(stateDir):
                os.makedirs(stateDir, mode=STATE_MODE, exist_ok=True)
            keyPath = os.path.join(stateDir, KEY_FILE)
            certPath = os.path.join(stateDir, CERT_FILE)
            if not os.path.lexists(keyPath) and not os.path.lexists(certPath):
                key, cert = createCA()
                _writeFile(keyPath, key.private_bytes(
                    serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                    serialization.NoEncryption()), KEY_MODE)
                _writeFile(certPath, cert.public_bytes(serialization.Encoding.PEM), CERT_MODE)
                return cls(key, cert)
            if not os.path.lexists(keyPath) or not os.path.lexists(certPath):
                raise CAError(
                    f"{stateDir} holds only one of {KEY_FILE} and {CERT_FILE}; restore the other "
                    f"or remove both to make a new CA"
                )
            return cls.load(keyPath, certPath)
        except OSError as e:
            raise CAError(f"netlog can't use its CA in {stateDir}: {e.strerror} ({e.filename})") from None

    @classmethod
    def load(cls, keyPath: str, certPath: str) -> "CertificateAuthority":
        fd = os.open(keyPath, os.O_RDONLY | os.O_NOFOLLOW)
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
        context = leafContext(self.mint(host), self._leafKey, self.cert, self.protocols)
        if len(self._contexts) >= MAX_CACHED:
            self._contexts.pop(next(iter(self._contexts)))
        self._contexts[host] = context
        return context


    def liveContext(self, host: str) -> LiveLeaf:
        """
        What serves the live host C{host}: a context minted here, as any
        (this process holds the CA, C{--no-supervise}).
        """
        return LiveLeaf(self.contextFor(host))

    def leafKeyPEM(self) -> bytes:
        """
        The leaf key every certificate this process mints is for (PKCS#8 PEM).
        """
        return self._leafKeyPEM


def leafContext(cert: x509.Certificate, leafKey: Any, caCert: x509.Certificate,
                protocols: tuple[bytes, ...]) -> SSL.Context:
    """
    A server TLS context presenting C{cert} (for C{leafKey}) and the CA's,
    offering C{protocols} in ALPN.
    """
    context = newServerContext(protocols)
    context.use_certificate(cert)
    context.use_privatekey(leafKey)
    context.add_extra_chain_cert(caCert)
    context.check_privatekey()
    return context


class LiveLeaf:
    """
    What serves a decrypted live host's handshake: a context, and (in a
    worker) the host's certificate, set on each connection of a context
    shared by every live host, which holds the leaf key and the CA's
    certificate once (a context of its own per host is some 40 KB).
    """

    __slots__ = ("context", "certificate")

    def __init__(self, context: SSL.Context, certificate: x509.Certificate | None = None) -> None:
        self.context = context
        self.certificate = certificate

    def connection(self) -> SSL.Connection:
        connection = SSL.Connection(self.context, None)
        if self.certificate is not None:
            connection.use_certificate(self.certificate)
        return connection


def leafBundle(ca: CertificateAuthority, hosts: Iterable[str]) -> bytes:
    """
    What a worker serves from: the CA certificate, the leaf key, and a
    certificate minted for each of C{hosts}, as JSON.
    """
    pem = serialization.Encoding.PEM
    return json.dumps({
        "ca": ca.certPEM().decode("ascii"),
        "key": ca.leafKeyPEM().decode("ascii"),
        "certs": {host: ca.mint(host).public_bytes(pem).decode("ascii") for host in hosts},
    }).encode("ascii")


def mintInChild(stateDir: str, hosts: Iterable[str]) -> bytes:
    """
    L{leafBundle} for C{hosts}, made by a child process that loads (or, the
    first time, creates) the CA in C{stateDir} and exits: the key is never
    in this process's memory, nor in any process forked from it later.

    @raise CAError: the child could not (its message says why).
    """
    hosts = list(hosts)
    readFrom, writeTo = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(readFrom)
            try:
                answer = b"0" + leafBundle(CertificateAuthority.loadOrCreate(stateDir), hosts)
            except CAError as e:
                answer = b"1" + str(e).encode("utf-8", "replace")
            except Exception:
                import traceback

                traceback.print_exc()
                raise
            view = memoryview(answer)
            while view:
                view = view[os.write(writeTo, view):]
            code = 0
        finally:
            os._exit(code)
    os.close(writeTo)
    chunks = []
    try:
        while chunk := os.read(readFrom, 1 << 16):
            chunks.append(chunk)
    finally:
        os.close(readFrom)
        _, status = os.waitpid(pid, 0)
    answer = b"".join(chunks)
    if os.waitstatus_to_exitcode(status) != 0 or not answer:
        raise CAError(f"the process that loads the CA in {stateDir} failed "
                      f"(status {os.waitstatus_to_exitcode(status)}); see the output above")
    if answer[:1] == b"1":
        raise CAError(answer[1:].decode("utf-8", "replace"))
    return answer[1:]


class HandedLeaves:
    """
    A worker's certificates: those L{leafBundle} made, with no CA key, so
    no other name can be signed for.
    """

    def __init__(self, bundle: bytes, protocols: tuple[bytes, ...] = PROTOCOLS) -> None:
        """
        @param protocols: what ALPN offers the browser.
        """
        self.protocols = protocols
        #: How a live host's certificate is asked for (the control channel
        #: to the supervisor, see L{netlog.site.minter}): host -> PEM.
        self.ask: Callable[[str], Deferred[str]] | None = None
        self._live: BoundedCache[str, LiveLeaf] = BoundedCache(MAX_MINTED)
        self._minting: Coalesced[str, LiveLeaf] = Coalesced()
        self._liveContext: SSL.Context | None = None
        data = json.loads(bundle)
        self.cert = x509.load_pem_x509_certificate(data["ca"].encode("ascii"))
        self._leafKey = serialization.load_pem_private_key(data["key"].encode("ascii"), None)
        self._contexts = {
            host: leafContext(x509.load_pem_x509_certificate(pem.encode("ascii")), self._leafKey, self.cert,
                              protocols)
            for host, pem in data["certs"].items()
        }

    def hosts(self) -> list[str]:
        return sorted(self._contexts)

    def contextFor(self, host: str) -> SSL.Context:
        """
        The context for C{host} (any case, a trailing dot or brackets
        aside), as minted at start.

        @raise CAError: none was minted for it.
        """
        from netlog.site.config import normalizeHost

        context = self._contexts.get(host) or self._contexts.get(normalizeHost(host))
        if context is None:
            raise CAError(f"no certificate was minted at start for {host!r} (not a site's host)")
        return context

    def liveContext(self, host: str) -> LiveLeaf | Deferred[LiveLeaf]:
        """
        What serves the live host C{host}: from the cache, or (a
        L{Deferred}) once C{ask} has brought its certificate, signed for the
        leaf key this process holds. Many asking at once for one host ask
        once.
        """
        leaf = self._live.get(host)
        if leaf is not None:
            return leaf
        if self.ask is None:
            return fail(MintError("this worker has no way to ask for a certificate"))
        d, first = self._minting.join(host)
        if first:
            self.ask(host).addCallbacks(self._minted, self._unminted, callbackArgs=(host,), errbackArgs=(host,))
        return d

    def _minted(self, pem: str, host: str) -> None:
        try:
            certificate = x509.load_pem_x509_certificate(pem.encode("ascii"))
            leafKey: Any = self._leafKey
            if self._liveContext is None:
                shared = self._liveContext = newServerContext(self.protocols)
                shared.use_privatekey(leafKey)
                shared.add_extra_chain_cert(self.cert)
            leaf = LiveLeaf(self._liveContext, certificate)
            # A certificate for another key can't serve: found now, not in
            # each handshake.
            leaf.connection().use_privatekey(leafKey)
        except Exception as e:
            self._minting.refuse(host, MintError(f"the certificate minted for {host} can't be used: {e}"))
            return
        self._live.put(host, leaf)
        self._minting.answer(host, leaf)

    def _unminted(self, failure: Failure, host: str) -> None:
        self._minting.refuse(host, failure)


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
