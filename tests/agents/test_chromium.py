"""
Finding and waiting with real Chromium traffic: a supervised site proxy with
two sessions (and its main listener), each driven by Chromium through a
sign-in form and, for one, a JSON order; the filter finds exactly the order,
a wait answers within 100 ms of its end, and the live view's filter box
shows the same rows as the API.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
import time
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import Netlog
from tests.browser import browser, procs

#: The order's POST, by the filter language.
ORDER = 'method:POST url:/api/cart reqbody:"\\"qty\\":2"'
#: Seconds within which a wait must answer once its exchange has ended.
PROMPT = 0.1


def signIn(page: Any, base: str) -> None:
    page.goto(base + "/login")
    page.locator("#username").press_sequentially(browser.USER)
    page.locator("#password").press_sequentially(browser.PASSWORD)
    page.click("#submit")
    page.wait_for_url(base + "/account")


def order(page: Any, base: str) -> None:
    page.click("#add")
    page.wait_for_function("document.getElementById('result').textContent.startsWith('ok')")


def logged(path: str) -> dict[int, tuple[dict[str, Any], dict[str, Any]]]:
    """
    A log's ended exchanges by id: (open record, end record).
    """
    with open(path, "rb") as f:
        records = [json.loads(line) for line in f]
    opens = {r["id"]: r for r in records if r["type"] == "open"}
    return {r["id"]: (opens[r["id"]], r) for r in records if r["type"] == "end" and r["id"] in opens}


@pytest.mark.slow
class ChromiumFindTests(SynchronousTestCase):

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-agents-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        self.base = f"http://shop.test:{self.site.http}"
        sites = procs.writeSites(self.tmp, self.site, origins=(self.base,))
        self.proxy = procs.startSiteProxy(self.tmp, self.site, self.addCleanup, api=True, sitesPath=sites,
                                          httpsRoute=False)
        assert self.proxy.state is not None
        self.api = f"http://127.0.0.1:{self.proxy.apiPort}"
        self.client = Netlog(self.api, token_file=os.path.join(self.proxy.state, "api-token"))

    def test_orderFoundAndAwaited(self) -> None:
        """
        Two sessions sign in; only alice orders. The order's filter finds
        exactly alice's order POST (and nothing of bob's); a wait started
        before the click answers within 100 ms of the order's end line; a
        wait for what never comes answers empty after its timeout.
        """
        alice = self.client.create_session("alice")
        bob = self.client.create_session("bob")
        waited: dict[str, Any] = {}
        main = f"http://127.0.0.1:{self.proxy.port}"
        with browser.pagesThrough({"alice": alice.proxy, "bob": bob.proxy, "main": main}) as pages:
            for page in pages.values():
                signIn(page, self.base)
            pages["bob"].goto(self.base + "/search?q=tea")
            pages["alice"].goto(self.base + "/cart")
            pages["main"].goto(self.base + "/cart")
            order(pages["main"], self.base)
            cursor = alice.find(ORDER).next

            def wait() -> None:
                waited["found"] = alice.wait_for(ORDER, 30, after=cursor)
                waited["at"] = time.time()

            waiter = threading.Thread(target=wait)
            waiter.start()
            time.sleep(0.5)
            self.assertTrue(waiter.is_alive(), "the wait answered before the order")
            order(pages["alice"], self.base)
            waiter.join(30)
        found = waited["found"]
        self.assertIsNotNone(found)
        late = waited["at"] - found["ended"]
        print(f"\nthe wait answered {late * 1000:.1f} ms after the order's end line")
        self.assertLess(late, PROMPT, f"the wait answered {late * 1000:.0f} ms after the order ended")

        self.assertTrue(alice.wait_ended())
        aliceLog = logged(alice.log)
        orders = {i for i, (o, _) in aliceLog.items()
                  if o["request"]["method"] == "POST" and o["request"]["url"] == self.base + "/api/cart"}
        self.assertEqual(len(orders), 1)
        self.assertEqual([e["id"] for e in alice.find(ORDER).exchanges], sorted(orders))
        self.assertEqual(found["id"], min(orders))
        self.assertEqual((found["method"], found["status"]), ("POST", 200))
        whole = alice.exchange(found["id"])
        self.assertEqual(json.loads(whole["request"]["body"]["text"]), browser.CART_ORDER)
        self.assertEqual(json.loads(whole["response"]["body"]["text"])["qty"], 2)
        self.assertEqual(bob.find(ORDER).exchanges, [])
        [login] = bob.find("method:POST url:/login").exchanges
        self.assertEqual(login["status"], 302)

        after = bob.find().next
        began = time.monotonic()
        self.assertIsNone(bob.wait_for(ORDER, 1, after=after))
        took = time.monotonic() - began
        self.assertGreaterEqual(took, 1.0)
        self.assertLess(took, 2.5)

        # The live view's box, with the same filters, shows the API's rows.
        procs.waitForEnds(self.proxy.log)
        filters = [ORDER, "method:POST", "status:3xx or type:json", "-host:shop.test"]
        expected = {f: {e["id"] for e in self.client.find(f, limit=1000).exchanges} for f in filters}
        self.assertEqual(len(expected[ORDER]), 1)
        self.assertEqual(len(expected["method:POST"]), 2)
        shown: dict[str, Any] = {}

        def view(page: Any) -> None:
            page.goto(self.api + "/")
            page.wait_for_function("() => window.netlogView !== undefined")
            for text in filters:
                page.fill("#filter-text", text)
                page.evaluate("() => window.netlogView.rendered()")
                shown[text] = set(page.evaluate("() => window.netlogView.shown()"))
            page.fill("#filter-text", "status:4x")
            page.evaluate("() => window.netlogView.rendered()")
            shown["mistake"] = (page.inner_text("#notice"), page.evaluate("() => window.netlogView.shown()"))

        browser.withBrowser(browser.Run(), view)
        self.assertEqual({f: shown[f] for f in filters}, expected)
        self.assertEqual(shown["mistake"],
                         ("Filter: at 1: status takes 200, 4xx or 400-499, not '4x'", []))
