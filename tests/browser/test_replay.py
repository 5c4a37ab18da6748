"""
Chromium records, then replays: the shop scenario (sign-in form POST and
redirect, fetched JSON, image, upload, big text, brotli news, search)
through a site proxy keeping every body, then the same scenario through a
proxy replaying that log, and through one replaying the HAR Playwright
recorded of the first run (C{recordHar}, content C{embed}). The test site
keeps running, so any request that reached it would be counted; none does.

The chat page's WebSocket is replayed from the log (Playwright's HAR keeps
no WebSocket messages, so that replay leaves the chat page out).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
from typing import Any
from urllib.parse import urlsplit

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.capture import MAX_RESPONSE_BODY
from tests.browser import browser, procs

BASE = "https://shop.test"
#: The fields a replayed HAR entry may differ in from the recorded one,
#: each for its reason (docs/replay.rst, "What differs from the recording's
#: HAR"); everything else is compared (L{sameBut}):
LEFT_OUT = (
    # about when, not what;
    "startedDateTime", "time", "timings",
    # the replay's own marks: the recorded line, a body cut when recorded;
    "_replayed", "_replayedCut",
    # the browser's connection, which is real: its id is the replay's own;
    "connection",
    # the replay log's own line number: an answer still streaming after a
    # second gets a head line, so the numbering depends on timing.
    "_id",
)


def _header(entry: dict[str, Any], side: str, name: str) -> dict[str, str]:
    return next(h for h in entry[side]["headers"] if h["name"].lower() == name)


def sameBut(recorded: dict[str, Any], replayed: dict[str, Any]) -> dict[str, Any]:
    """
    The recorded entry as the replay must have it, whatever the browser
    drew at random this time (a multipart boundary, a WebSocket key), and
    for a WebSocket its messages' times.
    """
    was = json.loads(json.dumps(recorded))
    contentType = was["request"].get("postData", {}).get("mimeType", "")
    if contentType.startswith("multipart/form-data"):
        # Chromium draws a new boundary for each upload.
        boundary = contentType.split("boundary=", 1)[1]
        newBoundary = replayed["request"]["postData"]["mimeType"].split("boundary=", 1)[1]
        was = json.loads(json.dumps(was).replace(boundary, newBoundary))
    if "_webSocketMessages" in was:
        # The handshake answers the browser's new key: the accept that key
        # calls for (RFC 6455, 4.2.2).
        key = _header(replayed, "request", "sec-websocket-key")["value"]
        accept = base64.b64encode(hashlib.sha1(key.encode() + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
        _header(was, "request", "sec-websocket-key")["value"] = key
        _header(was, "response", "sec-websocket-accept")["value"] = accept.decode()
        for message, now in zip(was["_webSocketMessages"], replayed["_webSocketMessages"]):
            message["time"] = now["time"]
    return was


def expectedSeen(big: int, webSocket: bool = True) -> dict[str, Any]:
    seen = browser.expectedSeen()
    if not webSocket:
        del seen["chat"]
    seen["big"] = big
    return seen


def isFavicon(method: str, url: str) -> bool:
    """
    Whether a request is Chromium's own favicon request: it asks for one
    on a page that isn't HTML (the big text, an image) when it has time to
    before the next page starts, so one walk may have it and another not.
    Left out of both walks' comparisons.
    """
    return method == "GET" and urlsplit(url).path == "/favicon.ico"


def keptAnswers(logPath: str) -> list[tuple[str, str, int, str, list[tuple[str, int, str]]]]:
    """
    Each exchange's method, URL, status, kept body's sha256 and WebSocket
    messages (direction, opcode, sha256 of the data), in order.
    """
    with open(logPath, "rb") as f:
        lines = [json.loads(line) for line in f]
    opens = {line["id"]: line for line in lines if line["type"] == "open"}
    messages: dict[int, list[tuple[str, int, str]]] = {}
    for line in lines:
        if line["type"] == "message":
            messages.setdefault(line["id"], []).append(
                (line["direction"], line["opcode"], hashlib.sha256(line.get("data", "").encode()).hexdigest()))
    out = []
    for line in lines:
        if line["type"] == "end" and opens[line["id"]]["kind"] == "exchange":
            request = opens[line["id"]]["request"]
            if isFavicon(request["method"], request["url"]):
                continue
            body = base64.b64decode(line["response"].get("body", {}).get("data", ""))
            out.append((request["method"], request["url"], line["response"]["status"],
                        hashlib.sha256(body).hexdigest(), messages.get(line["id"], [])))
    return out


@pytest.mark.slow
class RecordReplayTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-replay-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.site = procs.startSite(self.tmp, self.addCleanup)

    def proxy(self, name: str, *extra: str) -> tuple[procs.Proxy, str]:
        directory = os.path.join(self.tmp, name)
        os.makedirs(directory)
        proxy = procs.startSiteProxy(directory, self.site, self.addCleanup, extra=("--keep-bodies", "all", *extra))
        spki = procs.runNetlog(["ca", "--state", str(proxy.state), "--spki-only"]).stdout.decode().strip()
        return proxy, spki

    def walk(self, proxy: procs.Proxy, spki: str, harPath: str | None = None,
             webSocket: bool = True) -> dict[str, Any]:
        run = browser.Run(proxy=f"http://127.0.0.1:{proxy.port}", spkiHashes=[spki], harPath=harPath)
        seen = browser.withBrowser(run, lambda page: browser.shopScenario(page, BASE, webSocket=webSocket))
        seen.pop("searchURL")
        procs.waitForEnds(proxy.log)
        procs.stop(proxy.proc)
        return seen  # type: ignore[no-any-return]

    def har(self, logPath: str) -> list[dict[str, Any]]:
        out = logPath + ".har"
        procs.runNetlog(["har", logPath, "-o", out])
        with open(out, encoding="utf-8") as f:
            return [{k: v for k, v in e.items() if k not in LEFT_OUT} for e in json.load(f)["log"]["entries"]
                    if not isFavicon(e["request"]["method"], e["request"]["url"])]

    def test_recordThenReplay(self) -> None:
        """
        Every step passes when replayed, from the log and from Playwright's
        HAR, with no connection to the site; each answer's body has the
        recorded sha256, and the replay's HAR is the recording's but for
        L{LEFT_OUT} and what the browser drew at random (L{sameBut}): the
        big text cut at the recording's 1 MB limit keeps its recorded size.
        """
        from tests.browser import site_app

        playwrightHar = os.path.join(self.tmp, "playwright.har")
        recorder, spki = self.proxy("record")
        self.assertEqual(self.walk(recorder, spki, playwrightHar), expectedSeen(site_app.BIG_SIZE))
        before = len(self.site.connections())

        replay, spki = self.proxy("replay-log", "--replay", recorder.log)
        self.assertEqual(self.walk(replay, spki), expectedSeen(MAX_RESPONSE_BODY))
        fromHar, spki = self.proxy("replay-har", "--replay", playwrightHar)
        # (Playwright's HAR keeps no WebSocket messages: its chat isn't replayed.)
        self.assertEqual(self.walk(fromHar, spki, webSocket=False), expectedSeen(site_app.BIG_SIZE, False))
        self.assertEqual(len(self.site.connections()), before, "a replay reached the site")

        recorded = keptAnswers(recorder.log)
        self.assertEqual(keptAnswers(replay.log), recorded)
        with open(replay.log, "rb") as f:
            ends = [json.loads(line) for line in f if b'"type":"end"' in line]
        self.assertTrue(all(isinstance(end.get("_replayed"), int) for end in ends))

        recordedHar, replayedHar = self.har(recorder.log), self.har(replay.log)
        self.assertEqual(len(replayedHar), len(recordedHar))
        for was, now in zip(recordedHar, replayedHar):
            self.assertEqual(now, sameBut(was, now), now["request"]["url"])
        # (The chat's fragmented message is replayed in its recorded frames:
        # its bytes down are the recording's, compared above.)
        webSocket = next(e for e in recordedHar if "_webSocketMessages" in e)
        with open(recorder.log, "rb") as f:
            self.assertIn(b'"frames":[', f.read())
        self.assertGreater(webSocket["_websocket"]["bytes_down"], 0)
