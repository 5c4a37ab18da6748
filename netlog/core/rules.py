"""
Rules for a session or the main listener: header changes, block and allow
lists, local answers, host remaps, latency and bandwidth (C{docs/rules.rst}).

Pure: a rules document (JSON from the API, TOML or JSON from
C{--rules FILE}) is checked whole by L{compileRules}, which raises
L{BadRules} with one line (which key, where, why) or gives a L{Rules} that
answers, per request (L{Rules.request}) or per CONNECT (L{Rules.connect}),
a L{Decision}: blocked or not, the header changes each way, a remap, the
latency and bandwidth, and the C{_rules} entries for the log. Nothing is
applied from a document that is wrong anywhere.

A request whose host no rule names costs one dictionary look-up (the
answer for a host and port is kept, up to L{MAX_CACHED_HOSTS}).
"""

from __future__ import annotations

import base64
import ipaddress
import json
import re
import tomllib
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

#: The keys a rules document takes.
KEYS = ("headers", "block", "block_status", "allow", "remap", "latency_ms", "bandwidth", "answer")
#: What an answer rule takes.
ANSWER_KEYS = ("match", "method", "status", "headers", "body", "body_base64", "body_file")
#: The keys an answer rule's body may come from, one at most.
BODY_KEYS = ("body", "body_base64", "body_file")
#: The largest body an answer rule gives.
MAX_ANSWER_BODY = 1024 * 1024
#: What a header rule takes.
HEADER_KEYS = ("match", "set", "remove", "answer_set", "answer_remove")
#: The status a blocked request gets unless C{block_status} says.
DEFAULT_BLOCK_STATUS = 403
#: The statuses C{block_status} may be.
MIN_BLOCK_STATUS, MAX_BLOCK_STATUS = 400, 599
#: The most patterns in C{block} or C{allow}, rules in C{headers}, hosts in
#: C{remap}, and fields one header rule sets or removes.
MAX_ENTRIES = 1000
#: The longest latency, in milliseconds (under the idle timeout's default).
MAX_LATENCY_MS = 60_000
#: The slowest and fastest bandwidth, in bytes a second.
MIN_BANDWIDTH = 1024
MAX_BANDWIDTH = 10 * 1024 ** 3
#: Hosts and ports whose matching rules are kept worked out.
MAX_CACHED_HOSTS = 4096

_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?\Z")
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+\Z")
_FORBIDDEN_VALUE = re.compile(r"[\x00\r\n]")
#: Fields a header rule may not touch: they frame the message or the
#: connection, which the engine owns.
_FRAMING = frozenset({
    "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer",
    "proxy-connection", "host",
})
_PATTERN_FORM = "a pattern is host[:port][/path]"

#: How an answer rule's C{body_file} is read: C{(path, limit)}, the path
#: relative to the state folder and checked here, to at most C{limit}
#: bytes (the shell's L{netlog.state.stateFileReader}). It raises
#: L{OSError}, or L{ValueError} when the path leads out of the folder.
ReadFile = Callable[[str, int], bytes]


class BadRules(ValueError):
    """
    A rules document that is wrong: the message is one line, naming the key,
    where, and why (C{block[2]: a pattern is host[:port][/path], got "a b"}).
    """


def _got(value: Any) -> str:
    return json.dumps(value)[:80]


@dataclass(frozen=True)
class Pattern:
    """
    A compiled C{host[:port][/path]}.

    @ivar host: the host (lowercase) when it has no C{*}; else L{None} and
        C{hostRegex} matches it.
    @ivar port: the port, or L{None} for every port.
    @ivar path: the path, or L{None} for every path; C{prefix}: it ends in
        C{*} (kept without it) and matches every path it begins.
    """

    text: str
    host: str | None
    hostRegex: re.Pattern[str] | None
    port: int | None
    path: str | None
    prefix: bool

    def matchesHost(self, host: str, port: int) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.host is not None:
            return self.host == host
        assert self.hostRegex is not None
        return self.hostRegex.match(host) is not None

    def matchesPath(self, path: str) -> bool:
        if self.path is None:
            return True
        return path.startswith(self.path) if self.prefix else path == self.path


