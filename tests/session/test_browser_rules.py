"""
Rules in a real Chromium: one browser, a context (and a page) per session,
rules on one of the sessions only.
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
class BrowserRulesTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-rules-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        self.apiPort = procs.startStandinWithApi(self.tmp, self.addCleanup).apiPort

    def test_pagePerSession(self) -> None:
        """
        The page of the session with rules gets the answer header its rule
        sets and a 403 for the blocked search, logged with C{_rules}; the
        other session's page, at the same time in the same browser, gets
        the site's own answers, and its log has no C{_rules}.
        """
        from netlog.client import Netlog

        nl = Netlog(f"http://127.0.0.1:{self.apiPort}", token_file=os.path.join(self.tmp, "api-token"))
        ruled = nl.create_session("ruled", rules={
            "headers": [{"match": "shop.test", "answer_set": {"X-Rules": "on"}}],
            "block": ["shop.test/search*"],
        })
        plain = nl.create_session("plain")
        home = f"http://shop.test:{self.site.http}/"
        search = f"http://shop.test:{self.site.http}/search?q=x"
        seen: dict[str, list[tuple[int, str | None]]] = {}
        with browser.pagesThrough({made.name: made.proxy for made in (ruled, plain)}) as pages:
            for name, page in pages.items():
                seen[name] = []
                for url in (home, search):
                    answer = page.goto(url)
                    assert answer is not None
                    seen[name].append((answer.status, answer.headers.get("x-rules")))
        # (The blocked search is netlog's own answer: no header rule acts on it.)
        self.assertEqual(seen, {"ruled": [(200, "on"), (403, None)], "plain": [(200, None), (200, None)]})
        for made in (ruled, plain):
            self.assertTrue(made.wait_ended())
        with open(ruled.log, "rb") as f:
            opens = {line["request"]["url"]: line for line in map(json.loads, f) if line["type"] == "open"}
        self.assertEqual(opens[search]["_rules"], [{"rule": "block[0]", "action": "blocked"}])
        self.assertEqual(opens[home]["_rules"], [{"rule": "headers[0]", "action": "answer set X-Rules"}])
        with open(plain.log, "rb") as f:
            self.assertFalse([line for line in map(json.loads, f) if "_rules" in line])
