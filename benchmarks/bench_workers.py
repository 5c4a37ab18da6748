"""
One serving worker against several (issue 24): a supervised
C{twistd netlog-standin} with N sessions fixed at start (C{--session}), all
loaded at once, with C{--workers 1} and then with C{--workers 2} (or the
counts given), in interleaved rounds.

Each session is driven by a client process of its own (so that the clients
are not one Python on one core), over keep-alive connections, with small
plain-HTTP GETs: each one an exchange the stand-in logs whole.

Reported per worker count: requests per second over the whole load (median
of the rounds), and the CPU time of the stand-in's process tree (supervisor,
workers, standbys) per request.

Run from the repository::

    .venv/bin/python -m benchmarks.bench_workers                       # 4 sessions, 1 against 2 workers
    .venv/bin/python -m benchmarks.bench_workers --rounds 5 --requests 2000
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import shutil
import statistics
import tempfile
import time

from benchmarks.bench_sessions import cpu, settle, standin, tree
from benchmarks.harness import (
    Environment,
    Target,
    _keepAlive,
    freePort,
    printReport,
    startOrigin,
    stopProcess,
    waitListening,
)

#: Keep-alive connections each session's client keeps open.
CONNECTIONS = 4
#: Seconds a client may take at most.
CLIENT_TIMEOUT = 300.0


def load(env: Environment, port: int, requests: int) -> None:
    """
    One session's client (in a process of its own): C{requests} small GETs
    over L{CONNECTIONS} keep-alive connections.
    """
    asyncio.run(_keepAlive(env, Target(f"p{port}", port), "/small", CONNECTIONS, requests // CONNECTIONS))


def once(env: Environment, workers: int, sessions: int, requests: int, name: str) -> tuple[float, float]:
    """
    Start a stand-in with C{workers} workers and C{sessions} sessions, load
    them all at once; its requests per second and CPU seconds per request.
    """
    ports = [freePort() for _ in range(sessions)]
    port = freePort()
    process = standin(env, name, port, [(f"s{i}", p) for i, p in enumerate(ports)],
                      ["--workers", str(workers)])
    try:
        waitListening(port, process, f"the stand-in with {workers} workers")
        for p in ports:
            waitListening(p, process, "a session")
        settle([process])
        pids = tree(process.pid)
        before = cpu(pids)
        # Forked, so that nothing is pickled (the environment holds an SSL
        # context).
        context = multiprocessing.get_context("fork")
        clients = [context.Process(target=load, args=(env, p, requests)) for p in ports]
        started = time.monotonic()
        for client in clients:
            client.start()
        for client in clients:
            client.join(CLIENT_TIMEOUT)
        wall = time.monotonic() - started
        for client in clients:
            if client.exitcode != 0:
                client.kill()
                raise SystemExit(f"a client failed (exit code {client.exitcode})")
        after = cpu(tree(process.pid))
    finally:
        stopProcess(process)
    total = sessions * (requests // CONNECTIONS) * CONNECTIONS
    return total / wall, (after - before) / total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_workers")
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--requests", type=int, default=1000, help="GETs per session")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="netlog-bench-workers-")
    env, origin = startOrigin(directory)
    rates: dict[int, list[float]] = {w: [] for w in args.workers}
    costs: dict[int, list[float]] = {w: [] for w in args.workers}
    try:
        for round in range(args.rounds):
            # The order turns each round, so that each count sees the same load.
            order = args.workers[round % len(args.workers):] + args.workers[:round % len(args.workers)]
            for workers in order:
                rate, cost = once(env, workers, args.sessions, args.requests, f"w{workers}-r{round}")
                rates[workers].append(rate)
                costs[workers].append(cost)
    finally:
        stopProcess(origin)
        shutil.rmtree(directory, True)

    first = args.workers[0]
    lines = [
        f"# Workers: {args.sessions} sessions loaded at once, {args.requests} keep-alive GETs each "
        f"({CONNECTIONS} connections), {args.rounds} rounds",
        "",
        f"| workers | requests/s (median, min-max) | × {first} worker | CPU per request (µs, median) | × {first} worker |",
        "|---|---|---|---|---|",
    ]
    for workers in args.workers:
        rate, cost = statistics.median(rates[workers]), statistics.median(costs[workers])
        lines.append(
            f"| {workers} | {rate:.0f} ({min(rates[workers]):.0f}-{max(rates[workers]):.0f}) | "
            f"{rate / statistics.median(rates[first]):.2f}× | {cost * 1e6:.0f} | "
            f"{cost / statistics.median(costs[first]):.2f}× |"
        )
    printReport("\n".join(lines) + "\n", args.out)


if __name__ == "__main__":
    main()
