"""
The API's door (issue 20): the token for what changes things, no cross-site
requests, JSON for mutations, the session rate, reads guarded on request.

The pure parts (the token file, the bucket, the origin check) are tested
directly; the rest against a real supervised C{twistd netlog-standin} run
as root, with clients as C{nobody} and as a web page would send them.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import socket
import stat
import subprocess
import tempfile

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.api.door import sameOrigin
from netlog.token import (
    TOKEN_ENV,
    TokenError,
    bearerToken,
    defaultTokenPath,
    findToken,
    loadOrCreateToken,
    tokenMatches,
    validToken,
)
from netlog.core.ratelimit import TokenBucket
from tests.supervise.running import WAIT, Twistd


class TokenFileTests(SynchronousTestCase):
    def folder(self) -> str:
        folder = tempfile.mkdtemp(prefix="netlog-token-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", folder]))
        return folder

    def test_made(self) -> None:
        """
        A missing token file is made with its folder: mode 0600, this
        user's, 43 URL-safe characters (32 random bytes); read back the same;
        a second one made elsewhere differs.
        """
        folder = self.folder()
        path = defaultTokenPath(os.path.join(folder, "state"))
        self.assertEqual(os.path.basename(path), "api-token")
        token = loadOrCreateToken(path)
        st = os.lstat(path)
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, os.geteuid()))
        self.assertEqual(len(token), 43)
        self.assertTrue(validToken(token))
        self.assertEqual(loadOrCreateToken(path), token)
        self.assertNotEqual(loadOrCreateToken(os.path.join(folder, "other")), token)

    def test_unsafe(self) -> None:
        """
        A symbolic link, a file others may read, one that isn't a token, or
        a folder in its place is refused with a message naming the file and
        the fix; the link's target is left alone.
        """
        folder = self.folder()
        target = os.path.join(folder, "target")
        with open(target, "w") as f:
            f.write("x" * 43)
        os.chmod(target, 0o600)
        link = os.path.join(folder, "link")
        os.symlink(target, link)
        with self.assertRaises(TokenError) as caught:
            loadOrCreateToken(link)
        self.assertIn(link, str(caught.exception))
        self.assertIn("symbolic link", str(caught.exception))
        loose = os.path.join(folder, "loose")
        with open(loose, "w") as f:
            f.write("y" * 43)
        os.chmod(loose, 0o644)
        with self.assertRaises(TokenError) as caught:
            loadOrCreateToken(loose)
        self.assertIn("chmod 600", str(caught.exception))
        junk = os.path.join(folder, "junk")
        fd = os.open(junk, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, b"not a token at all!")
        os.close(fd)
        with self.assertRaises(TokenError):
            loadOrCreateToken(junk)
        os.mkdir(os.path.join(folder, "dir"))
        with self.assertRaises(TokenError):
            loadOrCreateToken(os.path.join(folder, "dir"))
        with open(target) as f:
            self.assertEqual(f.read(), "x" * 43)

    def test_clientOrder(self) -> None:
        """
        A client takes C{--token}, else C{NETLOG_API_TOKEN}, else the file;
        None when the file is missing or unreadable.
        """
        folder = self.folder()
        path = os.path.join(folder, "api-token")
        self.assertIsNone(findToken(None, path, {}))
        token = loadOrCreateToken(path)
        self.assertEqual(findToken(None, path, {}), token)
        self.assertEqual(findToken(None, path, {TOKEN_ENV: "from-env"}), "from-env")
        self.assertEqual(findToken("given", path, {TOKEN_ENV: "from-env"}), "given")
        self.assertIsNone(findToken(None, None, {}))

    def test_bearer(self) -> None:
        """
        Only one C{Authorization: Bearer TOKEN} header counts; the match is
        exact.
        """
        self.assertEqual(bearerToken([b"Bearer abc"]), b"abc")
        self.assertEqual(bearerToken([b"bearer  abc "]), b"abc")
        for values in (None, [], [b"Basic abc"], [b"Bearer"], [b"Bearer a", b"Bearer a"]):
            self.assertIsNone(bearerToken(values))
        self.assertTrue(tokenMatches(b"abc", b"abc"))
        self.assertFalse(tokenMatches(b"abd", b"abc"))
        self.assertFalse(tokenMatches(b"ab", b"abc"))
        self.assertFalse(tokenMatches(None, b"abc"))


class PureTests(SynchronousTestCase):
    def test_bucket(self) -> None:
        """
        A bucket of rate 20 allows 20 at once, then one each 1/20 s, and
        says how long to wait.
        """
        bucket = TokenBucket(20, 20, 100.0)
        self.assertEqual(sum(bucket.allow(100.0) for _ in range(25)), 20)
        self.assertAlmostEqual(bucket.wait(100.0), 0.05)
        self.assertFalse(bucket.allow(100.04))
        self.assertTrue(bucket.allow(100.06))
        self.assertEqual(sum(bucket.allow(200.0) for _ in range(25)), 20)
        with self.assertRaises(ValueError):
            TokenBucket(0, 1, 0.0)

    def test_sameOrigin(self) -> None:
        """
        The API's own origin is C{http://} and the C{Host} the request
        named, port included (80 when left out); anything else is not.
        """
        self.assertTrue(sameOrigin(b"http://127.0.0.1:8081", b"127.0.0.1:8081", 8081))
        self.assertTrue(sameOrigin(b"http://LOCALHOST:8081", b"localhost:8081", 8081))
        self.assertTrue(sameOrigin(b"http://[::1]:8081", b"[::1]:8081", 8081))
        self.assertTrue(sameOrigin(b"http://127.0.0.1", b"127.0.0.1:80", 80))
        for origin in (b"http://evil.test", b"null", b"https://127.0.0.1:8081", b"http://127.0.0.1:8082",
                       b"http://127.0.0.1:8081/x", b"http://127.0.0.1:8081.evil.test", b"", b"\xff"):
            self.assertFalse(sameOrigin(origin, b"127.0.0.1:8081", 8081), origin)


def request(port: int, method: str, path: str, headers: dict[str, str] | None = None,
            body: bytes = b"") -> tuple[int, dict[str, list[str]], bytes]:
    """
    One request over a real socket, as a browser or a script would send
    it: the status, the headers (lowercase name -> values), the body.
    """
    head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n"
    for name, value in (headers or {}).items():
        head += f"{name}: {value}\r\n"
    if body or method in ("POST", "PUT", "PATCH"):
        head += f"Content-Length: {len(body)}\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
        s.sendall(head.encode("latin-1") + b"\r\n" + body)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
    top, _, rest = answer.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    found: dict[str, list[str]] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        found.setdefault(name.strip().lower(), []).append(value.strip())
    if "chunked" in found.get("transfer-encoding", []):
        body, rest = b"", rest
        while rest:
            size, _, rest = rest.partition(b"\r\n")
            n = int(size, 16)
            if n == 0:
                break
            body += rest[:n]
            rest = rest[n + 2:]
        rest = body
    return int(lines[0].split()[1]), found, rest


#: What the C{nobody} client runs: it drops to nobody first thing, then
#: tries each request and prints what it got.
AS_NOBODY = r"""
import errno, json, os, sys, urllib.request, urllib.error
port, token = int(sys.argv[1]), sys.argv[2]
tokenPath = sys.argv[3]
os.setgroups([])
os.setgid(65534)
os.setuid(int(sys.argv[4]))
result = {"uid": os.getuid()}
try:
    open(tokenPath).read()
    result["read-token"] = "done"
