"""
The command line of the proxy benchmarks: parse it, run direct, the bare
relay, the peer (squid, when installed) and the proxies in interleaved
rounds, print and write the table. The scenarios and the measuring are in
L{benchmarks.harness}; the peer in L{benchmarks.squid}.
"""

from __future__ import annotations

import argparse
import os

from benchmarks.harness import DEFAULT_ROUNDS, PEER, SCENARIOS, Results, Target, baselineTarget, run, table
from benchmarks.squid import squidTargets


def main(proxies: list[Target], argv: list[str] | None = None, title: str = "netlog") -> Results:
    """
    Parse the command line, run, print and write the table.
    """
    parser = argparse.ArgumentParser(description=f"Benchmark {title} against direct and a bare relay.")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                        help=f"interleaved rounds (default {DEFAULT_ROUNDS}; use more for steadier medians)")
    parser.add_argument("--out", default=None, help="the markdown file to write (default: results-NAME.md here)")
    parser.add_argument("--only", action="append", default=[],
                        help="run only scenarios whose name contains this (repeatable)")
    parser.add_argument("--no-squid", action="store_true", help=f"leave out the peer ({PEER}) even if installed")
    args = parser.parse_args(argv)
    chosen = {n: s for n, s in SCENARIOS.items()
              if not args.only or any(o.lower() in n.lower() for o in args.only)}
    peers = [] if args.no_squid else squidTargets()
    targets: list[Target] = [Target("direct"), baselineTarget()] + peers + proxies
    results = run(targets, chosen, args.rounds)
    text = f"# {title}: benchmark\n\n" + table(results, targets, list(chosen), args.rounds)
    print(text)
    out = args.out or os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                   f"results-{proxies[0].name if proxies else 'baseline'}.md")
    with open(out, "w") as f:
        f.write(text)
    print(f"written to {out}")
    return results
