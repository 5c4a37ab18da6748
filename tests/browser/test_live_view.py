"""
The live view in Chromium, open while Chromium walks the test shop through
the site proxy: rows appear within a second of each line, the filters narrow
the list to what the log says they should, the login POST's detail shows its
form and its C{Set-Cookie}, and the HAR the page downloads is
C{GET /network.har} at the page's cursor.

The test saves screenshots of the list and of a detail pane; with
C{NETLOG_SCREENSHOTS=docs/_static} it also writes them where
C{docs/live-view.rst} shows them from.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Iterator
from urllib.parse import urlsplit

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import END, OPEN, encodeLine
from tests.browser import browser, procs
from tests.support import netlogArgv

BASE = "https://shop.test"
#: Seconds a line may take from the log to the page's list.
MAX_LAG = 1.0
#: The page's size for the screenshots, in CSS pixels.
VIEWPORT = {"width": 1180, "height": 600}
#: Milliseconds to wait for the page to catch up with the log.
CATCH_UP_MS = 10_000
#: Where the screenshots go besides the test's folder (the docs' command).
SCREENSHOTS_ENV = "NETLOG_SCREENSHOTS"


def logLines(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [json.loads(raw) for raw in f if raw.endswith(b"\n")]


def exchanges(lines: list[dict[str, Any]]) -> dict[int, tuple[dict[str, Any], dict[str, Any] | None]]:
    """
    Each exchange's open and end records, by id.
    """
    out: dict[int, tuple[dict[str, Any], dict[str, Any] | None]] = {}
    for line in lines:
        if line["type"] == "open":
            out[line["id"]] = (line, None)
        else:
            out[line["id"]] = (out[line["id"]][0], line)
    return out


def statusClass(ended: dict[str, Any] | None) -> str:
    if ended is None:
        return "open"
    if "_refused" in ended:
        return "refused"
    if "_failed" in ended:
        return "failed"
    if "response" not in ended:
        return "2xx" if "closed_by" in ended else ""
    return f"{ended['response']['status'] // 100}xx"


@pytest.mark.slow
class LiveViewTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-browser-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        self.proxy = procs.startSiteProxy(self.tmp, self.site, self.addCleanup, api=True)
        self.spki = procs.runNetlog(["ca", "--state", str(self.proxy.state), "--spki-only"]).stdout.decode().strip()
        self.viewURL = f"http://127.0.0.1:{self.proxy.apiPort}/"

    def screenshot(self, view: Any, name: str) -> None:
        view.screenshot(path=os.path.join(self.tmp, name))
        folder = os.environ.get(SCREENSHOTS_ENV)
        if folder:
            os.makedirs(folder, exist_ok=True)
            shutil.copy(os.path.join(self.tmp, name), os.path.join(folder, name))

    def catchUp(self, view: Any) -> list[dict[str, Any]]:
        """
        Wait until the page has read every line of the log as it is now;
        the log's lines.
        """
        lines = logLines(self.proxy.log)
        view.wait_for_function("(n) => window.netlogView.cursor() >= n", arg=lines[-1]["n"], timeout=CATCH_UP_MS)
        return lines

    def checkLags(self, view: Any, lines: list[dict[str, Any]]) -> None:
        """
        Each open and end line reached the page within L{MAX_LAG} of being
        written (the line's C{time}).
        """
        byN = {line["n"]: line for line in lines}
        seen = view.evaluate("() => window.netlogView.seen()")
        self.assertEqual(sorted(row[0] for row in seen), sorted(l["n"] for l in lines if l["type"] == "open"))
        lags = []
        for exchangeId, openedAt, endN, endedAt in seen:
            lags.append((openedAt / 1000 - byN[exchangeId]["time"], exchangeId))
            if endN:
                lags.append((endedAt / 1000 - byN[endN]["time"], endN))
        worst = max(lags)
        self.assertLess(worst[0], MAX_LAG, f"line {worst[1]} reached the page {worst[0]:.3f} s after it was written")

    def shown(self, view: Any) -> set[int]:
        """
        The ids of the rows the page shows (all of them fit in sight), and
        checks they are the rows its filters let through.
        """
        view.evaluate("() => window.netlogView.rendered()")  # the filters applied
        ids = set(view.evaluate("() => window.netlogView.shown()"))
        onScreen = view.evaluate(
            "() => Array.from(document.querySelectorAll('.rows .row'))"
            ".filter((e) => e.offsetParent !== null).map((e) => Number(e.dataset.id))"
        )
        self.assertEqual(sorted(onScreen), sorted(ids), "the rows on screen")
        return ids

    def download(self, view: Any, button: str) -> Any:
        with view.expect_download() as info:
            view.click(button)
        path = os.path.join(self.tmp, info.value.suggested_filename)
        info.value.save_as(path)
        with open(path, "rb") as f:
            return json.load(f)

    def walk(self, view: Any, shop: Any) -> None:
        view.goto(self.viewURL)
        view.wait_for_function("() => window.netlogView !== undefined")
        self.assertEqual(view.evaluate("() => document.visibilityState"), "visible")
        seen = browser.shopScenario(shop, BASE)
        self.assertEqual(seen["account"], browser.expectedSeen()["account"])
        shop.close()
        procs.waitForEnds(self.proxy.log)
        lines = self.catchUp(view)
        self.checkLags(view, lines)
        everything = exchanges(lines)
        self.assertGreater(len(everything), 10)
        rendered = view.locator(".rows .row:not([hidden])").count()
        self.assertGreater(rendered, 10, "rows in the page")
        self.screenshot(view, "live-view-list.png")

        # The filters narrow the list to what the log says.
        self.assertEqual(self.shown(view), set(everything))
        view.fill("#filter-text", "login")
        logins = {i for i, (o, _) in everything.items() if "login" in o["request"]["url"].lower()}
        self.assertEqual(self.shown(view), logins)
        self.assertLess(len(logins), len(everything))
        view.fill("#filter-text", "")
        for status in ("2xx", "3xx"):
            view.select_option("#filter-status", status)
            expected = {i for i, (_, e) in everything.items() if statusClass(e) == status}
            self.assertTrue(expected)
            self.assertEqual(self.shown(view), expected, status)
        view.select_option("#filter-status", "")
        view.select_option("#filter-kind", "websocket")
        sockets = {i for i, (o, _) in everything.items() if o["request"]["url"].startswith("wss:")}
        self.assertEqual(len(sockets), 1)
        self.assertEqual(self.shown(view), sockets)
        view.select_option("#filter-kind", "document")
        documents = self.shown(view)
        self.assertIn(min(everything), documents, "the first page is a document")
        self.assertFalse(documents & sockets)
        view.select_option("#filter-kind", "")
        view.select_option("#filter-host", "shop.test")
        self.assertEqual(
            self.shown(view),
            {i for i, (o, _) in everything.items() if urlsplit(o["request"]["url"]).hostname == "shop.test"},
        )
        view.select_option("#filter-host", "")
        self.assertIn(f"{len(everything)} / {len(everything)} requests", view.inner_text("#counts"))

        # The login POST's detail: its form and its Set-Cookie.
        (login,) = [
            i for i, (o, _) in everything.items()
            if o["request"]["method"] == "POST" and o["request"]["url"] == BASE + "/login"
        ]
        view.fill("#filter-text", "/login")
        # (clicked only once the list is the filtered one: a row element
        # resolved before would be reused for another row, or hidden)
        self.assertIn(login, self.shown(view))
        view.click(f'.rows .row[data-id="{login}"]')
        view.wait_for_selector("#detail-body h3")
        detail = view.inner_text("#detail-body")
        self.assertIn("Form", detail)
        self.assertRegex(detail, r"username\s+" + browser.USER)
        self.assertRegex(detail, r"password\s+" + browser.PASSWORD.replace("+", r"\+"))
        self.assertIn("Response cookies (Set-Cookie)", detail)
        self.assertRegex(detail, r"session\s+alice%7C42\s+·\s+expires 2037-10-21T07:28:00")
        # Chromium speaks HTTP/2 to the site, which has no reason phrase.
        self.assertIn("Status\t302\n", detail)
        self.assertIn("Protocol\tHTTP/2\n", detail)
        self.assertEqual(view.inner_text(f'.rows .row[data-id="{login}"] .c-proto'), "h2")
        view.get_by_role("heading", name="Form", exact=True).scroll_into_view_if_needed()
        self.screenshot(view, "live-view-detail.png")
        view.click("#detail-close")

        # The HAR the page downloads is GET /network.har at its cursor.
        cursor = view.evaluate("() => window.netlogView.cursor()")
        atCursor = json.loads(procs.fetchAPI(self.proxy, f"/network.har?upto={cursor}"))
        self.assertEqual(self.download(view, "#har-shown")["log"]["entries"],
                         [e for e in atCursor["log"]["entries"] if e["_id"] in logins])
        view.fill("#filter-text", "")
        self.assertEqual(self.download(view, "#har-all"), atCursor)
        self.assertEqual(self.download(view, "#har-shown"), atCursor)
        self.assertEqual(len(atCursor["log"]["entries"]), len(everything))

    def test_liveView(self) -> None:
        """
        The live view follows a real session through the site proxy (see the
        module's docstring for what is checked).
        """
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            chromium = p.chromium.launch(
                executable_path=browser.CHROMIUM,
                headless=True,
                args=browser.chromiumArgs([self.spki]),
                # The live view is fetched directly (Playwright has Chromium
                # send even loopback through the proxy unless told).
                proxy={
                    "server": f"http://127.0.0.1:{self.proxy.port}",
                    "bypass": ",".join(browser.GOOGLE_BYPASS + ("127.0.0.1",)),
                },
            )
            try:
                viewer = chromium.new_context(viewport=VIEWPORT, accept_downloads=True)
                shopper = chromium.new_context()
                for context in (viewer, shopper):
                    context.set_default_timeout(browser.ACTION_TIMEOUT_MS)
                self.walk(viewer.new_page(), shopper.new_page())
                viewer.close()
                shopper.close()
            finally:
                chromium.close()


@pytest.mark.slow
class LogFileTests(SynchronousTestCase):
    def setUp(self) -> None:
        from tests.api.test_view import writeViewLog

        self.tmp = tempfile.mkdtemp(prefix="netlog-browser-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.log = os.path.join(self.tmp, "network.jsonl")
        writeViewLog(self.log)
        self.proc = procs.start(
            netlogArgv() + ["view", self.log, "--listen", "tcp:0:interface=127.0.0.1"],
            self.addCleanup,
            os.path.join(self.tmp, "view.out"),
        )
        self.url = self.waitForURL(os.path.join(self.tmp, "view.out"))

    def waitForURL(self, out: str) -> str:
        deadline = time.monotonic() + procs.START_TIMEOUT
        while time.monotonic() < deadline:
            with open(out, encoding="utf-8", errors="replace") as f:
                match = re.search(r"serving .* on (http://\S+)", f.read())
            if match:
                return match.group(1)
            time.sleep(0.05)
        raise AssertionError(f"netlog view printed no URL: {procs.readTail(out)}")

    @contextmanager
    def viewPage(self) -> Iterator[Any]:
        """
        The view, open in Chromium at the screenshots' size.
        """
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=browser.CHROMIUM, headless=True, args=browser.chromiumArgs())
            try:
                view = chromium.new_page(viewport=VIEWPORT)
                view.set_default_timeout(browser.ACTION_TIMEOUT_MS)
                view.goto(self.url)
                yield view
            finally:
                chromium.close()

    def rowText(self, view: Any, exchangeId: int) -> str:
        text: str = view.inner_text(f'.rows .row[data-id="{exchangeId}"] .c-status')
        return text

    def test_followsTheFile(self) -> None:
        """
        Over C{netlog view}: an open row turns into its answer when its end
        line is appended; a log replaced by another starts the list again
        from the new log, with a notice.
        """
        lines = logLines(self.log)
        tunnel = lines[-1]
        self.assertEqual(tunnel["type"], "open")
        with self.viewPage() as view:
            view.wait_for_function("(n) => window.netlogView.cursor() >= n", arg=tunnel["n"])
            view.evaluate("() => window.netlogView.rendered()")
            self.assertEqual(self.rowText(view, tunnel["id"]), "open (tunnel)")
            self.assertTrue(view.locator("#notice").is_hidden())

            with open(self.log, "ab") as f:
                f.write(encodeLine(tunnel["n"] + 1, END, tunnel["id"], tunnel["n"] + 2, time.time(), {
                    "ended": tunnel["started"] + 3, "bytes": {"up": 10, "down": 20}, "closed_by": "client",
                }))
            view.wait_for_function("(n) => window.netlogView.cursor() >= n", arg=tunnel["n"] + 1)
            view.evaluate("() => window.netlogView.rendered()")
            self.assertEqual(self.rowText(view, tunnel["id"]), "200")

            replacement = os.path.join(self.tmp, "new.jsonl")
            with open(replacement, "wb") as f:
                f.write(encodeLine(1, OPEN, 1, 1, time.time(), {
                    "proxy": "site", "kind": "exchange", "started": time.time(),
                    "request": {"method": "GET", "url": "https://again.test/fresh", "headers": []},
                    "server": {"host": "again.test", "port": 443, "address": "127.0.0.1"},
                }))
            os.replace(replacement, self.log)
            view.wait_for_selector("#notice:not([hidden])")
            self.assertIn("begun again", view.inner_text("#notice"))
            view.wait_for_function("() => window.netlogView.rows() === 1")
            view.evaluate("() => window.netlogView.rendered()")
            self.assertEqual(view.evaluate("() => window.netlogView.shown()"), [1])
            self.assertEqual(view.inner_text('.rows .row[data-id="1"] .c-path'), "/fresh")
            self.assertEqual(self.rowText(view, 1), "open")

    def test_headersWhole(self) -> None:
        """
        Over C{netlog view}, in Chromium at the docs' screenshot size: each
        column's header is shown whole ("Protocol" was cut to "Protoc...").
        """
        with self.viewPage() as view:
            # The text's own width against the room the cell gives it
            # (an ellipsis keeps scrollWidth from telling).
            headers = view.eval_on_selector_all(".row.head > span", """(cells) => cells.map((c) => {
                const range = document.createRange();
                range.selectNodeContents(c);
                const style = getComputedStyle(c);
                const room = c.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
                return [c.textContent, range.getBoundingClientRect().width, room];
            })""")
        self.assertIn("Protocol", [name for name, _, _ in headers])
        self.assertEqual([name for name, whole, shown in headers if whole > shown], [], headers)
