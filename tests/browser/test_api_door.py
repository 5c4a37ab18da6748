"""
A web page can't make a session (issue 20): Chromium, its proxy the
stand-in, opens a page of the test site that POSTs to the stand-in's
loopback API as any page can (C{fetch} with C{mode: "no-cors"}), the browser
reaching loopback directly as it does by default.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import tempfile
import threading
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser import browser, procs


class _Probe(http.server.BaseHTTPRequestHandler):
    """
    A loopback server that keeps what it got: the same page's requests
    reach it, which shows that they reach loopback at all.
    """

    seen: list[dict[str, Any]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        type(self).seen.append({"headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.mark.slow
class CrossSiteBrowserTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-door-browser-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        proxy = procs.startStandinWithApi(self.tmp, self.addCleanup)
        self.port, self.apiPort = proxy.port, proxy.apiPort
        _Probe.seen = []
        self.probe = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Probe)
        threading.Thread(target=self.probe.serve_forever, daemon=True).start()
        self.addCleanup(self.probe.server_close)
        self.addCleanup(self.probe.shutdown)

    def test_noCorsPost(self) -> None:
        """
        The page's three no-cors POSTs (text, form, JSON) to
        C{/sessions} make no session and no session log, while the same
        POSTs reach the probe on loopback straight from the browser, marked
        as another site's (C{Origin} the page's, C{Sec-Fetch-Site:
        cross-site}); the proxy kept the page, not the POSTs.
        """
        api = f"http://127.0.0.1:{self.apiPort}/sessions"
        probe = f"http://127.0.0.1:{self.probe.server_address[1]}/sessions"
        page = f"http://shop.test:{self.site.http}/cross-site?to={quote(api, safe='')}&to={quote(probe, safe='')}"

        def visit(p: Any) -> str:
            p.goto(page)
            p.wait_for_function("document.title === 'done'")
            return str(p.title())

        run = browser.Run(proxy=f"http://127.0.0.1:{self.port}", bypass=["127.0.0.1"])
        self.assertEqual(browser.withBrowser(run, visit), "done")

        self.assertEqual(len(_Probe.seen), 3, _Probe.seen)
        for got in _Probe.seen:
            self.assertEqual(got["headers"]["origin"], f"http://shop.test:{self.site.http}")
            self.assertEqual(got["headers"].get("sec-fetch-site"), "cross-site")
            self.assertNotIn("application/json", got["headers"].get("content-type", ""))
        self.assertEqual(sorted(json.loads(g["body"])["name"] if g["body"].startswith(b"{") else g["body"].decode()
                                for g in _Probe.seen), ["csrf-json", "csrf-text", "name=csrf-form"])

        import urllib.request

        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(f"http://127.0.0.1:{self.apiPort}/sessions", timeout=30) as answer:
            self.assertEqual(json.loads(answer.read())["sessions"], [])
        self.assertFalse([n for n in os.listdir(self.tmp) if n.startswith("standin.") and n != "standin.jsonl"])
        procs.waitForEnds(os.path.join(self.tmp, "standin.jsonl"))
        with open(os.path.join(self.tmp, "standin.jsonl")) as f:
            urls = [r["request"]["url"] for r in map(json.loads, f) if r["type"] == "open"]
        self.assertTrue(any("/cross-site" in u for u in urls), urls)
        self.assertFalse([u for u in urls if urlsplit(u).hostname == "127.0.0.1"], urls)
