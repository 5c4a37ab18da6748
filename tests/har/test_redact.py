"""
Redaction by policy (L{netlog.har.redact}), in memory: policies read and
refused, and HAR entries built from log lines by the exporter, redacted.
"""

from __future__ import annotations

import base64
import copy
import fnmatch
import gzip
import io
import json
import os
import tempfile
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, urlencode

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.har import entriesFromLines
from netlog.har.export import writeHar
from netlog.har.redact import (
    HASH_HEX,
    HASH_PREFIX,
    SWEEP_MIN_LENGTH,
    Policy,
    PolicyError,
    Redactor,
    Rules,
    _EntryRedaction,
    _PathMatcher,
    builtinPolicy,
    loadPolicy,
    makeKey,
    namedPolicy,
    parsePolicy,
    redactorFor,
)
from tests.har.support import T0, Log

KEY = b"k" * 32
TOKEN = "eyJhbGciOiJIUzI1NiJ9.c2VjcmV0LXRva2Vu.sig-4f2a9"
PASSWORD = "correct horse battery staple"
SESSION = "sess-9d8c7b6a5f"
#: A token as base64 writes them, which URLs and forms write otherwise.
SLASHED = "ab/cd+ef=="


def entries(log: Log) -> list[dict[str, Any]]:
    built, _ = entriesFromLines(log.lines)
    return built


def redacted(log: Log, policy: Policy | str = "secrets", key: bytes = KEY) -> list[dict[str, Any]]:
    redactor = Redactor(builtinPolicy(policy) if isinstance(policy, str) else policy, key)
    return [redactor(e) for e in entries(log)]


def header(message: dict[str, Any], name: str) -> list[str]:
    return [h["value"] for h in message["headers"] if h["name"].lower() == name]


def hashed(value: str, key: bytes = KEY) -> str:
    return Redactor(Policy("p"), key).hash(value)


def exchange(log: Log, method: str = "GET", url: str = "https://shop.test/", headers: list[tuple[str, str]] = (),
             requestBody: bytes | None = None, responseHeaders: list[tuple[str, str]] = (),
             body: bytes = b"", **extra: Any) -> None:
    n = log.open(method, url, [("Host", "shop.test"), *headers])
    log.end(n, headers=list(responseHeaders), body=body, requestBody=requestBody, **extra)


