"""
How fast the HAR export is and how much memory it takes, against a naive
in-memory export built in the same run.

Makes two logs in a temporary folder (deleted after):

  - small: many small exchanges (a GET with a short JSON answer);
  - large: 1 GB of 10,000 exchanges (about 100 KB of body each), with a
    tunnel left open at the start, so an exporter that holds entries until
    everything before them ended would hold all of them.

Each export runs in a child process (netlog's streaming L{writeHar}, and the
naive one: read every line, C{json.loads} them all, join in memory, build
every entry, C{json.dump} the whole HAR) writing to a file; the child's peak
RSS comes from C{os.wait4}. Prints entries/s, seconds and peak RSS, and the
ratios.

Usage: .venv/bin/python benchmarks/bench_har.py [--small N] [--large-mb M]
       [--large-entries N] [--no-baseline]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from netlog.core.logline import encodeLine  # noqa: E402

T0 = 1767225600.0

STREAMING = """
import sys
from netlog.har.export import writeHar
with open(sys.argv[2], "wb") as out:
    r = writeHar(sys.argv[1], out)
print(r.entries)
"""

NAIVE = """
import json, sys
from netlog.core.har import buildEntry, harHead
records = []
with open(sys.argv[1], "rb") as f:
    for line in f:
        try:
            records.append(json.loads(line))
        except ValueError:
            pass
ends = {r["id"]: r for r in records if r.get("type") == "end"}
entries = [buildEntry(r, ends.get(r["id"])) for r in records if r.get("type") == "open"]
har = {"log": {"version": "1.2", "creator": {"name": "netlog", "version": "naive"}, "entries": entries}}
with open(sys.argv[2], "w", encoding="utf-8") as out:
    json.dump(har, out, ensure_ascii=False)
