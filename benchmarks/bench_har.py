"""
How fast the HAR export is and how much memory it takes, against a naive
in-memory export built in the same run.

Makes two logs in a temporary folder (deleted after):

  - small: many small exchanges (a GET with a short JSON answer); with
    C{--late F}, a share F of them (seeded) started 1.5 s before they were
    logged, so their open lines are out of start order and the export
    reorders them, as it does for a proxy's open lines written late;
  - large: 1 GB of 10,000 exchanges (about 100 KB of body each), with a
    tunnel left open at the start, so an exporter that holds entries until
    everything before them ended would hold all of them.

Each export runs in a child process writing to a file: C{netlog har LOG -o
OUT} as a user runs it (no flags: a process per CPU on a large log), netlog's
L{writeHar} in one process, and the naive one (read every line,
C{json.loads} them all, join in memory, build every entry with this tree's
L{buildEntry}, C{json.dump} the whole HAR). CPU time counts the child and
its workers (C{os.wait4}); peak memory is the most the child and its
workers held together, sampled every 20 ms: their C{Pss} summed (each
page once, however many of them share it: what they cost the machine), and
in brackets their C{Rss} summed (a page the workers share with the parent
counted in each). With C{--against REV},
netlog's export as it was at a git revision runs too (from C{git archive}),
so that a change is measured against what it changed in the same run, and
every netlog export's HAR is checked to be the same bytes (SHA-256): the
command as it was there (no flags), and with C{--against-serial} its
L{writeHar} in one process too. The
exporters run in interleaved rounds (C{--rounds}; the order turns each
round), and each line gives the median of the rounds (CPU time is what to
compare on a busy machine; the best round in brackets). Prints entries/s,
seconds and peak memory, and the ratios of the medians; for the large log,
the goal of issue 16 (C{netlog har} under 3 s, under 100 MB).

Usage: .venv/bin/python benchmarks/bench_har.py [--small N] [--late F]
       [--large-mb M] [--large-entries N] [--rounds R] [--against REV]
       [--against-serial] [--no-baseline] [--no-serial]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from netlog.core.logline import encodeLine  # noqa: E402

T0 = 1767225600.0
#: Seconds between samples of an exporter's memory.
SAMPLE_INTERVAL = 0.02
#: Issue 16's goal for C{netlog har} on the large log: wall seconds, and MB.
GOAL_SECONDS = 3.0
GOAL_MB = 100

#: C{netlog har LOG -o OUT}, as a user runs it, with no flags (it prints
#: nothing when every line was used: the table takes the count from the log
#: it made).
COMMAND = """
import sys
from netlog.cli import main
sys.exit(main(["har", sys.argv[1], "-o", sys.argv[2]]))
"""

STREAMING = """
import sys
from netlog.har.export import writeHar
with open(sys.argv[2], "wb") as out:
    r = writeHar(sys.argv[1], out)
print(r.entries)
"""

NAIVE = """
import json, sys
from netlog.core.har import buildEntry, harHead
records = []
with open(sys.argv[1], "rb") as f:
    for line in f:
        try:
            records.append(json.loads(line))
        except ValueError:
            pass
ends = {r["id"]: r for r in records if r.get("type") == "end"}
entries = [buildEntry(r, ends.get(r["id"])) for r in records if r.get("type") == "open"]
har = {"log": {"version": "1.2", "creator": {"name": "netlog", "version": "naive"}, "entries": entries}}
with open(sys.argv[2], "w", encoding="utf-8") as out:
    json.dump(har, out, ensure_ascii=False)