class PolicyTests(SynchronousTestCase):
    """
    Policies are read from TOML; a mistake is refused in one line that
    names what to fix.
    """

    def test_secrets(self) -> None:
        """
        The built-in C{secrets} hashes credentials in headers, queries,
        forms and JSON, and names no cookie.
        """
        policy = builtinPolicy("secrets")
        self.assertEqual(policy.headers.action("Authorization"), "hash")
        self.assertEqual(policy.headers.action("Proxy-Authorization"), "hash")
        self.assertEqual(policy.headers.action("X-API-Key"), "hash")
        self.assertEqual(policy.headers.action("X-CSRF-Token"), "hash")
        for kept in ("cookie", "set-cookie", "referer", "accept", "sec-fetch-dest", "content-type"):
            self.assertIsNone(policy.headers.action(kept), kept)
        self.assertEqual(policy.query.action("access_token"), "hash")
        self.assertIsNone(policy.query.action("q"))
        self.assertEqual(policy.form.action("password"), "hash")
        self.assertEqual(policy.form.action("new_password"), "hash")
        self.assertIsNone(policy.form.action("username"))
        self.assertEqual(policy.cookies.drop + policy.cookies.hash, ())

    def test_extends(self) -> None:
        """
        A policy that extends a built-in adds its names to the built-in's;
        a name both dropped and hashed is dropped.
        """
        policy = parsePolicy('extends = "secrets"\n[cookies]\nhash = ["Session"]\n'
                             '[headers]\ndrop = ["authorization"]\n', "mine.toml")
        self.assertEqual(policy.cookies.action("session"), "hash")
        self.assertEqual(policy.headers.action("authorization"), "drop")
        self.assertEqual(policy.headers.action("x-api-key"), "hash")
        self.assertEqual(policy.name, "mine.toml")

    def assertRefused(self, text: str, *says: str) -> None:
        with self.assertRaises(PolicyError) as caught:
            parsePolicy(text, "p.toml")
        message = str(caught.exception)
        self.assertNotIn("\n", message)
        self.assertTrue(message.startswith("p.toml: "), message)
        for part in says:
            self.assertIn(part, message)

    def test_mistakes(self) -> None:
        """
        Each mistake is refused in one line that says where and what.
        """
        self.assertRefused("[headers\nhash = []", "not TOML", "line 1")
        self.assertRefused("[header]\nhash = ['a']", "unknown key 'header'", "[headers]")
        self.assertRefused("headers = ['a']", "headers must be a table")
        self.assertRefused("[form]\nhash = 'password'", "[form] hash must be a list", "'password'")
        self.assertRefused("[form]\nhash = ['']", "[form] hash must be a list of non-empty names")
        self.assertRefused("[form]\nhash = [1]", "[form] hash")
        self.assertRefused("[query]\nhashed = ['a']", "[query] has unknown key 'hashed'", "hash = [...]")
        self.assertRefused("[json]\nhash = ['$.a.b']", "[json] path '$.a.b'", "**.password")
        self.assertRefused("[json]\ndrop = ['a..b']", "[json] path 'a..b'")
        self.assertRefused('extends = "secret"', "extends must name a built-in policy (secrets)")

    def test_load(self) -> None:
        """
        C{loadPolicy} takes a built-in's name, C{none} (no redaction), or a
        file; a wrong name or an unreadable file is one line.
        """
        self.assertEqual(loadPolicy("secrets"), builtinPolicy("secrets"))
        self.assertIsNone(loadPolicy("none"))
        self.assertIsNone(redactorFor(None))
        self.assertIsNone(redactorFor("none"))
        self.assertRaises(PolicyError, redactorFor, None, "key")
        with self.assertRaises(PolicyError) as caught:
            loadPolicy("secret")
        self.assertIn("no built-in policy 'secret' and no such file (built-ins: secrets, none)", str(caught.exception))
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.toml")
            with self.assertRaises(PolicyError) as caught:
                loadPolicy(path)
            self.assertEqual(str(caught.exception), f"{path}: can't read the policy: No such file or directory")
            with open(path, "wb") as f:
                f.write(b"[cookies]\ndrop = ['sid']\n")
            self.assertEqual(loadPolicy(path).cookies.drop, ("sid",))  # type: ignore[union-attr]
            with open(path, "wb") as f:
                f.write(b"[cookies]\ndrop = ['\xff']\n")
            with self.assertRaises(PolicyError) as caught:
                loadPolicy(path)
            self.assertEqual(str(caught.exception), f"{path}: the policy is not UTF-8")

    def test_named(self) -> None:
        """
        Where only a name will do (the API, the pytest plugin), a file's path
        is refused in one line that says where a file goes.
        """
        self.assertEqual(namedPolicy("secrets"), builtinPolicy("secrets"))
        self.assertIsNone(namedPolicy("none"))
        with self.assertRaises(PolicyError) as caught:
            namedPolicy("./mine.toml")
        self.assertEqual(str(caught.exception), "'./mine.toml' is not a built-in policy (secrets, none); "
                                                "a policy file is for netlog har --redact FILE")

    def test_query(self) -> None:
        """
        The HAR routes take C{redact} and C{redact_key} out of their query
        and leave the rest; a repeated one, a key with no policy or an empty
        key is a bad parameter that says so.
        """
        from netlog.api.redaction import takeRedaction
        from netlog.api.params import BadParameter

        self.assertEqual(takeRedaction(b"upto=5"), (b"upto=5", None))
        rest, redactor = takeRedaction(b"upto=5&redact=secrets&redact_key=abc&from=2")
        self.assertEqual(rest, b"upto=5&from=2")
        assert redactor is not None
        self.assertEqual(redactor.hash(TOKEN), hashed(TOKEN, b"abc"))
        self.assertEqual(takeRedaction(b"redact=none"), (b"", None))
        for query, name, reason in (
                (b"redact=secrets&redact=none", "redact", "given more than once"),
                (b"redact_key=abc", "redact_key", "give redact=POLICY too"),
                (b"redact=secrets&redact_key=", "redact_key", "the redaction key is empty"),
                (b"redact=bogus", "redact", "'bogus' is not a built-in policy")):
            with self.assertRaises(BadParameter) as caught:
                takeRedaction(query)
            self.assertEqual(caught.exception.name, name)
            self.assertIn(reason, caught.exception.reason)

    def test_keys(self) -> None:
        """
        A key is made per export unless given; equal values hash equal
        under one key, differently under another; an empty key is refused.
        """
        self.assertEqual(len(makeKey()), 32)
        self.assertNotEqual(makeKey(), makeKey())
        self.assertEqual(makeKey("abc"), b"abc")
        self.assertRaises(PolicyError, makeKey, "")
        one = hashed(TOKEN)
        self.assertEqual(one, hashed(TOKEN))
        self.assertNotEqual(one, hashed(TOKEN, b"other"))
        self.assertNotEqual(one, hashed(TOKEN + "x"))
        self.assertTrue(one.startswith(HASH_PREFIX))
        self.assertEqual(len(one), len(HASH_PREFIX) + HASH_HEX)


