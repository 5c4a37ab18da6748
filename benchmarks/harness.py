"""
The benchmark harness: interleaved rounds of the same scenarios against
direct (no proxy), a bare Twisted relay that logs nothing (the baseline), and
each proxy under test; medians with min–max, ratios to direct and to the
baseline, and a markdown table written to a file.

A proxy's own bench file (C{bench_standin.py}, ...) describes how to start it
as a L{ProcessTarget} and calls L{main}. The origin (L{benchmarks.origin}) and
the baseline (L{benchmarks.baseline}) run in processes of their own; the
clients run here, in asyncio, the same for every target.
"""

from __future__ import annotations

import asyncio
import datetime
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: The name every target reaches the origin by (proxies get
#: C{--resolve bench.test=127.0.0.1}).
HOST = "bench.test"
MIB = 1024 * 1024
#: The big transfers' size.
BIG = 100 * MIB
#: Rounds by default (each scenario once per target per round).
DEFAULT_ROUNDS = 3
#: The real peer the CPU table compares netlog with, when it ran.
PEER = "squid"
STARTUP_TIMEOUT = 20.0


def freePort() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sourceEnv() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def waitListening(port: int, process: subprocess.Popen[bytes], what: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{what} did not start listening on {port}")


def stopProcess(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def makeCertificate(directory: str, stem: str = "origin", commonName: str = HOST) -> tuple[str, str]:
    """
    A self-signed certificate for L{HOST} that may also sign others (the
    origin's; squid bumping signs its host certificates with one, named
    apart so that no client takes one issuer for the other), written to
    C{STEM.pem} and C{STEM.key} in C{directory}.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, commonName)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    certPath, keyPath = os.path.join(directory, f"{stem}.pem"), os.path.join(directory, f"{stem}.key")
    with open(certPath, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(keyPath, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return certPath, keyPath


@dataclass
class Environment:
    """
    The origin's ports and certificate, and a folder for the run.
    """

    directory: str
    port: int
    tlsPort: int
    cert: str
    sslContext: ssl.SSLContext


class TargetUnavailable(Exception):
    """
    A target could not start (a peer that isn't installed or won't run
    here): the run goes on without it, and says why.
    """


@dataclass
class Target:
    """
    Where the clients send their requests: straight to the origin
    (C{proxyPort} L{None}), or through a proxy.
    """

    name: str
    proxyPort: int | None = None
    #: a line for under the table (a peer's version, say)
    note: str = ""

    def start(self, env: Environment) -> None:
        pass

    def stop(self) -> None:
        pass

    @property
    def pid(self) -> int | None:
        return None


@dataclass
class ProcessTarget(Target):
    """
    A proxy in a process of its own, started by C{argv(env, port)}.
    """

    argv: Callable[[Environment, int], list[str]] = field(default=lambda env, port: [])
    process: subprocess.Popen[bytes] | None = None

    def start(self, env: Environment) -> None:
        self.proxyPort = freePort()
        self.process = subprocess.Popen(
            self.argv(env, self.proxyPort), env=sourceEnv(), cwd=env.directory,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        waitListening(self.proxyPort, self.process, self.name)

    def stop(self) -> None:
        if self.process is not None:
            stopProcess(self.process)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None


def baselineTarget() -> ProcessTarget:
    return ProcessTarget(
        "baseline",
        argv=lambda env, port: [sys.executable, "-m", "benchmarks.baseline", "--port", str(port),
                                "--resolve", f"{HOST}=127.0.0.1"],
    )


def processTree(pid: int) -> list[int]:
    """
    A process and its descendants (Linux C{/proc/PID/task/*/children}): a
    proxy that runs helpers (squid's log writer) is its whole tree.
    """
    found = [pid]
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                children = f.read().split()
        except OSError:
            continue
        for child in children:
            found += processTree(int(child))
    return found


def peakRSS(pid: int | None) -> int | None:
    """
    A process tree's peak resident set size in bytes: each process's
    C{VmHWM}, summed.
    """
    if pid is None:
        return None
    total = 0
    for each in processTree(pid):
        try:
            with open(f"/proc/{each}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1]) * 1024
                        break
        except OSError:
            pass
    return total or None


def resetPeakRSS(pid: int | None) -> None:
    """
    Start measuring a process tree's peak RSS afresh (Linux C{clear_refs} 5).
    """
    if pid is None:
        return
    for each in processTree(pid):
        try:
            with open(f"/proc/{each}/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass


# -- the clients ----------------------------------------------------------------


class Client:
    """
    One client connection to the origin through a target, in asyncio.
    """

    def __init__(self, env: Environment, target: Target, tls: bool) -> None:
        self.env = env
        self.target = target
        self.tls = tls
        self.authority = f"{HOST}:{env.tlsPort if tls else env.port}"

    async def open(self) -> Client:
        env, target = self.env, self.target
        if target.proxyPort is None:
            port = env.tlsPort if self.tls else env.port
            self.r, self.w = await asyncio.open_connection(
                "127.0.0.1", port, ssl=env.sslContext if self.tls else None,
                server_hostname=HOST if self.tls else None,
            )
            return self
        self.r, self.w = await asyncio.open_connection("127.0.0.1", target.proxyPort)
        if self.tls:
            self.w.write(f"CONNECT {self.authority} HTTP/1.1\r\nHost: {self.authority}\r\n\r\n".encode())
            head = await self.r.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"CONNECT through {target.name} failed: {head!r}")
            await self.w.start_tls(env.sslContext, server_hostname=HOST)
        return self

    def url(self, path: str) -> str:
        if self.target.proxyPort is not None and not self.tls:
            return f"http://{self.authority}{path}"
        return path

    async def request(self, path: str, upload: int = 0, close: bool = False) -> tuple[int, int]:
        """
        One request; returns the status and the body's size (read and
        dropped as it comes).
        """
        head = f"{'POST' if upload else 'GET'} {self.url(path)} HTTP/1.1\r\nHost: {self.authority}\r\n"
        if upload:
            head += f"Content-Length: {upload}\r\n"
        if close:
            head += "Connection: close\r\n"
        self.w.write(head.encode() + b"\r\n")
        if upload:
            block = b"u" * MIB
            sent = 0
            while sent < upload:
                piece = block[: upload - sent]
                self.w.write(piece)
                sent += len(piece)
                await self.w.drain()
        answer = await self.r.readuntil(b"\r\n\r\n")
        status = int(answer[9:12])
        length = 0
        for line in answer.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        got = 0
        while got < length:
            piece = await self.r.read(min(length - got, MIB))
            if not piece:
                raise RuntimeError("connection closed in the middle of a body")
            got += len(piece)
        return status, got

    async def close(self) -> None:
        self.w.close()
        try:
            await self.w.wait_closed()
        except (OSError, ssl.SSLError):
            pass


# -- scenarios ----------------------------------------------------------------------

Scenario = Callable[[Environment, Target], Awaitable[None]]


def _check(status: int) -> None:
    if status != 200:
        raise RuntimeError(f"status {status}")


async def _keepAlive(env: Environment, target: Target, path: str, connections: int,
                     each: int, tls: bool = False) -> None:
    async def one() -> None:
        client = await Client(env, target, tls).open()
        for _ in range(each):
            status, _ = await client.request(path)
            _check(status)
        await client.close()

    await asyncio.gather(*(one() for _ in range(connections)))


async def keepAliveSmall(env: Environment, target: Target) -> None:
    """1,000 small GETs on 4 keep-alive connections."""
    await _keepAlive(env, target, "/small", 4, 250)


async def get1MiB(env: Environment, target: Target) -> None:
    """64 GETs of 1 MiB on 4 keep-alive connections."""
    await _keepAlive(env, target, f"/size/{MIB}", 4, 16)


async def gzipJSON(env: Environment, target: Target) -> None:
    """400 GETs of a gzip-coded JSON document on 4 keep-alive connections."""
    await _keepAlive(env, target, "/gzip-json", 4, 100)


async def httpsConnect(env: Environment, target: Target) -> None:
    """400 small GETs over TLS on 4 CONNECT tunnels (direct: 4 TLS connections)."""
    await _keepAlive(env, target, "/small", 4, 100, tls=True)


async def _burst(env: Environment, target: Target, tls: bool) -> None:
    gate = asyncio.Semaphore(64)

    async def one() -> None:
        async with gate:
            client = await Client(env, target, tls).open()
            status, _ = await client.request("/small", close=True)
            _check(status)
            await client.close()

    await asyncio.gather(*(one() for _ in range(1024)))


async def burstPlain(env: Environment, target: Target) -> None:
    """1,024 GETs, 64 at a time, each on a new connection."""
    await _burst(env, target, False)


async def burstTLS(env: Environment, target: Target) -> None:
    """1,024 GETs, 64 at a time, each a new CONNECT and TLS handshake."""
    await _burst(env, target, True)


async def upload100(env: Environment, target: Target) -> None:
    """One 100 MB upload (plain HTTP)."""
    client = await Client(env, target, False).open()
    status, _ = await client.request("/upload", upload=BIG)
    _check(status)
    await client.close()


async def download100(env: Environment, target: Target, tls: bool = False) -> None:
    """One 100 MB download (plain HTTP; with C{tls}, TLS in a CONNECT tunnel)."""
    client = await Client(env, target, tls).open()
    status, size = await client.request(f"/size/{BIG}")
    _check(status)
    if size != BIG:
        raise RuntimeError(f"got {size} bytes")
    await client.close()


async def download100Tunnel(env: Environment, target: Target) -> None:
    """One 100 MB download over TLS in a CONNECT tunnel (direct: one TLS connection)."""
    await download100(env, target, tls=True)


#: Keep-alive connections held open, idle, beside L{burstBesideIdle}'s burst.
IDLE_HELD = 500


async def burstBesideIdle(env: Environment, target: Target) -> None:
    """
    500 GETs, each on a new connection kept open after it, 64 at a time, then
    1,024 GETs each on a new connection, 64 at a time, beside those 500
    idle ones: what a new connection costs while many are held open.
    """
    held: list[Client] = []
    try:
        for start in range(0, IDLE_HELD, 64):
            opened = await asyncio.gather(
                *(Client(env, target, False).open() for _ in range(min(64, IDLE_HELD - start))))
            held.extend(opened)
            for status, _ in await asyncio.gather(*(client.request("/small") for client in opened)):
                _check(status)
        await _burst(env, target, False)
    finally:
        for client in held:
            await client.close()


#: Every scenario, by name, in the order of the table.
SCENARIOS: dict[str, Scenario] = {
    "keep-alive small GETs (1,000)": keepAliveSmall,
    "1 MiB GETs (64)": get1MiB,
    "gzip JSON GETs (400)": gzipJSON,
    "HTTPS through CONNECT (400)": httpsConnect,
    "burst, new connections (1,024 / 64)": burstPlain,
    "burst, CONNECT+TLS (1,024 / 64)": burstTLS,
    "burst beside 500 idle connections (1,524 / 64)": burstBesideIdle,
    "100 MB up": upload100,
    "100 MB down": download100,
    "100 MB down through CONNECT": download100Tunnel,
}
#: The scenarios whose peak RSS is reported.
MEMORY_SCENARIOS = {"100 MB up", "100 MB down", "100 MB down through CONNECT"}
#: Requests per scenario, for CPU per request.
REQUESTS = {
    "keep-alive small GETs (1,000)": 1000, "1 MiB GETs (64)": 64, "gzip JSON GETs (400)": 400,
    "HTTPS through CONNECT (400)": 400, "burst, new connections (1,024 / 64)": 1024,
    "burst, CONNECT+TLS (1,024 / 64)": 1024, "burst beside 500 idle connections (1,524 / 64)": 1524,
    "100 MB up": 1, "100 MB down": 1,
    "100 MB down through CONNECT": 1,
}


def processClock(pid: int) -> int:
    """
    The clock id of a process's CPU time, every thread's, ended ones too
    (Linux's C{MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)}, what
    C{clock_getcpuclockid(3)} gives): read with C{time.clock_gettime_ns},
    to the nanosecond.
    """
    return ((~pid) << 3) | 2


def cpuSeconds(pid: int | None) -> float | None:
    """
    User and system CPU time of a process tree so far: each live process's
    own to the nanosecond (L{processClock}), and its children's that have
    ended and been waited for (C{/proc/PID/stat}, in clock ticks).

    The nanoseconds matter: a clock tick is 10 ms, as much as squid spends
    on 400 small requests, so per-request figures of the small scenarios
    read in ticks were one tick against two.
    """
    if pid is None:
        return None
    times = [t for t in map(ownCPUSeconds, processTree(pid)) if t is not None]
    return sum(times) if times else None


def ownCPUSeconds(pid: int) -> float | None:
    """
    User and system CPU time of one process so far: its own to the
    nanosecond (L{processClock}), and its children's that have ended and
    been waited for (C{/proc/PID/stat}, in clock ticks); not its living
    children's: sum a tree's processes with this, never with L{cpuSeconds},
    or each is counted once more for every ancestor.
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        own = time.clock_gettime_ns(processClock(pid))
    except OSError:
        return None
    return own / 1e9 + (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


# -- running ------------------------------------------------------------------------


@dataclass
class Results:
    times: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    #: CPU seconds the target's process spent in each run of a scenario.
    cpu: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    rss: dict[tuple[str, str], int] = field(default_factory=dict)
    #: each target's peak RSS over the whole run (its tree's, summed)
    peak: dict[str, int] = field(default_factory=dict)
    errors: dict[tuple[str, str], str] = field(default_factory=dict)
    #: targets that could not start, and why
    unavailable: dict[str, str] = field(default_factory=dict)

    def cpuPerRequest(self, scenario: str, name: str) -> float | None:
        """
        A target's median CPU seconds per request in a scenario (per run,
        for a scenario of one request), or L{None} if it has none.
        """
        runs = self.cpu.get((scenario, name))
        if not runs:
            return None
        return statistics.median(runs) / REQUESTS.get(scenario, 1)


def startOrigin(directory: str) -> tuple[Environment, subprocess.Popen[bytes]]:
    cert, key = makeCertificate(directory)
    port, tlsPort = freePort(), freePort()
    process = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.origin", "--port", str(port), "--tls-port", str(tlsPort),
         "--cert", cert, "--key", key],
        env=sourceEnv(), cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    waitListening(port, process, "the origin")
    waitListening(tlsPort, process, "the origin (TLS)")
    context = ssl.create_default_context(cafile=cert)
    return Environment(directory, port, tlsPort, cert, context), process


def run(targets: list[Target], scenarios: dict[str, Scenario], rounds: int,
        progress: Callable[[str], None] = print) -> Results:
    """
    Run every scenario against every target, C{rounds} times, interleaved
    (the order of targets turns each round, so none is always first).
    """
    directory = tempfile.mkdtemp(prefix="netlog-bench-")
    env, origin = startOrigin(directory)
    results = Results()
    started: list[Target] = []
    try:
        for target in list(targets):
            try:
                target.start(env)
            except TargetUnavailable as e:
                results.unavailable[target.name] = str(e)
                progress(f"{target.name}: {e}; running without it")
                targets.remove(target)
                continue
            started.append(target)
        loop = asyncio.new_event_loop()
        for target in targets:
            loop.run_until_complete(_keepAlive(env, target, "/small", 2, 20))
        for r in range(rounds):
            order = targets[r % len(targets):] + targets[: r % len(targets)]
            for name, scenario in scenarios.items():
                for target in order:
                    key = (name, target.name)
                    if key in results.errors:
                        continue
                    if name in MEMORY_SCENARIOS:
                        _notePeak(results, target)
                        resetPeakRSS(target.pid)
                    begin = time.perf_counter()
                    cpuBefore = cpuSeconds(target.pid)
                    try:
                        loop.run_until_complete(asyncio.wait_for(scenario(env, target), 120))
                    except Exception as e:  # a failed scenario is reported, not fatal
                        results.errors[key] = f"{type(e).__name__}: {e}"
                        progress(f"  {name} / {target.name}: FAILED {results.errors[key]}")
                        continue
                    elapsed = time.perf_counter() - begin
                    results.times.setdefault(key, []).append(elapsed)
                    cpuAfter = cpuSeconds(target.pid)
                    if cpuBefore is not None and cpuAfter is not None:
                        results.cpu.setdefault(key, []).append(cpuAfter - cpuBefore)
                    if name in MEMORY_SCENARIOS:
                        peak = peakRSS(target.pid)
                        if peak is not None:
                            results.rss[key] = max(results.rss.get(key, 0), peak)
            progress(f"round {r + 1}/{rounds} done")
        for target in targets:
            _notePeak(results, target)
        loop.close()
    finally:
        for target in started:
            target.stop()
        stopProcess(origin)
        shutil.rmtree(directory, ignore_errors=True)
    return results


def _notePeak(results: Results, target: Target) -> None:
    peak = peakRSS(target.pid)
    if peak is not None:
        results.peak[target.name] = max(results.peak.get(target.name, 0), peak)


def _cell(times: list[float] | None) -> str:
    if not times:
        return "failed"
    return f"{statistics.median(times):.3f} s ({min(times):.3f}–{max(times):.3f})"


def _ratio(a: list[float] | None, b: list[float] | None) -> str:
    if not a or not b:
        return "–"
    return f"{statistics.median(a) / statistics.median(b):.2f}×"


def table(results: Results, targets: list[Target], scenarios: list[str], rounds: int) -> str:
    """
    The markdown table: per scenario, each target's median (min–max), and
    each proxy's ratio to direct and to the baseline; peak RSS of the big
    transfers.
    """
    names = [t.name for t in targets]
    proxies = [n for n in names if n not in ("direct", "baseline")]
    header = ["scenario"] + names
    for p in proxies:
        header += [f"{p} / direct", f"{p} / baseline"]
    header.append("baseline / direct")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for scenario in scenarios:
        row = [scenario] + [_cell(results.times.get((scenario, n))) for n in names]
        for p in proxies:
            row.append(_ratio(results.times.get((scenario, p)), results.times.get((scenario, "direct"))))
            row.append(_ratio(results.times.get((scenario, p)), results.times.get((scenario, "baseline"))))
        row.append(_ratio(results.times.get((scenario, "baseline")), results.times.get((scenario, "direct"))))
        lines.append("| " + " | ".join(row) + " |")
    out = "\n".join(lines) + "\n"
    rss = [(s, n, v) for (s, n), v in sorted(results.rss.items())]
    if rss:
        out += "\nPeak RSS (VmHWM, reset before each big transfer):\n\n| scenario | process | peak RSS |\n|---|---|---|\n"
        for s, n, v in rss:
            out += f"| {s} | {n} | {v / MIB:.1f} MiB |\n"
    if results.peak:
        out += "\nPeak RSS over the whole run (VmHWM, a process tree's summed): " + ", ".join(
            f"{n} {results.peak[n] / MIB:.1f} MiB" for n in names if n in results.peak) + "\n"
    out += cpuTable(results, [n for n in names if n != "direct"], scenarios)
    for (s, n), error in sorted(results.errors.items()):
        out += f"\n- {s} / {n} failed: {error}"
    for n, why in results.unavailable.items():
        out += f"\n- {n} did not run: {why}"
    for t in targets:
        if t.note:
            out += f"\n- {t.name}: {t.note}"
    out += (
        f"\n\n{rounds} interleaved rounds; medians with min–max of wall time per scenario; "
        f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]}; "
        f"{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.\n"
    )
    return out


def cpuTable(results: Results, names: list[str], scenarios: list[str]) -> str:
    """
    Median CPU time per request of each process, by scenario, and each
    proxy's against the baseline's: steadier than wall time on a loaded
    machine, since it counts only what the process itself spent.
    """
    rows = [s for s in scenarios if any((s, n) in results.cpu for n in names)]
    if not rows:
        return ""
    proxies = [n for n in names if n != "baseline"]
    # netlog's against the peer's, as issue 16 sets its goals
    againstPeer = [n for n in proxies if n != PEER] if PEER in names else []
    header = (["scenario"] + names + [f"{p} / baseline" for p in proxies]
              + [f"{p} / {PEER}" for p in againstPeer])
    lines = ["", "Process CPU (user + system, median over rounds) per request:", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for scenario in rows:
        count = REQUESTS.get(scenario, 1)
        cells = []
        for n in names:
            per = results.cpuPerRequest(scenario, n)
            if per is None:
                cells.append("–")
                continue
            cells.append(f"{per * 1000:.3f} ms" if count > 1 else f"{per:.2f} s")
        for p in proxies:
            cells.append(_ratio(results.cpu.get((scenario, p)), results.cpu.get((scenario, "baseline"))))
        for p in againstPeer:
            cells.append(_ratio(results.cpu.get((scenario, p)), results.cpu.get((scenario, PEER))))
        lines.append(f"| {scenario} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def printReport(text: str, out: str | None) -> None:
    """
    Print a benchmark's report, and write it to C{out} when given.
    """
    sys.stdout.write(text)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
