"""
HTTP/2 toward the browser: C{h2load} (Debian's nghttp2-client) against the
site proxy's HTTPS route over HTTP/2, beside the same proxy over HTTP/1.1
keep-alive (C{h2load --h1}), and beside C{nghttpx} (Debian's nghttp2-proxy)
terminating TLS to the same plain origin over HTTP/2, in interleaved rounds;
CPU per request of each proxy's process, median over the rounds.

    .venv/bin/python -m benchmarks.bench_h2                 # 5 rounds of 4,000 requests
    .venv/bin/python -m benchmarks.bench_h2 --rounds 3 --requests 2000
    .venv/bin/python -m benchmarks.bench_h2 --memory   # 100 streams x 100 MB: peak RSS

With C{--memory}: the site proxy's peak RSS (C{VmHWM}, reset first) while
C{nghttp} downloads 100 MB on each of 100 concurrent streams of one HTTP/2
connection, beside one 100 MB download over HTTP/1.1 (C{h2load --h1}).

The goals (issue 21): HTTP/2's CPU per request no more than the site proxy's
HTTP/1.1 keep-alive's, and at most 2x nghttpx's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

from benchmarks.harness import (
    HOST,
    MIB,
    cpuSeconds,
    freePort,
    peakRSS,
    resetPeakRSS,
    sourceEnv,
    startOrigin,
    stopProcess,
    waitListening,
)

#: Streams in flight on the one connection (h2load -m) for HTTP/2.
STREAMS = 10


def startNetlog(directory: str, originPort: int, extra: tuple[str, ...] = (),
                profile: str | None = None) -> tuple[subprocess.Popen[bytes], int, int]:
    """
    C{twistd netlog-proxy --no-supervise} with C{https://bench.test} a site
    whose backend is the plain origin: the process, its forward port and its
    HTTPS route. C{extra} options go to the plugin; with C{profile}, twistd
    runs it under cProfile and saves the stats there.
    """
    sites = os.path.join(directory, "sites.toml")
    with open(sites, "w") as f:
        f.write(f'[[site]]\nname = "bench"\norigins = ["https://{HOST}"]\nbackend = "http://127.0.0.1:{originPort}"\n')
    port, route = freePort(), freePort()
    profiling = ["--profile", profile, "--profiler", "cprofile", "--savestats"] if profile else []
    process = subprocess.Popen(
        [sys.executable, "-c", "from twisted.scripts.twistd import run; run()", "-n", "--pidfile=",
         f"--logfile={os.path.join(directory, 'netlog-twistd.log')}", *profiling, "netlog-proxy", "--no-supervise",
         "--listen", f"tcp:{port}:interface=127.0.0.1", "--https-route", f"tcp:{route}:interface=127.0.0.1",
         "--sites", sites, "--state", os.path.join(directory, "state"),
         "--log", os.path.join(directory, "site.jsonl"), "--resolve-only", "--resolve", f"{HOST}=127.0.0.1",
         *extra],
        env=sourceEnv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    waitListening(port, process, "the site proxy")
    waitListening(route, process, "the site proxy's HTTPS route")
    return process, port, route


def nghttpxArgv(nghttpx: str, directory: str, port: int, originPort: int, cert: str, key: str,
                extra: tuple[str, ...] = ()) -> list[str]:
    """
    The command of C{nghttpx} (at C{nghttpx}) terminating TLS on
    127.0.0.1:C{port}, HTTP/2 by ALPN, in front of the plain HTTP/1.1 origin
    on 127.0.0.1:C{originPort}, its error log and pid file in C{directory}:
    as the benchmarks and the tests run it.
    """
    # --conf: Debian's /etc/nghttpx/nghttpx.conf adds a frontend on
    # 127.0.0.1:3000, which a second nghttpx at once fails to bind.
    return [nghttpx, "--conf=/dev/null", f"--frontend=127.0.0.1,{port}", f"--backend=127.0.0.1,{originPort}",
            "--workers=1", "--no-ocsp", "--no-via", f"--errorlog-file={os.path.join(directory, 'nghttpx.log')}",
            f"--pid-file={os.path.join(directory, 'nghttpx.pid')}", *extra, key, cert]


def startNghttpx(directory: str, originPort: int, cert: str, key: str,
                 extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen[bytes], int]:
    nghttpx = shutil.which("nghttpx")
    if nghttpx is None:
        raise SystemExit("nghttpx is missing: apt-get install nghttp2-proxy")
    port = freePort()
    process = subprocess.Popen(nghttpxArgv(nghttpx, directory, port, originPort, cert, key, extra),
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    waitListening(port, process, "nghttpx")
    return process, port


def load(port: int, requests: int, h1: bool) -> None:
    h2load = shutil.which("h2load")
    if h2load is None:
        raise SystemExit("h2load is missing: apt-get install nghttp2-client")
    argv = [h2load, "-n", str(requests), "-c", "1", "-H", f":authority: {HOST}"]
    argv += ["--h1"] if h1 else ["-m", str(STREAMS)]
    out = subprocess.run(argv + [f"https://127.0.0.1:{port}/small"], capture_output=True, timeout=300, check=True)
    done = re.search(rb"(\d+) succeeded", out.stdout)
    if done is None or int(done.group(1)) != requests:
        raise SystemExit(f"h2load did not complete every request: {out.stdout.decode()[-400:]}")


def memory(netlog: subprocess.Popen[bytes], route: int) -> None:
    """
    The site proxy's peak RSS over 100 concurrent HTTP/2 streams of 100 MB,
    then over one HTTP/1.1 download of 100 MB.
    """
    nghttp = shutil.which("nghttp")
    h2load = shutil.which("h2load")
    if nghttp is None or h2load is None:
        raise SystemExit("nghttp and h2load are missing: apt-get install nghttp2-client")
    url = f"https://127.0.0.1:{route}/size/{100 * MIB}"
    rows = []
    for what, argv in (
        ("100 streams x 100 MB, HTTP/2", [nghttp, "-n", "-m", "100", "-H", f":authority: {HOST}", url]),
        ("1 x 100 MB, HTTP/1.1", [h2load, "--h1", "-n", "1", "-c", "1", "-H", f":authority: {HOST}", url]),
    ):
        resetPeakRSS(netlog.pid)
        before = peakRSS(netlog.pid) or 0
        cpu = cpuSeconds(netlog.pid) or 0.0
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, timeout=1800)
        peak = peakRSS(netlog.pid) or 0
        rows.append((what, before, peak, (cpuSeconds(netlog.pid) or 0.0) - cpu))
    print("\n| transfer | RSS before | peak RSS | growth | CPU |")
    print("|---|---|---|---|---|")
    for what, before, peak, cpu in rows:
        print(f"| {what} | {before / MIB:.1f} MiB | {peak / MIB:.1f} MiB | {(peak - before) / MIB:.1f} MiB "
              f"| {cpu:.1f} s |")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--memory", action="store_true", help="measure peak RSS over 100 x 100 MB instead")
    args = parser.parse_args(argv)
    directory = tempfile.mkdtemp(prefix="netlog-bench-h2-")
    env, origin = startOrigin(directory)
    netlog, _, route = startNetlog(directory, env.port)
    if args.memory:
        try:
            memory(netlog, route)
        finally:
            stopProcess(netlog)
            stopProcess(origin)
        return
    keyPath = env.cert[:-len("origin.pem")] + "origin.key"
    nghttpx, front = startNghttpx(directory, env.port, env.cert, keyPath)
    runs = {
        "netlog, HTTP/2": (netlog, route, False),
        "netlog, HTTP/1.1 keep-alive": (netlog, route, True),
        "nghttpx, HTTP/2": (nghttpx, front, False),
    }
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    try:
        for name, (process, port, h1) in runs.items():
            load(port, 200, h1)  # warm-up
        for r in range(args.rounds):
            names = list(runs)
            names = names[r % len(names):] + names[:r % len(names)]
            for name in names:
                process, port, h1 = runs[name]
                before = cpuSeconds(process.pid) or 0.0
                load(port, args.requests, h1)
                after = cpuSeconds(process.pid) or 0.0
                cpu[name].append((after - before) / args.requests * 1000)
            print(f"round {r + 1}: " + ", ".join(f"{n} {cpu[n][-1]:.4f} ms" for n in runs), flush=True)
    finally:
        for process in (netlog, nghttpx, origin):
            stopProcess(process)
    medians = {name: statistics.median(values) for name, values in cpu.items()}
    print(f"\nCPU per request (median of {args.rounds} rounds of {args.requests} GETs of /small, "
          f"one connection; HTTP/2 with {STREAMS} streams in flight):\n")
    print("| target | CPU per request | / netlog HTTP/1.1 | / nghttpx |")
    print("|---|---|---|---|")
    for name, value in medians.items():
        print(f"| {name} | {value:.4f} ms | {value / medians['netlog, HTTP/1.1 keep-alive']:.2f}x "
              f"| {value / medians['nghttpx, HTTP/2']:.2f}x |")


if __name__ == "__main__":
    main(sys.argv[1:])
