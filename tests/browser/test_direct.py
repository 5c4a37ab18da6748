"""
The browser suite's footing, with no proxy in between: Debian's Chromium,
driven by Playwright with the flags our users pass, walks the test site over
HTTPS (its name mapped by C{--host-resolver-rules}, its self-signed
certificate trusted by SPKI hash alone), and every page works. The proxy
tests compare netlog's HAR with the Playwright HAR such a run writes.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser import browser, procs


@pytest.mark.slow
class DirectTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-browser-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)

    def test_scenarioWorksWithoutProxy(self) -> None:
        """
        Chromium reaches C{https://shop.test} only through the resolver map
        and trusts the site only through the SPKI list; the scenario's every
        step shows what the site answered, and Playwright's HAR lists the
        session's requests in the order the person made them.
        """
        harPath = os.path.join(self.tmp, "playwright.har")
        run = browser.Run(
            spkiHashes=[browser.spkiHash(self.site.certPEM)],
            maps={"shop.test": f"127.0.0.1:{self.site.https}"},
            harPath=harPath,
        )
        seen = browser.withBrowser(run, lambda page: browser.shopScenario(page, "https://shop.test"))
        seen.pop("searchURL")
        self.assertEqual(seen, browser.expectedSeen())
        with open(harPath, encoding="utf-8") as f:
            har = json.load(f)
        got = [(e["request"]["method"], e["request"]["url"], e["response"]["status"]) for e in har["log"]["entries"]]
        self.assertEqual(got, expectedRequests("https://shop.test", wsScheme="wss"))


def expectedRequests(base: str, wsScheme: str) -> list[tuple[str, str, int]]:
    """
    The requests L{browser.shopScenario} makes, in order: (method, URL,
    status). Playwright names the WebSocket's URL C{wss://}, as netlog does.
    """
    wsBase = wsScheme + base[base.index(":") :]
    return [
        ("GET", base + "/", 200),
        ("GET", base + "/logo.png", 200),
        ("GET", base + "/login", 200),
        ("POST", base + "/login", 302),
        ("GET", base + "/account", 200),
        ("GET", base + "/logo.png", 200),
        ("GET", base + "/cart", 200),
        ("POST", base + "/api/cart", 200),
        ("GET", base + "/upload", 200),
        ("POST", base + "/upload", 200),
        ("GET", base + "/latin1", 200),
        ("GET", base + "/big.txt", 200),
        ("GET", base + "/news", 200),
        ("GET", base + "/chat", 200),
        ("GET", wsBase + "/ws", 101),
        ("GET", base + "/", 200),
        ("GET", base + "/logo.png", 200),
        ("GET", base + "/search?" + SEARCH_QUERY, 200),
    ]


#: The query the search form sends (the browser's own encoding of
#: L{browser.SEARCH} and the hidden category).
SEARCH_QUERY = "cat=home+%26+garden&q=caf%C3%A9+%26+cr%C3%A8me+100%25+%2B+more"
