"""
Two real Chromium browsers at once, each through its own session of one
stand-in: each session's HAR holds its own browser's requests and no other's.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser import browser, procs
from tests.har.support import validate, wavLoad
from tests.session.test_sessions import caller, getBytes

#: Searches each browser makes.
SEARCHES = 3


@pytest.mark.slow
class TwoBrowsersTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-sessions-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        proxy = procs.startStandinWithApi(self.tmp, self.addCleanup)
        self.apiPort = proxy.apiPort
        self.mainLog = os.path.join(self.tmp, "standin.jsonl")
        self.api = caller(os.path.join(self.tmp, "api-token"))

    def test_twoBrowsersAtOnce(self) -> None:
        """
        Two Chromium processes search the site at the same time, each through
        its own session: each session's HAR (from the API) has its browser's
        page loads, in order, and none of the other's; both pass the HAR
        schema and WebArena-Verified's loader; the main log holds nothing.
        """
        base = f"http://127.0.0.1:{self.apiPort}"
        sessions = {}
        for who in ("alice", "bob"):
            status, made = self.api("POST", base + "/sessions", {"name": who})
            self.assertEqual(status, 201, made)
            sessions[who] = made
        start = threading.Barrier(2, timeout=60)
        seen: dict[str, Any] = {}
        errors: list[BaseException] = []

        def searches(who: str) -> None:
            def body(page: Any) -> list[str]:
                start.wait()
                urls = []
                for i in range(SEARCHES):
                    url = f"http://shop.test:{self.site.http}/search?q={who}-{i}"
                    page.goto(url)
                    urls.append(url)
                return urls

            try:
                run = browser.Run(proxy="http://" + sessions[who]["proxy"])
                seen[who] = browser.withBrowser(run, body)
            except BaseException as e:  # reported below, on the test's thread
                errors.append(e)

        threads = [threading.Thread(target=searches, args=(who,)) for who in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(errors, [])
        for who, other in (("alice", "bob"), ("bob", "alice")):
            procs.waitForEnds(sessions[who]["log"])
            har = getBytes(sessions[who]["urls"]["har"])
            self.assertEqual(validate(har), [])
            wavLoad(har)
            urls = [e["request"]["url"] for e in json.loads(har)["log"]["entries"]]
            searched = [u for u in urls if "/search?" in u]
            self.assertEqual(searched, seen[who])
            self.assertFalse([u for u in urls if f"q={other}" in u], urls)
        self.assertEqual(os.path.getsize(self.mainLog), 0)

    def test_contextPerSession(self) -> None:
        """
        As C{docs/sessions.rst} shows it, on L{netlog.client}: one Chromium,
        a browser context per session (the launch proxy a placeholder each
        context overrides), the contexts' pages open at once; each session's
        log holds its own context's requests only.
        """
        from netlog.client import Netlog

        nl = Netlog(f"http://127.0.0.1:{self.apiPort}", token_file=os.path.join(self.tmp, "api-token"))
        sessions = {who: nl.create_session(who) for who in ("carol", "dave")}
        with browser.pagesThrough({who: made.proxy for who, made in sessions.items()}) as pages:
            for i in range(SEARCHES):
                for who, page in pages.items():
                    page.goto(f"http://shop.test:{self.site.http}/search?q={who}-{i}")
        for who, other in (("carol", "dave"), ("dave", "carol")):
            self.assertTrue(sessions[who].wait_ended())
            deleted = sessions[who].delete()
            with open(sessions[who].log, "rb") as f:
                lines = [json.loads(line) for line in f]
            urls = [line["request"]["url"] for line in lines if line["type"] == "open"]
            self.assertEqual(
                [u for u in urls if "/search?" in u],
                [f"http://shop.test:{self.site.http}/search?q={who}-{i}" for i in range(SEARCHES)],
            )
            self.assertFalse([u for u in urls if f"q={other}" in u], urls)
            self.assertEqual([line["n"] for line in lines], list(range(1, deleted["last"] + 1)))
