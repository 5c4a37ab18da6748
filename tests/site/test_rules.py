"""
Rules per session over a real supervised C{twistd netlog-proxy}: two
sessions, A with rules and B without, their backends, their logs and the
times a client measures (issue 23's "Done when").
"""

from __future__ import annotations

import json
import os
import signal
import socket
import socketserver
import ssl
import threading
import time
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import ApiError, Netlog
from tests.client.test_cli import session as shell
from tests.site.h2client import H2Client
from tests.session.test_sessions import api, caller
from tests.site.support import readHead
from tests.supervise.running import Twistd, alive, waitFor

#: Seconds a client waits on a socket.
WAIT = 30.0
#: The download the bandwidth is measured by: 1 MiB.
BIG = 1024 * 1024
#: The rules' bandwidth down, bytes a second, and what the download should take.
DOWN = 102400
#: The latency asked for, and the tolerance the issue gives (ms).
LATENCY_MS = 200
LATENCY_TOLERANCE_MS = 30


class _Backend(socketserver.BaseRequestHandler):
    """
    A backend that answers C{/big} with L{BIG} bytes and anything else with
    its own name, and keeps each request's head it got.
    """

    server: _Server

    def handle(self) -> None:
        sock = self.request
        sock.settimeout(WAIT)
        buffered = b""
        while True:
            while b"\r\n\r\n" not in buffered:
                data = sock.recv(65536)
                if not data:
                    return
                buffered += data
            head, buffered = buffered.split(b"\r\n\r\n", 1)
            self.server.heads.append(head.decode("latin-1"))
            target = head.split(b" ")[1]
            body = b"x" * BIG if target == b"/big" else self.server.label.encode()
            sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
                         b"Server: backend\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, label: str) -> None:
        socketserver.ThreadingTCPServer.__init__(self, ("127.0.0.1", 0), _Backend)
        self.label = label
        self.heads: list[str] = []

    @property
    def port(self) -> int:
        return int(self.server_address[1])