def normalHost(host: str) -> str:
    """
    A host as rules compare it: lowercase, no trailing dot, an IPv6 address
    without its brackets.
    """
    host = host.lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host


def _checkHost(host: str, where: str, text: str) -> None:
    if not host:
        raise BadRules(f"{where}: {_PATTERN_FORM}, got {_got(text)} (no host)")
    try:
        ipaddress.ip_address(host)
        return
    except ValueError:
        pass
    for label in host.split("."):
        if label != "*" and not _LABEL.match(label):
            raise BadRules(f"{where}: {_PATTERN_FORM} (* stands for whole labels), got {_got(text)}")


def _checkPort(text: str, where: str, what: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise BadRules(f"{where}: a port is 1 to 65535, got {_got(what)}")
    return int(text)


def _splitAuthority(authority: str, where: str, text: str) -> tuple[str, str | None]:
    """
    C{host[:port]} (an IPv6 host in brackets) as the host and the port's
    text.
    """
    if authority.startswith("["):
        end = authority.find("]")
        if end < 0:
            raise BadRules(f"{where}: {_PATTERN_FORM}, got {_got(text)} (an IPv6 address in [] is not closed)")
        host, rest = authority[1:end], authority[end + 1:]
        if rest and not rest.startswith(":"):
            raise BadRules(f"{where}: {_PATTERN_FORM}, got {_got(text)}")
        return host, rest[1:] if rest else None
    if authority.count(":") > 1:
        raise BadRules(f"{where}: {_PATTERN_FORM}, got {_got(text)} (put an IPv6 address in [])")
    host, colon, port = authority.partition(":")
    return host, port if colon else None


def parsePattern(text: Any, where: str) -> Pattern:
    """
    Read one C{host[:port][/path]}.

    @param where: the key and index it was found at, for the error.
    @raise BadRules: it isn't one.
    """
    if not isinstance(text, str):
        raise BadRules(f"{where}: {_PATTERN_FORM} (a string), got {_got(text)}")
    if not text or any(c.isspace() for c in text) or "://" in text:
        raise BadRules(f"{where}: {_PATTERN_FORM}, got {_got(text)}")
    slash = text.find("/")
    authority, path = (text, None) if slash < 0 else (text[:slash], text[slash:])
    host, portText = _splitAuthority(authority, where, text)
    host = normalHost(host)
    _checkHost(host, where, text)
    port = None if portText is None else _checkPort(portText, where, text)
    prefix = False
    if path is not None:
        if "*" in path[:-1] or "?" in path or "#" in path:
            raise BadRules(f"{where}: {_PATTERN_FORM} (a path may end in * and has no query), got {_got(text)}")
        if path.endswith("*"):
            prefix, path = True, path[:-1]
    regex = None
    exact: str | None = host
    if "*" in host.split("."):
        exact = None
        parts = [r"[^.]+(?:\.[^.]+)*" if label == "*" else re.escape(label) for label in host.split(".")]
        regex = re.compile(r"\.".join(parts) + r"\Z")
    return Pattern(text, exact, regex, port, path, prefix)


@dataclass(frozen=True)
class HeaderRule:
    """
    One entry of C{headers}: which requests, and what it sets and removes
    on the request going up and on the answer coming down.
    """

    where: str
    match: Pattern
    set: tuple[tuple[bytes, bytes], ...]
    remove: tuple[bytes, ...]
    answerSet: tuple[tuple[bytes, bytes], ...]
    answerRemove: tuple[bytes, ...]


def _fieldName(name: Any, where: str) -> bytes:
    if not isinstance(name, str) or not _TOKEN.match(name):
        raise BadRules(f"{where}: a header's name is a token (letters, digits, -), got {_got(name)}")
    if name.lower() in _FRAMING:
        raise BadRules(f"{where}: {name} frames the message or the connection; rules can't change it")
    return name.encode("ascii")


def _setFields(value: Any, where: str) -> tuple[tuple[bytes, bytes], ...]:
    if not isinstance(value, dict):
        raise BadRules(f"{where}: an object of header names and values, got {_got(value)}")
    if len(value) > MAX_ENTRIES:
        raise BadRules(f"{where}: at most {MAX_ENTRIES} headers, got {len(value)}")
    out = []
    for name, text in value.items():
        encoded = _fieldName(name, f"{where}.{name}" if isinstance(name, str) else where)
        if not isinstance(text, str) or _FORBIDDEN_VALUE.search(text):
            raise BadRules(f"{where}.{name}: a header's value is a string on one line, got {_got(text)}")
        try:
            out.append((encoded, text.encode("latin-1")))
        except UnicodeEncodeError:
            raise BadRules(f"{where}.{name}: a header's value is Latin-1 text, got {_got(text)}") from None
    return tuple(out)


def _listOf(value: Any, where: str, expected: str, things: str) -> list[Any]:
    """
    C{value}, a list of at most L{MAX_ENTRIES} C{things}.

    @param expected: what it should be, for the error.
    """
    if not isinstance(value, list):
        raise BadRules(f"{where}: {expected}, got {_got(value)}")
    if len(value) > MAX_ENTRIES:
        raise BadRules(f"{where}: at most {MAX_ENTRIES} {things}, got {len(value)}")
    return value


def _removeFields(value: Any, where: str) -> tuple[bytes, ...]:
    names = _listOf(value, where, "a list of header names", "headers")
    return tuple(_fieldName(name, f"{where}[{i}]") for i, name in enumerate(names))


def _checkRule(value: Any, where: str, kind: str, keys: tuple[str, ...], example: str, does: str) -> None:
    """
    C{value} is a C{kind} rule: an object of C{keys} with a C{match}.

    @param example: such a rule, for the error; C{does}: what it does to
        the requests it matches.
    """
    if not isinstance(value, dict):
        raise BadRules(f"{where}: {kind} rule is an object such as {example}, got {_got(value)}")
    unknown = sorted(set(value) - set(keys))
    if unknown:
        raise BadRules(f"{where}: unknown key {_got(unknown[0])} ({kind} rule takes {', '.join(keys)})")
    if "match" not in value:
        raise BadRules(f"{where}: {kind} rule needs match, the pattern of the requests it {does}")


def _headerRule(value: Any, where: str) -> HeaderRule:
    _checkRule(value, where, "a header", HEADER_KEYS, '{"match": "shop.test", "set": {...}}', "changes")
    return HeaderRule(
        where,
        parsePattern(value["match"], f"{where}.match"),
        _setFields(value.get("set", {}), f"{where}.set"),
        _removeFields(value.get("remove", []), f"{where}.remove"),
        _setFields(value.get("answer_set", {}), f"{where}.answer_set"),
        _removeFields(value.get("answer_remove", []), f"{where}.answer_remove"),
    )


@dataclass(frozen=True)
class LocalAnswer:
    """
    One entry of C{answer}: the requests netlog answers itself, and with
    what.

    @ivar index: its place in C{answer}, named in the log.
    @ivar method: the method it answers (uppercase), or L{None} for any.
    """

    index: int
    match: Pattern
    method: str | None
    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes

    @property
    def where(self) -> str:
        return f"answer[{self.index}]"


def _bodyFilePath(path: Any, where: str) -> str:
    """
    C{body_file} checked as a path under the state folder: relative, with
    no C{..} and nothing empty in it.
    """
    if (not isinstance(path, str) or not path or path.startswith("/") or "\x00" in path
            or any(part in ("", ".", "..") for part in path.split("/"))):
        raise BadRules(f"{where}.body_file: a path under the state folder such as \"flags.json\", "
                       f"got {_got(path)}")
    return path


def _answerBody(value: Any, where: str, readFile: ReadFile | None) -> bytes:
    """
    An answer rule's body: C{body} (text), C{body_base64}, or C{body_file}
    read now through C{readFile}.
    """
    given = [key for key in BODY_KEYS if key in value]
    if len(given) > 1:
        raise BadRules(f"{where}: one of body, body_base64 or body_file, not {' and '.join(given)}")
    if "body_file" in value:
        path = _bodyFilePath(value["body_file"], where)
        if readFile is None:
            raise BadRules(f"{where}.body_file: no state folder to read {path!r} from")
        try:
            return readFile(path, MAX_ANSWER_BODY)
        except ValueError:
            raise BadRules(f"{where}.body_file: {path!r} leads out of the state folder") from None
        except OSError as e:
            raise BadRules(f"{where}.body_file: {path!r} can't be read in the state folder: "
                           f"{e.strerror or e}") from None
    if "body_base64" in value:
        encoded = value["body_base64"]
        try:
            if not isinstance(encoded, str):
                raise ValueError
            return base64.b64decode(encoded, validate=True)
        except ValueError:
            raise BadRules(f"{where}.body_base64: base64 text, got {_got(encoded)}") from None
    body = value.get("body", "")
    if isinstance(body, str):
        return body.encode("utf-8")
    raise BadRules(f"{where}.body: text, got {_got(body)}")


def _answerRule(value: Any, index: int, readFile: ReadFile | None = None) -> LocalAnswer:
    where = f"answer[{index}]"
    _checkRule(value, where, "an answer", ANSWER_KEYS, '{"match": "shop.test/api/flags", "body": "{}"}', "answers")
    method = value.get("method")
    if method is not None and (not isinstance(method, str) or not _TOKEN.match(method)):
        raise BadRules(f"{where}.method: a method such as GET, got {_got(method)}")
    data = _answerBody(value, where, readFile)
    if len(data) > MAX_ANSWER_BODY:
        raise BadRules(f"{where}: a body of at most {MAX_ANSWER_BODY} bytes, got {len(data)}")
    return LocalAnswer(
        index,
        parsePattern(value["match"], f"{where}.match"),
        method.upper() if method is not None else None,
        _integer(value.get("status", 200), f"{where}.status", 200, 599, "an HTTP status"),
        _setFields(value.get("headers", {}), f"{where}.headers"),
        data,
    )


def _patterns(value: Any, key: str) -> tuple[Pattern, ...]:
    patterns = _listOf(value, key, 'a list of patterns such as ["tracker.test", "*.ads.test"]', "patterns")
    return tuple(parsePattern(p, f"{key}[{i}]") for i, p in enumerate(patterns))


def _integer(value: Any, key: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadRules(f"{key}: {what}, an integer from {low} to {high}, got {_got(value)}")
    return value


def _remap(value: Any) -> dict[str, tuple[str, int | None]]:
    if not isinstance(value, dict):
        raise BadRules(f'remap: an object of hosts and addresses such as {{"shop.test": "127.0.0.1:8080"}}, '
                       f"got {_got(value)}")
    if len(value) > MAX_ENTRIES:
        raise BadRules(f"remap: at most {MAX_ENTRIES} hosts, got {len(value)}")
    out = {}
    for host, target in value.items():
        where = f"remap[{host}]"
        pattern = parsePattern(host, where)
        if pattern.host is None or pattern.port is not None or pattern.path is not None:
            raise BadRules(f"{where}: remap's keys are host names, with no *, port or path")
        if not isinstance(target, str):
            raise BadRules(f"{where}: an address[:port] such as 127.0.0.1:8080, got {_got(target)}")
        address, portText = _splitAuthority(target, where, target)
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise BadRules(f"{where}: an address[:port] such as 127.0.0.1:8080 (an IP address, so that no "
                           f"name is looked up), got {_got(target)}") from None
        out[pattern.host] = (address, None if portText is None else _checkPort(portText, where, target))
    return out


@dataclass(frozen=True)
class Bandwidth:
    """
    Bytes a second each way, or L{None} for no limit.
    """

    down: int | None = None
    up: int | None = None


def _bandwidth(value: Any) -> Bandwidth:
    if not isinstance(value, dict):
        raise BadRules(f'bandwidth: an object such as {{"down": 102400, "up": 51200}}, got {_got(value)}')
    unknown = sorted(set(value) - {"down", "up"})
    if unknown:
        raise BadRules(f"bandwidth: unknown key {_got(unknown[0])} (it takes down and up)")
    limits = {way: _integer(value[way], f"bandwidth.{way}", MIN_BANDWIDTH, MAX_BANDWIDTH, "bytes a second")
              for way in ("down", "up") if way in value}
    return Bandwidth(limits.get("down"), limits.get("up"))


@dataclass(frozen=True)
class Decision:
    """
    What the rules do to one request or CONNECT.

    @ivar blocked: the proxy answers it itself with C{status} (a CONNECT:
        the tunnel is refused); C{why} says which rule.
    @ivar setUp: fields set on the request going up (each replaces the
        browser's of that name); C{dropUp}: the names (lowercase) the
        request goes up without, the set ones among them.
    @ivar setDown, dropDown: the same for the answer coming down.
    @ivar remap: the address and port (L{None}: the request's) connected
        to instead of the host's.
    @ivar latency: seconds added before the answer's first byte.
    @ivar answer: the answer rule netlog answers it with itself (nothing is
        resolved or connected), or L{None}.
    @ivar entries: the C{_rules} entries for the log, empty when no rule
        acted.
    """

    blocked: bool = False
    status: int = DEFAULT_BLOCK_STATUS
    why: str = ""
    setUp: tuple[tuple[bytes, bytes], ...] = ()
    dropUp: frozenset[bytes] = frozenset()
    setDown: tuple[tuple[bytes, bytes], ...] = ()
    dropDown: frozenset[bytes] = frozenset()
    remap: tuple[str, int | None] | None = None
    latency: float = 0.0
    bandwidth: Bandwidth = field(default_factory=Bandwidth)
    entries: tuple[dict[str, str], ...] = ()
    answer: LocalAnswer | None = None

    @property
    def acted(self) -> bool:
        return bool(self.entries)

    @property
    def changesHeaders(self) -> bool:
        return bool(self.dropUp or self.dropDown)


#: Nothing to do.
PASS = Decision()


@dataclass(frozen=True)
class _HostRules:
    """
    The rules that may act on one host and port (the path decides the
    rest).
    """

    block: tuple[tuple[int, Pattern], ...]
    allow: tuple[Pattern, ...]
    headers: tuple[HeaderRule, ...]
    remap: tuple[str, int | None] | None
    answers: tuple[LocalAnswer, ...] = ()

    @property
    def none(self) -> bool:
        return not (self.block or self.allow or self.headers or self.remap or self.answers)


_NO_HOST_RULES = _HostRules((), (), (), None)


class Rules:
    """
    A rules document, checked and compiled.

    @ivar document: the document as given (JSON-able), for C{GET}.
    """

    def __init__(self, document: Mapping[str, Any], headers: tuple[HeaderRule, ...], block: tuple[Pattern, ...],
                 blockStatus: int, allow: tuple[Pattern, ...] | None, remap: dict[str, tuple[str, int | None]],
                 latencyMs: int, bandwidth: Bandwidth, answers: tuple[LocalAnswer, ...] = ()) -> None:
        self.document = dict(document)
        self.headers = headers
        self.block = block
        self.blockStatus = blockStatus
        self.allow = allow
        self.remap = remap
        self.latency = latencyMs / 1000.0
        self.bandwidth = bandwidth
        self.answers = answers
        #: Nothing at all: the engine need not ask.
        self.empty = not (headers or block or allow is not None or remap or latencyMs
                          or bandwidth.down or bandwidth.up or answers)
        #: What acts on every request (latency, bandwidth): the decision
        #: for a request no pattern names.
        entries = []
        if latencyMs:
            entries.append({"rule": "latency_ms", "action": f"delayed {latencyMs} ms"})
        for way in ("down", "up"):
            limit = getattr(bandwidth, way)
            if limit:
                entries.append({"rule": f"bandwidth.{way}", "action": f"shaped to {limit} bytes a second"})
        self._everywhere = tuple(entries)
        self._plain = Decision(latency=self.latency, bandwidth=bandwidth, entries=self._everywhere) \
            if entries else PASS
        #: What acts on every tunnel: the bandwidth (latency acts on the
        #: requests in a tunnel the proxy reads, not on the tunnel).
        shaping = tuple(e for e in entries if e["rule"] != "latency_ms")
        self._tunnel = Decision(bandwidth=bandwidth, entries=shaping) if shaping else PASS
        self._hosts: dict[tuple[str, int], _HostRules] = {}

    def _forHost(self, host: str, port: int) -> _HostRules:
        key = (host, port)
        found = self._hosts.get(key)
        if found is not None:
            return found
        host = normalHost(host)
        found = _HostRules(
            tuple((i, p) for i, p in enumerate(self.block) if p.matchesHost(host, port)),
            tuple(p for p in self.allow or () if p.matchesHost(host, port)),
            tuple(h for h in self.headers if h.match.matchesHost(host, port)),
            self.remap.get(host),
            tuple(a for a in self.answers if a.match.matchesHost(host, port)),
        )
        if found.none:
            found = _NO_HOST_RULES
        if len(self._hosts) >= MAX_CACHED_HOSTS:
            self._hosts.clear()
        self._hosts[key] = found
        return found

    def _blocked(self, rule: str, entries: list[dict[str, str]]) -> Decision:
        entries.append({"rule": rule, "action": "blocked"})
        return Decision(blocked=True, status=self.blockStatus, why=f"{rule} blocks it", entries=tuple(entries))

    def request(self, host: str, port: int, url: str, method: str = "GET") -> Decision:
        """
        What the rules do to a C{method} request for C{url} (whose host and
        port are C{host} and C{port}).
        """
        if self.empty:
            return PASS
        found = self._forHost(host, port)
        if found is _NO_HOST_RULES and self.allow is None:
            return self._plain
        path = _pathOf(url)
        entries: list[dict[str, str]] = []
        for i, pattern in found.block:
            if pattern.matchesPath(path):
                return self._blocked(f"block[{i}]", entries)
        if self.allow is not None and not any(p.matchesPath(path) for p in found.allow):
            return self._blocked("allow", entries)
        setUp: dict[bytes, tuple[bytes, bytes]] = {}
        dropUp: set[bytes] = set()
        setDown: dict[bytes, tuple[bytes, bytes]] = {}
        dropDown: set[bytes] = set()
        for rule in found.headers:
            if rule.match.matchesPath(path):
                _change(rule.where, "", rule.remove, rule.set, setUp, dropUp, entries)
                _change(rule.where, "answer ", rule.answerRemove, rule.answerSet, setDown, dropDown, entries)
        answer = next((a for a in found.answers if a.match.matchesPath(path)
                       and (a.method is None or a.method == method)), None)
        if answer is not None:
            entries.append({"rule": answer.where, "action": f"answered {answer.status}"})
        elif found.remap is not None:
            entries.append(_remapEntry(host, found.remap))
        if not entries:
            return self._plain
        return Decision(
            answer=answer,
            setUp=tuple(setUp.values()), dropUp=frozenset(dropUp),
            setDown=tuple(setDown.values()), dropDown=frozenset(dropDown),
            remap=None if answer is not None else found.remap, latency=self.latency, bandwidth=self.bandwidth,
            entries=tuple(entries) + self._everywhere,
        )

    def connect(self, host: str, port: int) -> Decision:
        """
        What the rules do to a CONNECT to C{host:port}: a block pattern with
        a path doesn't refuse the tunnel (its requests, when decrypted, are
        judged by it); an allow pattern with a path lets it open. Header
        rules and latency act on the requests inside a tunnel the mode
        opens, not on the tunnel; bandwidth shapes a blind tunnel (and the
        requests inside one the mode opens).
        """
        if self.empty:
            return PASS
        found = self._forHost(host, port)
        if found is _NO_HOST_RULES and self.allow is None:
            return self._tunnel
        entries: list[dict[str, str]] = []
        for i, pattern in found.block:
            if pattern.path is None:
                return self._blocked(f"block[{i}]", entries)
        if self.allow is not None and not found.allow:
            return self._blocked("allow", entries)
        if found.remap is None:
            return self._tunnel
        entries.append(_remapEntry(host, found.remap))
        return Decision(remap=found.remap, bandwidth=self.bandwidth, entries=tuple(entries) + self._tunnel.entries)


def _change(where: str, side: str, remove: tuple[bytes, ...], set_: tuple[tuple[bytes, bytes], ...],
            setFields: dict[bytes, tuple[bytes, bytes]], drop: set[bytes], entries: list[dict[str, str]]) -> None:
    """
    Add one header rule's removes, then its sets, to one side's changes
    (a later rule's wins), with their entries.
    """
    for name in remove:
        lower = name.lower()
        drop.add(lower)
        setFields.pop(lower, None)
        entries.append({"rule": where, "action": f"{side}remove {name.decode('ascii')}"})
    for name, value in set_:
        lower = name.lower()
        drop.add(lower)
        setFields[lower] = (name, value)
        entries.append({"rule": where, "action": f"{side}set {name.decode('ascii')}"})


def _remapEntry(host: str, remap: tuple[str, int | None]) -> dict[str, str]:
    address, port = remap
    shown = f"[{address}]" if ":" in address else address
    return {"rule": f"remap[{normalHost(host)}]",
            "action": f"remapped to {shown}" + ("" if port is None else f":{port}")}


def _pathOf(url: str) -> str:
    """
    The path of an absolute URL (C{/} when it has none), without its query.
    """
    scheme = url.find("://")
    start = url.find("/", scheme + 3 if scheme >= 0 else 0)
    if start < 0:
        return "/"
    end = len(url)
    for mark in "?#":
        at = url.find(mark, start)
        if 0 <= at < end:
            end = at
    return url[start:end]


def compileRules(document: Any, readFile: ReadFile | None = None) -> Rules:
    """
    Check a whole rules document and compile it.

    @param readFile: how an answer rule's C{body_file} is read, once, now
        (L{None}: a document that names one is refused).

    @raise BadRules: with one line saying which key is wrong, where and why.
    """
    if not isinstance(document, dict):
        raise BadRules(f'rules: a rules document is an object such as {{"block": ["tracker.test"]}}, '
                       f"got {_got(document)}")
    unknown = sorted(set(document) - set(KEYS))
    if unknown:
        raise BadRules(f"rules: unknown key {_got(unknown[0])} (it takes {', '.join(KEYS)})")
    headers = _listOf(document.get("headers", []), "headers", "a list of header rules", "rules")
    return Rules(
        document,
        tuple(_headerRule(h, f"headers[{i}]") for i, h in enumerate(headers)),
        _patterns(document.get("block", []), "block"),
        _integer(document.get("block_status", DEFAULT_BLOCK_STATUS), "block_status",
                 MIN_BLOCK_STATUS, MAX_BLOCK_STATUS, "an HTTP status"),
        _patterns(document["allow"], "allow") if "allow" in document else None,
        _remap(document.get("remap", {})),
        _integer(document.get("latency_ms", 0), "latency_ms", 0, MAX_LATENCY_MS, "milliseconds"),
        _bandwidth(document.get("bandwidth", {})),
        tuple(_answerRule(a, i, readFile) for i, a in
              enumerate(_listOf(document.get("answer", []), "answer", "a list of answer rules", "rules"))),
    )


#: No rules.
NO_RULES = compileRules({})


def readRulesDocument(text: str, toml: bool) -> Any:
    """
    A rules file's text (TOML, or JSON) as a document, not yet checked.

    @raise BadRules: it is neither.
    """
    try:
        return tomllib.loads(text) if toml else json.loads(text)
    except (tomllib.TOMLDecodeError, ValueError) as e:
        raise BadRules(f"rules: not {'TOML' if toml else 'JSON'}: {str(e).splitlines()[0]}") from None


def isTomlName(path: str) -> bool:
    """
    Whether a rules file named C{path} is read as TOML (any name but one
    ending in C{.json}).
    """
    return not path.lower().endswith(".json")


def parseRulesText(text: str, toml: bool, readFile: ReadFile | None = None) -> Rules:
    """
    Read a rules file's text (TOML, or JSON) and compile it (C{readFile}:
    as L{compileRules}).

    @raise BadRules: it can't be read, or is wrong.
    """
    return compileRules(readRulesDocument(text, toml), readFile)
