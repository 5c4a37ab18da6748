"""
One serving worker against several (issue 24).

The issue's scenario (the default): a supervised C{twistd netlog-proxy} (the
site proxy, decrypting) with 8 sessions fixed at start (C{--session}), each
driven at once by a C{curl} of its own over CONNECT+TLS (C{--parallel}, at
most L{CONNECTIONS} keep-alive connections, one GET per URL of a glob),
with C{--workers 1} and then C{--workers 2} (or the counts given), in
interleaved rounds. curl is the C load generator: C{h2load} can't go through
a forward proxy and C{wrk} has no CONNECT.

Reported per worker count: requests per second of wall time (median of the
rounds), the CPU time of the proxy's process tree (supervisor, workers,
standbys) per request, and beside it what the origin (the site's backend)
and the curls spent per request, so that one can see they were not the
bottleneck; the load average before and after each round; and from the
sessions' logs, every request logged once and how many connections carried
them.

C{--full-run}: 100 sessions, each sent 300 requests over HTTPS at once
through 6 connections, with C{--workers 2}; every curl's answers counted
(0 errors wanted) and every session's HAR taken from the API and checked to
hold exactly its own requests (each URL carries C{?s=NAME&n=K}).

C{--plain-standin}: the older scenario, kept for comparison with the
stand-in: the sessions driven by Python clients (a process each), small
plain-HTTP GETs over 4 keep-alive connections.

Run from the repository::

    .venv/bin/python -m benchmarks.bench_workers                              # 8 sessions, 1 against 2 workers, 3 rounds
    .venv/bin/python -m benchmarks.bench_workers --rounds 5 --requests 3000   # steadier
    .venv/bin/python -m benchmarks.bench_workers --full-run                   # 100 sessions x 300 requests, 2 workers
    .venv/bin/python -m benchmarks.bench_workers --plain-standin              # the Python-client stand-in scenario
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from benchmarks.bench_sessions import cpu, settle, standin, tree
from benchmarks.bench_site import makeCA, siteArgv
from benchmarks.harness import (
    HOST,
    Environment,
    Target,
    _keepAlive,
    cpuSeconds,
    freePort,
    printReport,
    sourceEnv,
    startOrigin,
    stopProcess,
    waitListening,
)

#: Sessions the issue's scenario loads at once.
SESSIONS = 8
#: Keep-alive connections each session's curl keeps at most
#: (C{--parallel-max}), as a browser keeps per host.
CONNECTIONS = 6
#: GETs per session by default, in the worker-count comparison.
REQUESTS = 2000
#: The full run's sessions and the requests each is sent.
FULL_SESSIONS = 100
FULL_REQUESTS = 300
#: The path every request asks for (a short text).
PATH = "/small"
#: Seconds one request may take in curl (C{--max-time}).
TRANSFER_TIMEOUT = 60.0
#: Seconds a whole load (every curl of a round or of the full run) may take,
#: and the full run's HAR exports together.
LOAD_TIMEOUT = 600.0
#: Seconds one HAR export over the API may take.
HAR_TIMEOUT = 120.0
#: Keep-alive connections each Python client keeps (C{--plain-standin}).
PYTHON_CONNECTIONS = 4


def loadAverage() -> str:
    """
    The 1-minute load average now (C{/proc/loadavg}, as C{uptime} says it).
    """
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def markedURL(env: Environment, session: str, requests: int) -> str:
    """
    The curl glob of a session's C{requests} GETs: each URL says its
    session and its number (C{?s=NAME&n=K}), so the HAR can be checked to
    hold exactly its own.
    """
    return f"https://{HOST}:{env.tlsPort}{PATH}?s={session}&n=[1-{requests}]"


def startCurl(env: Environment, ca: str, proxyPort: int, session: str, requests: int) -> subprocess.Popen[bytes]:
    """
    One session's load: a curl sending C{requests} GETs through the proxy's
    session port, at most L{CONNECTIONS} CONNECT+TLS keep-alive connections
    at once, HTTP/1.1, each answer's status on a line of its standard output
    (in the run's folder).
    """
    out = open(os.path.join(env.directory, f"curl-{session}.out"), "wb")
    err = open(os.path.join(env.directory, f"curl-{session}.err"), "wb")
    with out, err:
        return subprocess.Popen(
            ["curl", "--parallel", "--parallel-max", str(CONNECTIONS), "--http1.1", "--no-progress-meter",
             "--proxy", f"http://127.0.0.1:{proxyPort}", "--cacert", ca, "--max-time", f"{TRANSFER_TIMEOUT:g}",
             "--output", "/dev/null", "--write-out", "%{http_code}\\n", markedURL(env, session, requests)],
            stdout=out, stderr=err, stdin=subprocess.DEVNULL,
        )


@dataclass
class Load:
    """
    What one load of curls did.
    """

    wall: float
    #: CPU seconds the curls spent (user + system)
    clientCPU: float
    #: answers not C{200}, missing answers and curl's own complaints
    errors: list[str] = field(default_factory=list)


def runCurls(env: Environment, ca: str, sessions: dict[str, int], requests: int, atOnce: int) -> Load:
    """
    Drive every session (name to port) with its own curl, at most C{atOnce}
    curls running at a time, bounded by L{LOAD_TIMEOUT}.
    """
    # The curls are the only children waited for meanwhile, so the
    # children's usage grows by theirs alone.
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    todo = list(sessions.items())
    running: dict[str, subprocess.Popen[bytes]] = {}
    exits: dict[str, int] = {}
    started = time.monotonic()
    deadline = started + LOAD_TIMEOUT
    while todo or running:
        while todo and len(running) < atOnce:
            name, port = todo.pop(0)
            running[name] = startCurl(env, ca, port, name, requests)
        for name, process in list(running.items()):
            if process.poll() is not None:
                exits[name] = process.returncode
                del running[name]
        if time.monotonic() > deadline:
            for process in running.values():
                process.kill()
                process.wait()
            raise SystemExit(f"the curls did not end within {LOAD_TIMEOUT:g} s")
        time.sleep(0.005)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    errors = []
    for name in sessions:
        with open(os.path.join(env.directory, f"curl-{name}.out")) as f:
            statuses = f.read().split()
        with open(os.path.join(env.directory, f"curl-{name}.err")) as f:
            complaints = f.read().strip()
        bad = len(statuses) - statuses.count("200")
        if exits[name] or bad or len(statuses) != requests or complaints:
            errors.append(f"{name}: curl exit {exits[name]}, {statuses.count('200')} of {requests} answered 200"
                          + (f"; {complaints.splitlines()[0]}" if complaints else ""))
    clientCPU = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return Load(wall, clientCPU, errors)


def sessionLog(logPath: str, session: str) -> str:
    stem, extension = os.path.splitext(logPath)
    return f"{stem}.{session}{extension}"


def auditLog(path: str, session: str, requests: int) -> tuple[list[str], set[str]]:
    """
    A session's log as a user would check it: numbered from 1 without gap,
    every open ended, each of the session's requests opened exactly once
    and no other's. The problems found, and the ids of the browser
    connections that carried the requests.
    """
    with open(path, "rb") as f:
        data = f.read()
    problems = []
    if data and not data.endswith(b"\n"):
        problems.append(f"{session}: the log ends with a cut line")
    records = [json.loads(line) for line in data.splitlines()]
    if [r["n"] for r in records] != list(range(1, len(records) + 1)):
        problems.append(f"{session}: the numbers have a gap or a repeat")
    opens = [r for r in records if r["type"] == "open"]
    ended = {r["id"] for r in records if r["type"] == "end"}
    if {r["n"] for r in opens} - ended:
        problems.append(f"{session}: {len({r['n'] for r in opens} - ended)} opens never ended")
    exchanges = [r for r in opens if r.get("kind") == "exchange"]
    numbers = sorted(requestNumber(r["request"]["url"], session) for r in exchanges)
    if numbers != list(range(1, requests + 1)):
        problems.append(f"{session}: the log holds {len(numbers)} of its requests, not 1..{requests} once each")
    return problems, {r["connection"] for r in exchanges}


def slotOf(connection: str) -> int:
    """
    The worker slot a connection id says it came from (C{w1.c17}; slot 0's
    are bare, C{c17}).
    """
    prefix, _, _ = connection.rpartition(".")
    return int(prefix[1:]) if prefix else 0


def requestNumber(url: str, session: str) -> int:
    """
    The C{n} of one of C{session}'s URLs; -1 for a URL of another session
    or none.
    """
    query = parse_qs(urlsplit(url).query)
    if query.get("s") != [session] or len(query.get("n", [])) != 1:
        return -1
    return int(query["n"][0])


def startSiteProxy(env: Environment, name: str, workers: int, sessions: dict[str, int],
                   api: int | None = None) -> tuple[subprocess.Popen[bytes], int, str]:
    """
    A supervised site proxy with C{workers} workers and C{sessions} (name
    to port) fixed at start; its process, main port and main log.
    """
    port = freePort()
    argv = siteArgv(env, port, name=name, supervised=True) + ["--workers", str(workers)]
    for session, sessionPort in sessions.items():
        argv += ["--session", f"{session}={sessionPort}"]
    if api is not None:
        argv += ["--api", f"tcp:{api}:interface=127.0.0.1"]
    process = subprocess.Popen(argv, env=sourceEnv(), cwd=env.directory,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        waitListening(port, process, f"the site proxy with {workers} workers")
        for sessionPort in sessions.values():
            waitListening(sessionPort, process, "a session")
        settle([process])
    except BaseException:
        stopProcess(process)
        raise
    return process, port, os.path.join(env.directory, f"{name}.jsonl")


@dataclass
class Round:
    """
    One worker count's load in one round.
    """

    rate: float
    proxyCPU: float
    originCPU: float
    clientCPU: float
    connections: list[int]
    loadBefore: str
    loadAfter: str


def siteRound(env: Environment, origin: int, workers: int, sessions: int, requests: int, name: str) -> Round:
    """
    Start the site proxy with C{workers} workers and C{sessions} sessions,
    drive them all at once with a curl each; what it cost.
    """
    ca = makeCA(env, name)
    ports = {f"s{i}": freePort() for i in range(sessions)}
    loadBefore = loadAverage()
    process, _, logPath = startSiteProxy(env, name, workers, ports)
    try:
        proxyBefore, originBefore = cpu(tree(process.pid)), cpuSeconds(origin) or 0.0
        load = runCurls(env, ca, ports, requests, len(ports))
        proxyAfter, originAfter = cpu(tree(process.pid)), cpuSeconds(origin) or 0.0
    finally:
        stopProcess(process)
    if load.errors:
        raise SystemExit(f"--workers {workers}: errors:\n" + "\n".join(load.errors))
    problems, connections = [], []
    for session in ports:
        found, used = auditLog(sessionLog(logPath, session), session, requests)
        problems += found
        connections.append(len(used))
    if problems:
        raise SystemExit(f"--workers {workers}: the logs are wrong:\n" + "\n".join(problems))
    total = sessions * requests
    return Round(total / load.wall, (proxyAfter - proxyBefore) / total, (originAfter - originBefore) / total,
                 load.clientCPU / total, connections, loadBefore, loadAverage())


def compareSite(env: Environment, origin: int, args: argparse.Namespace) -> str:
    rounds: dict[int, list[Round]] = {w: [] for w in args.workers}
    for number in range(args.rounds):
        # The order turns each round, so that each count sees the same load.
        turn = number % len(args.workers)
        for workers in args.workers[turn:] + args.workers[:turn]:
            done = siteRound(env, origin, workers, args.sessions, args.requests, f"w{workers}-r{number}")
            rounds[workers].append(done)
            print(f"round {number + 1}, --workers {workers}: {done.rate:.0f} requests/s, "
                  f"proxy {done.proxyCPU * 1e6:.0f} µs/request, load {done.loadBefore} -> {done.loadAfter}",
                  flush=True)
    first = args.workers[0]

    def median(workers: int, what: Callable[[Round], float]) -> float:
        return statistics.median(what(r) for r in rounds[workers])

    lines = [
        f"# Workers: the site proxy, {args.sessions} sessions at once, {args.requests} HTTPS GETs each "
        f"(curl, CONNECT+TLS, at most {CONNECTIONS} connections), {args.rounds} rounds",
        "",
        f"| workers | requests/s (median, min-max) | × {first} | proxy CPU/request (µs) | × {first} "
        f"| origin CPU/request (µs) | curl CPU/request (µs) | connections per session | load before -> after |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for workers in args.workers:
        rates = [r.rate for r in rounds[workers]]
        connections = sorted({c for r in rounds[workers] for c in r.connections})
        lines.append(
            f"| {workers} | {median(workers, lambda r: r.rate):.0f} ({min(rates):.0f}-{max(rates):.0f}) "
            f"| {median(workers, lambda r: r.rate) / median(first, lambda r: r.rate):.2f}× "
            f"| {median(workers, lambda r: r.proxyCPU) * 1e6:.0f} "
            f"| {median(workers, lambda r: r.proxyCPU) / median(first, lambda r: r.proxyCPU):.2f}× "
            f"| {median(workers, lambda r: r.originCPU) * 1e6:.0f} "
            f"| {median(workers, lambda r: r.clientCPU) * 1e6:.0f} "
            f"| {'-'.join(str(c) for c in (connections[0], connections[-1])) if len(connections) > 1 else connections[0]} "
            f"| {', '.join(f'{r.loadBefore} -> {r.loadAfter}' for r in rounds[workers])} |"
        )
    lines += ["", "Every request answered 200 and logged once in its session's log; "
              f"{os.cpu_count()} CPUs."]
    return "\n".join(lines) + "\n"


def fullRun(env: Environment, args: argparse.Namespace) -> str:
    """
    The issue's full run: C{--sessions} sessions (100 by default), each sent
    C{--requests} (300) at once over HTTPS, the proxy with the first of
    C{--workers} (2); errors, wall time, and every session's HAR checked.
    """
    sessions, requests, workers = args.sessions, args.requests, args.workers[0]
    name = f"full-w{workers}"
    ca = makeCA(env, name)
    ports = {f"t{i}": freePort() for i in range(sessions)}
    api = freePort()
    loadBefore = loadAverage()
    process, _, logPath = startSiteProxy(env, name, workers, ports, api)
    problems: list[str] = []
    try:
        load = runCurls(env, ca, ports, requests, args.at_once)
        loadAfter = loadAverage()
        harStarted = time.monotonic()
        for session in ports:
            if time.monotonic() - harStarted > LOAD_TIMEOUT:
                raise SystemExit(f"the HARs took more than {LOAD_TIMEOUT:g} s")
            problems += checkHar(f"http://127.0.0.1:{api}/sessions/{session}/network.har", session, requests)
        harWall = time.monotonic() - harStarted
    finally:
        stopProcess(process)
    connections, slots = [], []
    for session in ports:
        found, used = auditLog(sessionLog(logPath, session), session, requests)
        problems += found
        connections.append(len(used))
        slots += sorted({slotOf(c) for c in used})
    verdict = "every HAR holds exactly its own requests" if not problems else "PROBLEMS:\n- " + "\n- ".join(problems)
    return "\n".join([
        f"# Full run: the site proxy with --workers {workers}, {sessions} sessions, {requests} HTTPS GETs each "
        f"(curl, at most {CONNECTIONS} connections), {min(args.at_once, sessions)} curls at once",
        "",
        f"- requests: {sessions * requests}, errors: {len(load.errors)}"
        + "".join(f"\n  - {e}" for e in load.errors[:10]),
        f"- wall time of the load: {load.wall:.1f} s ({sessions * requests / load.wall:.0f} requests/s)",
        f"- connections per session (from the logs): {min(connections)}-{max(connections)}; sessions per "
        f"worker slot: " + ", ".join(f"slot {slot} {slots.count(slot)}" for slot in sorted(set(slots))),
        f"- {sessions} HARs over the API in {harWall:.1f} s: {verdict}",
        f"- load average before -> after: {loadBefore} -> {loadAfter}; {os.cpu_count()} CPUs",
    ]) + "\n"


def checkHar(url: str, session: str, requests: int) -> list[str]:
    """
    A session's HAR, from the API: its entries are exactly the session's
    C{requests} requests (a decrypted tunnel has no entry of its own), each
    answered 200.
    """
    with urllib.request.urlopen(url, timeout=HAR_TIMEOUT) as answer:
        har = json.load(answer)
    entries = har["log"]["entries"]
    numbers = sorted(requestNumber(e["request"]["url"], session) for e in entries)
    problems = []
    if numbers != list(range(1, requests + 1)):
        problems.append(f"{session}: its HAR has {len(entries)} requests, {numbers.count(-1)} not its own, "
                        f"not 1..{requests} once each")
    statuses = {e["response"]["status"] for e in entries}
    if statuses != {200}:
        problems.append(f"{session}: answers {sorted(statuses)} in its HAR")
    return problems


def pythonClient(env: Environment, port: int, requests: int) -> None:
    """
    One session's Python client (in a process of its own): C{requests}
    small plain-HTTP GETs over L{PYTHON_CONNECTIONS} keep-alive connections.
    """
    asyncio.run(_keepAlive(env, Target(f"p{port}", port), PATH, PYTHON_CONNECTIONS,
                           requests // PYTHON_CONNECTIONS))


def standinRound(env: Environment, workers: int, sessions: int, requests: int, name: str) -> tuple[float, float]:
    """
    Start a stand-in with C{workers} workers and C{sessions} sessions, load
    them all at once from Python clients; its requests per second and CPU
    seconds per request.
    """
    ports = [freePort() for _ in range(sessions)]
    port = freePort()
    process = standin(env, name, port, [(f"s{i}", p) for i, p in enumerate(ports)], ["--workers", str(workers)])
    try:
        waitListening(port, process, f"the stand-in with {workers} workers")
        for p in ports:
            waitListening(p, process, "a session")
        settle([process])
        before = cpu(tree(process.pid))
        # Forked, so that nothing is pickled (the environment holds an SSL
        # context).
        context = multiprocessing.get_context("fork")
        clients = [context.Process(target=pythonClient, args=(env, p, requests)) for p in ports]
        started = time.monotonic()
        for client in clients:
            client.start()
        for client in clients:
            client.join(LOAD_TIMEOUT)
        wall = time.monotonic() - started
        for client in clients:
            if client.exitcode != 0:
                client.kill()
                raise SystemExit(f"a client failed (exit code {client.exitcode})")
        after = cpu(tree(process.pid))
    finally:
        stopProcess(process)
    total = sessions * (requests // PYTHON_CONNECTIONS) * PYTHON_CONNECTIONS
    return total / wall, (after - before) / total


def compareStandin(env: Environment, args: argparse.Namespace) -> str:
    rates: dict[int, list[float]] = {w: [] for w in args.workers}
    costs: dict[int, list[float]] = {w: [] for w in args.workers}
    for number in range(args.rounds):
        turn = number % len(args.workers)
        for workers in args.workers[turn:] + args.workers[:turn]:
            rate, cost = standinRound(env, workers, args.sessions, args.requests, f"w{workers}-r{number}")
            rates[workers].append(rate)
            costs[workers].append(cost)
    first = args.workers[0]
    lines = [
        f"# Workers: the stand-in, {args.sessions} sessions at once, {args.requests} plain keep-alive GETs each "
        f"(Python clients, {PYTHON_CONNECTIONS} connections), {args.rounds} rounds",
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
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_workers")
    parser.add_argument("--sessions", type=int, default=None,
                        help=f"sessions loaded at once (default {SESSIONS}; {FULL_SESSIONS} with --full-run)")
    parser.add_argument("--requests", type=int, default=None,
                        help=f"GETs per session (default {REQUESTS}; {FULL_REQUESTS} with --full-run)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=None,
                        help="worker counts to compare (default 1 2; with --full-run, the one to run: 2)")
    parser.add_argument("--full-run", action="store_true",
                        help=f"{FULL_SESSIONS} sessions x {FULL_REQUESTS} requests at once, every HAR checked")
    parser.add_argument("--at-once", type=int, default=FULL_SESSIONS,
                        help="curls running at a time in the full run (default: all)")
    parser.add_argument("--plain-standin", action="store_true",
                        help="the stand-in driven by Python clients over plain HTTP instead")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.full_run:
        args.sessions = args.sessions or FULL_SESSIONS
        args.requests = args.requests or FULL_REQUESTS
        args.workers = args.workers or [2]
    else:
        args.sessions = args.sessions or SESSIONS
        args.requests = args.requests or REQUESTS
        args.workers = args.workers or [1, 2]
    if min(args.sessions, args.requests, args.rounds, args.at_once, *args.workers) < 1:
        parser.error("--sessions, --requests, --rounds, --at-once and --workers want 1 or more")
    if not args.plain_standin and shutil.which("curl") is None:
        parser.error("curl is not installed (apt-get install curl)")
    directory = tempfile.mkdtemp(prefix="netlog-bench-workers-")
    env, origin = startOrigin(directory)
    try:
        if args.plain_standin:
            report = compareStandin(env, args)
        elif args.full_run:
            report = fullRun(env, args)
        else:
            report = compareSite(env, origin.pid, args)
    finally:
        stopProcess(origin)
        shutil.rmtree(directory, True)
    printReport(report, args.out)


if __name__ == "__main__":
    main(sys.argv[1:])
