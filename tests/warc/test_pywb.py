"""
Chromium walks the test shop through a site proxy keeping every body (the
sign-in form's POST and its redirect, fetched JSON, the logo, an upload,
big text, brotli news, a WebSocket chat); C{netlog warc} exports the log;
warcio checks every digest and indexes every exchange; pywb, the archiving
world's replay, loads the WARC into a collection and serves on loopback
every recorded URL with the body the log kept, and Chromium opened on pywb
sees the page's logo.
"""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import shutil
import subprocess
import tempfile
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.capture import MAX_RESPONSE_BODY
from tests.browser import browser, procs
from tests.support import freePort
from tests.warc.support import pywbTool

BASE = "https://shop.test"
COLLECTION = "shop"


def timestamp(seconds: float) -> str:
    """
    pywb's 14-digit timestamp of a moment.
    """
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y%m%d%H%M%S")


def keptGets(logPath: str) -> tuple[dict[str, set[tuple[int, str]]], dict[str, float], dict[str, int]]:
    """
    From the log: per URL fetched with a GET, each status and kept body's
    sha256 it was answered with; when each URL was first fetched; and the
    bytes kept of each body the log cut at its limit, by URL.
    """
    with open(logPath, "rb") as f:
        lines = [json.loads(line) for line in f]
    opens = {line["id"]: line for line in lines if line["type"] == "open"}
    kept: dict[str, set[tuple[int, str]]] = defaultdict(set)
    first: dict[str, float] = {}
    cut: dict[str, int] = {}
    for line in lines:
        opened = opens.get(line["id"])
        if line["type"] != "end" or opened is None or opened["kind"] != "exchange":
            continue
        request = opened["request"]
        if request["method"] != "GET" or not request["url"].startswith(BASE) or "response" not in line:
            continue
        keptBody = line["response"].get("body", {})
        body = base64.b64decode(keptBody.get("data", ""))
        if keptBody.get("_truncated"):
            cut[request["url"]] = len(body)
        kept[request["url"]].add((line["response"]["status"], hashlib.sha256(body).hexdigest()))
        first.setdefault(request["url"], opened["started"])
    return kept, first, cut


