"""
A page of 200 images over HTTP/2 in Chromium (issue 38, item 4): the page's
load time through netlog's site proxy, at its HTTPS route and through its
forward port, against C{nghttpx} (Debian's nghttp2-proxy) terminating TLS
and HTTP/2 in front of the same plain origin, in interleaved rounds.

    .venv/bin/python -m benchmarks.bench_h2page                  # 5 rounds, quiet
    .venv/bin/python -m benchmarks.bench_h2page --busy           # a CPU-bound job beside it
    .venv/bin/python -m benchmarks.bench_h2page --rounds 9 --no-direct
    .venv/bin/python -m benchmarks.bench_h2page --nghttp --also-upstream-connections 100

The origin (a process of its own, asyncio, HTTP/1.1 on loopback) serves
C{/page}, HTML with 200 C{<img>} of distinct URLs, and answers each image
(a 1x1 PNG) after 50 ms. Each load is headless Chromium in a fresh browser
context (an empty cache, new connections), one browser per target (each
its own C{--host-resolver-rules}), nothing leaving loopback. A load's time is
the page's load event (C{loadEventEnd} of its navigation entry); every
image must have loaded (C{naturalWidth > 0}) over the target's protocol
(C{nextHopProtocol}), or the run stops.

The origin counts the images it holds at once and the connections it
accepts, per load; a second table says where each load's time went. To
look into netlog's share: C{--nghttp} fetches with C{nghttp -a} instead of
Chromium (next to no client CPU; the targets without a CONNECT),
C{--upstream-connections N} and C{--also-upstream-connections N} set
netlog's cap on connections to the origin (a second site proxy in the same
rounds for the latter), C{--nghttpx-backend-connections N} caps nghttpx's,
and C{--profile OUT} runs netlog under cProfile.

The goal (issue 38, item 4): both netlog targets within 1.05x of nghttpx's
median, measured in one run, quiet and with C{--busy}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
import zlib
from dataclasses import dataclass, field
from typing import Any

from benchmarks.bench_h2 import startNetlog, startNghttpx
from benchmarks.harness import (
    HOST,
    cpuSeconds,
    freePort,
    makeCertificate,
    sourceEnv,
    stopProcess,
    waitListening,
)
from tests.browser.browser import CHROMIUM, GOOGLE_BYPASS, chromiumArgs, spkiHash
from tests.support import netlogArgv

#: Images on the page, and how long the origin waits before answering each.
IMAGES = 200
DELAY = 0.05
#: How long one load may take (ms) before the run stops.
LOAD_TIMEOUT_MS = 60_000

#: What a load reports: its load event and milestones (ms from the
#: navigation's start), how many images loaded, and the protocols its
#: resources came over.
MEASURE = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const images = Array.from(document.images);
  const fetched = performance.getEntriesByType('resource').filter(e => e.initiatorType === 'img');
  return {
    load: nav.loadEventEnd - nav.startTime,
    pageIn: nav.responseEnd - nav.startTime,
    firstAsked: Math.min(...fetched.map(e => e.requestStart || e.startTime)) - nav.startTime,
    lastIn: Math.max(...fetched.map(e => e.responseEnd)) - nav.startTime,
    images: images.length,
    loaded: images.filter(i => i.complete && i.naturalWidth > 0).length,
    protocols: [nav.nextHopProtocol].concat(
      performance.getEntriesByType('resource').map(e => e.nextHopProtocol)),
  };
}"""


def png() -> bytes:
    """
    A valid 1x1 opaque PNG.
    """

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\x00\x80\x40\x20"))
            + chunk(b"IEND", b""))


def pageHTML() -> bytes:
    images = "\n".join(f'<img src="/img/{n}.png" width="8" height="8">' for n in range(IMAGES))
    return (f"<!doctype html><html><head><title>{IMAGES} images</title></head>"
            f"<body>\n{images}\n</body></html>\n").encode()


# -- the origin ---------------------------------------------------------------------


@dataclass
class OriginStats:
    """
    What the origin saw since it was last asked (C{/stats}): connections
    accepted, and the most image requests it held at once.
    """

    connections: int = 0
    inFlight: int = 0
    peak: int = 0
    #: when C{/page} was asked for, and the last image asked for and answered
    pageAt: float = 0.0
    lastAsked: float = 0.0
    lastAnswered: float = 0.0

    def take(self) -> bytes:
        out = json.dumps({"connections": self.connections, "peak": self.peak,
                          "lastAsked": (self.lastAsked - self.pageAt) * 1000,
                          "lastAnswered": (self.lastAnswered - self.pageAt) * 1000}).encode()
        self.connections, self.peak = 0, self.inFlight
        return out


