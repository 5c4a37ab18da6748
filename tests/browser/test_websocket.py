"""
Chromium opens a C{ws://} WebSocket through each proxy. Behind an HTTP proxy
it asks for C{CONNECT host:port} and then speaks plain HTTP (the Upgrade
request) inside the tunnel: the stand-in keeps that as a tunnel, the site
proxy reads the HTTP inside it and keeps the C{101} with its messages.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser import browser, procs, site_app
from tests.har.support import validate

#: How long the site may take to write down a connection the proxy ended (seconds).
SITE_COUNT_TIMEOUT = 20.0


def echoPage(page: Any, base: str) -> str:
    """
    Open C{base}C{/echo} and wait for its WebSocket to close; returns what the
    page says about it.
    """
    page.goto(base + "/echo")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('closed')")
    status: str = page.inner_text("#status")
    return status


def expectedStatus(host: str, port: int) -> str:
    """
    What L{echoPage} returns when every message went up and came back the
    same, over C{ws://HOST:PORT/ws}, and the page closed it cleanly.
    """
    got = [
        f"text {len(site_app.ECHO_TEXT)} echoed",
        f"text {site_app.ECHO_BIG_SIZE} echoed",
        "bytes " + ",".join(str(b) for b in site_app.ECHO_BYTES) + " echoed",
    ]
    return f"closed 1000 ws://{host}:{port}/ws sent=3 received=3 " + json.dumps(got, separators=(",", ":"))


def exportHAR(test: SynchronousTestCase, proxy: procs.Proxy, directory: str) -> list[dict[str, Any]]:
    """
    Once every exchange has ended, C{netlog har} the proxy's log; checks it
    passes the schema and returns its entries.
    """
    procs.waitForEnds(proxy.log)
    harPath = os.path.join(directory, "network.har")
    procs.runNetlog(["har", proxy.log, "-o", harPath])
    with open(harPath, "rb") as f:
        raw = f.read()
    test.assertEqual(validate(raw), [], "har-validator's verdict on network.har")
    entries: list[dict[str, Any]] = json.loads(raw)["log"]["entries"]
    return entries


def listing(entries: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"  {i} {e['request']['method']} {e['request']['url']} {e['response']['status']} "
        + json.dumps({k: v for k, v in e.items() if k in ("_tunnel", "_websocket", "_failed", "_refused")})
        for i, e in enumerate(entries)
    )


@pytest.mark.slow
class WebSocketThroughStandinTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-browser-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        # The site's plain-HTTP port is named: a ws:// WebSocket is a CONNECT to it.
        self.proxy = procs.startStandin(self.tmp, [self.site.http], self.addCleanup)

    def test_plainWebSocket(self) -> None:
        """
        A page on C{http://} opens C{ws://} to its own host and port through
        the stand-in; every message (a short text, 100 kB of text, bytes)
        comes back the same. The HAR has the page's request and one
        C{CONNECT} entry for that host and port, whose bytes each way are
        exactly what the site counted on that connection (over 100 kB each
        way).
        """
        base = f"http://shop.test:{self.site.http}"
        run = browser.Run(proxy=f"http://127.0.0.1:{self.proxy.port}")
        status = browser.withBrowser(run, lambda page: echoPage(page, base))
        self.assertEqual(status, expectedStatus("shop.test", self.site.http), "what the page saw")

        entries = exportHAR(self, self.proxy, self.tmp)
        shown = listing(entries)
        pages = [
            (e["request"]["method"], e["response"]["status"])
            for e in entries
            if e["request"]["url"] == base + "/echo"
        ]
        self.assertEqual(pages, [("GET", 200)], shown)
        tunnels = [e for e in entries if e["request"]["url"] == f"https://shop.test:{self.site.http}/"]
        self.assertEqual(len(tunnels), 1, "the WebSocket's CONNECT: one tunnel entry\n" + shown)
        tunnel = tunnels[0]
        self.assertEqual(
            (tunnel["request"]["method"], tunnel["response"]["status"], "_failed" in tunnel, "_refused" in tunnel),
            ("CONNECT", 200, False, False),
            shown,
        )
        up, down = tunnel["_tunnel"]["bytes_up"], tunnel["_tunnel"]["bytes_down"]
        self.assertGreater(up, site_app.ECHO_BIG_SIZE, shown)
        self.assertGreater(down, site_app.ECHO_BIG_SIZE, shown)

        # The site's end of the tunnel carried exactly those bytes.
        deadline = time.monotonic() + SITE_COUNT_TIMEOUT
        while True:
            seen = [(c["in"], c["out"]) for c in self.site.connections() if c["listener"] == "http"]
            if (up, down) in seen or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertIn((up, down), seen, "the tunnel's bytes (up, down) vs the site's plain-HTTP connections")


@pytest.mark.slow
class WebSocketThroughSiteProxyTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-browser-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)
        sitesPath = procs.writeSites(self.tmp, self.site, [f"http://shop.test:{self.site.http}"])
        self.proxy = procs.startSiteProxy(
            self.tmp, self.site, self.addCleanup, sitesPath=sitesPath, httpsRoute=False
        )

    def test_plainWebSocket(self) -> None:
        """
        A site whose origin is plain C{http://} on its own port: its page
        opens C{ws://} to that origin through the forward port, and every
        message comes back the same. The HAR has the page, and the
        WebSocket's C{101} entry named C{ws://host:port/ws} with the messages
        the page sent and received counted each way.
        """
        base = f"http://shop.test:{self.site.http}"
        run = browser.Run(proxy=f"http://127.0.0.1:{self.proxy.port}")
        status = browser.withBrowser(run, lambda page: echoPage(page, base))
        self.assertEqual(status, expectedStatus("shop.test", self.site.http), "what the page saw")

        entries = exportHAR(self, self.proxy, self.tmp)
        shown = listing(entries)
        pages = [
            (e["request"]["method"], e["response"]["status"])
            for e in entries
            if e["request"]["url"] == base + "/echo"
        ]
        self.assertEqual(pages, [("GET", 200)], shown)
        sockets = [e for e in entries if e["response"]["status"] == 101]
        self.assertEqual(
            [(e["request"]["method"], e["request"]["url"]) for e in sockets],
            [("GET", f"ws://shop.test:{self.site.http}/ws")],
            shown,
        )
        counts = sockets[0]["_websocket"]
        self.assertEqual((counts["messages_up"], counts["messages_down"]), (3, 3), shown)
        self.assertGreater(counts["bytes_up"], site_app.ECHO_BIG_SIZE, shown)
        self.assertGreater(counts["bytes_down"], site_app.ECHO_BIG_SIZE, shown)