print(len(entries))
"""


def writeSmall(path: str, count: int) -> int:
    answer = base64.b64encode(json.dumps({"ok": True, "items": [1, 2, 3], "name": "Crème"}).encode()).decode()
    n = 0
    with open(path, "wb", buffering=1 << 20) as f:
        for i in range(count):
            n += 1
            opened = n
            f.write(
                encodeLine(
                    n,
                    "open",
                    n,
                    n,
                    T0 + i,
                    {
                        "proxy": "site",
                        "kind": "exchange",
                        "started": T0 + i,
                        "client": "127.0.0.1:50000",
                        "connection": "c%d" % (i % 50),
                        "request": {
                            "method": "GET",
                            "url": "https://shop.test/api/items/%d?page=2&q=caf%%C3%%A9" % i,
                            "version": "HTTP/1.1",
                            "headers": [
                                ["Host", "shop.test"],
                                ["Accept", "application/json"],
                                ["Cookie", "session=abc; theme=dark"],
                                ["Referer", "https://shop.test/"],
                            ],
                            "headers_size": 180,
                        },
                        "server": {"host": "shop.test", "port": 443, "address": "127.0.0.1"},
                    },
                )
            )
            n += 1
            f.write(
                encodeLine(
                    n,
                    "end",
                    opened,
                    n,
                    T0 + i + 0.2,
                    {
                        "ended": T0 + i + 0.2,
                        "times": {"connected": None, "sent": T0 + i + 0.01, "first_byte": T0 + i + 0.1, "end": T0 + i + 0.2},
                        "response": {
                            "status": 200,
                            "reason": "OK",
                            "version": "HTTP/1.1",
                            "headers": [["Content-Type", "application/json"], ["Set-Cookie", "seen=1; Max-Age=60"]],
                            "headers_size": 90,
                            "body": {"size": 60, "data": answer},
                        },
                        "bytes": {"up": 180, "down": 150},
                    },
                )
            )
    return count


def writeLarge(path: str, megabytes: int, count: int) -> int:
    bodyBytes = max(1, int(megabytes * 1024 * 1024 / count * 3 / 4) - 400)
    words = ("lorem ipsum dolor sit amet café crème %d " * 1000).encode()
    n = 0
    with open(path, "wb", buffering=1 << 20) as f:
        n += 1
        tunnel = n
        f.write(
            encodeLine(n, "open", n, 1, T0, {
                "proxy": "site", "kind": "tunnel", "started": T0, "connection": "c0",
                "request": {"method": "CONNECT", "url": "https://live.test:443/", "version": "HTTP/1.1", "headers": [], "headers_size": 40},
                "server": {"host": "live.test", "port": 443, "address": "127.0.0.1"},
            })
        )
        for i in range(count - 1):
            n += 1
            opened = n
            f.write(
                encodeLine(n, "open", n, 1, T0 + i, {
                    "proxy": "site", "kind": "exchange", "started": T0 + i, "connection": "c1",
                    "request": {"method": "GET", "url": "https://shop.test/page/%d" % i, "version": "HTTP/1.1",
                                "headers": [["Host", "shop.test"], ["Accept", "text/html"]], "headers_size": 60},
                    "server": {"host": "shop.test", "port": 443, "address": "127.0.0.1"},
                })
            )
            body = (b"<p>%d</p>" % i + words * (bodyBytes // len(words) + 1))[:bodyBytes]
            n += 1
            f.write(
                encodeLine(n, "end", opened, 1, T0 + i + 0.5, {
                    "ended": T0 + i + 0.5,
                    "times": {"connected": None, "sent": T0 + i + 0.01, "first_byte": T0 + i + 0.1, "end": T0 + i + 0.5},
                    "response": {"status": 200, "reason": "OK", "version": "HTTP/1.1",
                                 "headers": [["Content-Type", "text/html; charset=utf-8"]], "headers_size": 60,
                                 "body": {"size": len(body), "data": base64.b64encode(body).decode()}},
                    "bytes": {"up": 60, "down": 60 + len(body)},
                })
            )
        n += 1
        f.write(encodeLine(n, "end", tunnel, 1, T0 + count, {"ended": T0 + count, "bytes": {"up": 1, "down": 2}}))
    return count


def measure(code: str, logPath: str, outPath: str) -> tuple[float, float, float, int]:
    """
    Run an exporter in a child process: (wall seconds, CPU seconds, peak RSS
    in MB, entries). CPU time is what to compare on a busy machine.
    """
    env = dict(os.environ, PYTHONPATH=REPO)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, logPath, outPath], stdout=subprocess.PIPE, env=env)
    assert proc.stdout is not None
    output = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"exporter failed with {proc.returncode}")
    return seconds, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, int(output.strip() or 0)


def report(name: str, logPath: str, baseline: bool) -> None:
    size = os.path.getsize(logPath) / (1 << 20)
    outPath = logPath + ".har"
    seconds, cpu, rss, entries = measure(STREAMING, logPath, outPath)
    print(f"{name}: {entries} entries, log {size:.0f} MB, HAR {os.path.getsize(outPath) / (1 << 20):.0f} MB")
    line = "  {:<19} {:7.2f} s wall {:9.0f} entries/s | {:7.2f} s CPU {:9.0f} entries/CPU-s | peak RSS {:6.0f} MB"
    print(line.format("netlog (streaming):", seconds, entries / seconds, cpu, entries / cpu, rss))
    os.unlink(outPath)
    if baseline:
        bSeconds, bCpu, bRss, bEntries = measure(NAIVE, logPath, outPath)
        assert bEntries == entries
        print(line.format("naive (in memory):", bSeconds, bEntries / bSeconds, bCpu, bEntries / bCpu, bRss))
        print(f"  ratio: {bCpu / cpu:.2f}x the naive speed (CPU), {rss / bRss:.3f}x its peak RSS")
        os.unlink(outPath)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--small", type=int, default=100_000, help="exchanges in the small log")
    parser.add_argument("--large-mb", type=int, default=1024, help="size of the large log in MB (0: skip it)")
    parser.add_argument("--large-entries", type=int, default=10_000, help="exchanges in the large log")
    parser.add_argument("--no-baseline", action="store_true", help="skip the naive exporter")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="netlog-bench-har-")
    try:
        if args.small:
            path = os.path.join(folder, "small.jsonl")
            writeSmall(path, args.small)
            report("small", path, not args.no_baseline)
            os.unlink(path)
        if args.large_mb:
            path = os.path.join(folder, "large.jsonl")
            writeLarge(path, args.large_mb, args.large_entries)
            report("large", path, not args.no_baseline)
            os.unlink(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