async def _serveConnection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                           page: bytes, image: bytes, stats: OriginStats) -> None:
    stats.connections += 1
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, target, _ = lines[0].split(" ", 2)
            fields = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            length = int(fields.get("content-length", "0"))
            if length:
                await reader.readexactly(length)
            path = target.split("?", 1)[0]
            if path == "/page":
                stats.pageAt = time.monotonic()
                status, kind, body = "200 OK", "text/html; charset=utf-8", page
            elif path.startswith("/img/") and path.endswith(".png"):
                stats.inFlight += 1
                stats.lastAsked = time.monotonic()
                stats.peak = max(stats.peak, stats.inFlight)
                try:
                    await asyncio.sleep(DELAY)
                finally:
                    stats.inFlight -= 1
                status, kind, body = "200 OK", "image/png", image
            elif path == "/stats":
                status, kind, body = "200 OK", "application/json", stats.take()
            else:
                status, kind, body = "404 Not Found", "text/plain", b"not found\n"
            close = fields.get("connection", "").lower() == "close"
            writer.write(
                f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n"
                f"Cache-Control: no-store\r\n{'Connection: close' + chr(13) + chr(10) if close else ''}\r\n"
                .encode() + (body if method != "HEAD" else b"")
            )
            await writer.drain()
            if path.startswith("/img/"):
                stats.lastAnswered = time.monotonic()
            if close:
                return
    finally:
        writer.close()


def serveOrigin(port: int) -> None:
    """
    The origin's process: HTTP/1.1 keep-alive on C{127.0.0.1:port}, as
    many connections at once as come.
    """
    page, image, stats = pageHTML(), png(), OriginStats()

    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: _serveConnection(r, w, page, image, stats), "127.0.0.1", port,
                                            backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def startOrigin() -> tuple[subprocess.Popen[bytes], int]:
    port = freePort()
    process = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_h2page", "--origin", str(port)],
                               env=sourceEnv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    waitListening(port, process, "the origin")
    return process, port


# -- the targets --------------------------------------------------------------------


def startSiteProxy(directory: str, originPort: int, extra: tuple[str, ...] = (),
                   profile: str | None = None) -> tuple[subprocess.Popen[bytes], int, int, str]:
    """
    C{twistd netlog-proxy} (one process, as C{bench_h2} runs it) with
    C{https://bench.test} a site on the origin: its forward port, its HTTPS
    route, and its CA's SPKI hash.
    """
    process, port, route = startNetlog(directory, originPort, extra, profile)
    spki = subprocess.run(netlogArgv() + ["ca", "--state", os.path.join(directory, "state"), "--spki-only"],
                          env=sourceEnv(), capture_output=True, check=True, timeout=60).stdout.decode().strip()
    return process, port, route, spki


@dataclass
class Target:
    name: str
    url: str
    #: what every resource's C{nextHopProtocol} must be
    protocol: str
    maps: dict[str, str] = field(default_factory=dict)
    proxy: str | None = None
    process: subprocess.Popen[bytes] | None = None
    browser: Any = None
    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    #: the most image requests the origin held at once in each load, and
    #: the connections it accepted
    peaks: list[int] = field(default_factory=list)
    connections: list[int] = field(default_factory=list)
    #: each load's milestones (ms), by name, for where the time goes
    milestones: dict[str, list[float]] = field(default_factory=dict)


def launch(playwright: Any, target: Target, spkis: list[str]) -> None:
    options: dict[str, Any] = {"executable_path": CHROMIUM, "headless": True,
                               "args": chromiumArgs(spkis, target.maps)}
    if target.proxy is not None:
        options["proxy"] = {"server": target.proxy, "bypass": ",".join(GOOGLE_BYPASS)}
    target.browser = playwright.chromium.launch(**options)


def loadOnce(target: Target) -> dict[str, Any]:
    """
    Load the page once in a fresh context; its timings (ms from the
    navigation's start). Raises if an image did not load or came over
    another protocol.
    """
    if target.browser is None:
        return nghttpLoad(target)
    context = target.browser.new_context()
    try:
        context.set_default_timeout(LOAD_TIMEOUT_MS)
        page = context.new_page()
        page.goto(target.url, wait_until="load")
        page.wait_for_function("() => performance.getEntriesByType('navigation')[0].loadEventEnd > 0")
        seen = page.evaluate(MEASURE)
    finally:
        context.close()
    if seen["images"] != IMAGES or seen["loaded"] != IMAGES:
        raise SystemExit(f"{target.name}: {seen['loaded']} of {seen['images']} images loaded (expected {IMAGES})")
    protocols = set(seen["protocols"])
    if protocols != {target.protocol}:
        raise SystemExit(f"{target.name}: resources came over {sorted(protocols)}, expected {target.protocol}")
    return {k: float(seen[k]) for k in ("load", "pageIn", "firstAsked", "lastIn")}


