"""
Redaction end to end: a login through a real supervised C{twistd
netlog-proxy} session (a password in a form, a bearer token, a session
cookie), exported by C{netlog har --redact}, by the API's
C{?redact=secrets} and by C{Session.save_har(redact=...)}; the files' bytes
are searched for the secrets, base64 bodies decoded.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import os
import subprocess
import sys
import threading
from typing import Any, Callable
from urllib.parse import quote, quote_plus

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import ApiError, Netlog
from tests.har.support import validate, wavLoad
from tests.supervise.running import Twistd
from tests.support import netlogArgv, sourceEnv

#: Seconds a request or a command may take.
WAIT = 60
PASSWORD = "s3cret pass/word+1"
TOKEN = "tok_9f8e7d6c5b4a3f2e1d0c"
SESSION = "sid-77aa88bb99cc"


class _Shop(http.server.BaseHTTPRequestHandler):
    """
    A site with a login: C{POST /login} (a form) answers the token in JSON
    and sets the session cookie; C{/api/...} wants the bearer token.
    """

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.path == "/login":
            self.answer(json.dumps({"token": TOKEN, "user": "alice"}).encode(), "application/json",
                        [("Set-Cookie", f"session={SESSION}; Path=/; HttpOnly")])
        else:
            self.answer(b'{"ok": true, "order": ' + body + b"}", "application/json")

    def do_GET(self) -> None:
        ok = self.headers.get("Authorization") == f"Bearer {TOKEN}"
        self.answer(json.dumps({"orders": [1, 2], "authorized": ok}).encode(), "application/json")

    def answer(self, body: bytes, kind: str, extra: list[tuple[str, str]] = ()) -> None:  # type: ignore[assignment]
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in extra:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _startShop(addCleanup: Callable[..., Any]) -> int:
    """
    L{_Shop} on loopback, in threads; its port.
    """
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Shop)
    server.daemon_threads = True
    addCleanup(server.server_close)
    addCleanup(server.shutdown)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return int(server.server_address[1])


def _send(port: int, method: str, url: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=WAIT)
    try:
        conn.request(method, url, body=body or None, headers={"Host": "shop.test", **headers})
        response = conn.getresponse()
        assert response.status == 200, response.status
        return response.read()
    finally:
        conn.close()


def _base64Fields(value: Any) -> list[bytes]:
    """
    Every base64 a HAR holds (C{_base64} copies, base64 texts and
    WebSocket data), decoded.
    """
    found: list[bytes] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and (key == "_base64" or (key == "text" and (
                    value.get("encoding") == "base64" or "_undecoded" in value))):
                found.append(base64.b64decode(item))
            else:
                found.extend(_base64Fields(item))
    elif isinstance(value, list):
        for item in value:
            found.extend(_base64Fields(item))
    return found


def _forms(secret: str) -> list[bytes]:
    return [form.encode() for form in {secret, quote(secret, safe=""), quote_plus(secret), quote(secret)}]


@pytest.mark.slow
class RedactedLoginTests(SynchronousTestCase):
    """
    One login through a session; its HAR exported the three ways.
    """

    def setUp(self) -> None:
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        sites = os.path.join(self.folder, "sites.toml")
        with open(sites, "w") as f:
            f.write(f'[[site]]\nname = "shop"\norigins = ["http://shop.test"]\n'
                    f'backend = "http://127.0.0.1:{_startShop(self.addCleanup)}"\n')
        self.twistd = Twistd(self.folder, "netlog-proxy", [
            "--sites", sites, "--listen", "tcp:0:interface=127.0.0.1",
            "--log", os.path.join(self.folder, "network.jsonl"), "--state", self.folder,
            "--api", "tcp:0:interface=127.0.0.1", "--resolve-only", "--resolve", "shop.test=127.0.0.1",
        ])
        self.addCleanup(self.twistd.stop)
        self.twistd.waitServing(1)
        self.client = Netlog(f"http://127.0.0.1:{self.twistd.apiPort()}",
                             token_file=os.path.join(self.folder, "api-token"))
        self.session = self.client.create_session("login")
        self.addCleanup(self.session.delete)
        port = self.session.port
        form = f"username=alice&password={quote_plus(PASSWORD)}".encode()
        self.assertEqual(json.loads(_send(port, "POST", "http://shop.test/login",
                                          {"Content-Type": "application/x-www-form-urlencoded"}, form))["token"],
                         TOKEN)
        # the same form again with a byte that isn't UTF-8: its HAR keeps
        # the body's bytes as _base64 beside the text
        _send(port, "POST", "http://shop.test/login", {"Content-Type": "application/x-www-form-urlencoded"},
              b"note=caf\xe9&" + form)
        auth = {"Authorization": f"Bearer {TOKEN}", "Cookie": f"session={SESSION}"}
        self.assertTrue(json.loads(_send(port, "GET", "http://shop.test/api/orders", auth))["authorized"])
        _send(port, "POST", "http://shop.test/api/order", {**auth, "Content-Type": "application/json"},
              json.dumps({"sku": "A1", "qty": 2, "password": PASSWORD}).encode())
        self.assertTrue(self.session.wait_ended(WAIT))

    def netlogHar(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*netlogArgv(), "har", self.session.log, *args], env=sourceEnv(),
                              capture_output=True, timeout=WAIT)

    def checkSecretsGone(self, har: bytes, cookieKept: bool = True) -> dict[str, Any]:
        """
        The HAR passes the schema, holds no password and no token in its
        bytes or its base64, the token hashed alike in every entry, and the
        session cookie kept (or gone).
        """
        self.assertEqual(validate(har), [])
        document = json.loads(har)
        entries = document["log"]["entries"]
        self.assertEqual([e["request"]["method"] for e in entries], ["POST", "POST", "GET", "POST"])
        decoded = _base64Fields(document)
        self.assertEqual(len(decoded), 1, "the form with a Latin-1 byte keeps its bytes as _base64")
        for secret in (PASSWORD, TOKEN):
            for form in _forms(secret):
                self.assertNotIn(form, har)
                for raw in decoded:
                    self.assertNotIn(form, raw)
        hashedToken = json.loads(entries[0]["response"]["content"]["text"])["token"]
        self.assertTrue(hashedToken.startswith("hmac:"), hashedToken)
        for entry in entries[2:]:
            (auth,) = [h["value"] for h in entry["request"]["headers"] if h["name"].lower() == "authorization"]
            self.assertEqual(auth, f"Bearer {hashedToken}")
        hashedPassword = entries[0]["request"]["postData"]["params"][1]["value"]
        self.assertEqual(entries[1]["request"]["postData"]["params"][2]["value"], hashedPassword)
        self.assertEqual(json.loads(entries[3]["request"]["postData"]["text"])["password"], hashedPassword)
        self.assertIn(hashedPassword.encode(), decoded[0])
        self.assertEqual(SESSION.encode() in har, cookieKept)
        if cookieKept:
            self.assertEqual(entries[0]["response"]["cookies"][0]["value"], SESSION)
            self.assertIn({"name": "session", "value": SESSION}, entries[2]["request"]["cookies"])
        return document

    def test_cli(self) -> None:
        """
        C{netlog har --redact secrets}: no secret in the file, the cookie
        kept, and WebArena-Verified's loader reads the forms, JSON and
        cookies graders check; with a policy that names the cookie, it is gone too; a policy
        with a mistake is refused in one line and no file is written.
        """
        out = os.path.join(self.folder, "secrets.har")
        done = self.netlogHar("--redact", "secrets", "-o", out)
        self.assertEqual(done.returncode, 0, done.stderr)
        with open(out, "rb") as f:
            har = f.read()
        document = self.checkSecretsGone(har)
        # what a grader reads is still there, secrets hashed as they were
        login, _, orders, order = wavLoad(har)["events"]
        hashedPassword = document["log"]["entries"][0]["request"]["postData"]["params"][1]["value"]
        self.assertEqual(login["post_data"], {"username": "alice", "password": hashedPassword})
        self.assertEqual(login["response_cookies"], {"session": SESSION})
        self.assertEqual((order["post_data"]["sku"], order["post_data"]["qty"]), ("A1", 2))
        self.assertEqual(orders["response_content"], {"orders": [1, 2], "authorized": True})

        plain = self.netlogHar()
        self.assertIn(TOKEN.encode(), plain.stdout)
        self.assertIn(quote_plus(PASSWORD).encode(), plain.stdout)

        policy = os.path.join(self.folder, "cookies.toml")
        with open(policy, "w") as f:
            f.write('extends = "secrets"\n[cookies]\ndrop = ["session"]\n')
        done = self.netlogHar("--redact", policy)
        self.assertEqual(done.returncode, 0, done.stderr)
        document = self.checkSecretsGone(done.stdout, cookieKept=False)
        self.assertEqual(document["log"]["entries"][0]["response"]["cookies"], [])

        with open(policy, "w") as f:
            f.write('[cookies]\ndrop = "session"\n')
        bad = os.path.join(self.folder, "bad.har")
        done = self.netlogHar("--redact", policy, "-o", bad)
        self.assertEqual(done.returncode, 1)
        self.assertEqual(done.stderr.decode(), f"netlog har: --redact: {policy}: [cookies] drop must be a list of "
                                              f"non-empty names, got 'session'\n")
        self.assertFalse(os.path.exists(bad))

    def test_api(self) -> None:
        """
        C{?redact=secrets} on the session's HAR route, through
        C{save_har(redact=...)}: the same redaction; with a key given, two
        exports hash alike (and unlike another key's); a policy file is
        refused over HTTP with the reason.
        """
        out = os.path.join(self.folder, "api.har")
        self.session.save_har(out, redact="secrets")
        with open(out, "rb") as f:
            self.checkSecretsGone(f.read())
        self.client.save_har(out, redact="secrets")
        with open(out, "rb") as f:
            self.assertNotIn(TOKEN.encode(), f.read())

        tokens = []
        for key in ("grader-key", "grader-key", "other-key"):
            self.session.save_har(out, redact="secrets", redact_key=key)
            with open(out, "rb") as f:
                tokens.append(json.loads(self.checkSecretsGone(f.read())["log"]["entries"][0]["response"]
                                         ["content"]["text"])["token"])
        self.assertEqual(tokens[0], tokens[1])
        self.assertNotEqual(tokens[0], tokens[2])

        with self.assertRaises(ApiError) as caught:
            self.session.save_har(out, redact="/etc/netlog/policy.toml")
        self.assertEqual(caught.exception.status, 400)
        self.assertEqual(caught.exception.error["parameter"], "redact")
        self.assertIn("is not a built-in policy (secrets, none)", caught.exception.error["reason"])
        self.session.save_har(out, redact="none")
        with open(out, "rb") as f:
            self.assertIn(TOKEN.encode(), f.read())


    def netlogSessionHar(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([*netlogArgv(), "session", "har", "login", "--api", self.client.url,
                               "--token-file", os.path.join(self.folder, "api-token"), *args],
                              env=sourceEnv(), capture_output=True, timeout=WAIT)

    def test_sessionCommand(self) -> None:
        """
        C{netlog session har NAME --redact secrets} (done by the API): no
        secret in what it writes, the cookie kept; without C{--redact} the
        secrets are there. A policy file (done by the command on the HAR it
        fetched) redacts as C{netlog har --redact FILE} does, into C{-o}.
        """
        done = self.netlogSessionHar("--redact", "secrets")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.checkSecretsGone(done.stdout)

        plain = self.netlogSessionHar()
        self.assertEqual(plain.returncode, 0, plain.stderr)
        self.assertIn(TOKEN.encode(), plain.stdout)
        self.assertIn(quote_plus(PASSWORD).encode(), plain.stdout)

        policy = os.path.join(self.folder, "cookies.toml")
        with open(policy, "w") as f:
            f.write('extends = "secrets"\n[cookies]\ndrop = ["session"]\n')
        out = os.path.join(self.folder, "session.har")
        done = self.netlogSessionHar("--redact", policy, "--redact-key", "k", "-o", out)
        self.assertEqual((done.returncode, done.stdout, done.stderr), (0, b"", b""))
        with open(out, "rb") as f:
            document = self.checkSecretsGone(f.read(), cookieKept=False)
        self.assertEqual(document["log"]["entries"][0]["response"]["cookies"], [])


class PluginOptionTests(SynchronousTestCase):
    def test_badPolicy(self) -> None:
        """
        C{--netlog-redact} with no such built-in stops pytest at once, in
        one line.
        """
        env = sourceEnv({"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "netlog.pytest_plugin",
                               "--netlog-redact", "policy.toml"], cwd=folder, env=env, capture_output=True,
                              text=True, timeout=WAIT)
        self.assertEqual(done.returncode, 4, done.stdout + done.stderr)
        self.assertIn("--netlog-redact: 'policy.toml' is not a built-in policy (secrets, none); "
                      "a policy file is for netlog har --redact FILE", done.stderr)
