"""
Redaction of HAR entries by a policy: headers, cookies, query parameters,
form fields and JSON paths to drop or to hash (C{docs/redaction.rst}).

Pure: a L{Policy} is read from TOML text (L{parsePolicy}) or named
(L{loadPolicy}: a built-in, else a file); a L{Redactor} applies one to an
entry as L{netlog.core.har.buildEntry} made it, in place. A hashed value
becomes C{hmac:} and the first L{HASH_HEX} hex digits of its HMAC-SHA256
under the redactor's key, made per export unless given, so that equal
values stay equal within one HAR (and across HARs exported with the same
key) and nothing else can be read from them.

After the places a policy names, each value that was hashed or dropped
(of L{SWEEP_MIN_LENGTH} characters or more) is looked for everywhere else
in the same entry, as it is and as URLs, forms and JSON write it, in text
and inside base64 bodies, and hashed there too: a token named in a header
does not survive in the C{Referer} or a body of the same entry.
"""

from __future__ import annotations

import base64
import binascii
import fnmatch
import hashlib
import hmac
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable
from urllib.parse import quote, quote_plus, unquote_plus

#: Hex digits of the HMAC a hashed value keeps (128 bits).
HASH_HEX = 32
#: What a hashed value starts with.
HASH_PREFIX = "hmac:"
#: Bytes of a key made per export.
KEY_BYTES = 32
#: The shortest value looked for outside the places a policy names: a
#: shorter one (C{1}, C{true}) would hash unrelated text.
SWEEP_MIN_LENGTH = 6
#: Sweeps a redactor keeps made (see L{Redactor.sweep}).
SWEEPS_KEPT = 256
#: The policy name that redacts nothing.
NO_POLICY = "none"

#: The sections a policy has, each with C{drop} and C{hash} lists.
SECTIONS = ("headers", "cookies", "query", "form", "json")
_ACTIONS = ("drop", "hash")

#: Headers whose value is a URL (or HTTP/2's path), whose query the C{query}
#: rules apply to.
_URL_HEADERS = frozenset({"referer", "location", "content-location", ":path"})
#: An authorization value's scheme, kept before the hashed credentials.
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9!#$%&'*+.^_`|~-]*) +(\S.*)$", re.S)

BUILTIN: dict[str, str] = {
    "secrets": """
# Hash credentials; keep cookies (graders read them).
[headers]
hash = ["authorization", "proxy-authorization", "*api-key*", "*api_key*", "*apikey*",
        "*token*", "*secret*", "x-auth*"]
[query]
hash = ["*token*", "*api_key*", "*api-key*", "*apikey*", "*secret*", "*password*",
        "*passwd*", "pwd", "auth", "sig", "signature"]
[form]
hash = ["*password*", "*passwd*", "pwd", "pass", "passphrase", "*secret*"]
[json]
hash = ["**.*password*", "**.*passwd*", "**.*secret*", "**.*token*", "**.*api_key*",
        "**.*apikey*"]
""",
}


class PolicyError(ValueError):
    """
    A policy that can't be used; its message is one line that says what to
    fix.
    """


@dataclass(frozen=True)
class Rules:
    """
    The names (case-insensitive globs: C{*token*}) of one section to drop
    and to hash; a name in both is dropped.
    """

    drop: tuple[str, ...] = ()
    hash: tuple[str, ...] = ()

    def action(self, name: str) -> str | None:
        """
        C{"drop"}, C{"hash"} or None for C{name}.
        """
        lowered = name.lower()
        drop, hashed = self._compiled
        if drop is not None and drop.match(lowered):
            return "drop"
        if hashed is not None and hashed.match(lowered):
            return "hash"
        return None

    @cached_property
    def _compiled(self) -> tuple[re.Pattern[str] | None, re.Pattern[str] | None]:
        return _globs(self.drop), _globs(self.hash)


@dataclass(frozen=True)
class Policy:
    """
    What to drop and hash, by section. C{json}'s names are paths: keys
    joined by C{.}, C{*} for any one key or array index, C{**} for any
    number of them (C{**.password}).
    """

    name: str
    headers: Rules = field(default_factory=Rules)
    cookies: Rules = field(default_factory=Rules)
    query: Rules = field(default_factory=Rules)
    form: Rules = field(default_factory=Rules)
    json: Rules = field(default_factory=Rules)


