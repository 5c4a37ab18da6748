"""
What rules cost when none of them matches (issue 23): two sessions of one
C{twistd netlog-standin --no-supervise}, one with 20 rules (block patterns,
wildcards and paths among them, header rules and remaps) that name other
hosts, one with none, driven in turn by the same client (keep-alive small
GETs), the order turned each round.

Reported: the proxy's CPU time (user + system) per request for each
session, median over the rounds, and their ratio. Goal: the session with 20
rules costs at most 10% more CPU per request.

Run from the repository::

    .venv/bin/python -m benchmarks.bench_rules                  # 5 rounds of 2000 GETs each
    .venv/bin/python -m benchmarks.bench_rules --rounds 9 --requests 4000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from benchmarks.harness import HOST, Environment, Target, _keepAlive, cpuSeconds, freePort, printReport, \
    sourceEnv, startOrigin, stopProcess, waitListening

#: Twenty rules, none of which names L{HOST}.
TWENTY_RULES = {
    "block": ["tracker.test", "*.ads.test", "shop.test/admin/*", "metrics.example.test:8443",
              "*.cdn.test/track*", "beacon.test", "a.b.c.test", "*.doubleclick.test"],
    "headers": [{"match": f"site{i}.test", "set": {"X-Auto-Login": f"user{i}"}, "remove": ["Referer"]}
                for i in range(6)] + [{"match": "*.api.test/v1/*", "answer_set": {"X-Seen": "1"}},
                                      {"match": "login.test", "answer_remove": ["Set-Cookie"]}],
    "remap": {"mirror.test": "127.0.0.1:9", "legacy.test": "127.0.0.1", "old.test": "127.0.0.1:8080",
              "staging.test": "[::1]:8443"},
}
#: Seconds an API call may take.
API_TIMEOUT = 20.0


def call(base: str, token: str, method: str, path: str, body: object) -> dict[str, object]:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method=method,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=API_TIMEOUT) as answer:
        return json.loads(answer.read())  # type: ignore[no-any-return]


def count(rules: dict[str, object]) -> int:
    return sum(len(v) for v in rules.values())  # type: ignore[arg-type]


def drive(env: Environment, port: int, requests: int) -> None:
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(_keepAlive(env, Target(f"p{port}", port), "/small", 1, requests))
    finally:
        loop.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench_rules")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=2000, help="GETs per session per round")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    assert count(TWENTY_RULES) == 20, count(TWENTY_RULES)
    directory = tempfile.mkdtemp(prefix="netlog-bench-rules-")
    env, origin = startOrigin(directory)
    port, apiPort = freePort(), freePort()
    proxy = subprocess.Popen(
        [sys.executable, "-c", "from twisted.scripts.twistd import run; run()",
         "-n", "--pidfile=", f"--logfile={os.path.join(directory, 'twistd.log')}",
         "netlog-standin", "--no-supervise", "--listen", f"tcp:{port}:interface=127.0.0.1",
         "--log", os.path.join(directory, "network.jsonl"), "--state", directory,
         "--api", f"tcp:{apiPort}:interface=127.0.0.1",
         "--resolve-only", "--resolve", f"{HOST}=127.0.0.1", "--connect-ports", f"{env.tlsPort},{env.port}"],
        env=sourceEnv(), cwd=directory, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    cpu: dict[str, list[float]] = {"20 rules, none matching": [], "no rules": []}
    try:
        waitListening(port, proxy, "the stand-in")
        waitListening(apiPort, proxy, "its API")
        with open(os.path.join(directory, "api-token")) as f:
            token = f.read().strip()
        base = f"http://127.0.0.1:{apiPort}"
        ports = {
            "20 rules, none matching": int(call(base, token, "POST", "/sessions",  # type: ignore[call-overload]
                                                {"name": "ruled", "rules": TWENTY_RULES})["port"]),
            "no rules": int(call(base, token, "POST", "/sessions", {"name": "plain"})["port"]),  # type: ignore[call-overload]
        }
        for name, sessionPort in ports.items():
            drive(env, sessionPort, args.requests // 10)  # warm up
        names = list(ports)
        for round_ in range(args.rounds):
            for name in names if round_ % 2 == 0 else reversed(names):
                before = cpuSeconds(proxy.pid) or 0.0
                drive(env, ports[name], args.requests)
                cpu[name].append(((cpuSeconds(proxy.pid) or 0.0) - before) / args.requests)
            time.sleep(0.2)
    finally:
        stopProcess(proxy)
        stopProcess(origin)
        shutil.rmtree(directory, True)

    ruled, plain = (statistics.median(cpu[name]) for name in names)
    lines = [
        f"# Rules: {args.rounds} rounds of {args.requests} keep-alive GETs per session",
        "",
        "| session | CPU per request, median (µs) | min–max (µs) |",
        "|---|---|---|",
    ]
    for name in names:
        lines.append(f"| {name} | {statistics.median(cpu[name]) * 1e6:.1f} | "
                     f"{min(cpu[name]) * 1e6:.1f}–{max(cpu[name]) * 1e6:.1f} |")
    lines += ["", f"20 rules / no rules: {ruled / plain:.3f} (goal: at most 1.10)"]
    text = "\n".join(lines) + "\n"
    printReport(text, args.out)


if __name__ == "__main__":
    main()
