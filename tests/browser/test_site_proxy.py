"""
Chromium through the site proxy, graded as our users grade: the shop
scenario once through the forward port (CONNECT, decrypted with netlog's CA)
and once through the HTTPS route; then the C{network.har} that C{netlog har}
exports is read by WebArena-Verified 1.2.3's own loader, checked by
har-validator, and compared entry by entry with Playwright's own HAR of the
same session. C{GET /network.har} on the proxy's API gives the same HAR.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser import browser, grading, harcompare, procs
from tests.har.support import validate, wavLoad

BASE = "https://shop.test"


@pytest.mark.slow
class SiteProxyTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-browser-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        self.proxy = procs.startSiteProxy(self.tmp, self.site, self.addCleanup, api=True)
        self.spki = procs.runNetlog(["ca", "--state", str(self.proxy.state), "--spki-only"]).stdout.decode().strip()

    def session(self, run: browser.Run) -> tuple[bytes, bytes, dict[str, Any]]:
        """
        Walk the shop with Chromium as C{run} says; once every exchange has
        ended, export the log with C{netlog har} and fetch it from the API's
        C{GET /network.har}. Returns both HARs' bytes and Playwright's HAR.
        """
        run.harPath = os.path.join(self.tmp, "playwright.har")
        seen = browser.withBrowser(run, lambda page: browser.shopScenario(page, BASE))
        seen.pop("searchURL")
        self.assertEqual(seen, browser.expectedSeen(), "what the pages showed through the proxy")
        procs.waitForEnds(self.proxy.log)
        harPath = os.path.join(self.tmp, "network.har")
        procs.runNetlog(["har", self.proxy.log, "-o", harPath])
        with open(harPath, "rb") as f:
            ours = f.read()
        return ours, procs.fetchAPI(self.proxy, "/network.har"), grading.load(run.harPath)

    def checkSession(self, ours: bytes, fromAPI: bytes, theirs: dict[str, Any]) -> None:
        har = json.loads(ours.decode("utf-8"))
        self.assertEqual(json.loads(fromAPI.decode("utf-8")), har, "GET /network.har vs netlog har")
        for name, exported in (("netlog har", ours), ("GET /network.har", fromAPI)):
            self.assertEqual(validate(exported), [], f"har-validator's verdict on {name}")
            grading.checkGraded(self, wavLoad(exported), BASE)
        grading.checkOurs(self, har, BASE)

        comparison = harcompare.Comparison(har["log"]["entries"], theirs["log"]["entries"])
        self.assertEqual(comparison.problems, [], comparison.report())
        kinds = {k: n for k, n in comparison.kinds().items() if k[1] != "favicon"}
        self.assertEqual(kinds, grading.expectedExplanations(BASE), comparison.report())

        (ws,) = [e for e in har["log"]["entries"] if e["request"]["url"] == grading.webSocketUrl(BASE) + "/ws"]
        mine = {k: ws["_websocket"][k] for k in ("messages_up", "messages_down")}
        self.assertEqual(mine, grading.playwrightWebSocket(theirs), "WebSocket messages: ours vs Playwright's")

    def test_forwardPort(self) -> None:
        """
        Through the forward port (the browser's proxy setting), with netlog's
        CA trusted by its SPKI hash alone: every page works, and the HAR is
        graded right, validates, and agrees with Playwright's.
        """
        ours, fromAPI, theirs = self.session(
            browser.Run(proxy=f"http://127.0.0.1:{self.proxy.port}", spkiHashes=[self.spki])
        )
        self.checkSession(ours, fromAPI, theirs)

    def test_httpsRoute(self) -> None:
        """
        Through the HTTPS route (C{shop.test} mapped to the route's port, no
        proxy setting): the same.
        """
        ours, fromAPI, theirs = self.session(
            browser.Run(spkiHashes=[self.spki], maps={"shop.test": f"127.0.0.1:{self.proxy.routePort}"})
        )
        self.checkSession(ours, fromAPI, theirs)
