"""
TLS towards a decrypted live host (C{[live] decrypt}): SNI, and the
server's certificate verified as a browser would, against the system's trust
store or C{[live] ca_file}, with service-identity for the name.

Verification happens inside the handshake: a certificate that fails (its
chain, its dates, its name) ends the handshake before netlog's side sends
its C{Finished}, so no request ever reaches the server, and the failure
says why in words (L{LiveCertificateRejected}): the exchange's C{_failed}
carries them to the log.
"""

from __future__ import annotations

import weakref
from typing import Any

from OpenSSL import SSL, crypto
from service_identity import VerificationError
from service_identity.cryptography import verify_certificate_hostname, verify_certificate_ip_address
from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IOpenSSLServerConnectionCreator
from zope.interface import implementer

from netlog.proxy.h2upstream import OFFERED
from netlog.site.ca import LiveLeaf
from netlog.site.config import LiveTrust, isAddress

#: What ALPN offers a live host: HTTP/2 and HTTP/1.1, as to a site's
#: backend (the engine narrows it to HTTP/1.1 where it must).
LIVE_PROTOCOLS = OFFERED

#: OpenSSL's verify errors (C{X509_V_ERR_*}) by what they mean to a user.
_DATES = {10: "has expired", 9: "is not valid yet"}
_UNKNOWN_ISSUER = {2, 18, 19, 20, 21}

#: The host each live connection's certificate must be for (Twisted keeps
#: its own protocol as the connection's app data).
_hosts: "weakref.WeakKeyDictionary[SSL.Connection, str]" = weakref.WeakKeyDictionary()


class LiveCertificateRejected(SSL.Error):
    """
    A live host's certificate failed verification; the message says why
    (expired, wrong host, unknown issuer). Its arguments are shaped as
    OpenSSL's error queue (a list of C{(library, function, reason)}), which
    Twisted's TLS layer and L{netlog.proxy.exchange.describeTLSError} read.
    """

    def __init__(self, reason: str) -> None:
        super().__init__([("netlog", "verify", reason)])
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


def verifyReason(errno: int, depth: int, subject: str) -> str:
    """
    Why OpenSSL's verify error C{errno} (at C{depth} in the chain, for the
    certificate named C{subject}) rejects a certificate, in words.
    """
    which = "the certificate" if depth == 0 else f"the chain's certificate {subject!r}"
    if errno in _DATES:
        return f"certificate verify failed: {which} {_DATES[errno]}"
    if errno in _UNKNOWN_ISSUER:
        return f"certificate verify failed: unknown issuer ({which} is not signed by a trusted CA)"
    return f"certificate verify failed: {which} is rejected (OpenSSL verify error {errno})"


class LiveTLS:
    """
    The client side towards decrypted live hosts, for one trust: one
    context shared by every host, a connection creator per host from
    L{creatorFor}.
    """

    def __init__(self, trust: LiveTrust) -> None:
        context = self._context = SSL.Context(SSL.TLS_CLIENT_METHOD)
        context.set_min_proto_version(SSL.TLS1_2_VERSION)
        context.set_options(SSL.OP_NO_COMPRESSION)
        context.set_alpn_protos(LIVE_PROTOCOLS)
        if not trust.verify:
            context.set_verify(SSL.VERIFY_NONE, lambda *a: True)
            return
        if trust.caFile:
            context.load_verify_locations(trust.caFile)
        else:
            context.set_default_verify_paths()
        context.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, _verify)

    def creatorFor(self, host: str) -> IOpenSSLClientConnectionCreator:
        """
        The connection creator for C{host}: SNI (for a name) and its
        certificate checked for it.
        """
        return _HostCreator(self._context, host)


@implementer(IOpenSSLServerConnectionCreator)
class LiveHostTLS:
    """
    The server side of a decrypted live host's CONNECT: the certificate
    minted for it (see L{netlog.site.minter}).
    """

    def __init__(self, leaf: LiveLeaf) -> None:
        self._leaf = leaf

    def serverConnectionForTLS(self, protocol: Any) -> SSL.Connection:
        return self._leaf.connection()


@implementer(IOpenSSLClientConnectionCreator)
class _HostCreator:
    def __init__(self, context: SSL.Context, host: str) -> None:
        self._context = context
        self._host = host

    def clientConnectionForTLS(self, protocol: Any) -> SSL.Connection:
        connection = SSL.Connection(self._context, None)
        _hosts[connection] = self._host
        if not isAddress(self._host):
            connection.set_tlsext_host_name(self._host.encode("idna"))
        connection.set_connect_state()
        return connection


def _verify(connection: SSL.Connection, cert: crypto.X509, errno: int, depth: int, ok: int) -> bool:
    """
    OpenSSL's verify callback: a chain error, or (on the server's own
    certificate, the chain good) a name the certificate isn't for, raises
    L{LiveCertificateRejected}, which pyOpenSSL raises again from the
    handshake.
    """
    if not ok:
        raise LiveCertificateRejected(verifyReason(errno, depth, cert.get_subject().commonName or "?"))
    if depth == 0:
        host = _hosts.get(connection, "")
        certificate = cert.to_cryptography()
        try:
            if isAddress(host):
                verify_certificate_ip_address(certificate, host)
            else:
                verify_certificate_hostname(certificate, host)
        except VerificationError:
            raise LiveCertificateRejected(
                f"certificate verify failed: wrong host (the certificate is not for {host}; "
                f"it names {_names(certificate)})"
            ) from None
    return True


def _names(certificate: Any) -> str:
    """
    The names a certificate is for (its subjectAltName), for a message.
    """
    from cryptography import x509

    try:
        san = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no name"
    names = [str(n) for n in san.get_values_for_type(x509.DNSName)]
    names += [str(a) for a in san.get_values_for_type(x509.IPAddress)]
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "") if names else "no name"