def parsePolicy(text: str, source: str = "policy") -> Policy:
    """
    A policy from its TOML: a table per section in L{SECTIONS}, each with
    C{drop} and C{hash} lists of names, and C{extends}, a built-in whose
    lists this one adds to.

    @raise PolicyError: it is not TOML, or not a policy.
    """
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise PolicyError(f"{source}: not TOML: {e}") from None
    base: Policy | None = None
    for key, value in document.items():
        if key == "extends":
            if not isinstance(value, str) or value not in BUILTIN:
                raise PolicyError(f"{source}: extends must name a built-in policy ({_builtins()}), got {value!r}")
            base = builtinPolicy(value)
        elif key not in SECTIONS:
            raise PolicyError(
                f"{source}: unknown key {key!r}: a policy has extends and the tables [{'], ['.join(SECTIONS)}]"
            )
        elif not isinstance(value, dict):
            raise PolicyError(f"{source}: {key} must be a table ([{key}]) with drop and hash lists")
    sections: dict[str, Rules] = {}
    for section in SECTIONS:
        table = document.get(section, {})
        lists: dict[str, tuple[str, ...]] = {}
        for action in _ACTIONS:
            names = table.get(action, [])
            if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
                raise PolicyError(f"{source}: [{section}] {action} must be a list of non-empty names, got {names!r}")
            if section == "json":
                for name in names:
                    _checkPath(name, source)
            inherited = getattr(getattr(base, section), action) if base is not None else ()
            lists[action] = inherited + tuple(n.strip().lower() for n in names)
        for key in table:
            if key not in _ACTIONS:
                raise PolicyError(f"{source}: [{section}] has unknown key {key!r}: write drop = [...] or hash = [...]")
        sections[section] = Rules(lists["drop"], lists["hash"])
    return Policy(source, **sections)


def _globs(patterns: Iterable[str]) -> re.Pattern[str] | None:
    """
    One expression that matches what any of the globs matches (None for
    no glob).
    """
    patterns = list(patterns)
    return re.compile("|".join(fnmatch.translate(p) for p in patterns)) if patterns else None


def _checkPath(path: str, source: str) -> None:
    if path.startswith("$") or any(not segment for segment in path.split(".")):
        raise PolicyError(
            f"{source}: [json] path {path!r} is not keys joined by '.' (write user.password or **.password)"
        )


def _builtins() -> str:
    return ", ".join(sorted(BUILTIN))


def builtinPolicy(name: str) -> Policy:
    """
    A built-in policy by name.

    @raise PolicyError: there is none of that name.
    """
    if name not in BUILTIN:
        raise PolicyError(f"no built-in policy {name!r} (there are: {_builtins()}, and {NO_POLICY})")
    return parsePolicy(BUILTIN[name], name)


def namedPolicy(given: str) -> Policy | None:
    """
    A policy where only a name will do (over the API, in the pytest
    plugin): a built-in's, or L{NO_POLICY} (None); never a file.

    @raise PolicyError: it names no built-in.
    """
    if given == NO_POLICY:
        return None
    if given not in BUILTIN:
        raise PolicyError(f"{given!r} is not a built-in policy ({_builtins()}, {NO_POLICY}); "
                          f"a policy file is for netlog har --redact FILE")
    return builtinPolicy(given)