def nghttpLoad(target: Target) -> dict[str, Any]:
    """
    Fetch the page and its images with C{nghttp -a} (C, one HTTP/2
    connection, every image asked for at once up to the server's stream
    limit), to the port C{bench.test} is mapped to: the proxy's time with
    next to no client CPU. Its wall time in ms, as C{load}.
    """
    nghttp = shutil.which("nghttp")
    if nghttp is None:
        raise SystemExit("nghttp is missing: apt-get install nghttp2-client")
    begin = time.perf_counter()
    out = subprocess.run([nghttp, "-a", "-n", "-s", "-H", f":authority: {HOST}",
                          f"https://{target.maps[HOST]}/page"], capture_output=True, timeout=LOAD_TIMEOUT_MS / 1000)
    elapsed = (time.perf_counter() - begin) * 1000
    images = [line for line in out.stdout.decode().splitlines() if "/img/" in line]
    if out.returncode != 0 or len(images) != IMAGES:
        raise SystemExit(f"{target.name}: nghttp exited {out.returncode} with {len(images)} of {IMAGES} images: "
                         f"{(out.stdout + out.stderr).decode()[-400:]}")
    return {"load": elapsed}


def originStats(port: int) -> dict[str, int]:
    """
    What the origin saw since last asked (straight to it, no proxy).
    """
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{port}/stats", timeout=10) as answer:
        stats: dict[str, int] = json.loads(answer.read())
        return stats


def busyJob() -> subprocess.Popen[bytes]:
    """
    A CPU-bound job beside the run: one process spinning on a core.
    """
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def loadAverage() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def cell(values: list[float]) -> str:
    return f"{statistics.median(values):.0f} ms [{min(values):.0f}–{max(values):.0f}]"