class SecretsTests(SynchronousTestCase):
    """
    The built-in C{secrets} on entries as the exporter builds them.
    """

    def test_authorization(self) -> None:
        """
        An authorization's scheme is kept and its credentials hashed; the
        same token in two entries (and a query) hashes to the same value.
        """
        log = Log()
        exchange(log, headers=[("Authorization", f"Bearer {TOKEN}"), ("Accept", "text/html")])
        exchange(log, url=f"https://shop.test/api?access_token={TOKEN}&q=a+b",
                 headers=[("authorization", f"Bearer {TOKEN}")])
        exchange(log, headers=[("Proxy-Authorization", "Basic dXNlcjpodW50ZXIy"), ("X-Api-Key", "k-123")])
        first, second, third = redacted(log)
        self.assertEqual(header(first["request"], "authorization"), [f"Bearer {hashed(TOKEN)}"])
        self.assertEqual(header(first["request"], "accept"), ["text/html"])
        self.assertEqual(header(second["request"], "authorization"), [f"Bearer {hashed(TOKEN)}"])
        self.assertEqual(second["request"]["url"], f"https://shop.test/api?access_token={hashed(TOKEN)}&q=a+b")
        self.assertEqual(second["request"]["queryString"],
                         [{"name": "access_token", "value": hashed(TOKEN)}, {"name": "q", "value": "a b"}])
        self.assertEqual(header(third["request"], "proxy-authorization"), [f"Basic {hashed('dXNlcjpodW50ZXIy')}"])
        self.assertEqual(header(third["request"], "x-api-key"), [hashed("k-123")])
        self.assertNotIn(TOKEN, json.dumps([first, second, third]))

    def test_cookiesKept(self) -> None:
        """
        C{secrets} keeps cookies both ways, as graders read them.
        """
        log = Log()
        exchange(log, headers=[("Cookie", f"session={SESSION}; theme=dark")],
                 responseHeaders=[("Set-Cookie", f"session={SESSION}; Path=/; HttpOnly")])
        (before,) = entries(log)
        (after,) = redacted(log)
        self.assertEqual(after, before)
        self.assertEqual(after["request"]["cookies"][0], {"name": "session", "value": SESSION})

    def test_form(self) -> None:
        """
        A form's password is hashed in its text and params; the other fields
        keep their text as it was written.
        """
        log = Log()
        body = b"username=alice%40shop.test&password=" + PASSWORD.replace(" ", "+").encode() + b"&remember=on"
        exchange(log, "POST", "https://shop.test/login",
                 [("Content-Type", "application/x-www-form-urlencoded")], requestBody=body)
        (entry,) = redacted(log)
        post = entry["request"]["postData"]
        self.assertEqual(post["text"], f"username=alice%40shop.test&password={hashed(PASSWORD)}&remember=on")
        self.assertEqual(post["params"], [{"name": "username", "value": "alice@shop.test"},
                                          {"name": "password", "value": hashed(PASSWORD)},
                                          {"name": "remember", "value": "on"}])
        self.assertEqual(dict(parse_qsl(post["text"]))["password"], hashed(PASSWORD))

    def test_formBase64(self) -> None:
        """
        A form whose bytes aren't all text keeps them as C{_base64}: the
        password is hashed inside those bytes too.
        """
        log = Log()
        body = b"note=\xff\xfe&password=" + PASSWORD.replace(" ", "+").encode()
        exchange(log, "POST", "https://shop.test/login",
                 [("Content-Type", "application/x-www-form-urlencoded")], requestBody=body)
        (before,) = entries(log)
        self.assertIn("_base64", before["request"]["postData"])
        (entry,) = redacted(log)
        raw = base64.b64decode(entry["request"]["postData"]["_base64"])
        self.assertNotIn(PASSWORD.replace(" ", "+").encode(), raw)
        self.assertEqual(raw, b"note=\xff\xfe&password=" + hashed(PASSWORD).encode())

    def test_json(self) -> None:
        """
        JSON bodies: passwords and tokens at any depth are hashed (numbers
        as their JSON text), other values kept.
        """
        log = Log()
        sent = {"user": {"name": "alice", "password": PASSWORD}, "items": [{"sku": "A1", "qty": 2}]}
        answer = {"ok": True, "auth": {"access_token": TOKEN, "expires_in": 3600}, "pin_token": 1234}
        exchange(log, "POST", "https://shop.test/api/login", [("Content-Type", "application/json")],
                 requestBody=json.dumps(sent).encode(),
                 responseHeaders=[("Content-Type", "application/json; charset=utf-8")],
                 body=json.dumps(answer).encode())
        (entry,) = redacted(log)
        self.assertEqual(json.loads(entry["request"]["postData"]["text"]),
                         {"user": {"name": "alice", "password": hashed(PASSWORD)},
                          "items": [{"sku": "A1", "qty": 2}]})
        self.assertEqual(json.loads(entry["response"]["content"]["text"]),
                         {"ok": True, "auth": {"access_token": hashed(TOKEN), "expires_in": 3600},
                          "pin_token": hashed("1234")})

    def test_jsonUntouched(self) -> None:
        """
        JSON with nothing to redact keeps its text as it came (spacing and
        all), as does text that isn't JSON though its type says so.
        """
        log = Log()
        text = b'{ "user" : "alice",\n  "qty": 2 }'
        exchange(log, "POST", "https://shop.test/a", [("Content-Type", "application/json")], requestBody=text)
        exchange(log, "POST", "https://shop.test/b", [("Content-Type", "application/json")],
                 requestBody=b"password=not json")
        first, second = redacted(log)
        self.assertEqual(first["request"]["postData"]["text"], text.decode())
        self.assertEqual(second["request"]["postData"]["text"], "password=not json")

    def test_sweep(self) -> None:
        """
        A value found in a named place is hashed wherever else it shows in
        the entry: a Referer's query, an HTML body, a JSON-escaped or
        percent-encoded copy; a value shorter than the sweep's least is not.
        """
        log = Log()
        page = f"<p>Welcome, your token is {TOKEN} and again {quote(SLASHED, safe='')}</p>"
        exchange(log, url="https://shop.test/next?token=" + TOKEN,
                 headers=[("Referer", f"https://shop.test/prev?token={TOKEN}&x=1"), ("X-Auth", SLASHED)],
                 responseHeaders=[("Content-Type", "text/html"), ("Location", f"/done?token={TOKEN}")],
                 body=page.encode(), status=302)
        exchange(log, url="https://shop.test/?token=abc", responseHeaders=[("Content-Type", "text/plain")],
                 body=b"abc is short")
        first, second = redacted(log)
        dumped = json.dumps(first)
        self.assertNotIn(TOKEN, dumped)
        self.assertNotIn(quote(SLASHED, safe=""), dumped)
        self.assertEqual(header(first["request"], "referer"), [f"https://shop.test/prev?token={hashed(TOKEN)}&x=1"])
        self.assertEqual(header(first["response"], "location"), [f"/done?token={hashed(TOKEN)}"])
        self.assertEqual(first["response"]["content"]["text"],
                         f"<p>Welcome, your token is {hashed(TOKEN)} and again {hashed(SLASHED)}</p>")
        self.assertLess(len("abc"), SWEEP_MIN_LENGTH)
        self.assertEqual(second["response"]["content"]["text"], "abc is short")

    def test_sweepTakesNames(self) -> None:
        """
        A value hashed in a named place leaves no copy, even where it is a
        parameter's name: C{agreed=agreed} reads back with both hashed, and
        another parameter named as it is loses its name too.
        """
        log = Log()
        exchange(log, url="https://shop.test/p?agreed=agreed&x=1&agreed_too=2")
        (entry,) = redacted(log, parsePolicy('[query]\nhash = ["agreed"]\n'))
        h = hashed("agreed")
        self.assertEqual(entry["request"]["url"], f"https://shop.test/p?{h}={h}&x=1&{h}_too=2")
        self.assertNotIn("agreed", json.dumps(entry))

    def test_fieldNamesKept(self) -> None:
        """
        A secret that is also one of the HAR's own field names (a form's
        value C{params}) is hashed where it was sent; the HAR's fields keep
        their names, so the entry keeps its shape.
        """
        log = Log()
        exchange(log, "POST", headers=[("Content-Type", "application/x-www-form-urlencoded")],
                 requestBody=b"password=params&note=no+params+here")
        (before,) = entries(log)
        (entry,) = redacted(log)
        self.assertEqual(_fieldNames(entry), _fieldNames(before))
        h = hashed("params")
        self.assertEqual(entry["request"]["postData"]["params"],
                         [{"name": "password", "value": h}, {"name": "note", "value": f"no {h} here"}])

    def test_undecoded(self) -> None:
        """
        A body whose coding can't be undone stays base64; a found value is
        hashed inside its bytes.
        """
        log = Log()
        broken = gzip.compress(b"x")[:10] + f"Bearer {TOKEN}".encode()
        exchange(log, headers=[("Authorization", f"Bearer {TOKEN}")],
                 responseHeaders=[("Content-Type", "text/plain"), ("Content-Encoding", "gzip")], body=broken)
        (entry,) = redacted(log)
        content = entry["response"]["content"]
        self.assertIn("_undecoded", content)
        raw = base64.b64decode(content["text"])
        self.assertNotIn(TOKEN.encode(), raw)
        self.assertIn(hashed(TOKEN).encode(), raw)

    def test_webSocket(self) -> None:
        """
        WebSocket messages: JSON text by the json rules, binary ones swept.
        """
        log = Log()
        n = log.open("GET", "wss://shop.test/ws", [("Host", "shop.test"), ("Authorization", f"Bearer {TOKEN}")])
        for data, opcode in ((json.dumps({"type": "auth", "token": TOKEN}), 1),
                             (base64.b64encode(b"\x00" + TOKEN.encode()).decode(), 2)):
            log.raw(json.dumps({"n": log.next, "type": "message", "id": n, "v": 1, "time": T0 + 0.5,
                                "direction": "up", "opcode": opcode, "data": data, "size": 10,
                                "encoding": "base64" if opcode == 2 else "text"}).encode() + b"\n")
        log.end(n, status=101, _websocket={"messages_up": 2, "messages_down": 0, "bytes_up": 20, "bytes_down": 0})
        (entry,) = redacted(log)
        text, binary = entry["_webSocketMessages"]
        self.assertEqual(json.loads(text["data"]), {"type": "auth", "token": hashed(TOKEN)})
        self.assertEqual(base64.b64decode(binary["data"]), b"\x00" + hashed(TOKEN).encode())


