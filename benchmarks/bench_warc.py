"""
How the WARC export compares with the HAR export of the same log.

Makes bench_har's large log (1 GB of 10,000 exchanges of 80 KB HTML, a
tunnel open throughout) in a temporary folder (deleted after), and runs,
each in a child process writing to a file, C{netlog har LOG -o OUT} and
C{netlog warc LOG -o OUT.warc.gz} as a user runs them (no flags: a process
per CPU on a large log), in interleaved rounds. Prints each one's median
wall and CPU seconds and peak memory (bench_har's measure: the PSS of the
exporter and its workers summed), and the WARC's over the HAR's (issue 36:
at most 1.5).

With C{--varied}, the bodies are words drawn at random, which gzip makes a
third (pages, a quarter) where bench_har's repeated Latin becomes a
three-hundredth: the WARC's compression then costs what it would on real
pages.

Usage: .venv/bin/python benchmarks/bench_warc.py [--large-mb M] [--large-entries N] [--rounds R] [--varied]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks.bench_har import COMMAND, Exporter, writeLarge  # noqa: E402

#: Issue 36's goal: the WARC export's wall time over the HAR export's.
GOAL_RATIO = 1.5

WARC = """
import sys
from netlog.cli import main
sys.exit(main(["warc", sys.argv[1], "-o", sys.argv[2]]))
"""


def variedText(size: int = 4 << 20) -> bytes:
    """
    C{size} bytes of words drawn (seeded) from a vocabulary of 5,000 made
    up ones, by Zipf's law: text no window of gzip's 32 KB repeats.
    """
    draw = random.Random(36)
    letters = "abcdefghijklmnopqrstuvwxyzéè"
    vocabulary = ["".join(draw.choice(letters) for _ in range(draw.randint(2, 10))) for _ in range(5_000)]
    # the n-th word drawn 1/n as often as the first, as in a language
    weights = [1 / n for n in range(1, len(vocabulary) + 1)]
    text = bytearray()
    while len(text) < size:
        text += (" ".join(draw.choices(vocabulary, weights, k=1000)) + " ").encode()
    return bytes(text[:size])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--large-mb", type=int, default=1024, help="size of the log in MB")
    parser.add_argument("--large-entries", type=int, default=10_000, help="exchanges in the log")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of each export (default 3)")
    parser.add_argument("--varied", action="store_true",
                        help="bodies of words drawn at random (gzip makes them about a third; pages compress a little better) "
                             "rather than bench_har's repeated Latin (a three-hundredth)")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="netlog-bench-warc-")
    try:
        path = os.path.join(folder, "large.jsonl")
        count = writeLarge(path, args.large_mb, args.large_entries, variedText() if args.varied else None)
        har = Exporter("netlog har", COMMAND, command=True)
        # (it writes a .warc.gz wherever Exporter says, named .har)
        warc = Exporter("netlog warc", WARC, command=True)
        for i in range(args.rounds):
            for exporter in (har, warc) if i % 2 == 0 else (warc, har):
                exporter.run(path, count)
        print(f"log: {os.path.getsize(path) / (1 << 20):.0f} MB, {count} exchanges, {args.rounds} rounds")
        print(har.line())
        print(warc.line() + f" | {warc.harSize / (1 << 20):.0f} MB written")
        ratio = warc.median(0) / har.median(0)
        cpu = warc.median(1) / har.median(1)
        print(f"  warc / har: {ratio:.2f} wall, {cpu:.2f} CPU; goal (issue 36, at most {GOAL_RATIO} wall): "
              f"{'met' if ratio <= GOAL_RATIO else 'NOT met'}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
