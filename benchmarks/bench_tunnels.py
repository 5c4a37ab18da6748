"""
The stand-in's CPU per request on tunnels, this checkout's against another
checkout's, finer than the main table can tell: the CPU clock ticks at 10
ms, so a scenario of 400 requests measures in steps of 25 µs; here a round
is 10,000 small GETs over TLS in 4 CONNECT tunnels (C{https}: steps of 1
µs), 3 bursts of 1,024 new CONNECTs with TLS inside (C{burst-tls}), or 3
downloads of 100 MB over TLS in a tunnel each (C{bulk}: CPU per download),
and the two stand-ins take turns, the order turning each round.

    git worktree add --detach /tmp/before main
    .venv/bin/python -m benchmarks.bench_tunnels --before /tmp/before https 8
    .venv/bin/python -m benchmarks.bench_tunnels --before /tmp/before burst-tls 6
    .venv/bin/python -m benchmarks.bench_tunnels --before /tmp/before bulk 4
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile

from benchmarks.bench_ab import OtherProcess, renamed
from benchmarks.bench_standin import standinArgv
from benchmarks.harness import (
    ProcessTarget,
    _burst,
    _keepAlive,
    cpuSeconds,
    download100Tunnel,
    startOrigin,
    stopProcess,
)

#: Connections, and GETs on each, of an C{https} round.
TUNNELS, GETS = 4, 2500
#: Bursts of a C{burst-tls} round (each 1,024 new tunnels, 64 at a time).
BURSTS = 3
#: 100 MB downloads of a C{bulk} round.
DOWNLOADS = 3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--before", required=True, help="the other checkout")
    parser.add_argument("scenario", choices=("https", "burst-tls", "bulk"))
    parser.add_argument("rounds", type=int, nargs="?", default=6)
    args = parser.parse_args()
    env, origin = startOrigin(tempfile.mkdtemp(prefix="netlog-bench-tunnels-"))
    targets: list[ProcessTarget] = [
        ProcessTarget("this checkout", argv=standinArgv),
        OtherProcess("before", argv=renamed(standinArgv, "-before"), source=os.path.abspath(args.before)),
    ]
    perRequest: dict[str, list[float]] = {t.name: [] for t in targets}

    async def load(target: ProcessTarget) -> int:
        if args.scenario == "https":
            await _keepAlive(env, target, "/small", TUNNELS, GETS, tls=True)
            return TUNNELS * GETS
        if args.scenario == "bulk":
            for _ in range(DOWNLOADS):
                await download100Tunnel(env, target)
            return DOWNLOADS
        for _ in range(BURSTS):
            await _burst(env, target, True)
        return BURSTS * 1024

    loop = asyncio.new_event_loop()
    try:
        for target in targets:
            target.start(env)
            loop.run_until_complete(_keepAlive(env, target, "/small", 2, 20))
        for round in range(args.rounds):
            for target in targets if round % 2 == 0 else targets[::-1]:
                before = cpuSeconds(target.pid) or 0.0
                count = loop.run_until_complete(load(target))
                perRequest[target.name].append(((cpuSeconds(target.pid) or 0.0) - before) / count)
    finally:
        loop.close()
        for target in targets:
            target.stop()
        stopProcess(origin)
    unit, scale, each = ("ms", 1e3, "download") if args.scenario == "bulk" else ("µs", 1e6, "request")
    for name, runs in perRequest.items():
        print(f"{args.scenario}, {name}: {statistics.median(runs) * scale:.1f} {unit} CPU per {each}, median of "
              f"{len(runs)} rounds ({min(runs) * scale:.1f}–{max(runs) * scale:.1f})")


if __name__ == "__main__":
    main()
