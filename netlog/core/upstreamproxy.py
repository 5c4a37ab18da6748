"""
An upstream proxy (C{--upstream-proxy http://HOST:PORT}): its address and
credentials as the options give them, the C{CONNECT} netlog sends it, its
answer's head, and the words a log reader gets when it refuses. No I/O: the
shell that connects through it is L{netlog.net.viaproxy}.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from netlog.core.records import originForm, urlAuthority

#: The bytes an upstream proxy's answer to a C{CONNECT} may take before its
#: head ends; past them the answer is not read as one.
MAX_CONNECT_ANSWER = 64 * 1024


@dataclass(frozen=True)
class UpstreamProxy:
    """
    The proxy every outbound connection to a live host goes through.

    @ivar host: its host name or address (an IPv6 address without brackets).
    @ivar port: its port.
    @ivar authorization: the C{Proxy-Authorization} value netlog sends it
        (C{Basic ...}), or L{None}; kept out of C{repr}: it's a secret.
    """

    host: str
    port: int
    authorization: bytes | None = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        """
        How the log and the browser's answers name it: C{host:port}.
        """
        return urlAuthority(self.host, self.port, "")


def parseUpstreamProxy(value: str, option: str = "--upstream-proxy") -> tuple[str, int]:
    """
    Read an upstream proxy's C{http://HOST:PORT}.

    @raise ValueError: with one line saying what to fix.
    """
    text = value.strip()
    wanted = f"{option} wants http://HOST:PORT"
    scheme, sep, rest = text.partition("://")
    if not sep:
        raise ValueError(f"{wanted}, got {value!r}")
    if scheme.lower() == "https":
        raise ValueError(f"{option} {value!r}: an https:// upstream proxy is not supported; give its http:// port")
    if scheme.lower() != "http":
        raise ValueError(f"{wanted}, got {value!r}")
    rest = rest[:-1] if rest.endswith("/") else rest
    if not rest or any(c in rest for c in "/?#@ "):
        raise ValueError(f"{wanted} (no path, no user), got {value!r}")
    if rest.startswith("["):
        host, close, after = rest[1:].partition("]")
        if not close or not after.startswith(":"):
            raise ValueError(f"{wanted} with a port, got {value!r}")
        port = after[1:]
    else:
        host, colon, port = rest.rpartition(":")
        if not colon:
            raise ValueError(f"{wanted} with a port, got {value!r}")
    if not host or ":" in host and not rest.startswith("["):
        raise ValueError(f"{wanted}, got {value!r}")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{option} {value!r}: {port!r} is not a port")
    return host.lower(), int(port)


def parseCredentials(text: str) -> bytes:
    """
    The C{Proxy-Authorization} value for an auth file's one line,
    C{user:password}.

    @raise ValueError: the file is empty, has more than one line, or its
        line isn't C{user:password} (the message never repeats the secret).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ValueError("is empty (it wants one line, user:password)")
    if len(lines) > 1:
        raise ValueError("has more than one line (it wants one line, user:password)")
    line = lines[0].strip("\r\n")
    user, colon, _ = line.partition(":")
    if not colon or not user or user != user.strip():
        raise ValueError("isn't user:password on one line")
    return b"Basic " + base64.b64encode(line.encode("utf-8"))


def credentialsLine(authorization: bytes) -> bytes:
    """
    The auth file's line that C{authorization} (from L{parseCredentials})
    was made of: what a supervisor hands its workers.
    """
    return base64.b64decode(authorization.split(b" ", 1)[1]) + b"\n"


def connectRequest(host: str, port: int, authorization: bytes | None) -> bytes:
    """
    The C{CONNECT} that asks an upstream proxy for a tunnel to C{host:port}.
    """
    authority = urlAuthority(host, port, "").encode("ascii", "replace")
    lines = [b"CONNECT " + authority + b" HTTP/1.1", b"Host: " + authority]
    if authorization is not None:
        lines.append(b"Proxy-Authorization: " + authorization)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def absoluteTarget(host: str, port: int, target: bytes) -> bytes:
    """
    A plain request's target in absolute-form (C{http://host:port/path}),
    as an upstream proxy takes it.
    """
    return b"http://" + urlAuthority(host, port, "http").encode("ascii", "replace") + originForm(target)


@dataclass(frozen=True)
class ConnectAnswer:
    """
    The head of an upstream proxy's answer to a C{CONNECT}.

    @ivar status: its status; C{reason} its reason phrase.
    @ivar leftover: the bytes after its head (the tunnel's first).
    """

    status: int
    reason: str
    leftover: bytes = b""

    @property
    def tunnel(self) -> bool:
        """
        The proxy opened the tunnel (a C{2xx}).
        """
        return 200 <= self.status < 300


def readConnectAnswer(data: bytes) -> ConnectAnswer | None:
    """
    The answer's head once C{data} holds all of it; L{None} while it may
    still come.

    @raise ValueError: C{data} isn't an HTTP answer, or its head is over
        L{MAX_CONNECT_ANSWER} bytes.
    """
    end = data.find(b"\r\n\r\n")
    if end < 0:
        if len(data) > MAX_CONNECT_ANSWER:
            raise ValueError(f"its answer's head is over {MAX_CONNECT_ANSWER} bytes")
        if len(data) >= 5 and not data.startswith(b"HTTP/"):
            raise ValueError("its answer isn't HTTP")
        return None
    line = data[:data.find(b"\r\n")]
    parts = line.split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not (len(parts[1]) == 3 and parts[1].isdigit()):
        raise ValueError("its answer isn't HTTP")
    reason = parts[2].decode("latin-1").strip() if len(parts) > 2 else ""
    return ConnectAnswer(int(parts[1]), reason, data[end + 4:])


class UpstreamProxyRefused(Exception):
    """
    The upstream proxy answered a C{CONNECT} with something other than a
    C{2xx}: the browser gets its status.
    """

    def __init__(self, proxy: str, status: int, reason: str) -> None:
        Exception.__init__(self, proxy, status, reason)
        self.proxy = proxy
        self.status = status
        self.reason = reason

    def __str__(self) -> str:
        said = f"{self.status} {self.reason}".strip()
        return f"the upstream proxy {self.proxy} refused the tunnel: {said}"


class UpstreamProxyFailed(Exception):
    """
    The upstream proxy could not be reached, or its answer to a C{CONNECT}
    could not be read: C{why} in words (naming it), C{status} the browser's
    (502, or 504 for a timeout).
    """

    def __init__(self, proxy: str, why: str, status: int) -> None:
        Exception.__init__(self, proxy, why, status)
        self.proxy = proxy
        self.why = why
        self.status = status

    def __str__(self) -> str:
        return self.why


def upstreamProxyMark(proxy: str, status: int) -> dict[str, object]:
    """
    An end line's C{_upstreamProxy}: the upstream proxy refused (C{status}),
    not the server.
    """
    return {"_upstreamProxy": {"proxy": proxy, "status": status}}