class CookiePolicyTests(SynchronousTestCase):
    """
    Cookies named by a policy, both ways.
    """

    def setUp(self) -> None:
        self.log = Log()
        exchange(self.log, headers=[("Cookie", f"theme=dark; session={SESSION}")],
                 responseHeaders=[("Set-Cookie", f"session={SESSION}; Path=/; HttpOnly"),
                                  ("Set-Cookie", "theme=light")])
        exchange(self.log, headers=[("Cookie", f"session={SESSION}")])

    def test_hash(self) -> None:
        """
        A hashed cookie keeps its name and attributes; its value hashes the
        same in both directions and both entries.
        """
        policy = parsePolicy('extends = "secrets"\n[cookies]\nhash = ["session"]\n')
        first, second = redacted(self.log, policy)
        h = hashed(SESSION)
        self.assertEqual(header(first["request"], "cookie"), [f"theme=dark; session={h}"])
        self.assertEqual(first["request"]["cookies"], [{"name": "theme", "value": "dark"},
                                                       {"name": "session", "value": h}])
        self.assertEqual(header(first["response"], "set-cookie"), [f"session={h}; Path=/; HttpOnly", "theme=light"])
        self.assertEqual(first["response"]["cookies"][0]["value"], h)
        self.assertEqual(first["response"]["cookies"][0]["path"], "/")
        self.assertEqual(second["request"]["cookies"], [{"name": "session", "value": h}])

    def test_drop(self) -> None:
        """
        A dropped cookie is gone from headers and lists (a C{Cookie} header
        left empty goes too), and its value from the whole entry.
        """
        policy = parsePolicy('[cookies]\ndrop = ["SESSION"]\n')
        first, second = redacted(self.log, policy)
        self.assertEqual(header(first["request"], "cookie"), ["theme=dark"])
        self.assertEqual(header(first["response"], "set-cookie"), ["theme=light"])
        self.assertEqual([c["name"] for c in first["response"]["cookies"]], ["theme"])
        self.assertEqual(header(second["request"], "cookie"), [])
        self.assertEqual(second["request"]["cookies"], [])
        self.assertNotIn(SESSION, json.dumps([first, second]))

    def test_headers(self) -> None:
        """
        A policy that drops the C{Cookie} and hashes the C{Set-Cookie}
        header does so to the cookie lists too.
        """
        policy = parsePolicy('[headers]\ndrop = ["cookie"]\nhash = ["set-cookie"]\n')
        first, _ = redacted(self.log, policy)
        self.assertEqual(header(first["request"], "cookie"), [])
        self.assertEqual(first["request"]["cookies"], [])
        self.assertEqual(header(first["response"], "set-cookie"),
                         [hashed(f"session={SESSION}; Path=/; HttpOnly"), hashed("theme=light")])
        self.assertEqual([c["value"] for c in first["response"]["cookies"]], [hashed(SESSION), hashed("light")])