def report(targets: list[Target], rounds: int, busy: bool, loads: tuple[str, str], nghttp: bool) -> str:
    reference = statistics.median(targets[0].times)
    mode = "busy: one CPU-bound process spinning beside the run" if busy else "quiet: nothing started beside it"
    lines = [
        f"\n{IMAGES} images, each answered after {DELAY * 1000:.0f} ms; {rounds} interleaved rounds, "
        f"{'nghttp -a, a new connection per load' if nghttp else 'Chromium, a fresh context per load'}; "
        f"mode {mode}; load average {loads[0]} at the start, {loads[1]} at the end; "
        f"{os.cpu_count()} CPUs; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.\n",
        f"| target | {'page and images fetched' if nghttp else 'load event'}, median [min–max] | / nghttpx "
        "| server process CPU per load | images at the origin at once | origin connections opened |",
        "|---|---|---|---|---|---|",
    ]
    for t in targets:
        cpu = f"{statistics.median(t.cpu) * 1000:.0f} ms" if t.cpu else "–"
        lines.append(f"| {t.name} | {cell(t.times)} | {statistics.median(t.times) / reference:.2f}× | {cpu} "
                     f"| {statistics.median(t.peaks):g} | {statistics.median(t.connections):g} |")
    if nghttp:
        return "\n".join(lines) + "\n"
    lines += [
        "\nWhere the time goes (medians, ms; the browser's from the navigation's start, the origin's from "
        "/page asked for):\n",
        "| target | page in | first image asked | last image in | load event | origin: last image asked "
        "| origin: last image answered |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in targets:
        m = {k: statistics.median(v) for k, v in t.milestones.items()}
        lines.append(f"| {t.name} | {m['pageIn']:.0f} | {m['firstAsked']:.0f} | {m['lastIn']:.0f} | {m['load']:.0f} "
                     f"| {m['originLastAsked']:.0f} | {m['originLastAnswered']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--busy", action="store_true", help="run a CPU-bound job beside the benchmark")
    parser.add_argument("--no-direct", action="store_true", help="leave out direct HTTP/1.1 to the origin")
    parser.add_argument("--upstream-connections", type=int, metavar="N",
                        help="netlog's cap on connections to the origin (its --upstream-connections; default 32)")
    parser.add_argument("--also-upstream-connections", type=int, metavar="N",
                        help="also, in the same rounds, the HTTPS route of a second site proxy with "
                             "--upstream-connections N")
    parser.add_argument("--nghttpx-backend-connections", type=int, metavar="N",
                        help="nghttpx's cap (--backend-connections-per-frontend; default 0, no cap)")
    parser.add_argument("--nghttp", action="store_true",
                        help="fetch with nghttp -a instead of Chromium (no forward port, no direct)")
    parser.add_argument("--profile", metavar="OUT",
                        help="run netlog under cProfile (twistd --profile), its stats written to OUT at the end")
    parser.add_argument("--origin", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.origin is not None:
        serveOrigin(args.origin)
        return
    from playwright.sync_api import sync_playwright

    directory = tempfile.mkdtemp(prefix="netlog-bench-h2page-")
    processes: list[subprocess.Popen[bytes]] = []
    busy = None
    try:
        origin, originPort = startOrigin()
        processes.append(origin)
        cert, key = makeCertificate(directory)
        nghttpx, front = startNghttpx(
            directory, originPort, cert, key,
            () if args.nghttpx_backend_connections is None
            else (f"--backend-connections-per-frontend={args.nghttpx_backend_connections}",))
        processes.append(nghttpx)
        netlog, forward, route, netlogSPKI = startSiteProxy(
            directory, originPort,
            () if args.upstream_connections is None else ("--upstream-connections", str(args.upstream_connections)),
            os.path.abspath(args.profile) if args.profile else None)
        processes.append(netlog)
        with open(cert, "rb") as f:
            spkis = [spkiHash(f.read()), netlogSPKI]
        page = f"https://{HOST}/page"
        targets = [
            Target("nghttpx, HTTP/2", page, "h2", maps={HOST: f"127.0.0.1:{front}"}, process=nghttpx),
            Target("netlog HTTPS route, HTTP/2", page, "h2", maps={HOST: f"127.0.0.1:{route}"}, process=netlog),
            Target("netlog forward port, HTTP/2", page, "h2", proxy=f"http://127.0.0.1:{forward}", process=netlog),
        ]
        if args.also_upstream_connections is not None:
            n = args.also_upstream_connections
            second = os.path.join(directory, f"cap{n}")
            os.mkdir(second)
            other, _, otherRoute, otherSPKI = startSiteProxy(second, originPort, ("--upstream-connections", str(n)))
            processes.append(other)
            spkis.append(otherSPKI)
            targets.append(Target(f"netlog HTTPS route, HTTP/2, --upstream-connections {n}", page, "h2",
                                  maps={HOST: f"127.0.0.1:{otherRoute}"}, process=other))
        if args.nghttp:
            targets = [t for t in targets if t.proxy is None]
        elif not args.no_direct:
            targets.append(Target("direct, HTTP/1.1", f"http://{HOST}/page", "http/1.1",
                                  maps={HOST: f"127.0.0.1:{originPort}"}, process=origin))
        with sync_playwright() as playwright:
            for t in targets:
                if not args.nghttp:
                    launch(playwright, t, spkis)
            for t in targets:
                loadOnce(t)  # warm-up: the browser's first page, the proxy's first connections
            if args.busy:
                busy = busyJob()
            loads = [loadAverage()]
            print(f"mode: {'busy (a CPU-bound job beside it)' if args.busy else 'quiet'}; "
                  f"load average {loads[0]}", flush=True)
            for r in range(args.rounds):
                order = targets[r % len(targets):] + targets[:r % len(targets)]
                for t in order:
                    originStats(originPort)
                    before = cpuSeconds(t.process.pid if t.process else None)
                    timings = loadOnce(t)
                    t.times.append(timings["load"])
                    after = cpuSeconds(t.process.pid if t.process else None)
                    if before is not None and after is not None:
                        t.cpu.append(after - before)
                    seen = originStats(originPort)
                    t.peaks.append(seen["peak"])
                    t.connections.append(seen["connections"] - 1)  # less the one asking
                    timings.update(originLastAsked=seen["lastAsked"], originLastAnswered=seen["lastAnswered"])
                    for k, v in timings.items():
                        t.milestones.setdefault(k, []).append(v)
                print(f"round {r + 1}: " + ", ".join(f"{t.name} {t.times[-1]:.0f} ms" for t in targets), flush=True)
            loads.append(loadAverage())
            for t in targets:
                if t.browser is not None:
                    t.browser.close()
    finally:
        if busy is not None:
            stopProcess(busy)
        for process in reversed(processes):
            stopProcess(process)
        shutil.rmtree(directory, ignore_errors=True)
    sys.stdout.write(report(targets, args.rounds, args.busy, (loads[0], loads[1]), args.nghttp))


if __name__ == "__main__":
    main(sys.argv[1:])
