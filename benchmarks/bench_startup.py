"""
How long a LogWriter takes to start on a large log, and a read near its end.

Builds a log of about C{--size} bytes (1 GB by default) in /tmp with lines
shaped like netlog's (exchanges opened and ended, some with base64 bodies),
then times:

 - a LogWriter start on it when every exchange but the last few has ended
   (the usual case: recovery reads back only to the last line's open_from);
 - the same when one exchange opened at the very start is still open (a
   tunnel or WebSocket open for the whole log: recovery reads it all);
 - C{read(after=...)} near the end, in the middle, and from a reader that
   follows (the offset hint).

The file is deleted afterwards. Run: C{python benchmarks/bench_startup.py}.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from netlog.core.logline import END, OPEN, encodeLine  # noqa: E402
from netlog.log.reader import LogReader, read  # noqa: E402
from netlog.log.writer import LogWriter  # noqa: E402


def build(path: str, size: int, stillOpenFromStart: bool) -> int:
    """
    Write a log of about C{size} bytes; return its last line's number.
    """
    body = base64.b64encode(os.urandom(3000)).decode()
    openFields = {
        "proxy": "site",
        "kind": "exchange",
        "client": "127.0.0.1:50312",
        "connection": "c17",
        "request": {
            "method": "GET",
            "url": "https://shop.test/catalog/item?id=12345",
            "version": "HTTP/1.1",
            "headers": [["Host", "shop.test"], ["User-Agent", "Mozilla/5.0"], ["Accept", "*/*"]],
            "headers_size": 180,
        },
        "server": {"host": "shop.test", "port": 443, "address": "127.0.0.1"},
    }
    endFields = {
        "response": {
            "status": 200,
            "reason": "OK",
            "version": "HTTP/1.1",
            "headers": [["Content-Type", "text/html; charset=utf-8"], ["Content-Length", "3000"]],
            "headers_size": 120,
            "body": {"size": 3000, "data": body},
        },
        "bytes": {"up": 180, "down": 4120},
    }
    n = 0
    written = 0
    pinned = None
    with open(path, "wb", buffering=1 << 22) as f:
        if stillOpenFromStart:
            n += 1
            pinned = n
            line = encodeLine(n, OPEN, n, n, time.time(), openFields)
            f.write(line)
            written += len(line)
        while written < size:
            n += 1
            exchangeId = n
            low = pinned if pinned is not None else exchangeId
            line = encodeLine(n, OPEN, exchangeId, low, 1.7e9, openFields)
            n += 1
            end = encodeLine(n, END, exchangeId, low if pinned is not None else n + 1, 1.7e9, endFields)
            f.write(line + end)
            written += len(line) + len(end)
        # A few exchanges still open at the end, as a crash leaves them.
        firstOpen = n + 1
        for _ in range(3):
            n += 1
            f.write(encodeLine(n, OPEN, n, pinned if pinned is not None else firstOpen, 1.7e9, openFields))
    return n


def timeStart(path: str) -> tuple[float, int]:
    start = time.perf_counter()
    writer = LogWriter(path)
    writer.startService()
    elapsed = time.perf_counter() - start
    nextNumber = writer.nextNumber
    writer.stopService()
    return elapsed, nextNumber


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=1 << 30, help="bytes of log (default 1 GB)")
    parser.add_argument("--folder", default=tempfile.gettempdir())
    args = parser.parse_args()
    path = os.path.join(args.folder, f"netlog-bench-{os.getpid()}.jsonl")
    try:
        for pinned in (False, True):
            t0 = time.perf_counter()
            last = build(path, args.size, pinned)
            built = time.perf_counter() - t0
            size = os.path.getsize(path)
            case = "one exchange open since the first line" if pinned else "all but the last 3 exchanges ended"
            print(f"log: {size / 1e9:.2f} GB, {last} lines, built in {built:.1f} s ({case})")
            elapsed, nextNumber = timeStart(path)
            print(f"  LogWriter start: {elapsed * 1000:.1f} ms (numbers on from {nextNumber})")
            if not pinned:
                for label, after in (("near the end", last - 20), ("in the middle", last // 2)):
                    t = time.perf_counter()
                    page = read(path, after=after, limit=1 << 20)
                    took = time.perf_counter() - t
                    print(f"  read(after={after}) {label}: {took * 1000:.1f} ms, {len(page.lines)} lines")
                reader = LogReader(path)
                page = reader.read(last - 20)
                t = time.perf_counter()
                page = reader.read(page.next)
                took = time.perf_counter() - t
                print(f"  a following reader's next poll (no new lines): {took * 1000:.2f} ms")
            os.unlink(path)
    finally:
        if os.path.exists(path):
            os.unlink(path)


if __name__ == "__main__":
    main()