class PolicyShapeTests(SynchronousTestCase):
    """
    Drop and hash in every section, and JSON paths.
    """

    def test_queryDrop(self) -> None:
        """
        A dropped query parameter leaves the URL, C{queryString} and C{:path}; the
        rest of the URL, fragment included, is as it was.
        """
        policy = parsePolicy('[query]\ndrop = ["sig"]\n')
        log = Log()
        exchange(log, url="https://shop.test/p?a=1&sig=s3cr3t-value&b=%2F#frag", headers=[(":path", "/p?sig=x&a=1")])
        (entry,) = redacted(log, policy)
        self.assertEqual(entry["request"]["url"], "https://shop.test/p?a=1&b=%2F#frag")
        self.assertEqual(header(entry["request"], ":path"), ["/p?a=1"])
        self.assertEqual(entry["request"]["queryString"], [{"name": "a", "value": "1"}, {"name": "b", "value": "/"}])

    def test_jsonPaths(self) -> None:
        """
        Paths name keys joined by C{.}; C{*} is one key or index, C{**} any
        number; a dropped key leaves its object, a dropped index its array.
        """
        policy = parsePolicy('[json]\nhash = ["card.number", "items.*.note"]\ndrop = ["**.cvv", "tags.1"]\n')
        log = Log()
        sent = {"card": {"number": "4111111111111111", "cvv": "123"}, "number": "kept",
                "items": [{"note": "n1"}, {"note": {"deep": 5}}], "tags": ["a", "b", "c"],
                "nested": {"card": {"cvv": "999"}}}
        exchange(log, "POST", "https://shop.test/pay", [("Content-Type", "application/vnd.api+json")],
                 requestBody=json.dumps(sent).encode())
        (entry,) = redacted(log, policy)
        self.assertEqual(json.loads(entry["request"]["postData"]["text"]), {
            "card": {"number": hashed("4111111111111111")}, "number": "kept",
            "items": [{"note": hashed("n1")}, {"note": {"deep": hashed("5")}}], "tags": ["a", "c"],
            "nested": {"card": {}}})

    def test_formDropAndMultipart(self) -> None:
        """
        A dropped form field leaves the text and params; a multipart form's
        field is hashed in its params and its text.
        """
        policy = parsePolicy('[form]\ndrop = ["otp"]\nhash = ["pin"]\n')
        log = Log()
        exchange(log, "POST", "https://shop.test/a", [("Content-Type", "application/x-www-form-urlencoded")],
                 requestBody=b"otp=123456&x=1")
        multipart = (b"--B\r\nContent-Disposition: form-data; name=\"pin\"\r\n\r\n8675309\r\n"
                     b"--B\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\n1\r\n--B--\r\n")
        exchange(log, "POST", "https://shop.test/b", [("Content-Type", "multipart/form-data; boundary=B")],
                 requestBody=multipart)
        first, second = redacted(log, policy)
        self.assertEqual(first["request"]["postData"]["text"], "x=1")
        self.assertEqual(first["request"]["postData"]["params"], [{"name": "x", "value": "1"}])
        self.assertEqual(second["request"]["postData"]["params"][0]["value"], hashed("8675309"))
        self.assertNotIn("8675309", second["request"]["postData"]["text"])
        self.assertIn(hashed("8675309"), second["request"]["postData"]["text"])

    def test_emptyPolicy(self) -> None:
        """
        A policy that names nothing changes nothing.
        """
        log = Log()
        exchange(log, "POST", "https://shop.test/login?token=abcdefgh", [("Authorization", "Bearer x"),
                                                                         ("Content-Type", "application/json")],
                 requestBody=b'{"password": "p"}')
        (before,) = entries(log)
        (after,) = redacted(log, Policy("empty"))
        self.assertEqual(after, before)


