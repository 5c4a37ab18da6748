"""
Chromium over HTTP/2 through the site proxy: the browser chooses C{h2} by
ALPN in its decrypted CONNECTs, every resource says so, the HAR has one entry
per request with the right bodies, the WebSocket still opens (over HTTP/1.1)
with its messages logged, and the same walk with C{--no-h2} gives the same
entries but for what depends on the protocol.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections import Counter
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser import browser, grading, procs

BASE = "https://shop.test"
#: What a resource's C{nextHopProtocol} says, on the page the walk ends on.
PROTOCOLS = """() => [performance.getEntriesByType('navigation')[0].nextHopProtocol]
    .concat(performance.getEntriesByType('resource').map(e => e.nextHopProtocol))"""
#: Fields that exist in one protocol only: HTTP/2's pseudo-fields stand for
#: HTTP/1.1's request line and Host; Connection and Transfer-Encoding are
#: HTTP/1.1's framing; Chromium sends Priority (RFC 9218) over HTTP/2 only.
ONE_PROTOCOL_ONLY = {"host", "connection", "keep-alive", "transfer-encoding", "priority"}
#: Fields whose values are new on every run, whatever the protocol.
NEW_EACH_RUN = {"date", "sec-websocket-key", "sec-websocket-accept"}


def walk(page: Any) -> dict[str, Any]:
    seen = browser.shopScenario(page, BASE)
    page.goto(BASE + "/")
    seen["protocols"] = page.evaluate(PROTOCOLS)
    return seen


def comparable(entry: dict[str, Any]) -> dict[str, Any]:
    """
    An entry less what depends on the protocol (the version, the case of
    field names, pseudo-fields, C{headersSize}, the connection's id) or on
    the moment (times, dates).
    """

    def fields(headers: list[dict[str, str]], drop: set[str]) -> Counter[tuple[str, str]]:
        out: Counter[tuple[str, str]] = Counter()
        for h in headers:
            name = h["name"].lower()
            if name.startswith(":") or name in drop or name in NEW_EACH_RUN:
                continue
            if name == "cookie":
                for crumb in h["value"].split("; "):
                    out[(name, crumb)] += 1
                continue
            out[(name, h["value"])] += 1
        return out

    request, response = entry["request"], entry["response"]
    content = dict(response["content"])
    # A multipart body's boundary is new on every run.
    boundary = re.search(r"boundary=([-\w]+)", json.dumps(request["headers"]))
    if boundary is not None:
        entry = json.loads(json.dumps(entry).replace(boundary.group(1), "BOUNDARY"))
        request, response = entry["request"], entry["response"]
    return {
        "method": request["method"],
        "url": request["url"],
        "requestFields": fields(request["headers"], ONE_PROTOCOL_ONLY),
        "postData": request.get("postData"),
        "bodySize": request["bodySize"],
        "status": response["status"],
        "responseFields": fields(response["headers"], ONE_PROTOCOL_ONLY),
        "content": content,
        "cookies": response["cookies"],
        "websocket": entry.get("_webSocketMessages") and [
            (m["type"], m["opcode"], m["data"]) for m in entry["_webSocketMessages"]],
    }


@pytest.mark.slow
class HTTP2Tests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-h2-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)

    def session(self, name: str, extra: tuple[str, ...]) -> tuple[dict[str, Any], dict[str, Any]]:
        folder = os.path.join(self.tmp, name)
        os.makedirs(folder)
        proxy = procs.startSiteProxy(folder, self.site, self.addCleanup, extra=extra)
        spki = procs.runNetlog(["ca", "--state", str(proxy.state), "--spki-only"]).stdout.decode().strip()
        seen = browser.withBrowser(browser.Run(proxy=f"http://127.0.0.1:{proxy.port}", spkiHashes=[spki]), walk)
        procs.waitForEnds(proxy.log)
        harPath = os.path.join(folder, "network.har")
        procs.runNetlog(["har", proxy.log, "-o", harPath])
        with open(harPath, "rb") as f:
            return seen, json.loads(f.read().decode("utf-8"))

    def test_h2AgainstHttp1(self) -> None:
        """
        Chromium speaks HTTP/2 to the site through the forward port: every
        resource's C{nextHopProtocol} is C{h2}, the HAR says C{HTTP/2.0}
        as Playwright's does, the WebSocket's messages are logged; with
        C{--no-h2} the same walk gives the same entries, field for field,
        but for what depends on the protocol.
        """
        seen2, har2 = self.session("h2", ())
        seen1, har1 = self.session("http1", ("--no-h2",))
        self.assertEqual(set(seen2.pop("protocols")), {"h2"})
        self.assertEqual(set(seen1.pop("protocols")), {"http/1.1"})
        seen2.pop("searchURL")
        seen1.pop("searchURL")
        self.assertEqual(seen2, browser.expectedSeen())
        self.assertEqual(seen1, seen2)

        entries2 = [e for e in har2["log"]["entries"] if not e["request"]["url"].endswith("/favicon.ico")]
        entries1 = [e for e in har1["log"]["entries"] if not e["request"]["url"].endswith("/favicon.ico")]
        ws = grading.webSocketUrl(BASE) + "/ws"
        versions = {e["request"]["httpVersion"] for e in entries2 if e["request"]["url"] != ws}
        self.assertEqual(versions, {"HTTP/2.0"})
        self.assertEqual({e["request"]["httpVersion"] for e in entries1}, {"HTTP/1.1"})
        (socket2,) = [e for e in entries2 if e["request"]["url"] == ws]
        self.assertEqual(socket2["request"]["httpVersion"], "HTTP/1.1", "WebSockets stay on HTTP/1.1")
        self.assertGreater(len(socket2["_webSocketMessages"]), 0)

        # One entry per request: the same requests, in an order each
        # protocol may interleave differently within a page.
        def key(e: dict[str, Any]) -> tuple[str, str]:
            return (e["request"]["method"], e["request"]["url"])

        self.assertEqual(Counter(map(key, entries2)), Counter(map(key, entries1)))
        byKey1: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for e in entries1:
            byKey1.setdefault(key(e), []).append(comparable(e))
        for e in entries2:
            mine = comparable(e)
            if mine not in byKey1[key(e)]:
                theirs = byKey1[key(e)][0]
                diff = {k: (mine[k] - theirs[k], theirs[k] - mine[k]) if isinstance(mine[k], Counter)
                        else (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]}
                self.fail(f"{key(e)}: no entry like it with --no-h2: {diff}")
            byKey1[key(e)].remove(mine)
