"""
Replay as a user sees it: a real C{twistd netlog-proxy --replay} says at
start that replay is on, from which recording, how many answers it holds
and what a request with none gets; the live view's detail pane marks a
replayed answer (from the recording, not the backend the open line names)
and an unmatched one, as docs/replay.rst promises.
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import time

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.log.writer import LogWriter
from tests.browser import browser, procs
from tests.site.support import connectTunnel, request
from tests.standin.support import tempDirectory
from tests.supervise.running import Twistd
from tests.support import netlogArgv

#: The recorded page.
PAGE = b"<p>the recorded page</p>"
#: The recorded backend (nothing listens there: the replay never connects).
RECORDED_BACKEND = ("127.0.0.1", 7770)
#: Seconds for the replay's lines to be written.
WAIT = 30.0


def writeRecording(path: str) -> None:
    """
    A recording kept with C{--keep-bodies all}: C{GET https://shop.test/}
    answered with L{PAGE}, and an exchange that got no answer (the writer
    ends it as failed when it stops: "the proxy stopped").
    """
    writer = LogWriter(path)
    writer.startService()
    # as the site proxy names its backend
    server = {"host": RECORDED_BACKEND[0], "port": RECORDED_BACKEND[1], "address": RECORDED_BACKEND[0]}
    page = writer.open({
        "proxy": "site", "kind": "exchange", "started": 1764670000.0, "server": server,
        "request": {"method": "GET", "url": "https://shop.test/", "version": "HTTP/1.1",
                    "headers": [["Host", "shop.test"]], "headers_size": 40},
    })
    writer.end(page, {
        "ended": 1764670000.2,
        "times": {"connected": None, "sent": 1764670000.1, "first_byte": 1764670000.15, "end": 1764670000.2},
        "response": {"status": 200, "reason": "OK", "version": "HTTP/1.1",
                     "headers": [["Content-Type", "text/html"], ["Content-Length", str(len(PAGE))]],
                     "headers_size": 60,
                     "body": {"size": len(PAGE), "data": base64.b64encode(PAGE).decode()}},
        "bytes": {"up": 40, "down": 60 + len(PAGE)},
    })
    writer.open({
        "proxy": "site", "kind": "exchange", "started": 1764670001.0, "server": server,
        "request": {"method": "GET", "url": "https://shop.test/never", "version": "HTTP/1.1",
                    "headers": [["Host", "shop.test"]], "headers_size": 40},
    })
    writer.stopService()


@pytest.mark.slow
class ReplayShownTests(SynchronousTestCase):
    def test_startLineAndDetail(self) -> None:
        """
        The start-up line names the site, the recording, its one answer
        and what it skipped, and the 404 for the rest; the replayed page
        and an unmatched request then show in the live view's detail as
        replayed (from the recording's exchange 1, recorded from
        127.0.0.1:7770) and unmatched.
        """
        folder = tempDirectory(self)
        recording = os.path.join(folder, "record.jsonl")
        writeRecording(recording)
        sites = os.path.join(folder, "sites.toml")
        with open(sites, "w") as f:
            f.write('[[site]]\nname = "shop"\norigins = ["https://shop.test"]\n'
                    f'backend = "http://{RECORDED_BACKEND[0]}:{RECORDED_BACKEND[1]}"\n')
        log = os.path.join(folder, "replay.jsonl")
        state = os.path.join(folder, "state")
        twistd = Twistd(folder, "netlog-proxy", [
            "--sites", sites, "--replay", recording, "--log", log, "--state", state,
            "--listen", "tcp:0:interface=127.0.0.1", "--resolve-only"])
        self.addCleanup(twistd.stop)
        twistd.waitServing(1)
        with open(os.path.join(folder, "twistd.out"), encoding="utf-8") as f:
            said = f.read()
        self.assertIn(f"twistd netlog-proxy: replay is on: the site shop answered from {recording} "
                      f"(1 recorded answer; skipped: 1 failed); a request with no recorded answer "
                      f"gets 404\n", said)

        context = ssl.create_default_context(cafile=os.path.join(state, "ca.pem"))
        context.set_alpn_protocols(["http/1.1"])
        sock = connectTunnel(twistd.listenerPort("forward"), "shop.test:443", context)
        sock.settimeout(WAIT)
        with sock:
            status, _, body, _ = request(sock, "GET", "/", [("Host", "shop.test")], b"")
            self.assertEqual((status, body), (200, PAGE))
            status, _, _, _ = request(sock, "GET", "/elsewhere", [("Host", "shop.test")], b"")
            self.assertEqual(status, 404)
        deadline = time.monotonic() + WAIT
        while True:
            with open(log, encoding="utf-8") as f:
                ends = {r["id"]: r for r in map(json.loads, f) if r["type"] == "end"}
            if len(ends) == 2:
                break
            self.assertLess(time.monotonic(), deadline, ends)
            time.sleep(0.05)
        replayed, unmatched = sorted(ends)
        self.assertEqual(ends[replayed]["_replayed"], 1)
        self.assertTrue(ends[unmatched]["_unmatched"])

        out = os.path.join(folder, "view.out")
        procs.start(netlogArgv() + ["view", log, "--listen", "tcp:0:interface=127.0.0.1"], self.addCleanup, out)
        deadline = time.monotonic() + WAIT
        while not (found := re.search(r"serving .* on (http://\S+)", procs.readTail(out))):
            self.assertLess(time.monotonic(), deadline, procs.readTail(out))
            time.sleep(0.05)
        details = {}
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            chromium = p.chromium.launch(executable_path=browser.CHROMIUM, headless=True,
                                         args=browser.chromiumArgs())
            try:
                view = chromium.new_page()
                view.set_default_timeout(browser.ACTION_TIMEOUT_MS)
                view.goto(found.group(1))
                for exchange in (replayed, unmatched):
                    view.click(f'.rows .row[data-id="{exchange}"]')
                    view.wait_for_function("(id) => document.querySelector('#detail-body') && "
                                           "document.querySelector('#detail-body').innerText.includes("
                                           "'open line ' + id)", arg=exchange)
                    details[exchange] = view.inner_text("#detail-body")
            finally:
                chromium.close()
        self.assertIn("Server\tthe recording, not the backend (recorded from 127.0.0.1:7770)\n", details[replayed])
        self.assertIn("Server\tnone: netlog answered (the backend 127.0.0.1:7770 was not asked)\n",
                      details[unmatched])
        self.assertIn("Answer\treplayed: the recording's exchange 1\n", details[replayed])
        self.assertIn("Answer\tunmatched: no recorded answer (netlog's 404)\n", details[unmatched])
        self.assertIn("Replay: the recording has no answer for this request; netlog answered 404.",
                      details[unmatched])
        self.assertNotIn("Answer\t", details[replayed].replace("Answer\treplayed", ""))