_SECRET = st.text(st.characters(codec="utf-8", exclude_characters="\r\n\x00"), min_size=SWEEP_MIN_LENGTH,
                  max_size=40).filter(lambda s: s.strip() == s)
_NAMES = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=8)


class PropertyTests(SynchronousTestCase):
    """
    Properties over made-up values.
    """

    @settings(max_examples=150, deadline=None)
    @given(_SECRET)
    def test_secretGoneEverywhere(self, secret: str) -> None:
        """
        Whatever its characters, a token sent in an authorization, a query,
        a form and a JSON answer leaves none of its copies in the entry,
        and each place holds the same hash.
        """
        log = Log()
        query = urlencode({"api_key": secret})
        form = urlencode({"password": secret}).encode()
        exchange(log, "POST", f"https://shop.test/x?{query}",
                 [("Authorization", f"Token {secret}"), ("Content-Type", "application/x-www-form-urlencoded")],
                 requestBody=form, responseHeaders=[("Content-Type", "application/json")],
                 body=json.dumps({"token": secret}).encode())
        (before,) = entries(log)
        spare = copy.deepcopy(before)
        del spare["request"]["headers"][1:2], spare["request"]["postData"], spare["response"]["content"]["text"]
        spare["request"]["url"] = spare["request"]["queryString"] = ""
        assume(secret not in json.dumps(spare, ensure_ascii=False))
        # the HAR's own field names are its shape, not something sent: the
        # sweep goes through values only (test_fieldNamesKept)
        assume(not any(secret in name for name in _fieldNames(before)))
        (entry,) = redacted(log)
        self.assertEqual(_fieldNames(entry), _fieldNames(before))
        dumped = json.dumps(entry, ensure_ascii=False)
        self.assertNotIn(secret, dumped)
        h = hashed(secret)
        self.assertEqual(header(entry["request"], "authorization"), [f"Token {h}"])
        self.assertEqual(entry["request"]["queryString"], [{"name": "api_key", "value": h}])
        self.assertEqual(entry["request"]["postData"]["params"], [{"name": "password", "value": h}])
        self.assertEqual(json.loads(entry["response"]["content"]["text"]), {"token": h})

    @settings(max_examples=150, deadline=None)
    @given(st.lists(st.tuples(_NAMES, st.text(max_size=12)), max_size=6), st.sampled_from(["drop", "hash"]))
    def test_pairsKeptAsWritten(self, pairs: list[tuple[str, str]], action: str) -> None:
        """
        A query's pairs that the policy doesn't name keep their text byte
        for byte; the named ones are dropped or read back as their hash.
        """
        policy = parsePolicy(f'[query]\n{action} = ["a*"]\n')
        text = urlencode(pairs)
        log = Log()
        exchange(log, url=f"https://shop.test/p?{text}")
        (entry,) = redacted(log, policy)
        query = entry["request"]["url"].partition("?")[2]
        expected = [(n, hashed(v)) for n, v in pairs if n.startswith("a")] if action == "hash" else []
        kept = [piece for piece in text.split("&") if piece and not piece.startswith("a")]
        # a named value elsewhere in the entry is swept (test_sweep), not kept
        swept = [form for n, v in pairs if n.startswith("a") and len(v) >= SWEEP_MIN_LENGTH
                 for form in (v, quote_plus(v), quote(v, safe=""), quote(v))]
        assume(not any(form in piece for form in swept for piece in kept))
        # nor in a named pair's own name, which the sweep hashes too
        # (test_sweepTakesNames)
        named = [n for n, _ in pairs if n.startswith("a")]
        assume(not any(form in name for form in swept for name in named))
        self.assertEqual([p for p in query.split("&") if p and not p.startswith("a")], kept)
        self.assertEqual([(n, v) for n, v in parse_qsl(query, keep_blank_values=True) if n.startswith("a")],
                         expected)