except OSError as e:
    result["read-token"] = errno.errorcode[e.errno]

def call(method, path, token, body=None):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token is not None:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=20) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

steps = []
for label, offered in (("none", None), ("wrong", "x" * 43), ("prefix", token[:-1])):
    steps.append(["POST", label, *call("POST", "/sessions", offered, {"name": "evil"})])
    steps.append(["DELETE", label, *call("DELETE", "/sessions/fixed", offered)])
steps.append(["GET", "none", *call("GET", "/sessions", None)])
steps.append(["POST", "right", *call("POST", "/sessions", token, {"name": "mine"})])
steps.append(["DELETE", "right", *call("DELETE", "/sessions/fixed", token)])
result["steps"] = steps
print(json.dumps(result))
"""


@pytest.mark.slow
class DoorProcessTests(SynchronousTestCase):
    """
    A supervised stand-in started as root, with its API and a session fixed
    at start.
    """

    def setUp(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="netlog-door-")
        os.chmod(self.folder, 0o755)
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.folder]))
        self.log = os.path.join(self.folder, "network.jsonl")

    def start(self, *extra: str) -> int:
        args = ["--listen", "tcp:0:interface=127.0.0.1", "--log", self.log, "--api", "tcp:0",
                "--state", os.path.join(self.folder, "state"), "--resolve-only",
                "--session", "fixed=0", *extra]
        self.twistd = Twistd(self.folder, "netlog-standin", args)
        self.addCleanup(self.twistd.stop)
        port = self.twistd.apiPort()
        self.twistd.waitServing()
        with open(os.path.join(self.folder, "state", "api-token")) as f:
            self.token = f.read().strip()
        return port

    def sessions(self, port: int) -> list[str]:
        status, _, body = request(port, "GET", "/sessions")
        self.assertEqual(status, 200, body)
        return sorted(s["name"] for s in json.loads(body)["sessions"])

    def test_nobody(self) -> None:
        """
        As C{nobody}, who can't read the token file: a C{POST /sessions} or
        a C{DELETE /sessions/NAME} without the token, with a wrong one, or
        with all of it but its last character, gets 401 with a JSON error;
        no log file is made and no session ends; reads stay open; given the
        token, both work.
        """
        if os.geteuid() != 0:
            raise self.skipTest("this test runs the proxy as root and a client as nobody")  # type: ignore[misc]
        port = self.start()
        tokenPath = os.path.join(self.folder, "state", "api-token")
        st = os.stat(tokenPath)
        self.assertEqual((stat.S_IMODE(st.st_mode), st.st_uid), (0o600, 0))
        nobody = pwd.getpwnam("nobody").pw_uid
        done = subprocess.run(
            ["/usr/bin/python3", "-I", "-c", AS_NOBODY, str(port), self.token, tokenPath, str(nobody)],
            capture_output=True, timeout=60,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        result = json.loads(done.stdout)
        self.assertEqual(result["uid"], nobody)
        self.assertEqual(result["read-token"], "EACCES")
        steps = result["steps"]
        refused = steps[:6]
        self.assertEqual(len(refused), 6)
        for method, label, status, answer in refused:
            self.assertEqual(status, 401, (method, label, answer))
            self.assertIn("Bearer", answer["error"])
        self.assertEqual(steps[6][2], 200)
        self.assertEqual([s[2] for s in steps[7:]], [201, 200], steps[7:])
        self.assertFalse(os.path.exists(os.path.join(self.folder, "network.evil.jsonl")))
        self.assertTrue(os.path.exists(os.path.join(self.folder, "network.mine.jsonl")))
        self.assertEqual(self.sessions(port), ["mine"])

    def test_crossSite(self) -> None:
        """
        A C{POST /sessions} as a page elsewhere sends it (C{text/plain}, a
        form or JSON; with a foreign C{Origin}, C{Origin: null}, or
        C{Sec-Fetch-Site: cross-site} or C{same-site}) gets 403, even with
        the token, and no session appears; the answers grant no CORS. With
        the token but a body that isn't JSON, 415. The API's own origin
        with the token passes.
        """
        port = self.start()
        auth = {"Authorization": f"Bearer {self.token}"}
        bodies = [
            ("text/plain;charset=UTF-8", b'{"name": "csrf"}'),
            ("application/x-www-form-urlencoded", b"name=csrf"),
            ("application/json", b'{"name": "csrf"}'),
        ]
        marks = [
            {"Origin": "http://evil.test"},
            {"Origin": "null"},
            {"Origin": f"http://127.0.0.1:{port + 1}"},
            {"Sec-Fetch-Site": "cross-site"},
            {"Sec-Fetch-Site": "same-site"},
            {"Origin": "http://evil.test", "Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"},
        ]
        for kind, body in bodies:
            for mark in marks:
                for token in ({}, auth):
                    status, headers, answer = request(
                        port, "POST", "/sessions", {"Content-Type": kind, **mark, **token}, body)
                    self.assertEqual(status, 403, (kind, mark, answer))
                    self.assertIn("other sites", json.loads(answer)["error"])
                    self.assertFalse([h for h in headers if h.startswith("access-control-")], headers)
        status, headers, _ = request(port, "OPTIONS", "/sessions", {
            "Origin": "http://evil.test", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type"})
        self.assertEqual(status, 403)
        self.assertFalse([h for h in headers if h.startswith("access-control-")], headers)
        for kind, body in bodies[:2]:
            status, _, answer = request(port, "POST", "/sessions", {"Content-Type": kind, **auth}, body)
            self.assertEqual(status, 415, answer)
        self.assertEqual(self.sessions(port), ["fixed"])
        self.assertFalse([n for n in os.listdir(self.folder) if "csrf" in n])
        status, _, answer = request(port, "POST", "/sessions", {
            "Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}",
            "Sec-Fetch-Site": "same-origin", **auth}, b'{"name": "own"}')
        self.assertEqual(status, 201, answer)

    def test_rateAndEscaping(self) -> None:
        """
        Past C{--api-session-rate} sessions a second, C{POST /sessions}
        gets 429 with a C{Retry-After}; an error that names what the
        client sent escapes it (no markup a browser could run) and is
        never sniffed as HTML.
        """
        port = self.start("--api-session-rate", "3")
        auth = {"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"}
        statuses = [request(port, "POST", "/sessions", auth, json.dumps({"name": f"r{i}"}).encode())
                    for i in range(5)]
        self.assertEqual([s[0] for s in statuses][:3], [201, 201, 201])
        self.assertIn(429, [s[0] for s in statuses[3:]])
        limited = next(s for s in statuses if s[0] == 429)
        self.assertGreaterEqual(int(limited[1]["retry-after"][0]), 1)
        attack = "<script>alert(1)</script>"
        for method, path, headers, body in [
            ("GET", "/" + attack, {}, b""),
            ("GET", "/network?after=" + attack, {}, b""),
            ("DELETE", "/sessions/" + attack, auth, b""),
            ("POST", "/sessions", auth, json.dumps({"name": attack}).encode()),
        ]:
            status, found, answer = request(port, method, path, headers, body)
            self.assertGreaterEqual(status, 400, (path, answer))
            self.assertNotIn(b"<", answer, (path, answer))
            self.assertNotIn(b">", answer, (path, answer))
            self.assertEqual(found["x-content-type-options"], ["nosniff"])
            self.assertEqual(found["content-type"], ["application/json"])

    def test_guardedReads(self) -> None:
        """
        With C{--api-token-reads}, a read without the token gets 401; with
        it, the log. The live view opens once through the URL logged at
        start: it sets an HttpOnly C{SameSite=Strict} cookie and sends the
        browser to C{/}; the cookie then reads; the URL opens no more.
        """
        port = self.start("--api-token-reads")
        for path in ("/network", "/network.har", "/", "/view.js", "/sessions"):
            status, _, answer = request(port, "GET", path)
            self.assertEqual(status, 401, (path, answer))
        status, _, answer = request(port, "GET", "/network", {"Authorization": f"Bearer {self.token}"})
        self.assertEqual(status, 200, answer)
        found = re.search(r"the live view opens once at (http://\S+)", self.twistd.text())
        self.assertIsNotNone(found, self.twistd.text())
        assert found is not None
        path = found.group(1).split(f":{port}", 1)[1]
        self.assertNotIn(self.token, found.group(1))
        status, headers, _ = request(port, "GET", path)
        self.assertEqual((status, headers["location"]), (303, ["/"]))
        cookie = headers["set-cookie"][0]
        self.assertIn("HttpOnly", cookie)
        self.assertIn("SameSite=strict", cookie)
        self.assertNotIn(self.token, cookie)
        pair = cookie.split(";", 1)[0]
        status, headers, page = request(port, "GET", "/", {"Cookie": pair})
        self.assertEqual(status, 200)
        self.assertIn(b"netlog live view", page)
        status, _, _ = request(port, "GET", "/network", {"Cookie": pair})
        self.assertEqual(status, 200)
        status, _, _ = request(port, "POST", "/sessions", {"Cookie": pair, "Content-Type": "application/json"},
                               b"{}")
        self.assertEqual(status, 401)
        status, _, _ = request(port, "GET", path)
        self.assertEqual(status, 401)


    def test_siteProxy(self) -> None:
        """
        The site proxy's API has the same door: its token is made in its
        C{--state} beside its CA; a session needs it.
        """
        sites = os.path.join(self.folder, "sites.toml")
        with open(sites, "w") as f:
            f.write('[live]\nhosts = ["live.test"]\n')
        state = os.path.join(self.folder, "state")
        self.twistd = Twistd(self.folder, "netlog-proxy", [
            "--listen", "tcp:0:interface=127.0.0.1", "--log", self.log, "--api", "tcp:0",
            "--state", state, "--resolve-only", "--sites", sites])
        self.addCleanup(self.twistd.stop)
        port = self.twistd.apiPort()
        self.twistd.waitServing()
        self.assertEqual(sorted(os.listdir(state)), ["api-token", "ca.key", "ca.pem"])
        with open(os.path.join(state, "api-token")) as f:
            token = f.read().strip()
        body = b'{"name": "task-1"}'
        status, _, answer = request(port, "POST", "/sessions", {"Content-Type": "application/json"}, body)
        self.assertEqual(status, 401, answer)
        status, _, answer = request(port, "POST", "/sessions", {
            "Content-Type": "application/json", "Authorization": f"Bearer {token}"}, body)
        self.assertEqual(status, 201, answer)
        self.assertEqual(self.sessions(port), ["task-1"])
