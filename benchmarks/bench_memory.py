"""
Memory of a supervised netlog (issue 13): each process's PSS and RSS idle
(the supervisor, the serving worker, the standby), the tree's total, and how
much the tree's PSS grows while a 100 MB download and a 100 MB upload pass
through it.

Both proxies run as users run them, C{twistd -n netlog-standin} and
C{twistd -n netlog-proxy} (supervised, with a standby), on loopback, with
C{--resolve bench.test=127.0.0.1 --resolve-only}; the site proxy has the
origin as a site, so its transfers are decrypted-side exchanges kept whole
(plain HTTP here). squid, when installed, is measured idle for scale.

PSS (C{Pss} of C{/proc/PID/smaps_rollup}) counts a page shared by several
processes once between them, so the tree's total is what it costs the
machine; RSS counts it in each. Growth is sampled every
L{SAMPLE_INTERVAL} seconds during each transfer (the tree's PSS) and read
from each process's C{VmHWM}, reset before the transfer (the tree's peak
RSS, summed): sampling may miss a short peak, the high-water mark can't.

Goals (issue 13): the whole tree idle under L{IDLE_GOAL}, and no growth
beyond L{GROWTH_GOAL} during either transfer.

Run from the repository::

    .venv/bin/python -m benchmarks.bench_memory
    .venv/bin/python -m benchmarks.bench_memory --only standin --out /tmp/memory.md
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

from benchmarks.bench_sessions import pss, settle, tree
from benchmarks.bench_site import SiteTarget, siteArgv
from benchmarks.bench_standin import standinArgv
from benchmarks.harness import (
    MIB,
    Environment,
    ProcessTarget,
    Target,
    TargetUnavailable,
    download100,
    peakRSS,
    printReport,
    resetPeakRSS,
    startOrigin,
    stopProcess,
    upload100,
)
from benchmarks.squid import squidTargets

#: The whole tree's PSS, idle, standby included, must stay under this.
IDLE_GOAL = 64 * MIB
#: The tree's PSS may grow at most this much during a 100 MB transfer.
GROWTH_GOAL = 8 * MIB
#: Seconds between two readings of the tree's PSS during a transfer.
SAMPLE_INTERVAL = 0.02
#: Seconds a transfer may take.
TRANSFER_TIMEOUT = 120.0
#: Seconds to wait for the standby to stand by.
STANDBY_TIMEOUT = 60.0


def supervised(argv: list[str]) -> list[str]:
    """
    The benchmarks' command line for a proxy, supervised (the default):
    without C{--no-supervise}.
    """
    return [a for a in argv if a != "--no-supervise"]


def standin(env: Environment, port: int) -> list[str]:
    return supervised(standinArgv(env, port))


def site(env: Environment, port: int) -> list[str]:
    return supervised(siteArgv(env, port))


def memory(pid: int) -> tuple[int, int]:
    """
    A process's PSS and RSS in bytes (0 if it is gone).
    """
    found = {"Pss:": 0, "Rss:": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                key = line.split(None, 1)[0]
                if key in found:
                    found[key] = int(line.split()[1]) * 1024
    except OSError:
        pass
    return found["Pss:"], found["Rss:"]


def roles(twistdLog: str, supervisor: int) -> dict[int, str]:
    """
    Each process of a supervised netlog by its role, from the supervisor's
    log: the one that serves (the last said to serve) and the standby (the
    last started to stand by, if it isn't the one serving).
    """
    with open(twistdLog, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = {supervisor: "supervisor"}
    serving = re.findall(r"worker (\d+)(?:, standing by, takes over| serving)", text)
    standby = re.findall(r"started worker (\d+) to stand by", text)
    if serving:
        found[int(serving[-1])] = "worker"
    if standby and int(standby[-1]) not in found:
        found[int(standby[-1])] = "standby"
    return found


@dataclass
class Row:
    """
    One proxy's memory: per process idle, and the tree's growth per transfer.
    """

    name: str
    #: role -> (PSS, RSS) idle
    idle: dict[str, tuple[int, int]] = field(default_factory=dict)
    total: int = 0
    totalRSS: int = 0
    #: transfer -> (peak PSS growth sampled, peak RSS growth by VmHWM)
    growth: dict[str, tuple[int, int]] = field(default_factory=dict)
    error: str = ""


def waitStandby(target: ProcessTarget, log: str) -> None:
    """
    Wait (bounded) until the supervisor says a standby stands by.
    """
    deadline = time.monotonic() + STANDBY_TIMEOUT
    while time.monotonic() < deadline:
        try:
            with open(log, encoding="utf-8", errors="replace") as f:
                if re.search(r"worker \d+ standing by,", f.read()):
                    return
        except FileNotFoundError:
            pass
        time.sleep(0.1)
    raise RuntimeError("no standby stood by")


def transfer(env: Environment, target: Target, scenario: object, pids: list[int]) -> tuple[int, int]:
    """
    Run one transfer while a thread reads the tree's PSS; the peak growth
    of its PSS (sampled) and of its RSS (high-water marks).
    """
    base = pss(pids)
    baseRSS = sum(memory(pid)[1] for pid in pids)
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], pss(pids))
            time.sleep(SAMPLE_INTERVAL)

    # Both walk the tree from its top (the supervisor).
    resetPeakRSS(pids[0])
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(asyncio.wait_for(scenario(env, target), TRANSFER_TIMEOUT))  # type: ignore[operator]
    finally:
        done.set()
        sampler.join()
        loop.close()
    peak[0] = max(peak[0], pss(pids))
    highWater = peakRSS(pids[0]) or 0
    return peak[0] - base, highWater - baseRSS


def measure(env: Environment, target: ProcessTarget, twistdLog: str | None) -> Row:
    row = Row(target.name)
    target.start(env)
    try:
        assert target.pid is not None
        if twistdLog is not None:
            waitStandby(target, twistdLog)
        assert target.process is not None
        settle([target.process])
        pids = tree(target.pid)
        named = roles(twistdLog, target.pid) if twistdLog is not None else {target.pid: "main"}
        for pid in pids:
            role = named.get(pid, f"other ({pid})")
            row.idle[role] = memory(pid)
        row.total = pss(pids)
        row.totalRSS = sum(memory(pid)[1] for pid in pids)
        if twistdLog is None:
            return row
        for name, scenario in (("100 MB down", download100), ("100 MB up", upload100)):
            row.growth[name] = transfer(env, target, scenario, pids)
    except Exception as e:  # reported under the table, the others still run
        row.error = f"{type(e).__name__}: {e}"
    finally:
        target.stop()
    return row


def report(rows: list[Row]) -> str:
    mib = float(MIB)
    lines = [
        "# netlog's memory, supervised (supervisor, worker, standby)",
        "",
        "| proxy | process | PSS idle (MiB) | RSS idle (MiB) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        for role, (p, r) in row.idle.items():
            lines.append(f"| {row.name} | {role} | {p / mib:.1f} | {r / mib:.1f} |")
        lines.append(f"| {row.name} | **tree** | **{row.total / mib:.1f}** | {row.totalRSS / mib:.1f} |")
    lines += [
        "",
        "Growth of the tree during one transfer, over its idle memory:",
        "",
        "| proxy | transfer | PSS growth, sampled (MiB) | RSS growth, high-water (MiB) |",
        "|---|---|---|---|",
    ]
    for row in rows:
        for name, (p, r) in row.growth.items():
            lines.append(f"| {row.name} | {name} | {p / mib:.1f} | {r / mib:.1f} |")
    lines.append("")
    for row in rows:
        if row.error:
            lines.append(f"- {row.name} failed: {row.error}")
            continue
        if not row.growth:
            continue
        idleMet = row.total < IDLE_GOAL
        worst = max((max(g) for g in row.growth.values()), default=0)
        growthMet = worst <= GROWTH_GOAL
        lines.append(
            f"- {row.name}: idle tree {row.total / mib:.1f} MiB PSS "
            f"({'meets' if idleMet else 'misses'} the goal of under {IDLE_GOAL / mib:.0f} MiB); "
            f"largest growth {worst / mib:.1f} MiB "
            f"({'meets' if growthMet else 'misses'} the goal of at most {GROWTH_GOAL / mib:.0f} MiB)"
        )
    lines.append(
        f"\n{os.cpu_count()} CPUs; Python {sys.version.split()[0]}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_memory", description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["standin", "site"], default=None, help="measure one proxy only")
    parser.add_argument("--no-squid", action="store_true", help="leave out squid (measured idle, for scale)")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="netlog-bench-memory-")
    env, origin = startOrigin(directory)
    rows = []
    try:
        if args.only in (None, "standin"):
            rows.append(measure(env, ProcessTarget("standin", argv=standin),
                                os.path.join(directory, "standin-twistd.log")))
        if args.only in (None, "site"):
            rows.append(measure(env, SiteTarget("site", argv=site), os.path.join(directory, "site-twistd.log")))
        for peer in [] if args.no_squid else squidTargets():
            if isinstance(peer, ProcessTarget):
                try:
                    rows.append(measure(env, peer, None))
                except TargetUnavailable as e:
                    print(f"{peer.name}: {e}; running without it")
    finally:
        stopProcess(origin)
        shutil.rmtree(directory, ignore_errors=True)
    text = report(rows)
    printReport(text, args.out)


if __name__ == "__main__":
    main()
