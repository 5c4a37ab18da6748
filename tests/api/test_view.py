"""
The live view's server side over real loopback sockets, served by
C{netlog view LOG}: the page and its files, C{GET /exchange}, C{GET
/network.har?upto=N}, and the same C{Host} check as the rest of the API.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.api.resource import VIEW_FILES, viewFile
from netlog.har.export import writeHar
from netlog.log.writer import LogWriter
from tests.api.test_host import ask
from tests.support import REPO, netlogArgv, sourceEnv

#: Seconds to wait for C{netlog view} to say where it serves.
START_WAIT = 30.0

FORM = b"username=ann&password=%3Cremoved%3E"


def writeViewLog(path: str) -> None:
    """
    A log with a form POST answered with a cookie, a JSON answer, a refusal,
    and an exchange still open at the end.
    """
    writer = LogWriter(path)
    writer.startService()
    post = writer.open(
        {
            "proxy": "site", "kind": "exchange", "started": 1764670000.0,
            "request": {
                "method": "POST", "url": "https://shop.test/login", "version": "HTTP/1.1",
                "headers": [["Host", "shop.test"], ["Content-Type", "application/x-www-form-urlencoded"]],
                "headers_size": 80,
            },
            "server": {"host": "shop.test", "port": 443, "address": "127.0.0.1"},
        }
    )
    writer.end(
        post,
        {
            "ended": 1764670000.2,
            "times": {"connected": None, "sent": 1764670000.1, "first_byte": 1764670000.15, "end": 1764670000.2},
            "request_body": {"size": len(FORM), "data": base64.b64encode(FORM).decode()},
            "response": {
                "status": 303, "reason": "See Other", "version": "HTTP/1.1",
                "headers": [["Location", "/account"], ["Set-Cookie", "session=abc; Path=/; HttpOnly"]],
                "headers_size": 70, "body": {"size": 0},
            },
            "bytes": {"up": 120, "down": 70},
        },
    )
    for i in range(3):
        exchangeId = writer.open(
            {
                "proxy": "site", "kind": "exchange", "started": 1764670001.0 + i,
                "request": {"method": "GET", "url": f"https://shop.test/api/{i}", "headers": []},
                "server": {"host": "shop.test", "port": 443, "address": "127.0.0.1"},
            }
        )
        body = json.dumps({"i": i}).encode()
        writer.end(
            exchangeId,
            {
                "ended": 1764670001.5 + i,
                "response": {
                    "status": 200, "reason": "OK", "version": "HTTP/1.1",
                    "headers": [["Content-Type", "application/json"]],
                    "headers_size": 40, "body": {"size": len(body), "data": base64.b64encode(body).decode()},
                },
                "bytes": {"up": 50, "down": 60},
            },
        )
    writer.open(
        {
            "proxy": "standin", "kind": "tunnel", "started": 1764670010.0,
            "request": {"method": "CONNECT", "url": "https://live.test:443/", "headers": []},
            "server": {"host": "live.test", "port": 443, "address": "127.0.0.1"},
        }
    )
    writer.stopService()
    # A clean stop ends the tunnel ("the proxy stopped"): drop that line, as
    # if the log were read while the proxy ran.
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(b"".join(data.splitlines(keepends=True)[:-1]))


def lines(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [json.loads(raw) for raw in f]


@pytest.mark.slow
class ViewServerTests(SynchronousTestCase):
    def setUp(self) -> None:
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        self.folder = folder
        self.logPath = os.path.join(folder, "network.jsonl")
        writeViewLog(self.logPath)
        self.proc = subprocess.Popen(
            netlogArgv() + ["view", self.logPath, "--listen", "tcp:0:interface=127.0.0.1"],
            cwd=REPO, env=sourceEnv(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        self.addCleanup(self.stop)
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline().decode()
        match = re.match(r"netlog view: serving .* on (http://127\.0\.0\.1:(\d+)/)$", first.strip())
        self.assertIsNotNone(match, f"what netlog view printed: {first!r}")
        assert match is not None
        self.url = match.group(1)
        self.port = int(match.group(2))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(START_WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stdout is not None
        self.proc.stdout.close()

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        """
        C{GET path} as a browser would (chunked answers read whole): the
        status, the headers (lowercase names), the body.
        """
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(self.url.rstrip("/") + path, timeout=START_WAIT) as answer:
                return answer.status, {k.lower(): v for k, v in answer.headers.items()}, answer.read()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()

    def test_page(self) -> None:
        """
        C{GET /} at the URL printed is the live view's page, and its script
        and style are the package's files, each with its type; the page may
        run only its own script and can't be framed.
        """
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(self.url, timeout=START_WAIT) as answer:
            self.assertEqual(answer.status, 200)
            page = answer.read()
            policy = answer.headers["content-security-policy"]
        self.assertIn(b'<script src="view.js"', page)
        self.assertIn("script-src 'self'", policy)
        self.assertIn("frame-ancestors 'none'", policy)
        for path, (name, kind) in VIEW_FILES.items():
            code, headers, body = self.get("/" + path.decode())
            self.assertEqual((code, headers["content-type"]), (200, kind.decode()), path)
            self.assertEqual(body, viewFile(name), path)
            self.assertEqual(headers["x-content-type-options"], "nosniff")

    def test_hostChecked(self) -> None:
        """
        The page, its script, an exchange and the HAR at a cursor get C{421}
        for a C{Host} that isn't the API's own (DNS rebinding), or none.
        """
        for path in ("/", "/view.js", "/exchange?id=1&end=2", "/network.har?upto=2"):
            for host in (b"rebound.test", b"rebound.test:%d" % self.port, None):
                code, _, body = ask(self.port, host, path)
                self.assertEqual(code, 421, (path, host))
                self.assertNotIn(b"<html", body)
                self.assertNotIn(b"shop.test", body)

    def test_exchange(self) -> None:
        """
        C{GET /exchange?id=N&end=M} gives the exchange's two records in
        order (bodies' base64 left out) and its HAR entry with the form and
        the cookie; without C{end} the end line is found; an exchange still
        open has none.
        """
        logged = lines(self.logPath)
        for query in ("id=1&end=2", "id=1"):
            code, headers, body = self.get("/exchange?" + query)
            self.assertEqual((code, headers["content-type"]), (200, "application/json"), query)
            detail = json.loads(body)
            self.assertEqual(detail["open"], logged[0])
            expected = dict(logged[1])
            expected["request_body"] = {"size": len(FORM)}
            self.assertEqual(detail["end"], expected)
            entry = detail["entry"]
            self.assertEqual(
                [(p["name"], p["value"]) for p in entry["request"]["postData"]["params"]],
                [("username", "ann"), ("password", "<removed>")],
            )
            self.assertEqual([c["name"] for c in entry["response"]["cookies"]], ["session"])
        tunnel = logged[-1]
        code, _, body = self.get(f"/exchange?id={tunnel['n']}")
        self.assertEqual(code, 200)
        self.assertIsNone(json.loads(body)["end"])

    def test_exchangeErrors(self) -> None:
        """
        An id that is no open line, or an end line that isn't the
        exchange's, gets C{404} saying so; a missing or bad id C{400}.
        """
        for path, code, says in (
            ("/exchange?id=2", 404, "no exchange 2"),
            ("/exchange?id=1&end=4", 404, "line 4 is not the end line of exchange 1"),
            ("/exchange?id=999", 404, "no exchange 999"),
            ("/exchange", 400, "required"),
            ("/exchange?id=x", 400, "whole number"),
            ("/exchange?id=1&body=1", 400, "unknown parameter"),
        ):
            got, headers, body = self.get(path)
            self.assertEqual((got, headers["content-type"]), (code, "application/json"), path)
            self.assertIn(says, json.loads(body).get("reason", ""), path)

    def test_harAtCursor(self) -> None:
        """
        C{GET /network.har?upto=N} is the HAR of the log as it was when it
        ended at line N: the export of the log cut there; the exchange whose
        end came later is open in it. A line the log lacks gets C{400}.
        """
        with open(self.logPath, "rb") as f:
            data = f.read()
        count = data.count(b"\n")
        for upto in (0, 1, 3, 4, count):
            cut = os.path.join(self.folder, f"cut{upto}.jsonl")
            with open(cut, "wb") as f:
                f.write(b"".join(data.splitlines(keepends=True)[:upto]))
            out = io.BytesIO()
            writeHar(cut, out)
            code, _, body = self.get(f"/network.har?upto={upto}")
            self.assertEqual(code, 200, upto)
            self.assertEqual(json.loads(body), json.loads(out.getvalue()), upto)
        har = json.loads(self.get("/network.har?upto=3")[2])
        self.assertEqual([e.get("_open", False) for e in har["log"]["entries"]], [False, True])
        code, _, body = self.get(f"/network.har?upto={count + 1}")
        self.assertEqual(code, 400)
        self.assertEqual(json.loads(body)["parameter"], "upto")
        self.assertEqual(json.loads(self.get("/network.har")[2]), json.loads(self.get(f"/network.har?upto={count}")[2]))


class ViewCommandTests(SynchronousTestCase):
    def test_packageData(self) -> None:
        """
        A plain build of the package (what C{pip install .} copies) carries
        the page's files.
        """
        # In a copy of the tree: a build writes its egg-info beside setup.cfg.
        tree = os.path.abspath(self.mktemp())
        os.makedirs(tree)
        for name in ("setup.cfg", "pyproject.toml", "README.rst"):
            shutil.copy(os.path.join(REPO, name), tree)
        for name in ("netlog", "twisted"):
            shutil.copytree(
                os.path.join(REPO, name), os.path.join(tree, name),
                ignore=shutil.ignore_patterns("__pycache__", "dropin.cache"),
            )
        out = os.path.join(tree, "out")
        done = subprocess.run(
            [sys.executable, "-c", "from setuptools import setup; setup()", "-q", "build_py", "-d", out],
            cwd=tree, capture_output=True, timeout=START_WAIT,
        )
        self.assertEqual(done.returncode, 0, done.stderr.decode("utf-8", "replace"))
        for name, _ in VIEW_FILES.values():
            with open(os.path.join(out, "netlog", "api", "static", name), "rb") as f:
                self.assertEqual(f.read(), viewFile(name), name)

    def test_noLog(self) -> None:
        """
        C{netlog view} on a path with no log says so and exits 1, serving
        nothing.
        """
        missing = os.path.join(os.path.abspath(self.mktemp()), "none.jsonl")
        done = subprocess.run(
            netlogArgv() + ["view", missing, "--listen", "tcp:0:interface=127.0.0.1"],
            cwd=REPO, env=sourceEnv(), capture_output=True, timeout=START_WAIT,
        )
        self.assertEqual(done.returncode, 1)
        self.assertIn(b"netlog view: there is no log at", done.stderr)