def _fieldNames(value: Any) -> set[str]:
    """
    Every field name of a HAR value, at any depth.
    """
    if isinstance(value, dict):
        return set(value).union(*(_fieldNames(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(_fieldNames(item) for item in value))
    return set()


def _matches(pattern: list[str], path: list[str]) -> bool:
    """
    A path pattern's meaning, read off its definition: C{**} any number of
    keys, else one key by its glob.
    """
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(_matches(pattern[1:], path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0].lower(), pattern[0]) and _matches(pattern[1:], path[1:])


_SEGMENTS = st.sampled_from(["a", "b", "*", "**", "a*", "0"])
_PATTERNS = st.lists(st.lists(_SEGMENTS, min_size=1, max_size=4).map(".".join), max_size=3)


class PathTests(SynchronousTestCase):
    """
    JSON paths as the walk matches them, against their definition.
    """

    @settings(max_examples=300, deadline=None)
    @given(_PATTERNS, _PATTERNS, st.lists(st.sampled_from(["a", "B", "ab", "0", "c"]), min_size=1, max_size=5))
    def test_walk(self, drop: list[str], hashed: list[str], path: list[str]) -> None:
        """
        Stepping key by key ends on the action the definition gives the
        whole path (drop before hash), and a walk with no state left means
        no path below matches either.
        """
        matcher = _PathMatcher(Rules(tuple(drop), tuple(hashed)))
        states = matcher.start
        for depth, key in enumerate(path):
            states, action = matcher.step(states, key)
            walked = path[: depth + 1]
            expected = ("drop" if any(_matches(p.split("."), walked) for p in drop) else
                        "hash" if any(_matches(p.split("."), walked) for p in hashed) else None)
            self.assertEqual(action, expected, (walked, drop, hashed))
            if not states:
                deeper = path + ["a", "b", "0"]
                self.assertFalse([p for p in drop + hashed
                                  for end in range(depth + 1, len(deeper) + 1) if _matches(p.split("."), deeper[:end])])
                break


    def test_mayMatch(self) -> None:
        """
        JSON text is parsed only when a path's last key may be in it: a key
        written plainly in any case, or escaped; a path that may end on an
        array index, or on any key, always parses.
        """
        matcher = _PathMatcher(Rules((), ("**.*pass*", "user.token")))
        self.assertTrue(matcher.mayMatch('{"PassWord": 1}'))
        self.assertTrue(matcher.mayMatch('{"t": "token"}'))
        self.assertTrue(matcher.mayMatch('{"\\u0070ass": 1}'))
        self.assertFalse(matcher.mayMatch('{"user": {"name": "alice"}}'))
        self.assertFalse(_PathMatcher(Rules()).mayMatch('{"password": 1}'))
        for always in ("items.1", "a.*", "**", "a.[pP]ass"):
            self.assertTrue(_PathMatcher(Rules((always,))).mayMatch("{}"), always)

    @settings(max_examples=200, deadline=None)
    @given(st.recursive(st.text("ab", max_size=3) | st.integers(0, 9),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                            st.sampled_from(["password", "Pass", "x", "tokens", "\u0070ass"]), inner, max_size=3),
                        max_leaves=12))
    def test_mayMatchNeverSkips(self, document: Any) -> None:
        """
        Whatever the document (keys escaped or not), skipping text that
        can't match gives what parsing it would have.
        """
        for text in (json.dumps(document), json.dumps(document, ensure_ascii=False).replace("p", "\\u0070")):
            redactor = Redactor(parsePolicy('[json]\nhash = ["**.*pass*"]\ndrop = ["tokens"]\n'), KEY)
            skipped = _EntryRedaction(redactor, {}).jsonText(text)
            redactor.paths._needles = None
            self.assertEqual(_EntryRedaction(redactor, {}).jsonText(text), skipped)


class ExportTests(SynchronousTestCase):
    """
    C{writeHar(transform=...)} redacts every entry, in one process or many.
    """

    def test_workers(self) -> None:
        """
        Entries built in worker processes are redacted as in one process:
        the same bytes under the same key, and no token left.
        """
        log = Log()
        for i in range(40):
            exchange(log, url=f"https://shop.test/{i}?token={TOKEN}", headers=[("Authorization", f"Bearer {TOKEN}")])
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "network.jsonl")
            with open(path, "wb") as f:
                f.write(log.bytes())
            outs = []
            for workers in (1, 2):
                out = io.BytesIO()
                result = writeHar(path, out, workers=workers, transform=Redactor(builtinPolicy("secrets"), KEY))
                self.assertEqual(result.entries, 40)
                outs.append(out.getvalue())
        self.assertEqual(outs[0], outs[1])
        self.assertNotIn(TOKEN.encode(), outs[0])
        self.assertEqual(outs[0].count(hashed(TOKEN).encode()), 40 * 3)
