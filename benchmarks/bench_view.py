"""
How the live view copes with a large log: C{netlog view} over a log of
100,000 exchanges (200,000 lines, small JSON answers, 20 hosts), opened in
Chromium.

Measures, in one run (figures, not assertions):

  - time to first rows: from asking for the page to the first row drawn;
  - time to every row: until the page's cursor reaches the log's last line;
  - scrolling: 300 frames scrolled 40 rows each (and how long the page's
    own rendering took in each), then 100 jumps to random places, each to
    its next drawn frame (median, 95th percentile, worst);
  - a text filter over every row, to its counts shown;
  - a detail opened from the middle of the log, to its first section;
  - the page's JS heap once every row is in (C{--enable-precise-memory-info});
  - following: exchanges appended at 1,000 a second for 10 s (C{--rate},
    C{--seconds}) while the page follows; each line's lag from being
    written (its C{time}) to being read by the page.

Usage: .venv/bin/python -m benchmarks.bench_view [--exchanges N] [--keep LOG]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from netlog.core.logline import END, OPEN, encodeLine  # noqa: E402
from tests.browser.browser import CHROMIUM, chromiumArgs  # noqa: E402
from tests.support import netlogArgv, sourceEnv  # noqa: E402

T0 = 1767225600.0
#: Hosts the exchanges go to.
HOSTS = 20
#: Seconds to wait for the page to read the whole log.
LOAD_TIMEOUT_MS = 600_000
SCROLL_FRAMES = 300
SCROLL_ROWS = 40
JUMPS = 100


def makeLog(path: str, exchanges: int) -> int:
    """
    Write a log of C{exchanges} finished GETs, two at a time in flight;
    returns the last line's number.
    """
    rng = random.Random(15)
    n = 0
    with open(path, "wb") as f:
        for i in range(exchanges):
            host = f"host{i % HOSTS}.test"
            started = T0 + i * 0.01
            n += 1
            exchangeId = n
            f.write(
                encodeLine(n, OPEN, exchangeId, exchangeId, started + 0.001, {
                    "proxy": "site", "kind": "exchange", "started": started,
                    "client": "127.0.0.1:50000", "connection": f"c{i // 6}",
                    "request": {
                        "method": "GET" if i % 7 else "POST",
                        "url": f"https://{host}/api/items/{i}?page={i % 13}",
                        "version": "HTTP/1.1",
                        "headers": [["Host", host], ["Accept", "application/json"], ["User-Agent", "bench"],
                                    ["Sec-Fetch-Dest", "empty" if i % 3 else "document"]],
                        "headers_size": 120,
                    },
                    "server": {"host": host, "port": 443, "address": "127.0.0.1"},
                })
            )
            body = json.dumps({"id": i, "name": f"item {i}", "tags": ["a", "b"]}).encode()
            status = rng.choice((200, 200, 200, 200, 304, 404, 500))
            n += 1
            f.write(
                encodeLine(n, END, exchangeId, n + 1, started + 0.02, {
                    "ended": started + 0.02 + rng.random() * 0.05,
                    "times": {"connected": None, "sent": started + 0.002, "first_byte": started + 0.015,
                              "end": started + 0.02},
                    "response": {
                        "status": status, "reason": "OK", "version": "HTTP/1.1",
                        "headers": [["Content-Type", "application/json"], ["Content-Length", str(len(body))]],
                        "headers_size": 80,
                        "body": {"size": len(body), "data": base64.b64encode(body).decode()},
                    },
                    "bytes": {"up": 140, "down": 80 + len(body)},
                })
            )
    return n


def appendExchanges(path: str, first: int, rate: int, seconds: float) -> int:
    """
    Append finished exchanges to the log at C{rate} a second for C{seconds},
    in batches every 10 ms, each line stamped when written; the last line's
    number.
    """
    n = first
    start = time.monotonic()
    done = 0
    total = int(rate * seconds)
    with open(path, "ab", buffering=0) as f:
        while done < total:
            due = min(total, int((time.monotonic() - start) * rate))
            batch = []
            now = time.time()
            while done < due:
                n += 1
                exchangeId = n
                batch.append(encodeLine(n, OPEN, exchangeId, exchangeId, now, {
                    "proxy": "site", "kind": "exchange", "started": now,
                    "request": {"method": "GET", "url": f"https://live.test/follow/{done}", "headers": []},
                    "server": {"host": "live.test", "port": 443, "address": "127.0.0.1"},
                }))
                n += 1
                batch.append(encodeLine(n, END, exchangeId, n + 1, now, {
                    "ended": now, "response": {"status": 200, "reason": "OK", "headers": [], "body": {"size": 2}},
                    "bytes": {"up": 50, "down": 60},
                }))
                done += 1
            for line in batch:
                f.write(line)
            time.sleep(0.01)
    return n


def spread(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
    return f"median {statistics.median(values):.1f} ms, p95 {p95:.1f} ms, worst {values[-1]:.1f} ms"


SCROLL = """async ([frames, rows]) => {
  const s = document.getElementById("scroller");
  s.scrollTop = 0;
  await new Promise(requestAnimationFrame);
  const gaps = [];
  let last = performance.now();
  for (let i = 0; i < frames; i++) {
    s.scrollTop += rows * 22;
    await new Promise(requestAnimationFrame);
    const now = performance.now();
    gaps.push(now - last);
    last = now;
  }
  return gaps;
}"""

JUMP = """async (jumps) => {
  const s = document.getElementById("scroller");
  const times = [];
  let seed = 15;
  for (let i = 0; i < jumps; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    const t = performance.now();
    s.scrollTop = (seed / 2147483648) * (s.scrollHeight - s.clientHeight);
    await new Promise(requestAnimationFrame);
    await new Promise(requestAnimationFrame);
    times.push(performance.now() - t);
  }
  return times;
}"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=100_000)
    parser.add_argument("--keep", metavar="LOG", help="write the log here and keep it")
    parser.add_argument("--rate", type=int, default=1000, help="exchanges a second appended while following")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long to append them")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    folder = tempfile.mkdtemp(prefix="netlog-bench-view-")
    try:
        logPath = args.keep or os.path.join(folder, "network.jsonl")
        started = time.monotonic()
        last = makeLog(logPath, args.exchanges)
        print(f"log: {args.exchanges:,} exchanges, {last:,} lines, "
              f"{os.path.getsize(logPath) / 1e6:.0f} MB, written in {time.monotonic() - started:.1f} s")
        view = subprocess.Popen(
            netlogArgv() + ["view", logPath, "--listen", "tcp:0:interface=127.0.0.1"],
            cwd=REPO, env=sourceEnv(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )
        try:
            assert view.stdout is not None
            line = view.stdout.readline().decode()
            match = re.search(r"(http://\S+)", line)
            if match is None:
                raise SystemExit(f"netlog view said: {line!r}")
            url = match.group(1)
            results = measure(sync_playwright, url, logPath, last, args)
        finally:
            view.terminate()
            view.wait(30)
        for name, value in results:
            print(f"{name}: {value}")
    finally:
        shutil.rmtree(folder, True)
    return 0


def measure(sync_playwright: Any, url: str, logPath: str, last: int, args: Any) -> list[tuple[str, str]]:
    results: list[tuple[str, str]] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=chromiumArgs() + ["--enable-precise-memory-info"]
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            t = time.monotonic()
            page.goto(url)
            page.wait_for_selector(".rows .row:not([hidden])", timeout=LOAD_TIMEOUT_MS)
            results.append(("time to first rows", f"{(time.monotonic() - t) * 1000:.0f} ms"))
            page.wait_for_function("(n) => window.netlogView.cursor() >= n", arg=last, timeout=LOAD_TIMEOUT_MS,
                                   polling=50)
            results.append(("time to every row", f"{time.monotonic() - t:.1f} s "
                            f"({page.evaluate('() => window.netlogView.rows()'):,} rows)"))
            page.wait_for_timeout(500)
            heap = page.evaluate("() => performance.memory.usedJSHeapSize")
            results.append(("JS heap with every row", f"{heap / 1e6:.0f} MB"))
            page.evaluate("() => window.netlogView.renderTimes()")
            gaps = page.evaluate(SCROLL, [SCROLL_FRAMES, SCROLL_ROWS])
            results.append((f"scrolling {SCROLL_ROWS} rows a frame, frame to frame", spread(gaps)))
            results.append(("  of which the page's own rendering", spread(
                page.evaluate("() => window.netlogView.renderTimes()"))))
            jumps = page.evaluate(JUMP, JUMPS)
            results.append(("jump to a random place, to its frame drawn", spread(jumps)))
            t = time.monotonic()
            page.fill("#filter-text", "/items/99")
            expected = f"{sum(1 for i in range(args.exchanges) if str(i).startswith('99')):,} "
            page.wait_for_function("(s) => document.getElementById('counts').textContent.startsWith(s)",
                                   arg=expected, polling="raf")
            results.append(("text filter over every row, to the counts", f"{(time.monotonic() - t) * 1000:.0f} ms"))
            page.fill("#filter-text", "")
            page.evaluate("() => { const s = document.getElementById('scroller');"
                          " s.scrollTop = s.scrollHeight / 2; }")
            page.wait_for_timeout(200)
            t = time.monotonic()
            page.locator(".rows .row:not([hidden])").nth(10).click()
            page.wait_for_selector("#detail-body h3")
            results.append(("a detail from the middle, to its first section",
                            f"{(time.monotonic() - t) * 1000:.0f} ms"))
            page.click("#detail-close")
            page.evaluate("() => { const s = document.getElementById('scroller'); s.scrollTop = s.scrollHeight; }")
            ends: list[int] = []
            writer = threading.Thread(
                target=lambda: ends.append(appendExchanges(logPath, last, args.rate, args.seconds))
            )
            writer.start()
            writer.join()
            page.wait_for_function("(n) => window.netlogView.cursor() >= n", arg=ends[0], timeout=LOAD_TIMEOUT_MS)
            times = {}
            with open(logPath, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - int(args.rate * args.seconds) * 800))
                for raw in f.read().split(b"\n")[1:]:
                    if raw:
                        record = json.loads(raw)
                        if record["n"] > last:
                            times[record["n"]] = record["time"]
            lags = []
            for exchangeId, openedAt, endN, endedAt in page.evaluate("() => window.netlogView.seen()"):
                if exchangeId > last:
                    lags.append(openedAt - times[exchangeId] * 1000)
                    lags.append(endedAt - times[endN] * 1000)
            results.append((f"following {args.rate:,} exchanges/s for {args.seconds:g} s, line written to read "
                            f"({len(lags):,} lines)", spread(lags)))
        finally:
            browser.close()
    return results


if __name__ == "__main__":
    sys.exit(main())
