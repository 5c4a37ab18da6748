"""
What segments cost: the LogWriter's CPU per exchange with and without
rotation, and a page read at the end of a long series.

    .venv/bin/python -m benchmarks.bench_rotation                 # 3 rounds
    .venv/bin/python -m benchmarks.bench_rotation --rounds 5 --exchanges 200000

Writing: the same exchanges (an open and an end line of about 600 bytes
together) written by a LogWriter with no rotation and with C{--rotate-size}
(64 MiB by default, and a small size so that a short run rotates often),
in interleaved rounds; CPU is this thread's (the writer's, what a request
waits for) and the process's (the compression thread's too).

Reading: a series of C{--segments} compressed closed segments and a live
one, then C{LogReader.read(after=N)} near the end from a fresh reader (no
offset remembered), the median of 20.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

from netlog.core.logline import OPEN, encodeLine
from netlog.core.segments import Rotation, parseSize, segmentName
from netlog.log.reader import LogReader
from netlog.log.series import compressSegment, listing
from netlog.log.writer import LogWriter

FIELDS = {
    "method": "GET", "url": "http://bench.test/some/path?q=1", "http_version": "HTTP/1.1",
    "request_headers": [["Host", "bench.test"], ["User-Agent", "bench/1.0"], ["Accept", "*/*"]] * 3,
}
END = {"status": 200, "response_headers": [["Content-Type", "text/html"], ["Content-Length", "1234"]] * 3,
       "body_size": 1234, "_sha256": "0" * 64}


def writeRound(folder: str, exchanges: int, rotation: Rotation) -> tuple[float, float, int]:
    path = os.path.join(folder, "network.jsonl")
    writer = LogWriter(path, rotation=rotation)
    writer.startService()
    thread, process = time.thread_time(), time.process_time()
    for _ in range(exchanges):
        writer.end(writer.open(FIELDS), END)
    threadSpent = time.thread_time() - thread
    writer.waitForHousekeeping(600)
    processSpent = time.process_time() - process
    writer.stopService()
    return threadSpent / exchanges * 1e6, processSpent / exchanges * 1e6, len(listing(path).segments)


def readBench(folder: str, segments: int, perSegment: int) -> float:
    path = os.path.join(folder, "network.jsonl")
    line = len(encodeLine(1, OPEN, 1, 1, 0.0, FIELDS))
    lines = perSegment // line
    n = 1
    for _ in range(segments + 1):
        closed = os.path.join(folder, segmentName("network.jsonl", n))
        with open(closed, "wb") as f:
            f.write(b"".join(encodeLine(k, OPEN, k, k, 0.0, FIELDS) for k in range(n, n + lines)))
        n += lines
    os.rename(closed, path)
    for segment in listing(path).toCompress:
        compressSegment(path, segment)
    times = []
    for _ in range(20):
        began = time.perf_counter()
        page = LogReader(path).read(n - 100, 1 << 20)
        times.append(time.perf_counter() - began)
        assert page.lines and page.records()[0]["n"] == n - 99
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_rotation")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--exchanges", type=int, default=100000)
    parser.add_argument("--rotate-size", default="64MiB")
    parser.add_argument("--small-size", default="4MiB", help="a size that rotates often in a short run")
    parser.add_argument("--segments", type=int, default=160)
    parser.add_argument("--segment-size", default="8MiB", help="uncompressed bytes per closed segment")
    args = parser.parse_args()
    modes = {
        "no rotation": Rotation(),
        f"--rotate-size {args.rotate_size}": Rotation(size=parseSize(args.rotate_size)),
        f"--rotate-size {args.small_size}": Rotation(size=parseSize(args.small_size)),
    }
    results: dict[str, list[tuple[float, float, int]]] = {name: [] for name in modes}
    for _ in range(args.rounds):
        for name, rotation in modes.items():
            folder = tempfile.mkdtemp(prefix="netlog-bench-")
            try:
                results[name].append(writeRound(folder, args.exchanges, rotation))
            finally:
                shutil.rmtree(folder)
    base = statistics.median(r[0] for r in results["no rotation"])
    print(f"| writing {args.exchanges} exchanges, {args.rounds} rounds | writer µs/exchange | vs none "
          f"| process µs/exchange | segments |")
    print("|---|---|---|---|---|")
    for name, rounds in results.items():
        writer = statistics.median(r[0] for r in rounds)
        process = statistics.median(r[1] for r in rounds)
        print(f"| {name} | {writer:.2f} | {writer / base:.3f} | {process:.2f} | {rounds[0][2]} |")
    folder = tempfile.mkdtemp(prefix="netlog-bench-")
    try:
        took = readBench(folder, args.segments, parseSize(args.segment_size))
        size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder))
    finally:
        shutil.rmtree(folder)
    print(f"\nreading a page at the end of {args.segments} compressed segments of {args.segment_size} "
          f"and a live one ({size / 1e6:.0f} MB on disk): {took:.2f} ms (median of 20, fresh readers)")


if __name__ == "__main__":
    main()
