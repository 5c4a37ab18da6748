"""
What a small keep-alive exchange costs netlog at the least, whatever its
shell does: reading the request and the answer with the strict reader, and
writing the exchange's two log lines (encoding each, one C{writev} each).

The proxies' CPU per exchange is measured against the bare relay's in
C{bench_standin} and C{bench_site}; this puts a number on the part of it no
proxy that parses and logs each exchange can shed. One process, no sockets,
the best of a few rounds (so this machine's load counts as little as it can).

Run: C{.venv/bin/python -m benchmarks.bench_floor [--exchanges N] [--rounds R]}.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from typing import Any, Callable

from netlog.core.http1 import RequestReader, ResponseReader
from netlog.core.logline import encodeRecord

#: A keep-alive GET through the stand-in and its answer, as the benchmark
#: client and origin send them.
REQUEST = b"GET http://bench.test:8080/small HTTP/1.1\r\nHost: bench.test:8080\r\n\r\n"
RESPONSE = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 96\r\n\r\n" + b"x" * 96
)
#: The fields of that exchange's open and end lines, as the stand-in writes
#: them.
OPEN_FIELDS: dict[str, Any] = {
    "proxy": "standin", "kind": "exchange", "started": 1767225600.123456, "client": "127.0.0.1:50000",
    "connection": "c12",
    "request": {"method": "GET", "url": "http://bench.test:8080/small", "version": "HTTP/1.1",
                "headers": [["Host", "bench.test:8080"]], "headers_size": 66},
    "server": {"host": "bench.test", "port": 8080, "address": "127.0.0.1"},
}
END_FIELDS: dict[str, Any] = {
    "ended": 1767225600.2,
    "times": {"connected": 1767225600.1, "sent": 1767225600.11, "first_byte": 1767225600.15,
              "end": 1767225600.2},
    "response": {"status": 200, "reason": "OK", "version": "HTTP/1.1",
                 "headers": [["Content-Type", "text/plain"], ["Content-Length", "96"]],
                 "headers_size": 66, "body": {"size": 96}},
    "bytes": {"up": 66, "down": 162},
}


def _best(rounds: int, count: int, work: Callable[[int], None]) -> float:
    """
    The least CPU time per call of C{work} over C{rounds} rounds of C{count}
    calls, in microseconds.
    """
    best = float("inf")
    for _ in range(rounds):
        begin = time.process_time()
        work(count)
        best = min(best, (time.process_time() - begin) / count)
    return best * 1e6


def measure(count: int, rounds: int) -> dict[str, float]:
    """
    Microseconds per exchange of each part.
    """
    requests = RequestReader(forwardProxy=True)
    answers = ResponseReader()

    def read(n: int) -> None:
        for _ in range(n):
            requests.feed(REQUEST)
            answers.expectResponseTo(b"GET")
            answers.feed(RESPONSE)

    def encode(n: int) -> None:
        for i in range(n):
            encodeRecord(2 * i + 1, "open", 2 * i + 1, 2 * i + 1, 1767225600.5, OPEN_FIELDS)
            encodeRecord(2 * i + 2, "end", 2 * i + 1, 2 * i + 2, 1767225600.6, END_FIELDS)

    opened = encodeRecord(1, "open", 1, 1, 1767225600.5, OPEN_FIELDS)
    ended = encodeRecord(2, "end", 1, 2, 1767225600.6, END_FIELDS)
    with tempfile.TemporaryDirectory() as folder:
        fd = os.open(os.path.join(folder, "floor.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            def write(n: int) -> None:
                for _ in range(n):
                    os.writev(fd, [opened, b"\n"])
                    os.writev(fd, [ended, b"\n"])
                os.ftruncate(fd, 0)

            parts = {
                "read the request and the answer": _best(rounds, count, read),
                "encode the open and end lines": _best(rounds, count, encode),
                "write them (two writev)": _best(rounds, count, write),
            }
        finally:
            os.close(fd)
    parts["in all"] = sum(parts.values())
    return parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    parts = measure(args.exchanges, args.rounds)
    print("netlog's least work per small keep-alive exchange (CPU, best of "
          f"{args.rounds} rounds of {args.exchanges:,}):\n")
    print("| part | µs per exchange |\n|---|---|")
    for name, micros in parts.items():
        print(f"| {name} | {micros:.1f} |")


if __name__ == "__main__":
    main()
