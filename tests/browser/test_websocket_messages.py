"""
Chromium talks over WebSockets with permessage-deflate agreed, through the
site proxy, on C{wss://} (decrypted) and C{ws://}: text, binary, a message
the server sends fragmented, and one over 1 MB. netlog's HAR carries every
message in C{_webSocketMessages} as the page sent and got it, in the same
count and order as Playwright's HAR of the same session.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import tempfile
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.wsmessages import MESSAGE_CAP
from tests.browser import browser, grading, procs, site_app
from tests.har.support import validate, wavLoad

BIG = "abcdefghij" * (site_app.MESSAGES_BIG_SIZE // 10)
BYTES_B64 = base64.b64encode(bytes(site_app.ECHO_BYTES)).decode()
#: What the page sends and gets, in order: (type, opcode, data as the HAR has it).
EXPECTED = [
    ("send", 1, site_app.MESSAGES_TEXT),
    ("receive", 1, site_app.MESSAGES_TEXT),
    ("send", 2, BYTES_B64),
    ("receive", 2, BYTES_B64),
    ("send", 1, site_app.FRAGMENT_REQUEST),
    ("receive", 1, "".join(site_app.FRAGMENTS)),
    ("send", 1, BIG[:MESSAGE_CAP]),
    ("receive", 1, BIG[:MESSAGE_CAP]),
]
#: What the page says once its WebSocket closed.
STATUS = "closed 1000 permessage-deflate " + json.dumps(
    [site_app.MESSAGES_TEXT, "bytes " + ",".join(map(str, site_app.ECHO_BYTES)),
     "".join(site_app.FRAGMENTS), f"text {site_app.MESSAGES_BIG_SIZE} echoed"],
    separators=(",", ":"))


def messagesPage(page: Any, url: str) -> str:
    page.goto(url)
    page.wait_for_function("document.getElementById('status').textContent.startsWith('closed')")
    status: str = page.inner_text("#status")
    return status


@pytest.mark.slow
class WebSocketMessagesTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-browser-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        sitesPath = procs.writeSites(self.tmp, self.site, ["https://shop.test", f"http://shop.test:{self.site.http}"])
        self.proxy = procs.startSiteProxy(self.tmp, self.site, self.addCleanup, sitesPath=sitesPath,
                                          httpsRoute=False)
        self.spki = procs.runNetlog(["ca", "--state", str(self.proxy.state), "--spki-only"]).stdout.decode().strip()

    def test_messages(self) -> None:
        """
        Over wss:// and ws://, with permessage-deflate: the page gets every
        echo right; each WebSocket's entry has its messages as the page
        sent and got them (the one over 1 MB cut there and marked), in the
        order they passed, and matches Playwright's HAR message by message
        (count, order, type, opcode; data but where netlog cut it).
        """
        run = browser.Run(proxy=f"http://127.0.0.1:{self.proxy.port}", spkiHashes=[self.spki],
                          harPath=os.path.join(self.tmp, "playwright.har"))
        urls = ["https://shop.test/messages", f"http://shop.test:{self.site.http}/messages"]
        statuses = browser.withBrowser(run, lambda page: [messagesPage(page, url) for url in urls])
        self.assertEqual(statuses, [STATUS, STATUS], "what the pages saw")

        procs.waitForEnds(self.proxy.log)
        harPath = os.path.join(self.tmp, "network.har")
        procs.runNetlog(["har", self.proxy.log, "-o", harPath])
        with open(harPath, "rb") as f:
            raw = f.read()
        self.assertEqual(validate(raw), [], "har-validator's verdict")
        wavLoad(raw)
        with open(self.proxy.log, "rb") as f:
            lines = [json.loads(line) for line in f]
        big = [line for line in lines if line["type"] == "message" and line["size"] == site_app.MESSAGES_BIG_SIZE]
        self.assertEqual(len(big), 4)
        # Compressed on the wire both ways (Chromium and the site agreed), logged inflated.
        self.assertTrue(all(line["compressed"] < site_app.MESSAGES_BIG_SIZE // 100 for line in big), big[0]["compressed"])
        ours = {e["request"]["url"]: e for e in json.loads(raw)["log"]["entries"] if "_webSocketMessages" in e}
        theirs = {e["request"]["url"]: e for e in grading.load(run.harPath)["log"]["entries"]
                  if e.get("_resourceType") == "websocket"}
        wsUrls = ["wss://shop.test/wsz", f"ws://shop.test:{self.site.http}/wsz"]
        self.assertEqual(sorted(ours), sorted(wsUrls))
        self.assertEqual(sorted(theirs), sorted(wsUrls))
        for url in wsUrls:
            mine = ours[url]["_webSocketMessages"]
            self.assertEqual([(m["type"], m["opcode"], m["data"]) for m in mine], EXPECTED, url)
            self.assertEqual([m.get("_truncated", False) for m in mine], [False] * 6 + [True, True], url)
            self.assertEqual(mine[-1]["_size"], site_app.MESSAGES_BIG_SIZE)
            self.assertTrue(all(isinstance(m["time"], float) for m in mine))
            self.assertEqual(ours[url]["_websocket"]["close_up"], {"code": 1000, "reason": "done"})
            other = theirs[url]["_webSocketMessages"]
            self.assertEqual([(m["type"], m["opcode"]) for m in mine], [(m["type"], m["opcode"]) for m in other],
                             url + ": ours vs Playwright's")
            self.assertEqual([m["data"] for m in mine[:6]], [m["data"] for m in other[:6]], url)
            self.assertEqual([m["data"][:MESSAGE_CAP] for m in other[6:]], [m["data"] for m in mine[6:]], url)