def _get(port: int, url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes, float]:
    """
    A plain request for C{url} through the forward port C{port}: its
    status, headers, body and the seconds to the answer's first byte.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as sock:
        host = url.split("/")[2]
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        began = time.monotonic()
        sock.sendall(f"GET {url} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n".encode())
        first = sock.recv(1)
        firstByte = time.monotonic() - began
        return (*_read(sock, first), firstByte)


def _read(sock: socket.socket, data: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    while True:
        piece = sock.recv(65536)
        if not piece:
            break
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split(" ")[1]), fields, body


def _connect(port: int, authority: str) -> tuple[socket.socket, int]:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    sock.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    head = readHead(sock)
    return sock, int(head.split(b" ")[1])


def _opens(logPath: str) -> list[dict[str, Any]]:
    with open(logPath, "rb") as f:
        return [json.loads(line) for line in f if json.loads(line)["type"] == "open"]


class _SessionRulesCases:
    """
    What a site proxy with sessions A (rules) and B (none) must do,
    supervised or not (the classes below, each a C{SynchronousTestCase}).
    """

    #: The proxy's own options: supervised (the default) unless a class says.
    options: list[str] = []

    def setUp(self) -> None:
        self.shop = _Server("shop")
        self.second = _Server("second")
        for server in (self.shop, self.second):
            threading.Thread(target=server.serve_forever, daemon=True).start()
            self.addCleanup(server.server_close)
            self.addCleanup(server.shutdown)
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        sites = os.path.join(self.folder, "sites.toml")
        with open(sites, "w") as f:
            f.write(
                f'[[site]]\nname = "shop"\norigins = ["http://shop.test", "https://secure.test"]\n'
                f'backend = "http://127.0.0.1:{self.shop.port}"\n'
                f'[[site]]\nname = "mirror"\norigins = ["http://mirror.test"]\n'
                f'backend = "http://127.0.0.1:{self.shop.port}"\n'
                f'[[site]]\nname = "other"\norigins = ["https://other.test"]\n'
                f'backend = "http://127.0.0.1:{self.shop.port}"\n'
            )
        self.log = os.path.join(self.folder, "network.jsonl")
        mainRules = os.path.join(self.folder, "rules.toml")
        with open(mainRules, "w") as f:
            f.write('[[headers]]\nmatch = "shop.test"\nset = { "X-Main" = "yes" }\n')
        self.twistd = Twistd(self.folder, "netlog-proxy", [
            "--sites", sites, "--listen", "tcp:0:interface=127.0.0.1", "--log", self.log,
            "--state", self.folder, "--api", "tcp:0", "--resolve-only",
            "--resolve", "shop.test=127.0.0.1", "--resolve", "mirror.test=127.0.0.1",
            "--resolve", "secure.test=127.0.0.1", "--resolve", "other.test=127.0.0.1",
            "--rules", mainRules, *self.options,
        ])
        self.addCleanup(self.twistd.stop)
        if not self.options:
            self.worker = self.twistd.waitServing(1)
        self.base = f"http://127.0.0.1:{self.twistd.apiPort()}"
        self.call = caller(os.path.join(self.folder, "api-token"))

    def session(self, name: str, rules: dict[str, Any] | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name}
        if rules is not None:
            body["rules"] = rules
        status, made = self.call("POST", self.base + "/sessions", body)
        self.assertEqual(status, 201, made)
        return made

    def test_twoSessions(self) -> None:
        """
        A's header rule reaches A's backend, its blocked URL gets 403 with
        nothing reaching a backend or the resolver, its remap sends it to
        the second backend; its latency delays the first byte by 200 ms
        and its bandwidth makes 1 MiB take about 10 s. B, with no rules,
        gets none of it, nor the main listener's (from C{--rules}). Each
        rule's action is in A's log and HAR.
        """
        rules = {
            "headers": [{"match": "shop.test", "set": {"X-Auto-Login": "admin"}, "remove": ["Referer"],
                         "answer_set": {"X-Rules": "A"}, "answer_remove": ["Server"]}],
            "block": ["tracker.test", "shop.test/admin/*"],
            "remap": {"mirror.test": f"127.0.0.1:{self.second.port}"},
        }
        a = self.session("a", rules)
        b = self.session("b")
        status, got = self.call("GET", self.base + "/sessions/a/rules")
        self.assertEqual((status, got), (200, {"rules": rules}))

        status, fields, body, _ = _get(a["port"], "http://shop.test/page", {"Referer": "http://x.test/"})
        self.assertEqual((status, body, fields.get("x-rules"), fields.get("server")), (200, b"shop", "A", None))
        self.assertIn("X-Auto-Login: admin", self.shop.heads[-1])
        self.assertNotIn("Referer", self.shop.heads[-1])
        status, fields, body, _ = _get(b["port"], "http://shop.test/page", {"Referer": "http://x.test/"})
        self.assertEqual((status, body, fields.get("server")), (200, b"shop", "backend"))
        self.assertNotIn("X-Auto-Login", self.shop.heads[-1])
        self.assertNotIn("X-Main", self.shop.heads[-1])
        self.assertIn("Referer: http://x.test/", self.shop.heads[-1])

        heads = len(self.shop.heads) + len(self.second.heads)
        status, _, body, _ = _get(a["port"], "http://shop.test/admin/users")
        self.assertEqual(status, 403, body)
        # tracker.test resolves nowhere (--resolve-only): a 403 and not a 502
        # says the rules answered before any name was looked up.
        status, _, body, _ = _get(a["port"], "http://tracker.test/pixel")
        self.assertEqual(status, 403, body)
        self.assertEqual(len(self.shop.heads) + len(self.second.heads), heads)
        status, _, body, _ = _get(b["port"], "http://shop.test/admin/users")
        self.assertEqual((status, body), (200, b"shop"))

        self.assertEqual(_get(a["port"], "http://mirror.test/")[2], b"second")
        self.assertEqual(_get(b["port"], "http://mirror.test/")[2], b"shop")

        opens = _opens(a["log"])
        self.assertEqual([o.get("_rules") for o in opens], [
            [{"rule": "headers[0]", "action": "remove Referer"},
             {"rule": "headers[0]", "action": "set X-Auto-Login"},
             {"rule": "headers[0]", "action": "answer remove Server"},
             {"rule": "headers[0]", "action": "answer set X-Rules"}],
            [{"rule": "block[1]", "action": "blocked"}],
            [{"rule": "block[0]", "action": "blocked"}],
            [{"rule": "remap[mirror.test]", "action": f"remapped to 127.0.0.1:{self.second.port}"}],
        ])
        self.assertEqual(opens[2]["server"]["address"], None)
        self.assertTrue(all("_rules" not in o for o in _opens(b["log"])))
        status, har = self.call("GET", self.base + "/sessions/a/network.har")
        self.assertEqual([e.get("_rules") for e in har["log"]["entries"]], [o.get("_rules") for o in opens])

        # Latency: a live change, for the next request.
        status, _ = self.call("PUT", self.base + "/sessions/a/rules", {"latency_ms": LATENCY_MS})
        self.assertEqual(status, 200)
        delayed = [_get(a["port"], "http://shop.test/")[3] for _ in range(3)]
        plain = [_get(b["port"], "http://shop.test/")[3] for _ in range(3)]
        for seconds in delayed:
            self.assertLess(abs(seconds * 1000 - LATENCY_MS), LATENCY_TOLERANCE_MS, delayed)
        self.assertLess(max(plain), LATENCY_MS / 2000, plain)

        # Bandwidth down.
        status, _ = self.call("PUT", self.base + "/sessions/a/rules", {"bandwidth": {"down": DOWN}})
        self.assertEqual(status, 200)
        began = time.monotonic()
        status, _, body, _ = _get(a["port"], "http://shop.test/big")
        took = time.monotonic() - began
        self.assertEqual((status, len(body)), (200, BIG))
        self.assertLess(abs(took - 10.0), 1.0, took)
        began = time.monotonic()
        status, _, body, _ = _get(b["port"], "http://shop.test/big")
        self.assertEqual((status, len(body)), (200, BIG))
        self.assertLess(time.monotonic() - began, 2.0)

    def test_allowAndLiveChanges(self) -> None:
        """
        With C{allow}, a CONNECT to a host it doesn't list is refused and a
        listed one opens (and its requests are served, decrypted); a bad
        document gets 400 with its one line and the rules in force stay; a
        good one applies to the next request. The main listener's rules,
        from C{--rules FILE} (TOML) at start, are at C{/rules}.
        """
        a = self.session("a", {"allow": ["secure.test"]})
        sock, status = _connect(a["port"], "other.test:443")
        sock.close()
        self.assertEqual(status, 403)
        sock, status = _connect(a["port"], "secure.test:443")
        self.assertEqual(status, 200)
        context = ssl.create_default_context(cafile=os.path.join(self.folder, "ca.pem"))
        with context.wrap_socket(sock, server_hostname="secure.test") as tls:
            tls.sendall(b"GET /in HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n")
            status, _, body = _read(tls)  # type: ignore[arg-type]
        self.assertEqual((status, body), (200, b"shop"))
        self.assertEqual(_get(a["port"], "http://shop.test/")[0], 403)

        status, answer = self.call("PUT", self.base + "/sessions/a/rules", {"block": ["ok.test", "a b"]})
        self.assertEqual((status, answer), (400, {"error": 'block[1]: a pattern is host[:port][/path], got "a b"'}))
        self.assertEqual(self.call("GET", self.base + "/sessions/a/rules")[1], {"rules": {"allow": ["secure.test"]}})
        self.assertEqual(_get(a["port"], "http://shop.test/")[0], 403)

        status, _ = self.call("PUT", self.base + "/sessions/a/rules", {"allow": ["shop.test"]})
        self.assertEqual(status, 200)
        self.assertEqual(_get(a["port"], "http://shop.test/")[0], 200)
        sock, status = _connect(a["port"], "secure.test:443")
        sock.close()
        self.assertEqual(status, 403)

        status, answer = api("PUT", self.base + "/sessions/a/rules", {})
        self.assertEqual(status, 401, answer)
        status, answer = self.call("PUT", self.base + "/sessions/nobody/rules", {})
        self.assertEqual(status, 404, answer)
        status, answer = self.call("POST", self.base + "/sessions", {"name": "c", "rules": {"latency_ms": "x"}})
        self.assertEqual((status, answer), (400, {"error": 'latency_ms: milliseconds, an integer from 0 to 60000, '
                                                           'got "x"'}))

        main = self.twistd.listenerPort("forward")
        self.assertEqual(_get(main, "http://shop.test/")[0], 200)
        self.assertIn("X-Main: yes", self.shop.heads[-1])
        self.assertEqual(self.call("GET", self.base + "/rules")[1],
                         {"rules": {"headers": [{"match": "shop.test", "set": {"X-Main": "yes"}}]}})
        status, _ = self.call("PUT", self.base + "/rules", {"block": ["shop.test"]})
        self.assertEqual(status, 200)
        self.assertEqual(_get(main, "http://shop.test/")[0], 403)
        self.assertEqual(self.call("GET", self.base + "/rules")[1], {"rules": {"block": ["shop.test"]}})

    def test_http2(self) -> None:
        """
        In a decrypted tunnel that chose HTTP/2, each stream is judged on
        its own: a blocked path gets 403 on its stream while the others on
        the connection are served, with the header rule's changes each way.
        """
        a = self.session("a", {
            "headers": [{"match": "secure.test", "set": {"X-Auto-Login": "admin"}, "answer_set": {"X-Rules": "A"}}],
            "block": ["secure.test/admin/*"],
        })
        client = H2Client.throughTunnel(a["port"], "secure.test:443", os.path.join(self.folder, "ca.pem"))
        self.addCleanup(client.close)
        self.assertEqual(client.alpn, "h2")
        first, blocked, last = (client.get(path, "secure.test") for path in ("/one", "/admin/x", "/two"))
        answers = client.wait(first, blocked, last)
        self.assertEqual([a.status for a in answers], [200, 403, 200])
        self.assertEqual([dict(a.headers).get(b"x-rules") for a in answers], [b"A", None, b"A"])
        self.assertEqual(bytes(answers[0].data), b"shop")
        self.assertEqual(sum("X-Auto-Login: admin" in head for head in self.shop.heads), 2)
        self.assertFalse([head for head in self.shop.heads if "/admin/" in head.split("\r\n")[0]])
        rules = [o.get("_rules") for o in _opens(a["log"]) if o["request"]["version"] == "HTTP/2"]
        self.assertEqual(sorted(map(str, rules)), sorted(map(str, [
            [{"rule": "headers[0]", "action": "set X-Auto-Login"},
             {"rule": "headers[0]", "action": "answer set X-Rules"}],
            [{"rule": "block[0]", "action": "blocked"}],
            [{"rule": "headers[0]", "action": "set X-Auto-Login"},
             {"rule": "headers[0]", "action": "answer set X-Rules"}],
        ])))

    def test_fromShellAndClient(self) -> None:
        """
        C{netlog session rules NAME FILE} sets a session's rules from a TOML
        file and prints them; without FILE it prints them; a wrong document
        is one line and exit status 1. The Python client reads and sets
        them on the session object and the main listener.
        """
        self.session("a")
        tokenFile = os.path.join(self.folder, "api-token")
        rulesFile = os.path.join(self.folder, "a.toml")
        with open(rulesFile, "w") as f:
            f.write('block = ["shop.test/admin*"]\n')
        done = shell("rules", "a", rulesFile, "--api", self.base, "--token-file", tokenFile)
        self.assertEqual((done.returncode, json.loads(done.stdout)), (0, {"rules": {"block": ["shop.test/admin*"]}}),
                         done.stderr)
        self.assertEqual(_get(self.session("b")["port"], "http://shop.test/admin")[0], 200)
        client = Netlog(self.base, token_file=tokenFile)
        a = client.get_session("a")
        self.assertEqual(_get(a.port, "http://shop.test/admin")[0], 403)
        done = shell("rules", "a", "--api", self.base)
        self.assertEqual((done.returncode, json.loads(done.stdout)), (0, {"rules": {"block": ["shop.test/admin*"]}}))
        with open(rulesFile, "w") as f:
            f.write("latency_ms = -5\n")
        done = shell("rules", "a", rulesFile, "--api", self.base, "--token-file", tokenFile)
        self.assertEqual(done.returncode, 1)
        self.assertEqual(len(done.stderr.splitlines()), 1, done.stderr)
        self.assertIn("latency_ms: milliseconds, an integer from 0 to 60000, got -5", done.stderr)

        self.assertEqual(a.set_rules({"block": ["other.test"]}), {"block": ["other.test"]})
        self.assertEqual(a.rules(), {"block": ["other.test"]})
        self.assertEqual(_get(a.port, "http://shop.test/admin")[0], 200)
        with self.assertRaises(ApiError) as raised:
            a.set_rules({"block": 3})
        self.assertEqual(raised.exception.status, 400)
        self.assertEqual(client.set_rules({}), {})
        self.assertEqual(client.rules(), {})
        made = client.create_session("c", rules={"block": ["shop.test"]})
        self.assertEqual(_get(made.port, "http://shop.test/")[0], 403)


@pytest.mark.slow
class SessionRulesTests(_SessionRulesCases, SynchronousTestCase):
    """
    One supervised site proxy, sessions A (rules) and B (none).
    """

    def test_workerKilled(self) -> None:
        """
        Supervised, a worker killed with C{kill -9} is replaced by one that
        serves with the rules last set: a session's (made with rules, then
        changed), one's made while no worker ran, and the main listener's.
        """
        a = self.session("a", {"block": ["mirror.test"]})
        self.assertEqual(self.call("PUT", self.base + "/sessions/a/rules", {"block": ["shop.test"]})[0], 200)
        self.assertEqual(self.call("PUT", self.base + "/rules", {"block": ["mirror.test"]})[0], 200)
        os.kill(self.worker, signal.SIGKILL)
        late = self.session("late", {"block": ["mirror.test"]})
        waitFor(lambda: not alive(self.worker), "the worker to die")
        self.twistd.waitServing(2)
        main = self.twistd.listenerPort("forward")
        self.assertEqual([_get(port, url)[0] for port, url in [
            (a["port"], "http://shop.test/"), (a["port"], "http://mirror.test/"),
            (late["port"], "http://mirror.test/"), (late["port"], "http://shop.test/"),
            (main, "http://mirror.test/"), (main, "http://shop.test/"),
        ]], [403, 200, 403, 200, 403, 200])


@pytest.mark.slow
class UnsupervisedRulesTests(_SessionRulesCases, SynchronousTestCase):
    """
    The same in one process (C{--no-supervise}), where the API holds the
    sessions' engines itself (and there is no worker to kill).
    """

    options = ["--no-supervise"]
