"""
Benchmark the stand-in (C{twistd netlog-standin}, logging to a file) against
direct and the bare Twisted relay.

Run from the repository: C{.venv/bin/python -m benchmarks.bench_standin}
(C{--rounds 10} for steadier medians, C{--only burst} for some scenarios).

C{--with-unlogged} adds the same stand-in with C{--no-log} to the rounds:
the stand-in against it is what logging itself costs.

C{--profile N} instead runs N keep-alive small GETs (4 connections) through a
stand-in under twistd's cProfile, and prints its CPU time per exchange (from
C{/proc}, taken without the profiler too) and where the time goes;
C{--profile N burst} does the same for the new-connection burst (1,024
GETs a round, each on a new connection, 64 at a time), C{--profile N
burst-tls} for the burst of new CONNECT tunnels with TLS inside.
"""

from __future__ import annotations

import asyncio
import os
import pstats
import shutil
import sys
import tempfile
import time
from typing import Callable

from benchmarks.harness import (
    HOST,
    Environment,
    ProcessTarget,
    _burst,
    _keepAlive,
    cpuSeconds,
    startOrigin,
    stopProcess,
)
from benchmarks.runner import main

#: Connections the profile's GETs are spread over.
PROFILE_CONNECTIONS = 4


def standinArgv(env: Environment, port: int) -> list[str]:
    from netlog.tap.standin import Options

    supervise = ["--no-supervise"] if "no-supervise" in Options().longOpt else []
    return [
        sys.executable, "-c", "from twisted.scripts.twistd import run; run()",
        "-n", "--pidfile=", f"--logfile={os.path.join(env.directory, 'standin-twistd.log')}",
        "netlog-standin", *supervise,
        "--listen", f"tcp:{port}:interface=127.0.0.1",
        "--log", os.path.join(env.directory, "standin.jsonl"),
        "--resolve-only", "--resolve", f"{HOST}=127.0.0.1",
        "--connect-ports", f"{env.tlsPort},{env.port}",
    ]


#: Exchanges in one round of the burst scenarios.
BURST = 1024


#: What C{--profile N SCENARIO} can run.
PROFILED = ("keep-alive", "https", "burst", "burst-tls")


def profile(requests: int, scenario: str = "keep-alive", top: int = 30,
            makeArgv: Callable[[Environment, int], list[str]] = standinArgv,
            targetClass: type[ProcessTarget] = ProcessTarget, name: str = "standin") -> None:
    """
    A proxy's CPU per exchange, plain and under cProfile (whose numbers are
    wall time, and inflated by the profiler: read them as shares).

    @param scenario: one of L{PROFILED}: C{keep-alive} (small GETs on 4
        connections), C{https} (the same over TLS in 4 CONNECT tunnels),
        C{burst} (each on a new connection) or C{burst-tls} (each a new
        CONNECT with TLS inside).
    @param makeArgv: the proxy's command line (the stand-in's by default).
    """
    if scenario not in PROFILED:
        raise SystemExit(f"--profile N [{'|'.join(PROFILED)}], not {scenario!r}")
    each = max(1, requests // PROFILE_CONNECTIONS)
    rounds = max(1, requests // BURST)

    async def load(target: ProcessTarget) -> int:
        if scenario in ("keep-alive", "https"):
            await _keepAlive(env, target, "/small", PROFILE_CONNECTIONS, each, tls=scenario == "https")
            return each * PROFILE_CONNECTIONS
        for _ in range(rounds):
            await _burst(env, target, scenario == "burst-tls")
        return rounds * BURST
    for profiled in (False, True):
        directory = tempfile.mkdtemp(prefix="netlog-profile-")
        env, origin = startOrigin(directory)
        stats = os.path.join(directory, f"{name}.prof")

        def argv(env: Environment, port: int) -> list[str]:
            args = makeArgv(env, port)
            if profiled:
                at = next(i for i, arg in enumerate(args) if arg.startswith("netlog-"))
                args[at:at] = [f"--profile={stats}", "--profiler=cprofile", "--savestats"]
            return args

        target = targetClass(name, argv=argv)
        target.start(env)
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(_keepAlive(env, target, "/small", 2, 20))
            assert target.pid is not None
            cpu, wall = cpuSeconds(target.pid) or 0.0, time.perf_counter()
            count = loop.run_until_complete(load(target))
            wall, cpu = time.perf_counter() - wall, (cpuSeconds(target.pid) or 0.0) - cpu
        finally:
            loop.close()
            target.stop()
            stopProcess(origin)
        print(f"{'profiled' if profiled else 'plain'}: {count} {scenario} GETs in {wall:.2f} s; "
              f"{name} CPU {cpu * 1e6 / count:.0f} µs per exchange")
        if profiled:
            report = pstats.Stats(stats)
            report.sort_stats("tottime").print_stats(top)
            report.sort_stats("cumulative").print_stats(r"netlog", top)
            print(shares(report))
        shutil.rmtree(directory, ignore_errors=True)


#: Where a profiled function's own time is counted, by where it is defined:
#: the first part of its file's path (or of a C function's name) that
#: matches, in this order.
SHARE_KINDS = (
    ("waiting in epoll (idle, not CPU)", ("method 'poll' of 'select.epoll'",)),
    ("socket system calls (send, recv, accept, connect, shutdown, close)",
     ("of '_socket.socket' objects", "socket.close", "posix.writev", "posix.close")),
    ("TLS (OpenSSL and pyOpenSSL)", ("_openssl.", "/OpenSSL/", "/twisted/protocols/tls.py")),
    ("netlog's own code", ("/netlog/",)),
    ("Twisted's reactor and transports", ("/twisted/",)),
)


def shares(report: pstats.Stats) -> str:
    """
    The profile's own time (cProfile's C{tottime}) by kind, as shares of the
    time not spent waiting: how much of a request's CPU netlog's code is,
    against the event loop and the kernel under it.
    """
    totals: dict[str, float] = {}
    for (path, _, function), row in report.stats.items():  # type: ignore[attr-defined]
        where = f"{path}:{function}"
        kind = next((name for name, marks in SHARE_KINDS if any(m in where for m in marks)), "other Python")
        totals[kind] = totals.get(kind, 0.0) + row[2]
    waiting = totals.pop(SHARE_KINDS[0][0], 0.0)
    busy = sum(totals.values()) or 1.0
    lines = [f"Own time by kind ({busy:.2f} s busy, {waiting:.2f} s waiting in epoll, left out):"]
    for kind, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        lines.append(f"  {seconds / busy:6.1%}  {kind}")
    return "\n".join(lines)


def unloggedArgv(env: Environment, port: int) -> list[str]:
    """
    The same stand-in keeping no log (C{--no-log}): against it, the stand-in
    shows what logging itself costs.
    """
    args = standinArgv(env, port)
    at = args.index("--log")
    return args[:at] + ["--no-log"] + args[at + 2:]


if __name__ == "__main__":
    if sys.argv[1:2] == ["--profile"]:
        profile(int(sys.argv[2]) if len(sys.argv) > 2 else 2000, *sys.argv[3:4])
    else:
        argv = sys.argv[1:]
        targets = [ProcessTarget("standin", argv=standinArgv)]
        if "--with-unlogged" in argv:
            argv.remove("--with-unlogged")
            targets.append(ProcessTarget("unlogged", argv=unloggedArgv))
        main(targets, argv, title="the stand-in")
