"""
The site proxy's configuration: C{sites.toml}.

Each C{[[site]]} names one web app: its public C{origins} (what the browser
types), its C{backend} (where it really runs) and the C{sign_in_headers} whose
values the log keeps as C{<removed>}. A C{[live]} table lists the live hosts
the browser may reach besides the sites (none by default), and those of them
whose CONNECTs are decrypted and recorded whole (C{decrypt}), with the trust
their certificates are verified against (C{ca_file}, C{verify}).

A mistake fails at start with a message naming the line and what to fix.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from netlog.core.upstreamproxy import UpstreamProxy, parseUpstreamProxy

#: Header names a site may never declare as sign-in headers: graders read
#: cookies, so the log always keeps them.
NEVER_REMOVED = frozenset({"cookie", "set-cookie"})

DEFAULT_PORTS = {"http": 80, "https": 443}

_SITE_KEYS = {"name", "origins", "backend", "verify", "sign_in_headers", "ca_file", "replay", "backend_connections",
              "upstream_proxy"}
_LIVE_KEYS = {"hosts", "connect_ports", "decrypt", "ca_file", "verify"}
_TOP_KEYS = {"site", "live"}
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


class ConfigError(Exception):
    """
    The configuration can't be used; the message names the file, the line and
    what is wrong.
    """


@dataclass(frozen=True)
class Origin:
    """
    A public origin, C{https://shop.test} or C{https://shop.test:8443}.
    """

    scheme: str
    host: str
    port: int

    def __str__(self) -> str:
        if self.port == DEFAULT_PORTS[self.scheme]:
            return f"{self.scheme}://{self.host}"
        return f"{self.scheme}://{self.host}:{self.port}"


@dataclass(frozen=True)
class Backend:
    """
    Where a site runs: C{http://127.0.0.1:7770} or an C{https://} backend.
    """

    scheme: str
    host: str
    port: int
    verify: bool = True
    caFile: str | None = None

    @property
    def tls(self) -> bool:
        return self.scheme == "https"

    def netlocs(self) -> set[str]:
        """
        The spellings of this backend's authority that may appear in a
        C{Location}: with and without a default port.
        """
        host = self.host.lower()
        if ":" in host:
            host = f"[{host}]"
        names = {f"{host}:{self.port}"}
        if self.port == DEFAULT_PORTS[self.scheme]:
            names.add(host)
        return names


@dataclass(frozen=True)
class Site:
    name: str
    origins: tuple[Origin, ...]
    backend: Backend
    signInHeaders: frozenset[str] = frozenset()
    #: The recording this site is answered from (C{replay = "PATH"}, made
    #: absolute from the folder of C{sites.toml}), if any.
    replay: str | None = None
    #: The most connections open at once to its backend
    #: (C{backend_connections}); L{None} for C{--upstream-connections}.
    connections: int | None = None
    #: The proxy its backend is reached through (C{upstream_proxy}); L{None}:
    #: direct.
    upstreamProxy: UpstreamProxy | None = None

    def httpsOrigin(self, host: str) -> Origin | None:
        """
        The HTTPS origin for C{host}, where the HTTP route sends the browser.
        """
        for origin in self.origins:
            if origin.scheme == "https" and origin.host == host:
                return origin
        for origin in self.origins:
            if origin.scheme == "https":
                return origin
        return None

    def origin(self, scheme: str, host: str, port: int) -> Origin | None:
        """
        This site's origin C{scheme://host:port}, or L{None}.
        """
        for origin in self.origins:
            if (origin.scheme, origin.host, origin.port) == (scheme, host, port):
                return origin
        return None


#: The ports a live host's CONNECT may name unless C{[live] connect_ports}
#: says otherwise: HTTPS only, as the stand-in's C{--connect-ports} default.
DEFAULT_LIVE_CONNECT_PORTS = frozenset({443})


@dataclass
class SitesConfig:
    sites: list[Site] = field(default_factory=list)
    liveHosts: tuple[str, ...] = ()
    path: str | None = None
    #: The ports a live host's CONNECT may name (C{[live] connect_ports}).
    liveConnectPorts: frozenset[int] = DEFAULT_LIVE_CONNECT_PORTS
    #: The live hosts whose CONNECTs are decrypted (C{[live] decrypt}):
    #: patterns as L{liveHosts}'; a host they name is a live host too.
    liveDecrypt: tuple[str, ...] = ()
    #: What decrypted live hosts' certificates are verified against.
    liveTrust: LiveTrust = field(default_factory=lambda: LiveTrust())

    def __post_init__(self) -> None:
        self._byOrigin: dict[tuple[str, str, int], Site] = {}
        self._byHost: dict[str, Site] = {}
        for site in self.sites:
            for origin in site.origins:
                self._byOrigin.setdefault((origin.scheme, origin.host, origin.port), site)
                self._byHost.setdefault(origin.host, site)

    def siteAt(self, scheme: str, host: str, port: int) -> Site | None:
        """
        The site whose origin is C{scheme://host:port}: an origin is its
        scheme, host and port, so another port of the same host is not that
        site (and sites may share a host on different ports).
        """
        return self._byOrigin.get((scheme, normalizeHost(host), port))

    def tunnelsTo(self, host: str, port: int) -> bool:
        """
        Whether a CONNECT to C{host:port} reaches a site: one of its origins,
        C{https://} (decrypted) or C{http://} (read as plain HTTP, which is
        how browsers open C{ws://} through a proxy), names that host and
        port.
        """
        host = normalizeHost(host)
        return any((scheme, host, port) in self._byOrigin for scheme in DEFAULT_PORTS)

    def hasHost(self, host: str) -> bool:
        """
        Whether any site's origin names C{host}, on any port (the HTTPS
        route's SNI check: the port is only known from C{Host} later).
        """
        return normalizeHost(host) in self._byHost

    def redirectFor(self, host: str, port: int) -> Origin | None:
        """
        Where the HTTP route sends a request for C{http://host:port}: the
        HTTPS origin of the site it names (its own C{http://} origin's site
        first, else the site with an HTTPS origin on that host).
        """
        host = normalizeHost(host)
        site = self._byOrigin.get(("http", host, port))
        if site is not None and site.httpsOrigin(host) is not None:
            return site.httpsOrigin(host)
        for site in self.sites:
            for origin in site.origins:
                if origin.scheme == "https" and origin.host == host:
                    return origin
        return None

    def isLive(self, host: str) -> bool:
        """
        Whether C{host} is an allowed live host (C{*.example.org} matches
        C{a.example.org}, not C{example.org}): C{hosts} or C{decrypt} names
        it.
        """
        host = normalizeHost(host)
        return _matches(host, self.liveHosts) or _matches(host, self.liveDecrypt)

    def decrypts(self, host: str) -> bool:
        """
        Whether a CONNECT to the live host C{host} is decrypted
        (C{[live] decrypt} names it); a site's host is a site's, never a
        live host's.
        """
        host = normalizeHost(host)
        return host not in self._byHost and _matches(host, self.liveDecrypt)


@dataclass(frozen=True)
class LiveTrust:
    """
    What the certificates of decrypted live hosts are verified against:
    C{caFile} (C{[live] ca_file}, PEM), else the system's trust store; not
    at all when C{verify} is false (C{[live] verify = false}).
    """

    caFile: str | None = None
    verify: bool = True


def _matches(host: str, patterns: tuple[str, ...]) -> bool:
    """
    Whether the normalized C{host} matches one of C{patterns} (C{"*"},
    C{"*.name"} or a name).
    """
    for pattern in patterns:
        if pattern == "*" or fnmatch.fnmatchcase(host, pattern):
            return True
    return False


def normalizeHost(host: str) -> str:
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


def _lineOf(text: str, table: str, index: int, key: str | None) -> int | None:
    """
    The line (1-based) of C{key} in the C{index}-th C{[[table]]} (or
    C{[table]}), or of the table's header when the key isn't found.
    """
    header = re.compile(r"^\s*\[\[\s*" + re.escape(table) + r"\s*\]\]|^\s*\[\s*" + re.escape(table) + r"\s*\]")
    anyHeader = re.compile(r"^\s*\[")
    lines = text.splitlines()
    seen = -1
    start = None
    for number, line in enumerate(lines, 1):
        if header.match(line):
            seen += 1
            if seen == index:
                start = number
                break
    if start is None:
        return None
    if key is None:
        return start
    keyLine = re.compile(r"^\s*(" + re.escape(key) + r"|\"" + re.escape(key) + r"\")\s*=")
    for number in range(start + 1, len(lines) + 1):
        line = lines[number - 1]
        if anyHeader.match(line):
            break
        if keyLine.match(line):
            return number
    return start


def _fail(path: str, text: str, table: str, index: int, key: str | None, message: str) -> ConfigError:
    line = _lineOf(text, table, index, key)
    where = f"{path}, line {line}" if line else path
    return ConfigError(f"{where}: {message}")


def _parseUrl(value: Any, what: str) -> tuple[str, str, int, str]:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string like \"https://shop.test\", not {value!r}")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as e:
        raise ValueError(f"{what} {value!r} is not a URL: {e}") from None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"{what} {value!r} must start with http:// or https://")
    if not parts.hostname:
        raise ValueError(f"{what} {value!r} has no host")
    if parts.username or parts.password:
        raise ValueError(f"{what} {value!r} must not carry a user name or password")
    return scheme, normalizeHost(parts.hostname), port or DEFAULT_PORTS[scheme], parts.path


def parseSites(text: str, path: str = "sites.toml") -> SitesConfig:
    """
    Read a C{sites.toml}'s text.

    @raise ConfigError: naming the line and what is wrong.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        message = str(e)
        found = re.search(r"\(at line (\d+), column \d+\)", message)
        if found:
            line = int(found.group(1))
        else:
            line = max(1, len(text.rstrip("\n").splitlines()))
        message = re.sub(r"\s*\(at [^)]*\)", "", message)
        raise ConfigError(f"{path}, line {line}: not valid TOML: {message}") from None
    for key in data:
        if key not in _TOP_KEYS:
            raise ConfigError(
                f"{path}: unknown table or key {key!r}; sites.toml has [[site]] tables and a [live] table"
            )
    rawSites = data.get("site", [])
    if not isinstance(rawSites, list):
        raise _fail(path, text, "site", 0, None, "write each site as a [[site]] table")
    sites: list[Site] = []
    owners: dict[Origin, str] = {}
    names: set[str] = set()
    for index, raw in enumerate(rawSites):

        def fail(key: str | None, message: str) -> ConfigError:
            return _fail(path, text, "site", index, key, message)

        for key in raw:
            if key not in _SITE_KEYS:
                raise fail(key, f"unknown key {key!r} in [[site]]; known keys: {', '.join(sorted(_SITE_KEYS))}")
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise fail("name" if "name" in raw else None, "each [[site]] needs a name = \"...\"")
        if name in names:
            raise fail("name", f"two sites are named {name!r}")
        names.add(name)
        rawOrigins = raw.get("origins")
        if isinstance(rawOrigins, str):
            rawOrigins = [rawOrigins]
        if not isinstance(rawOrigins, list) or not rawOrigins:
            raise fail("origins" if "origins" in raw else None,
                       f"site {name!r} needs origins = [\"https://HOST\"]")
        origins: list[Origin] = []
        for value in rawOrigins:
            try:
                scheme, host, port, urlPath = _parseUrl(value, "origin")
            except ValueError as e:
                raise fail("origins", f"site {name!r}: {e}") from None
            if urlPath not in ("", "/"):
                raise fail("origins", f"site {name!r}: origin {value!r} must have no path")
            origin = Origin(scheme, host, port)
            if origin in origins:
                # https://a.test and https://a.test:443 are one origin: a
                # second spelling is a slip (a port meant, another scheme).
                raise fail("origins", f"site {name!r}: origin {value!r} is {origin}, which its "
                           f"origins already name; name each origin (scheme, host, port) once")
            if origin in owners and owners[origin] != name:
                raise fail("origins", f"site {name!r}: origin {origin} is already site {owners[origin]!r}'s")
            owners[origin] = name
            origins.append(origin)
        verify = raw.get("verify", True)
        if not isinstance(verify, bool):
            raise fail("verify", f"site {name!r}: verify must be true or false")
        caFile = raw.get("ca_file")
        if caFile is not None and not isinstance(caFile, str):
            raise fail("ca_file", f"site {name!r}: ca_file must be a path")
        if "backend" not in raw:
            raise fail(None, f"site {name!r} needs backend = \"http://127.0.0.1:PORT\"")
        try:
            scheme, host, port, urlPath = _parseUrl(raw["backend"], "backend")
        except ValueError as e:
            raise fail("backend", f"site {name!r}: {e}") from None
        if urlPath not in ("", "/"):
            raise fail("backend", f"site {name!r}: backend {raw['backend']!r} must have no path")
        backend = Backend(scheme, host, port, verify, caFile)
        rawHeaders = raw.get("sign_in_headers", [])
        if not isinstance(rawHeaders, list) or not all(isinstance(h, str) for h in rawHeaders):
            raise fail("sign_in_headers", f"site {name!r}: sign_in_headers must be a list of header names")
        signIn = set()
        for header in rawHeaders:
            if not _TOKEN.match(header):
                raise fail("sign_in_headers", f"site {name!r}: {header!r} is not a header name")
            if header.lower() in NEVER_REMOVED:
                raise fail(
                    "sign_in_headers",
                    f"site {name!r}: {header} can't be a sign-in header: the log always keeps "
                    f"cookies, since graders read them",
                )
            signIn.add(header.lower())
        replay = raw.get("replay")
        if replay is not None and (not isinstance(replay, str) or not replay):
            raise fail("replay", f"site {name!r}: replay must be the path of a recording (a netlog log or a HAR)")
        if replay is not None and path is not None:
            replay = os.path.join(os.path.dirname(os.path.abspath(path)), replay)
        connections = raw.get("backend_connections")
        if connections is not None and (not isinstance(connections, int) or isinstance(connections, bool)
                                        or connections < 1):
            raise fail("backend_connections",
                       f"site {name!r}: backend_connections must be a whole number of connections, 1 or more")
        upstreamProxy = None
        if "upstream_proxy" in raw:
            value = raw["upstream_proxy"]
            try:
                if not isinstance(value, str):
                    raise ValueError("upstream_proxy wants \"http://HOST:PORT\"")
                upstreamProxy = UpstreamProxy(*parseUpstreamProxy(value, "upstream_proxy"))
            except ValueError as e:
                raise fail("upstream_proxy", f"site {name!r}: {e}") from None
        sites.append(Site(name, tuple(origins), backend, frozenset(signIn), replay, connections, upstreamProxy))
    live = data.get("live", {})
    if not isinstance(live, dict):
        raise _fail(path, text, "live", 0, None, "write live hosts as a [live] table with hosts = [...]")
    for key in live:
        if key not in _LIVE_KEYS:
            raise _fail(path, text, "live", 0, key,
                        f"unknown key {key!r} in [live]; known keys: {', '.join(sorted(_LIVE_KEYS))}")

    def liveFail(key: str | None, message: str) -> ConfigError:
        return _fail(path, text, "live", 0, key, message)

    liveHosts = _livePatterns(live, "hosts", liveFail)
    liveDecrypt = _livePatterns(live, "decrypt", liveFail)
    liveVerify = live.get("verify", True)
    if not isinstance(liveVerify, bool):
        raise liveFail("verify", "verify must be true or false (false only to turn verification off)")
    liveCaFile = live.get("ca_file")
    if liveCaFile is not None:
        if not isinstance(liveCaFile, str) or not liveCaFile:
            raise liveFail("ca_file", "ca_file must be the path of a PEM file of CA certificates")
        if path is not None:
            liveCaFile = os.path.join(os.path.dirname(os.path.abspath(path)), liveCaFile)
        why = _unusableCaFile(liveCaFile)
        if why is not None:
            raise liveFail("ca_file", f"ca_file {liveCaFile}: {why}")
    ports = live.get("connect_ports", sorted(DEFAULT_LIVE_CONNECT_PORTS))
    if (
        not isinstance(ports, list)
        or not ports
        or not all(isinstance(p, int) and not isinstance(p, bool) and 0 < p < 65536 for p in ports)
    ):
        raise _fail(path, text, "live", 0, "connect_ports",
                    "connect_ports must be a list of port numbers (1-65535) like [443, 8443]")
    return SitesConfig(sites, liveHosts, path, frozenset(ports), liveDecrypt, LiveTrust(liveCaFile, liveVerify))


def _livePatterns(live: dict[str, Any], key: str, fail: Any) -> tuple[str, ...]:
    """
    The host patterns of C{[live]}'s C{key} (C{hosts} or C{decrypt}),
    normalized.
    """
    patterns = live.get(key, [])
    if not isinstance(patterns, list) or not all(isinstance(h, str) and h for h in patterns):
        raise fail(key, f"{key} must be a list of names like \"*.example.org\"")
    for pattern in patterns:
        bare = pattern[2:] if pattern.startswith("*.") else pattern
        if pattern != "*" and ("*" in bare or "/" in bare or ":" in bare and not isAddress(bare)):
            raise fail(key, f"live host {pattern!r}: write a name, \"*.name\" or \"*\" (no scheme, port or path)")
    return tuple(normalizeHost(h) for h in patterns)


def _unusableCaFile(path: str) -> str | None:
    """
    Why C{path} can't serve as a trust store (no such file, unreadable, no
    PEM certificate in it), or L{None}.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return f"can't read it: {e.strerror}"
    if b"-----BEGIN CERTIFICATE-----" not in data:
        return "holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
    return None


def isAddress(value: str) -> bool:
    """
    Whether C{value} is an IP address (not a name).
    """
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def loadSites(path: str) -> SitesConfig:
    """
    Read a C{sites.toml} file.

    @raise ConfigError: it can't be read or used; the message says why.
    """
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ConfigError(f"{path}: can't read it: {e.strerror}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(f"{path}, line {line}: not UTF-8") from None
    return parseSites(text, path)
