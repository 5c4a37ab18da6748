"""
Chromium through the stand-in on the open-web pattern: it decrypts nothing,
so HTTPS sites are tunnels (kept with their bytes each way), plain-HTTP
requests are kept by request line and status, and destinations it turns down
or can't reach are in the HAR too, everything in the order it started.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser import browser, grading, procs, site_app
from tests.har.support import validate, wavLoad
from tests.support import freePort


@pytest.mark.slow
class StandinTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-browser-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        #: allowed for CONNECT, but nothing listens there
        self.closedPort = freePort()
        #: not allowed for CONNECT: the stand-in answers 403
        self.refusedPort = freePort()
        self.proxy = procs.startStandin(self.tmp, [self.site.https, self.closedPort], self.addCleanup)

    def test_openWeb(self) -> None:
        """
        Plain-HTTP pages are entries with their request line and status, the
        same requests Playwright saw in the same order; each HTTPS connection
        is a C{CONNECT} entry whose bytes each way are exactly what the site
        counted on that connection; a port the stand-in doesn't allow is
        C{_refused} with its 403; a destination that refuses the connection
        and a name that doesn't resolve are C{_failed} with the reason; the
        HAR is in start order and passes the schema.
        """
        httpBase = f"http://shop.test:{self.site.http}"
        httpsBase = f"https://shop.test:{self.site.https}"
        refused = f"https://shop.test:{self.refusedPort}/"
        closed = f"https://shop.test:{self.closedPort}/"
        unresolved = f"https://nowhere.test:{self.site.https}/"
        run = browser.Run(
            proxy=f"http://127.0.0.1:{self.proxy.port}",
            spkiHashes=[browser.spkiHash(self.site.certPEM)],
            harPath=os.path.join(self.tmp, "playwright.har"),
        )
        seen = browser.withBrowser(
            run, lambda page: browser.openWebScenario(page, httpBase, httpsBase, [refused, closed, unresolved])
        )
        expected = browser.expectedSeen()
        self.assertEqual(
            {k: seen[k] for k in ("account", "cart", "big", "chat")},
            {k: expected[k] for k in ("account", "cart", "big", "chat")},
            "what the pages showed through the stand-in",
        )
        for url in (refused, closed, unresolved):
            self.assertIsNotNone(seen["errors"][url], f"Chromium reached {url}")

        procs.waitForEnds(self.proxy.log)
        harPath = os.path.join(self.tmp, "network.har")
        procs.runNetlog(["har", self.proxy.log, "-o", harPath])
        with open(harPath, "rb") as f:
            raw = f.read()
        self.assertEqual(validate(raw), [], "har-validator's verdict on network.har")
        entries: list[dict[str, Any]] = json.loads(raw)["log"]["entries"]
        theirs = grading.load(str(run.harPath))["log"]["entries"]
        listing = "\n".join(
            f"  {i} {e['request']['method']} {e['request']['url']} {e['response']['status']} "
            + json.dumps({k: v for k, v in e.items() if k in ("_tunnel", "_failed", "_refused")})
            for i, e in enumerate(entries)
        )

        # Plain HTTP: by request line and status, as Playwright saw them.
        plain = [
            (e["request"]["method"], e["request"]["url"], e["response"]["status"])
            for e in entries
            if e["request"]["url"].startswith("http://") and "favicon" not in e["request"]["url"]
        ]
        theirPlain = [
            (e["request"]["method"], e["request"]["url"], e["response"]["status"])
            for e in theirs
            if e["request"]["url"].startswith("http://")
        ]
        self.assertEqual(plain, theirPlain, "plain-HTTP requests: ours vs Playwright's\n" + listing)
        self.assertEqual(
            plain[:4],
            [
                ("GET", httpBase + "/", 200),
                ("GET", httpBase + "/logo.png", 200),
                ("GET", httpBase + "/login", 200),
                ("POST", httpBase + "/login", 302),
            ],
        )
        for e in entries:
            if e["request"]["url"].startswith("http://"):
                self.assertEqual(e["request"]["httpVersion"], "HTTP/1.1")

        # Tunnels: every HTTPS connection, with exactly the bytes the site saw.
        tunnels = [e for e in entries if e["request"]["url"] == httpsBase + "/"]
        self.assertTrue(tunnels, "no tunnel to the HTTPS site\n" + listing)
        for e in tunnels:
            self.assertEqual(
                (e["request"]["method"], e["response"]["status"], "_failed" in e, "_refused" in e),
                ("CONNECT", 200, False, False),
                listing,
            )
        siteSaw = Counter(
            (c["in"], c["out"]) for c in self.site.httpsConnections(atLeast=len(tunnels))
        )
        tunnelBytes = Counter((e["_tunnel"]["bytes_up"], e["_tunnel"]["bytes_down"]) for e in tunnels)
        self.assertEqual(tunnelBytes, siteSaw, "tunnels' bytes (up, down) vs what the site counted\n" + listing)
        self.assertGreater(sum(down for _, down in tunnelBytes.elements()), site_app.BIG_SIZE)

        # Turned down and unreachable destinations.
        def at(url: str) -> list[dict[str, Any]]:
            found = [e for e in entries if e["request"]["url"] == url]
            self.assertTrue(found, f"no entry for {url}\n" + listing)
            return found

        for e in at(refused):
            # netlog's own 403 is no answer from the server: -1, and the 403 in _refused
            self.assertEqual((e["request"]["method"], e["response"]["status"]), ("CONNECT", -1), listing)
            self.assertEqual(e["_refused"]["status"], 403, listing)
        for url in (closed, unresolved):
            for e in at(url):
                self.assertEqual(e["request"]["method"], "CONNECT", listing)
                self.assertTrue(e.get("_failed", {}).get("reason"), f"{url} is not _failed with a reason\n" + listing)
                # netlog's own 502 is no answer from the server: -1, and the 502 in _failed
                self.assertEqual((e["response"]["status"], e["_failed"].get("status")), (-1, 502), listing)
                self.assertNotIn("_refused", e, listing)

        # Start order: the HAR's order is the order things started, which is
        # the order the person did them in.
        def phase(e: dict[str, Any]) -> int:
            url = e["request"]["url"]
            if url.startswith("http://"):
                return 0
            return [httpsBase + "/", refused, closed, unresolved].index(url) + 1

        phases = [phase(e) for e in entries]
        self.assertEqual(phases, sorted(phases), "entries out of start order\n" + listing)
        started = [e["startedDateTime"] for e in entries]
        self.assertEqual(started, sorted(started), "startedDateTime out of order\n" + listing)

        # A grader's loader reads it: the sign-in's request line and status.
        loaded = grading.Graded(wavLoad(raw))
        login = loaded.last("POST", httpBase + "/login")
        self.assertEqual((login["status"], login["is_redirect"]), (302, True))
        self.assertEqual(login["redirect_url"], httpBase + "/account")
        self.assertEqual(urlsplit(loaded.last("CONNECT", httpsBase + "/")["url"]).port, self.site.https)
