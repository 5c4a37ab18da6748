"""
Live hosts' certificates minted on demand (C{[live] decrypt}): the TLS
handshake of a first-seen host (its certificate minted through the
supervisor and the minter) against one already minted, and the memory the
certificate caches take.

    .venv/bin/python -m benchmarks.bench_livemint                 # 1,000 hosts, 100 at a time
    .venv/bin/python -m benchmarks.bench_livemint --hosts 200 --no-supervise

It starts a real C{twistd netlog-proxy} on loopback, then for each host a
client sends C{CONNECT hN.live.test:443} and completes a TLS handshake
trusting netlog's CA (nothing goes upstream: the handshake is netlog's
alone). It prints the handshake times (CONNECT sent to handshake done) of
first-seen hosts, sequentially and in a burst (C{--at-once} at a time),
and of known hosts, as p50 and p99, the errors, and the resident memory
(C{VmRSS}) of the worker, the supervisor and the minter before and after.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from tests.site.support import connectTunnel

WAIT = 30.0


def rss(pid: int) -> int:
    """
    C{VmRSS} of C{pid}, in KiB.
    """
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def handshake(port: int, host: str, context: ssl.SSLContext) -> float:
    """
    Seconds from CONNECT sent to the TLS handshake done, through the proxy.
    """
    started = time.perf_counter()
    with connectTunnel(port, f"{host}:443", context):
        return time.perf_counter() - started


def quantiles(times: list[float]) -> str:
    ordered = sorted(times)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1000:.2f} ms, p99 {p99 * 1000:.2f} ms (n={len(ordered)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=1000, help="distinct hosts in the burst")
    parser.add_argument("--at-once", type=int, default=100, help="handshakes at once in the burst")
    parser.add_argument("--sequential", type=int, default=200, help="first-seen and known hosts timed one by one")
    parser.add_argument("--no-supervise", action="store_true", help="mint in the proxy's one process")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="netlog-bench-livemint-")
    sites = os.path.join(folder, "sites.toml")
    with open(sites, "w") as f:
        f.write('[[site]]\nname = "shop"\norigins = ["https://shop.test"]\nbackend = "http://127.0.0.1:9"\n'
                '[live]\ndecrypt = ["*.live.test"]\n')
    state = os.path.join(folder, "state")
    twistdLog = os.path.join(folder, "twistd.log")
    argv = [os.path.join(os.path.dirname(sys.executable), "twistd"), "-n", "--pidfile=", "--logfile", twistdLog,
            "netlog-proxy", "--sites", sites, "--state", state, "--log", os.path.join(folder, "network.jsonl"),
            "--listen", "tcp:0:interface=127.0.0.1", "--resolve-only"]
    if args.no_supervise:
        argv.append("--no-supervise")
    proc = subprocess.Popen(argv, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + WAIT
        text = ""
        while True:
            if os.path.exists(twistdLog):
                with open(twistdLog) as f:
                    text = f.read()
            bound = re.search(r"forward listener \S+ bound on IPv4Address\(type='TCP', host='[^']*', port=(\d+)\)",
                              text)
            serving = args.no_supervise or re.search(r"worker \d+ serving", text)
            if bound and serving:
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"twistd didn't start:\n{text}")
            time.sleep(0.05)
        port = int(bound.group(1))
        processes = {"proxy": proc.pid} if args.no_supervise else {
            "worker": int(re.search(r"started worker (\d+)", text).group(1)),  # type: ignore[union-attr]
            "supervisor": proc.pid,
            "minter": int(re.search(r"started the certificate minter (\d+)", text).group(1)),  # type: ignore[union-attr]
        }
        context = ssl.create_default_context(cafile=os.path.join(state, "ca.pem"))
        before = {role: rss(pid) for role, pid in processes.items()}

        handshake(port, "warm.live.test", context)
        first = [handshake(port, f"s{i}.live.test", context) for i in range(args.sequential)]
        known = [handshake(port, f"s{i}.live.test", context) for i in range(args.sequential)]
        errors: list[str] = []

        def one(i: int) -> float | None:
            try:
                return handshake(port, f"b{i}.live.test", context)
            except Exception as e:  # noqa: BLE001 -- counted and shown
                errors.append(str(e))
                return None

        started = time.perf_counter()
        with ThreadPoolExecutor(args.at_once) as pool:
            burst = [t for t in pool.map(one, range(args.hosts)) if t is not None]
        wall = time.perf_counter() - started
        with ThreadPoolExecutor(args.at_once) as pool:
            burstKnown = [t for t in pool.map(lambda i: handshake(port, f"b{i}.live.test", context),
                                              range(args.hosts))]
        after = {role: rss(pid) for role, pid in processes.items()}

        print(f"{'in process (--no-supervise)' if args.no_supervise else 'supervised'}:")
        print(f"  first-seen host, one at a time:  {quantiles(first)}")
        print(f"  known host, one at a time:       {quantiles(known)}")
        print(f"  burst of {args.hosts} first-seen hosts, {args.at_once} at a time: {quantiles(burst)}, "
              f"{wall:.2f} s, errors: {len(errors)}")
        print(f"  the same {args.hosts} hosts again (known):       {quantiles(burstKnown)}")
        minted = args.sequential + args.hosts + 1
        for role in processes:
            grown = after[role] - before[role]
            print(f"  {role}: VmRSS {before[role]} KiB -> {after[role]} KiB "
                  f"(+{grown} KiB, {grown * 1024 / minted:.0f} B per host, {minted} hosts)")
        for error in errors[:5]:
            print(f"  error: {error}")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(WAIT)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