@pytest.mark.slow
class PywbReplayTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-warc-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def record(self) -> str:
        """
        Walk the shop through a site proxy keeping every body; its log.
        """
        self.site = procs.startSite(self.tmp, self.addCleanup)
        return self.walk("record", ("--keep-bodies", "all"))[0]

    def walk(self, name: str, extra: tuple[str, ...], webSocket: bool = True) -> tuple[str, dict[str, Any]]:
        """
        Walk the shop through a site proxy with C{extra} options; its log
        and what the pages showed.
        """
        directory = os.path.join(self.tmp, name)
        os.makedirs(directory)
        proxy = procs.startSiteProxy(directory, self.site, self.addCleanup, extra=extra)
        spki = procs.runNetlog(["ca", "--state", str(proxy.state), "--spki-only"]).stdout.decode().strip()
        run = browser.Run(proxy=f"http://127.0.0.1:{proxy.port}", spkiHashes=[spki])
        seen = browser.withBrowser(run, lambda page: browser.shopScenario(page, BASE, webSocket=webSocket))
        procs.waitForEnds(proxy.log)
        procs.stop(proxy.proc)
        return proxy.log, seen

    def pywb(self, warc: str) -> int:
        """
        A pywb collection holding C{warc}, served by C{wayback} on
        loopback; its port.
        """
        root = os.path.join(self.tmp, "pywb")
        os.makedirs(root)
        for args in (["init", COLLECTION], ["add", COLLECTION, warc]):
            subprocess.run([pywbTool("wb-manager"), *args], cwd=root, check=True, capture_output=True,
                           timeout=procs.START_TIMEOUT * 4)
        port = freePort()
        out = os.path.join(self.tmp, "wayback.out")
        proc = procs.start([pywbTool("wayback"), "-p", str(port), "-b", "127.0.0.1", "-d", root],
                           self.addCleanup, out)
        procs.waitForPort(port, proc, out, timeout=procs.START_TIMEOUT * 2)
        return port

    def test_pywbReplaysTheWarc(self) -> None:
        """
        Every URL the browser got with a GET comes back from pywb (its
        original, unrewritten form, C{id_}) with a status and a body whose
        sha256 the log has for it (of what it kept, for the big text it
        cut at 1 MB); the WARC passes C{warcio check}, and
        C{warcio index} lists a response and a request per exchange, and
        its WACZ passes C{wacz validate}; the front page opened in Chromium from pywb shows the logo.
        """
        log = self.record()
        warc = os.path.join(self.tmp, "shop.warc.gz")
        done = procs.runNetlog(["warc", log, "-o", warc])
        summary = done.stderr.decode().strip()
        self.assertRegex(summary, r"^netlog warc: \d+ exchanges in \d+ records$")

        check = subprocess.run([pywbTool("warcio"), "check", "-v", warc], capture_output=True, timeout=60)
        self.assertEqual(check.returncode, 0, check.stdout.decode())
        index = subprocess.run([pywbTool("warcio"), "index", "-f", "warc-type,warc-target-uri", warc],
                               capture_output=True, check=True, timeout=60)
        indexed = [json.loads(line) for line in index.stdout.splitlines()]
        kept, first, cut = keptGets(log)
        responses = {r["warc-target-uri"] for r in indexed if r["warc-type"] == "response"}
        requests = {r["warc-target-uri"] for r in indexed if r["warc-type"] == "request"}
        self.assertTrue(set(kept) <= responses, set(kept) - responses)
        self.assertEqual(responses, requests)
        self.assertIn(BASE + "/logo.png", kept)
        self.assertIn(BASE + "/big.txt", cut)
        self.assertIn(BASE + "/api/cart", responses)  # the fetched JSON (a POST)

        wacz = os.path.join(self.tmp, "shop.wacz")
        procs.runNetlog(["wacz", log, "-o", wacz])
        checked = subprocess.run([pywbTool("wacz"), "validate", "-f", wacz], capture_output=True, timeout=120)
        self.assertEqual(checked.returncode, 0, checked.stdout.decode())

        port = self.pywb(warc)
        for url, answers in sorted(kept.items()):
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            # (as a browser says: pywb undoes a br coding for a client that doesn't take it)
            connection.request("GET", f"/{COLLECTION}/{timestamp(first[url])}id_/{url}",
                               headers={"Accept-Encoding": "gzip, deflate, br"})
            answer = connection.getresponse()
            # a body the log cut is archived cut (WARC-Truncated), under
            # the head the browser got, which promised the whole
            body = answer.read(cut[url]) if url in cut else answer.read()
            connection.close()
            self.assertIn((answer.status, hashlib.sha256(body).hexdigest()), answers, url)

        shot = os.path.join(self.tmp, "front.png")

        def look(page: Any) -> int:
            page.goto(f"http://127.0.0.1:{port}/{COLLECTION}/{timestamp(first[BASE + '/'])}mp_/{BASE}/")
            # pywb shows a top-level page in its frame, the capture inside
            logo = page.frame_locator("iframe").first.locator("#logo")
            width = logo.evaluate("e => e.complete ? e.naturalWidth"
                                  " : new Promise(done => { e.onload = e.onerror = () => done(e.naturalWidth); })")
            page.screenshot(path=shot)
            if os.environ.get("NETLOG_KEEP_SCREENSHOT"):
                shutil.copy(shot, os.environ["NETLOG_KEEP_SCREENSHOT"])
            return int(width)

        self.assertGreater(browser.withBrowser(browser.Run(), look), 0)

    def test_netlogReplaysTheWarc(self) -> None:
        """
        The WARC of a recording is a recording: a site proxy replaying it
        (C{--replay FILE.warc.gz}) serves every step of the shop with no
        connection to the site, each answer with the body the first run
        got (the WebSocket left out: its messages aren't replayed from a
        WARC), and marks each exchange replayed.
        """
        from tests.browser.test_replay import expectedSeen, keptAnswers

        log = self.record()
        warc = os.path.join(self.tmp, "shop.warc.gz")
        procs.runNetlog(["warc", log, "-o", warc])
        before = len(self.site.connections())
        replayed, seen = self.walk("replay", ("--keep-bodies", "all", "--replay", warc), webSocket=False)
        seen.pop("searchURL")
        self.assertEqual(seen, expectedSeen(MAX_RESPONSE_BODY, webSocket=False))
        self.assertEqual(len(self.site.connections()), before, "a replay reached the site")
        # (the walk without its WebSocket leaves the chat page out)
        recorded = [a for a in keptAnswers(log) if a[1] != BASE + "/chat" and not a[1].startswith("wss:")]
        self.assertEqual(keptAnswers(replayed), recorded)
        with open(replayed, "rb") as f:
            ends = [json.loads(line) for line in f if b'"type":"end"' in line]
        self.assertTrue(ends)
        self.assertTrue(all(isinstance(end.get("_replayed"), int) for end in ends))