def loadPolicy(given: str) -> Policy | None:
    """
    A policy named on a command line: a built-in's name, L{NO_POLICY} (None:
    no redaction), else the path of a TOML file.

    @raise PolicyError: no such built-in or readable file, or a bad policy.
    """
    if given == NO_POLICY:
        return None
    if given in BUILTIN:
        return builtinPolicy(given)
    if os.sep not in given and not given.endswith(".toml") and not os.path.exists(given):
        raise PolicyError(f"no built-in policy {given!r} and no such file (built-ins: {_builtins()}, {NO_POLICY})")
    try:
        with open(given, encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError:
        raise PolicyError(f"{given}: the policy is not UTF-8") from None
    except OSError as e:
        raise PolicyError(f"{given}: can't read the policy: {e.strerror}") from None
    return parsePolicy(text, given)


def makeKey(given: str | bytes | None = None) -> bytes:
    """
    The HMAC key: C{given} (text is used as its UTF-8 bytes), else
    L{KEY_BYTES} random bytes.
    """
    if given is None:
        return os.urandom(KEY_BYTES)
    if isinstance(given, str):
        given = given.encode("utf-8")
    if not given:
        raise PolicyError("the redaction key is empty: give some text, or none to have one made")
    return given


class Redactor:
    """
    A policy and a key, applied to entries one at a time (L{__call__}).
    """

    def __init__(self, policy: Policy, key: bytes | None = None) -> None:
        self.policy = policy
        self._key = key if key is not None else makeKey()
        self.paths = _PathMatcher(policy.json)
        self._sweeps: dict[frozenset[tuple[str, str]], Sweep] = {}

    def sweep(self, found: dict[str, str]) -> Sweep:
        """
        The sweep for what an entry's named places held (the same token
        entry after entry makes the same one, kept).
        """
        key = frozenset(found.items())
        sweep = self._sweeps.get(key)
        if sweep is None:
            if len(self._sweeps) >= SWEEPS_KEPT:
                self._sweeps.clear()
            sweep = self._sweeps[key] = Sweep(found)
        return sweep

    def hash(self, value: str) -> str:
        """
        C{value} hashed: C{hmac:} and hex digits, equal for equal values.
        """
        digest = hmac.new(self._key, value.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return HASH_PREFIX + digest[:HASH_HEX]

    def __call__(self, entry: dict[str, Any]) -> dict[str, Any]:
        """
        Redact one HAR entry in place; the entry.
        """
        _EntryRedaction(self, entry).run()
        return entry


class _EntryRedaction:
    """
    One entry's redaction: the places the policy names, then the sweep of
    what was found there through the rest of the entry.
    """

    def __init__(self, redactor: Redactor, entry: dict[str, Any]) -> None:
        self.hash = redactor.hash
        self.policy = redactor.policy
        self.paths = redactor.paths
        self.sweep = redactor.sweep
        self.entry = entry
        #: every value hashed or dropped, and what it becomes
        self.found: dict[str, str] = {}

    def secret(self, value: str) -> str:
        hashed = self.hash(value)
        if value and not value.startswith(HASH_PREFIX):
            self.found[value] = hashed
        return hashed

    def run(self) -> None:
        request = _dict(self.entry.get("request"))
        response = _dict(self.entry.get("response"))
        for message, isRequest in ((request, True), (response, False)):
            if message is None:
                continue
            self.headers(message, isRequest)
            self.cookies(message)
            self.bodies(message.get("postData" if isRequest else "content"))
        if request is not None:
            if isinstance(request.get("url"), str):
                request["url"] = self.url(request["url"])
            if isinstance(request.get("queryString"), list):
                request["queryString"] = self.pairs(request["queryString"], self.policy.query)
        if response is not None and isinstance(response.get("redirectURL"), str):
            response["redirectURL"] = self.url(response["redirectURL"])
        for message in _list(self.entry.get("_webSocketMessages")):
            if isinstance(message, dict) and isinstance(message.get("data"), str) and "_encoding" not in message \
                    and message.get("opcode", 1) == 1:
                message["data"] = self.jsonText(message["data"])
        if self.found:
            self.sweep(self.found).entry(self.entry)

    # -- headers and cookies ---------------------------------------------------

    def headers(self, message: dict[str, Any], isRequest: bool) -> None:
        headers = message.get("headers")
        if not isinstance(headers, list):
            return
        kept = []
        hashCookies = False
        for header in headers:
            if not isinstance(header, dict) or not isinstance(header.get("name"), str) \
                    or not isinstance(header.get("value"), str):
                kept.append(header)
                continue
            name = header["name"].lower()
            action = self.policy.headers.action(name)
            if action == "drop":
                if name in ("cookie", "set-cookie"):
                    message["cookies"] = []
                continue
            if action == "hash":
                header = dict(header, value=self.headerValue(name, header["value"]))
                hashCookies = hashCookies or name in ("cookie", "set-cookie")
            elif name == "cookie" and isRequest:
                value = self.cookieHeader(header["value"])
                if value is None:
                    continue
                header = dict(header, value=value)
            elif name == "set-cookie" and not isRequest:
                value = self.setCookie(header["value"])
                if value is None:
                    continue
                header = dict(header, value=value)
            elif name in _URL_HEADERS:
                header = dict(header, value=self.url(header["value"]))
            kept.append(header)
        message["headers"] = kept
        if hashCookies:
            for cookie in _list(message.get("cookies")):
                if isinstance(cookie, dict) and isinstance(cookie.get("value"), str):
                    cookie["value"] = self.secret(cookie["value"])

    def headerValue(self, name: str, value: str) -> str:
        """
        A header's value hashed; an authorization's scheme is kept, and a
        cookie's names.
        """
        if name in ("authorization", "proxy-authorization"):
            scheme = _SCHEME.match(value)
            if scheme:
                return f"{scheme.group(1)} {self.secret(scheme.group(2))}"
        return self.secret(value)

    def cookieHeader(self, value: str) -> str | None:
        pieces = []
        changed = False
        for piece in value.split(";"):
            name, eq, cookie = piece.strip().partition("=")
            action = self.policy.cookies.action(name.strip()) if piece.strip() else None
            if action == "drop":
                self.secret(cookie.strip())
                changed = True
                continue
            if action == "hash":
                piece = f"{name.strip()}={self.secret(cookie.strip())}"
                changed = True
            pieces.append(piece.strip())
        if not changed:
            return value
        return "; ".join(pieces) if pieces else None

    def setCookie(self, value: str) -> str | None:
        pair, semicolon, attributes = value.partition(";")
        name, _, cookie = pair.partition("=")
        action = self.policy.cookies.action(name.strip())
        if action == "drop":
            self.secret(cookie.strip())
            return None
        if action == "hash":
            return f"{name.strip()}={self.secret(cookie.strip())}{semicolon}{attributes}"
        return value

    def cookies(self, message: dict[str, Any]) -> None:
        cookies = message.get("cookies")
        if isinstance(cookies, list):
            message["cookies"] = self.pairs(cookies, self.policy.cookies)

    def pairs(self, pairs: list[Any], rules: Rules) -> list[Any]:
        """
        A HAR list of C{{name, value}} objects with the rules applied.
        """
        kept = []
        for pair in pairs:
            if isinstance(pair, dict) and isinstance(pair.get("name"), str) and isinstance(pair.get("value"), str):
                action = rules.action(pair["name"])
                if action == "drop":
                    self.secret(pair["value"])
                    continue
                if action == "hash" and not pair["value"].startswith(HASH_PREFIX):
                    # (one its header's rule hashed already stays as it is)
                    pair = dict(pair, value=self.secret(pair["value"]))
            kept.append(pair)
        return kept

    # -- URLs and forms --------------------------------------------------------

    def url(self, url: str) -> str:
        base, question, rest = url.partition("?")
        if not question:
            return url
        query, hashMark, fragment = rest.partition("#")
        return base + question + self.encodedPairs(query, self.policy.query) + hashMark + fragment

    def encodedPairs(self, text: str, rules: Rules) -> str:
        """
        C{name=value&...} with the rules applied, the other pairs kept as
        they were written.
        """
        pieces = []
        changed = False
        for piece in text.split("&"):
            rawName, eq, rawValue = piece.partition("=")
            action = rules.action(unquote_plus(rawName)) if piece else None
            if action is not None:
                changed = True
                hashed = self.secret(unquote_plus(rawValue))
                if action == "drop":
                    continue
                piece = f"{rawName}={hashed}"
            pieces.append(piece)
        return "&".join(pieces) if changed else text

    # -- bodies ----------------------------------------------------------------

    def bodies(self, body: object) -> None:
        """
        A C{postData} or C{content}: its form fields and JSON paths.
        """
        if not isinstance(body, dict) or not isinstance(body.get("text"), str) or "_undecoded" in body \
                or body.get("encoding") == "base64":
            return
        mediaType = str(body.get("mimeType", "")).split(";")[0].strip().lower()
        if mediaType == "application/x-www-form-urlencoded":
            body["text"] = self.encodedPairs(body["text"], self.policy.form)
        elif mediaType == "application/json" or mediaType.endswith("+json"):
            body["text"] = self.jsonText(body["text"])
        if isinstance(body.get("params"), list):
            body["params"] = self.pairs(body["params"], self.policy.form)

    def jsonText(self, text: str) -> str:
        """
        JSON text with the C{json} rules applied (written again, compact,
        only when they changed something); text that isn't JSON as it was.
        """
        if not self.paths.mayMatch(text):
            return text
        try:
            document = json.loads(text)
        except ValueError:
            return text
        redacted, changed = self.jsonValue(document, self.paths.start)
        if not changed:
            return text
        return json.dumps(redacted, ensure_ascii=False, separators=(",", ":"))

    def jsonValue(self, value: Any, states: frozenset[tuple[int, int]]) -> tuple[Any, bool]:
        """
        A JSON value with the paths applied below it; C{states}: where each
        path's pattern stands at it (L{_PathMatcher}).
        """
        if isinstance(value, dict):
            items: Iterable[tuple[Any, Any]] = value.items()
        elif isinstance(value, list):
            items = enumerate(value)
        else:
            return value, False
        changed = False
        kept: list[tuple[Any, Any]] = []
        for key, item in items:
            itemStates, action = self.paths.step(states, str(key))
            if not itemStates:
                kept.append((key, item))
                continue
            if action is not None:
                changed = True
                hashed = self.hashedJson(item)
                if action == "drop":
                    continue
                item = hashed
            else:
                item, itemChanged = self.jsonValue(item, itemStates)
                changed = changed or itemChanged
            kept.append((key, item))
        if isinstance(value, dict):
            return dict(kept), changed
        return [item for _, item in kept], changed

    def hashedJson(self, value: Any) -> Any:
        """
        A JSON value under a hashed path: strings and numbers hashed (a
        number as its JSON text), each inside an object or array alike.
        """
        if isinstance(value, str):
            return self.secret(value)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, (int, float)):
            return self.secret(json.dumps(value))
        if isinstance(value, dict):
            return {k: self.hashedJson(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.hashedJson(v) for v in value]
        return value


def _needles(paths: Iterable[str]) -> list[str] | None:
    """
    For each path, the longest run of plain characters in its last key's
    glob, which a key it matches holds, and so the text of a document it
    matches in (None when some path's last key could be an array index, or
    has a character class: nothing then has to be written).
    """
    needles = []
    for path in paths:
        last = path.rsplit(".", 1)[-1]
        if "[" in last:
            return None
        run = max(re.split(r"[*?]", last), key=len)
        if not run or run.isdigit():
            return None
        needles.append(run.lower())
    return needles


#: Steps a L{_PathMatcher} remembers before it begins again.
PATH_STEPS_KEPT = 4096


class _PathMatcher:
    """
    The C{json} rules' paths matched as a JSON document is walked, a key at
    a time: a state is C{(path, segment)}, where a path's pattern stands; a
    key moves each state on (C{**} may also stay, or match nothing). A key
    with no state left has nothing below it to look at. Steps are
    remembered: documents repeat their shapes.
    """

    def __init__(self, rules: Rules) -> None:
        #: each path's segments (a compiled glob, None for C{**}) and action
        self._paths: list[tuple[list[re.Pattern[str] | None], str]] = [
            ([None if s == "**" else re.compile(fnmatch.translate(s)) for s in p.split(".")], action)
            for action, paths in (("drop", rules.drop), ("hash", rules.hash)) for p in paths
        ]
        self.start = self._closure((i, 0) for i in range(len(self._paths)))
        self._needles = _needles(p for ps in (rules.drop, rules.hash) for p in ps)
        self._steps: dict[tuple[frozenset[tuple[int, int]], str], tuple[frozenset[tuple[int, int]], str | None]] = {}

    def mayMatch(self, text: str) -> bool:
        """
        Whether JSON text may hold a key a path ends on: without one of the
        paths' last keys written in it (plainly: a key escaped as
        C{\\u...} makes it yes), no path can match.
        """
        if not self._paths:
            return False
        if self._needles is None or "\\u" in text:
            return True
        lowered = text.lower()
        return any(needle in lowered for needle in self._needles)

    def _closure(self, states: Iterable[tuple[int, int]]) -> frozenset[tuple[int, int]]:
        found = set()
        for path, at in states:
            segments = self._paths[path][0]
            found.add((path, at))
            while at < len(segments) and segments[at] is None:
                at += 1
                found.add((path, at))
        return frozenset(found)

    def step(self, states: frozenset[tuple[int, int]], key: str) -> tuple[frozenset[tuple[int, int]], str | None]:
        """
        The states after C{key}, and the action a path that ends there asks
        (C{drop} before C{hash}).
        """
        remembered = self._steps.get((states, key))
        if remembered is not None:
            return remembered
        lowered = key.lower()
        moved = []
        for path, at in states:
            segments = self._paths[path][0]
            if at == len(segments):
                continue
            glob = segments[at]
            if glob is None:
                moved.append((path, at))
            elif glob.match(lowered):
                moved.append((path, at + 1))
        after = self._closure(moved)
        ended = {self._paths[path][1] for path, at in after if at == len(self._paths[path][0])}
        action = "drop" if "drop" in ended else "hash" if ended else None
        if len(self._steps) >= PATH_STEPS_KEPT:
            self._steps.clear()
        self._steps[(states, key)] = (after, action)
        return after, action


def _base64Fields(body: dict[str, Any]) -> list[str]:
    """
    The fields of a body that hold base64, by the body's own marks.
    """
    fields = ["_base64"] if isinstance(body.get("_base64"), str) else []
    if isinstance(body.get("text"), str) and ("_undecoded" in body or body.get("encoding") == "base64"):
        fields.append("text")
    return fields


class Sweep:
    """
    Replace found values everywhere in an entry: in every string, as
    written plainly, in URLs and forms, and in JSON; and in the bytes of its
    base64 bodies.
    """

    def __init__(self, found: dict[str, str]) -> None:
        forms: dict[str, str] = {}
        for value, hashed in found.items():
            if len(value) < SWEEP_MIN_LENGTH:
                continue
            for form in (value, quote(value, safe=""), quote(value), quote_plus(value),
                         json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]):
                forms.setdefault(form, hashed)
        # longest first, so that a value inside another is not cut out of it first
        self._forms = sorted(forms.items(), key=lambda item: -len(item[0]))
        self._bytes = [(form.encode("utf-8", "surrogatepass"), hashed.encode("ascii")) for form, hashed in self._forms]

    def text(self, text: str) -> str:
        for form, hashed in self._forms:
            if form in text:
                text = text.replace(form, hashed)
        return text

    def data(self, encoded: str) -> str:
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            return self.text(encoded)
        swept = raw
        for form, hashed in self._bytes:
            if form in swept:
                swept = swept.replace(form, hashed)
        return encoded if swept == raw else base64.b64encode(swept).decode("ascii")

    def entry(self, entry: dict[str, Any]) -> None:
        request = _dict(entry.get("request"))
        response = _dict(entry.get("response"))
        for body in (request.get("postData") if request else None, response.get("content") if response else None):
            if isinstance(body, dict):
                for name in _base64Fields(body):
                    body[name] = self.data(body[name])
        for message in _list(entry.get("_webSocketMessages")):
            if isinstance(message, dict) and isinstance(message.get("data"), str) and (
                    message.get("_encoding") == "base64" or message.get("opcode") == 2):
                message["data"] = self.data(message["data"])
        self.walk(entry, _skipBase64)

    def walk(self, value: Any, skip: Callable[[dict[str, Any], str], bool]) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            for key, item in value.items():
                if not skip(value, key):
                    value[key] = self.walk(item, skip)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                value[i] = self.walk(item, skip)
        return value


def _skipBase64(container: dict[str, Any], key: str) -> bool:
    """
    Whether C{container[key]} is base64 the sweep went through as bytes.
    """
    if key in ("_base64", "text") and key in _base64Fields(container):
        return True
    return key == "data" and (container.get("_encoding") == "base64" or container.get("opcode") == 2)


def _dict(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def redactorFor(given: str | None, key: str | bytes | None = None) -> Redactor | None:
    """
    The redactor a command line's C{--redact POLICY} and C{--redact-key}
    ask for; None for none (no option, or L{NO_POLICY}).

    @raise PolicyError: see L{loadPolicy}.
    """
    if given is None:
        if key is not None:
            raise PolicyError("a key is only for a redaction: give --redact POLICY too")
        return None
    policy = loadPolicy(given)
    return Redactor(policy, makeKey(key)) if policy is not None else None
