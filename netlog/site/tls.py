"""
TLS for the site proxy: the server side (a minted certificate per host,
chosen by the CONNECT's host or by SNI; ALPN offers C{h2} and C{http/1.1}
unless C{--no-h2}) and the
client side towards C{https://} backends (ALPN offers C{h2} and
C{http/1.1}: the engine speaks whichever the backend picks, and offers
C{http/1.1} alone with C{--no-h2-upstream} or for an upgrade).
"""

from __future__ import annotations

from typing import Any, Callable

from OpenSSL import SSL
from twisted.internet import ssl
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IOpenSSLServerConnectionCreator
from zope.interface import implementer

from netlog.proxy.h2upstream import OFFERED
from netlog.site.ca import CertificateAuthority, HandedLeaves, newServerContext
from netlog.site.config import Backend, normalizeHost


@implementer(IOpenSSLServerConnectionCreator)
class HostTLS:
    """
    The server side of a decrypted CONNECT: a certificate for the host the
    browser asked for.
    """

    def __init__(self, ca: CertificateAuthority | HandedLeaves, host: str) -> None:
        self._context = ca.contextFor(host)

    def serverConnectionForTLS(self, protocol: Any) -> SSL.Connection:
        return SSL.Connection(self._context, None)


@implementer(IOpenSSLServerConnectionCreator)
class SNITLS:
    """
    The server side of the HTTPS route: the certificate is chosen by the SNI
    name, among the hosts C{isSite} accepts.
    """

    def __init__(self, ca: CertificateAuthority | HandedLeaves, isSite: Callable[[str], bool],
                 fallbackHost: str) -> None:
        self._ca = ca
        self._isSite = isSite
        self._context = newServerContext(ca.protocols)
        fallback = ca.contextFor(fallbackHost)
        # The default context needs a certificate for clients that send no SNI.
        self._fallbackHost = fallbackHost
        self._context.set_tlsext_servername_callback(self._chooseContext)
        self._fallback = fallback

    def _chooseContext(self, connection: SSL.Connection) -> None:
        name = connection.get_servername()
        if name:
            host = normalizeHost(name.decode("ascii", "replace"))
            if self._isSite(host):
                connection.set_context(self._ca.contextFor(host))
                return
        connection.set_context(self._fallback)

    def serverConnectionForTLS(self, protocol: Any) -> SSL.Connection:
        return SSL.Connection(self._context, None)


def backendTLS(backend: Backend) -> Any:
    """
    The client side towards an C{https://} backend: verified with
    service-identity (against C{ca_file} when the site names one, else the
    system's trust store), unless the site says C{verify = false}.
    """
    if backend.verify:
        if backend.caFile:
            with open(backend.caFile, "rb") as f:
                trust: Any = ssl.trustRootFromCertificates(
                    [ssl.Certificate.loadPEM(pem) for pem in _splitPEM(f.read())]
                )
        else:
            trust = ssl.platformTrust()
        return optionsFor(backend.host, trust)
    return _Unverified(backend.host)


def optionsFor(host: str, trust: Any) -> IOpenSSLClientConnectionCreator:
    return ssl.optionsForClientTLS(host, trustRoot=trust, acceptableProtocols=OFFERED)


@implementer(IOpenSSLClientConnectionCreator)
class _Unverified:
    """
    A client side that checks nothing (C{verify = false}), still sending SNI.
    """

    def __init__(self, host: str) -> None:
        self._host = host
        self._context = SSL.Context(SSL.TLS_CLIENT_METHOD)
        self._context.set_min_proto_version(SSL.TLS1_2_VERSION)
        self._context.set_verify(SSL.VERIFY_NONE, lambda *a: True)
        self._context.set_alpn_protos(OFFERED)

    def clientConnectionForTLS(self, protocol: Any) -> SSL.Connection:
        connection = SSL.Connection(self._context, None)
        if not _isAddress(self._host):
            connection.set_tlsext_host_name(self._host.encode("idna"))
        connection.set_connect_state()
        return connection


def _isAddress(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _splitPEM(data: bytes) -> list[bytes]:
    marker = b"-----END CERTIFICATE-----"
    parts = []
    for chunk in data.split(marker):
        if b"-----BEGIN CERTIFICATE-----" in chunk:
            parts.append(chunk[chunk.index(b"-----BEGIN CERTIFICATE-----"):] + marker + b"\n")
    return parts
