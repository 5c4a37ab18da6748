"""
Sessions against separate stand-ins (issue 14): N sessions in one supervised
C{twistd netlog-standin} (C{--session NAME=PORT}, held by the supervisor),
each driven by its own client, against N separate supervised stand-ins, each
driven by its own; and one idle stand-in for scale.

Reported: the total PSS of each process tree (C{Pss} from
C{/proc/PID/smaps_rollup}, so pages the processes share are counted once
between them), idle and after the run, and the CPU time (user + system, every
process of the tree) per request.

Goals: N = 32 sessions use less than 1.5 times the memory of one idle
netlog, and no more CPU per request than separate netlogs.

Run from the repository::

    .venv/bin/python -m benchmarks.bench_sessions                 # 32 sessions
    .venv/bin/python -m benchmarks.bench_sessions --sessions 8 --requests 100
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time

from benchmarks.harness import (
    HOST,
    Environment,
    Target,
    _keepAlive,
    ownCPUSeconds,
    freePort,
    printReport,
    sourceEnv,
    startOrigin,
    stopProcess,
    waitListening,
)

#: Seconds a tree is left to settle (workers started, standbys built)
#: before its memory is read: at least the first, at most the second, until
#: it spends less than L{QUIET_CPU} CPU seconds in one.
SETTLE = (3.0, 60.0)
#: CPU seconds per second under which a tree has settled.
QUIET_CPU = 0.02
#: Seconds a supervised stand-in may take to serve.
START_TIMEOUT = 60.0


def tree(pid: int) -> list[int]:
    """
    C{pid} and every process below it.
    """
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, []))
    return found


def pss(pids: list[int]) -> int:
    """
    The processes' total PSS in bytes.
    """
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            continue
    return total


def cpu(pids: list[int]) -> float:
    """
    The CPU seconds the processes C{pids} spent, each counted once (a tree
    from L{tree} holds each process and its children).
    """
    return sum(ownCPUSeconds(pid) or 0.0 for pid in pids)


def standin(env: Environment, name: str, port: int, sessions: list[tuple[str, int]],
            extra: list[str] | None = None) -> subprocess.Popen[bytes]:
    """
    A supervised stand-in on C{port}, with C{sessions} fixed at start, and
    C{extra} arguments.
    """
    args = [
        sys.executable, "-c", "from twisted.scripts.twistd import run; run()",
        "-n", "--pidfile=", f"--logfile={os.path.join(env.directory, name + '-twistd.log')}",
        "netlog-standin",
        "--listen", f"tcp:{port}:interface=127.0.0.1",
        "--log", os.path.join(env.directory, name + ".jsonl"),
        "--resolve-only", "--resolve", f"{HOST}=127.0.0.1",
        "--connect-ports", f"{env.tlsPort},{env.port}",
    ]
    for session, sessionPort in sessions:
        args += ["--session", f"{session}={sessionPort}"]
    args += extra or []
    return subprocess.Popen(args, env=sourceEnv(), cwd=env.directory,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def drive(env: Environment, ports: list[int], requests: int) -> float:
    """
    One client per port, all at once, C{requests} keep-alive small GETs
    each; the wall time.
    """
    async def all() -> None:
        await asyncio.gather(*(
            _keepAlive(env, Target(f"p{port}", port), "/small", 1, requests) for port in ports
        ))

    loop = asyncio.new_event_loop()
    started = time.monotonic()
    try:
        loop.run_until_complete(all())
    finally:
        loop.close()
    return time.monotonic() - started


def settle(processes: list[subprocess.Popen[bytes]]) -> None:
    """
    Wait until the trees have started everything they start (bounded).
    """
    time.sleep(SETTLE[0])
    deadline = time.monotonic() + SETTLE[1]
    while time.monotonic() < deadline:
        pids = [p for process in processes for p in tree(process.pid)]
        before = cpu(pids)
        time.sleep(1.0)
        if cpu(pids) - before < QUIET_CPU:
            return


def measure(env: Environment, processes: list[subprocess.Popen[bytes]], ports: list[int],
            requests: int) -> dict[str, float]:
    settle(processes)
    pids = [p for process in processes for p in tree(process.pid)]
    idle = pss(pids)
    before = cpu(pids)
    wall = drive(env, ports, requests)
    pids = [p for process in processes for p in tree(process.pid)]
    after = cpu(pids)
    return {
        "processes": len(pids),
        "idle": idle,
        "loaded": pss(pids),
        "cpu": (after - before) / (len(ports) * requests),
        "wall": wall,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_sessions")
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--requests", type=int, default=200, help="GETs per client")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="netlog-bench-sessions-")
    env, origin = startOrigin(directory)
    rows = []
    try:
        # One idle stand-in, for scale.
        port = freePort()
        one = standin(env, "idle", port, [])
        try:
            waitListening(port, one, "the idle stand-in")
            settle([one])
            idle = pss(tree(one.pid))
        finally:
            stopProcess(one)

        # N sessions in one stand-in.
        sessionPorts = [freePort() for _ in range(args.sessions)]
        port = freePort()
        shared = standin(env, "sessions", port, [(f"s{i}", p) for i, p in enumerate(sessionPorts)])
        try:
            waitListening(port, shared, "the stand-in with sessions")
            rows.append((f"{args.sessions} sessions in one netlog", measure(env, [shared], sessionPorts, args.requests)))
        finally:
            stopProcess(shared)

        # N separate stand-ins.
        ports = [freePort() for _ in range(args.sessions)]
        separate = []
        try:
            # One after the other: all at once, on a small machine, some
            # would take longer than the harness waits.
            for i, p in enumerate(ports):
                separate.append(standin(env, f"standin-{i}", p, []))
                waitListening(p, separate[-1], "a separate stand-in")
            rows.append((f"{args.sessions} separate netlogs", measure(env, separate, ports, args.requests)))
        finally:
            for process in separate:
                stopProcess(process)
    finally:
        stopProcess(origin)
        shutil.rmtree(directory, True)

    mib = 1 << 20
    lines = [
        f"# Sessions: {args.sessions} clients, {args.requests} keep-alive GETs each",
        "",
        f"One idle netlog (supervised, its standby included): {idle / mib:.1f} MiB PSS.",
        "",
        "| target | processes | PSS idle (MiB) | PSS after (MiB) | after / one idle netlog | CPU per request (µs) | wall (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in rows:
        lines.append(
            f"| {name} | {row['processes']:.0f} | {row['idle'] / mib:.1f} | {row['loaded'] / mib:.1f} | "
            f"{row['loaded'] / idle:.2f}× | {row['cpu'] * 1e6:.0f} | {row['wall']:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    printReport(text, args.out)


if __name__ == "__main__":
    main()