print(len(entries))
"""


def writeSmall(path: str, count: int, late: float = 0.0) -> int:
    answer = base64.b64encode(json.dumps({"ok": True, "items": [1, 2, 3], "name": "Crème"}).encode()).decode()
    rng = random.Random(1)
    n = 0
    with open(path, "wb", buffering=1 << 20) as f:
        for i in range(count):
            n += 1
            opened = n
            f.write(
                encodeLine(
                    n,
                    "open",
                    n,
                    n,
                    T0 + i,
                    {
                        "proxy": "site",
                        "kind": "exchange",
                        "started": T0 + i - (1.5 if late and rng.random() < late else 0),
                        "client": "127.0.0.1:50000",
                        "connection": "c%d" % (i % 50),
                        "request": {
                            "method": "GET",
                            "url": "https://shop.test/api/items/%d?page=2&q=caf%%C3%%A9" % i,
                            "version": "HTTP/1.1",
                            "headers": [
                                ["Host", "shop.test"],
                                ["Accept", "application/json"],
                                ["Cookie", "session=abc; theme=dark"],
                                ["Referer", "https://shop.test/"],
                            ],
                            "headers_size": 180,
                        },
                        "server": {"host": "shop.test", "port": 443, "address": "127.0.0.1"},
                    },
                )
            )
            n += 1
            f.write(
                encodeLine(
                    n,
                    "end",
                    opened,
                    n,
                    T0 + i + 0.2,
                    {
                        "ended": T0 + i + 0.2,
                        "times": {"connected": None, "sent": T0 + i + 0.01, "first_byte": T0 + i + 0.1, "end": T0 + i + 0.2},
                        "response": {
                            "status": 200,
                            "reason": "OK",
                            "version": "HTTP/1.1",
                            "headers": [["Content-Type", "application/json"], ["Set-Cookie", "seen=1; Max-Age=60"]],
                            "headers_size": 90,
                            "body": {"size": 60, "data": answer},
                        },
                        "bytes": {"up": 180, "down": 150},
                    },
                )
            )
    return count


def writeLarge(path: str, megabytes: int, count: int, words: bytes | None = None) -> int:
    """
    The large log; its bodies are C{words} repeated (by default a short
    run of Latin, which compresses 300 to 1).
    """
    bodyBytes = max(1, int(megabytes * 1024 * 1024 / count * 3 / 4) - 400)
    words = words or ("lorem ipsum dolor sit amet café crème %d " * 1000).encode()
    n = 0
    with open(path, "wb", buffering=1 << 20) as f:
        n += 1
        tunnel = n
        f.write(
            encodeLine(n, "open", n, 1, T0, {
                "proxy": "site", "kind": "tunnel", "started": T0, "connection": "c0",
                "request": {"method": "CONNECT", "url": "https://live.test:443/", "version": "HTTP/1.1", "headers": [], "headers_size": 40},
                "server": {"host": "live.test", "port": 443, "address": "127.0.0.1"},
            })
        )
        for i in range(count - 1):
            n += 1
            opened = n
            f.write(
                encodeLine(n, "open", n, 1, T0 + i, {
                    "proxy": "site", "kind": "exchange", "started": T0 + i, "connection": "c1",
                    "request": {"method": "GET", "url": "https://shop.test/page/%d" % i, "version": "HTTP/1.1",
                                "headers": [["Host", "shop.test"], ["Accept", "text/html"]], "headers_size": 60},
                    "server": {"host": "shop.test", "port": 443, "address": "127.0.0.1"},
                })
            )
            body = (b"<p>%d</p>" % i + words * (bodyBytes // len(words) + 1))[:bodyBytes]
            n += 1
            f.write(
                encodeLine(n, "end", opened, 1, T0 + i + 0.5, {
                    "ended": T0 + i + 0.5,
                    "times": {"connected": None, "sent": T0 + i + 0.01, "first_byte": T0 + i + 0.1, "end": T0 + i + 0.5},
                    "response": {"status": 200, "reason": "OK", "version": "HTTP/1.1",
                                 "headers": [["Content-Type", "text/html; charset=utf-8"]], "headers_size": 60,
                                 "body": {"size": len(body), "data": base64.b64encode(body).decode()}},
                    "bytes": {"up": 60, "down": 60 + len(body)},
                })
            )
        n += 1
        f.write(encodeLine(n, "end", tunnel, 1, T0 + count, {"ended": T0 + count, "bytes": {"up": 1, "down": 2}}))
    return count


def _tree(pid: int) -> list[int]:
    """
    A process and its descendants (Linux C{/proc/PID/task/*/children}).
    """
    found = [pid]
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    found += _tree(int(child))
    except OSError:
        pass
    return found


def _memory(pid: int) -> tuple[int, int]:
    """
    A process's resident memory and its proportional share of it (C{Rss}
    and C{Pss} of C{/proc/PID/smaps_rollup}: a page shared by N processes
    counts 1/N in each one's C{Pss}), in bytes.
    """
    rss = pss = 0
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Rss:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("Pss:"):
                    pss = int(line.split()[1]) * 1024
    except OSError:
        pass
    return rss, pss


def measure(code: str, logPath: str, outPath: str, path: str = REPO,
            entries: int | None = None) -> tuple[float, float, float, int, float]:
    """
    Run an exporter in a child process, with C{path} first on its
    C{sys.path}: (wall seconds, CPU seconds of it and its workers, peak
    memory of it and its workers together in MB (their C{Pss} summed),
    entries, and their peak C{Rss} summed in MB (pages they share counted
    in each)).
    """
    env = dict(os.environ, PYTHONPATH=path)
    start = time.perf_counter()
    argv = [sys.executable, "-c", code, logPath, outPath]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=env, cwd=path)
    assert proc.stdout is not None
    peakRss = peakPss = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peakRss, peakPss
        while not done.is_set():
            both = [_memory(p) for p in _tree(proc.pid)]
            peakRss = max(peakRss, sum(rss for rss, _ in both))
            peakPss = max(peakPss, sum(pss for _, pss in both))
            done.wait(SAMPLE_INTERVAL)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    output = proc.stdout.read()
    done.set()
    sampler.join()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"exporter failed with {proc.returncode}")
    count = int(output.strip() or 0) if entries is None else entries
    return (seconds, usage.ru_utime + usage.ru_stime, (peakPss or usage.ru_maxrss * 1024) / (1 << 20), count,
            max(peakRss / (1 << 20), usage.ru_maxrss / 1024))


def _digest(path: str) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            sha.update(block)
    return sha.hexdigest()


class Exporter:
    """
    One exporter under test and its rounds.
    """

    def __init__(self, name: str, code: str, path: str = REPO, netlog: bool = True, command: bool = False) -> None:
        self.name = name
        self.code = code
        self.path = path
        #: netlog's export (whose bytes every netlog export must share)
        self.netlog = netlog
        #: the command (which prints no count of entries)
        self.command = command
        self.rounds: list[tuple[float, float, float, int, float]] = []
        self.digest: str | None = None

    def run(self, logPath: str, entries: int | None = None, digest: bool = False) -> None:
        outPath = logPath + ".har"
        self.rounds.append(measure(self.code, logPath, outPath, self.path, entries if self.command else None))
        self.harSize = os.path.getsize(outPath)
        if digest and self.netlog and self.digest is None:
            self.digest = _digest(outPath)
        os.unlink(outPath)

    def median(self, i: int) -> float:
        return statistics.median(r[i] for r in self.rounds)

    def line(self) -> str:
        entries = self.rounds[0][3]
        wall, cpu, pss, rss = self.median(0), self.median(1), self.median(2), self.median(4)
        bestWall = min(r[0] for r in self.rounds)
        bestCpu = min(r[1] for r in self.rounds)
        return (
            f"  {self.name + ':':<22} {wall:7.2f} s wall {entries / wall:7.0f} entries/s [{entries / bestWall:6.0f}]"
            f" | {cpu:7.2f} s CPU {entries / cpu:7.0f} entries/CPU-s [{entries / bestCpu:6.0f}]"
            f" | peak memory {pss:4.0f} MB (RSS {rss:4.0f} MB)"
        )


def report(name: str, logPath: str, exporters: list[Exporter], rounds: int, entries: int,
           digest: bool = False, goal: bool = False) -> None:
    size = os.path.getsize(logPath) / (1 << 20)
    for r in range(rounds):
        turn = r % len(exporters)
        for exporter in exporters[turn:] + exporters[:turn]:
            exporter.run(logPath, entries, digest)
    assert len({r[3] for e in exporters for r in e.rounds}) == 1, "the exporters disagree on the entries"
    ours = exporters[0]
    print(f"{name}: {ours.rounds[0][3]} entries, log {size:.0f} MB, HAR {ours.harSize / (1 << 20):.0f} MB, "
          f"{rounds} interleaved rounds: medians [best]")
    for exporter in exporters:
        print(exporter.line())
    for other in exporters[1:]:
        print(f"  ratio to {other.name}: {other.median(1) / ours.median(1):.2f}x its speed (CPU), "
              f"{other.median(0) / ours.median(0):.2f}x (wall), {ours.median(2) / other.median(2):.3f}x its peak memory")
    if digest:
        digests = {e.name: e.digest for e in exporters if e.netlog}
        same = len(set(digests.values())) == 1
        print(f"  HAR bytes of {', '.join(digests)}: {'identical' if same else 'DIFFERENT'}"
              + ("" if same else f" {digests}"))
    if goal:
        wall, best, memory = ours.median(0), min(r[0] for r in ours.rounds), ours.median(2)
        verdict = "meets" if wall < GOAL_SECONDS and memory < GOAL_MB else "misses"
        print(f"  goal (issue 16): {ours.name} under {GOAL_SECONDS:.0f} s and {GOAL_MB} MB: median {wall:.2f} s "
              f"(best {best:.2f} s), {memory:.0f} MB: {verdict} it (wall time depends on what else runs)")
    for exporter in exporters:
        exporter.rounds = []
        exporter.digest = None


def checkout(rev: str, folder: str) -> str:
    """
    netlog as it was at git revision C{rev}, in a folder of its own.
    """
    path = os.path.join(folder, "at-" + rev.replace("/", "_"))
    os.makedirs(path)
    archive = subprocess.run(["git", "-C", REPO, "archive", rev, "netlog"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", path], input=archive.stdout, check=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--small", type=int, default=100_000,
                        help="exchanges in the small log, about 990 bytes each (default 100,000; 0: skip it)")
    parser.add_argument("--late", type=float, default=0.0,
                        help="share of the small log's exchanges logged after a later one started (default 0)")
    parser.add_argument("--large-mb", type=int, default=1024, help="size of the large log in MB (0: skip it)")
    parser.add_argument("--large-entries", type=int, default=10_000, help="exchanges in the large log")
    parser.add_argument("--no-baseline", action="store_true", help="skip the naive exporter")
    parser.add_argument("--no-serial", action="store_true", help="skip writeHar in one process")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of each export (default 3)")
    parser.add_argument("--against", metavar="REV",
                        help="also run `netlog har` (no flags) as it was at this git revision")
    parser.add_argument("--against-serial", action="store_true",
                        help="with --against, also run writeHar in one process as it was there")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="netlog-bench-har-")
    try:
        exporters = [Exporter("netlog har", COMMAND, command=True)]
        if not args.no_serial:
            exporters.append(Exporter("writeHar, 1 process", STREAMING))
        if args.against:
            before = checkout(args.against, folder)
            exporters.append(Exporter(f"netlog har at {args.against}", COMMAND, before, command=True))
            if args.against_serial:
                exporters.append(Exporter(f"writeHar at {args.against}", STREAMING, before))
        if not args.no_baseline:
            exporters.append(Exporter("naive (in memory)", NAIVE, netlog=False))
        if args.small:
            path = os.path.join(folder, "small.jsonl")
            count = writeSmall(path, args.small, args.late)
            report("small", path, exporters, args.rounds, count, digest=bool(args.against))
            os.unlink(path)
        if args.large_mb:
            path = os.path.join(folder, "large.jsonl")
            count = writeLarge(path, args.large_mb, args.large_entries)
            report("large", path, exporters, args.rounds, count, digest=bool(args.against), goal=True)
            os.unlink(path)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
