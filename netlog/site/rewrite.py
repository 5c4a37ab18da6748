"""
The site proxy's rewrites of an answer's head: a C{Location} or a
C{Set-Cookie} C{Domain} that names a backend is made to name the site's public
origin, so the browser stays on the site. Pure functions over bytes.
"""

from __future__ import annotations

import re

from netlog.site.config import Backend

_ABSOLUTE = re.compile(rb"^([A-Za-z][A-Za-z0-9+.\-]*:)?//([^/?#]*)(.*)$", re.S)
_DOMAIN = re.compile(rb"(;\s*domain\s*=\s*)([^;]*)", re.I)


def rewriteLocation(value: bytes, backend: Backend, origin: str) -> bytes:
    """
    C{http://127.0.0.1:7770/cart} becomes C{https://shop.test/cart} when the
    backend is C{http://127.0.0.1:7770} and the browser came by
    C{https://shop.test}; anything else is left alone.
    """
    match = _ABSOLUTE.match(value)
    if match is None:
        return value
    scheme, authority, rest = match.groups()
    if scheme is not None and scheme[:-1].lower().decode("ascii") != backend.scheme:
        return value
    if authority.decode("latin-1").lower() not in backend.netlocs():
        return value
    return origin.encode("latin-1") + rest


def rewriteSetCookie(value: bytes, backend: Backend, publicHost: str) -> bytes:
    """
    A cookie's C{Domain=127.0.0.1} (the backend's host) becomes the site's
    public host; other domains are left alone.
    """
    backendHost = backend.host.lower().encode("latin-1")

    def replace(match: re.Match[bytes]) -> bytes:
        domain = match.group(2).strip()
        if domain.lstrip(b".").lower() == backendHost:
            return match.group(1) + publicHost.encode("latin-1")
        return match.group(0)

    return _DOMAIN.sub(replace, value)
