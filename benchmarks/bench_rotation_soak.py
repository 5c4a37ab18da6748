"""
The rotation soak: 20,000 requests through a supervised proxy closing a
segment every 1 MiB, while C{netlog read --follow} and an API poller read
along, with a C{SIGUSR1} to the supervisor after a third of them and a
C{SIGKILL} of the serving worker after two thirds; then the checks a user
would make. A check, not a timing: it prints what it found and exits 1 if
any check failed. It runs through the stand-in (C{netlog-standin}), then
through the site proxy (C{netlog-proxy} with one site, C{http://origin.test:PORT},
whose backend is the soak's origin), each in a folder of its own, unless
C{--proxy} names one.

    .venv/bin/python -m benchmarks.bench_rotation_soak                    # both, about 35 s each
    .venv/bin/python -m benchmarks.bench_rotation_soak --proxy site --requests 2000 --rotate-size 32KiB

Checked:

  - the series (every closed segment, then the live file) holds the lines
    1..N once each, in order;
  - the follower and the poller each saw 1..N once, in order, and no page
    said the log began again or lost lines;
  - every closed segment is compressed, and there are at least 10;
  - every exchange opened has an end line (those in flight at the kill:
    "the proxy restarted"), and every open line names the proxy asked for
    (C{"proxy": "standin"} or C{"site"});
  - each request C{/r/I} has an entry answered 200 in the HAR, two only
    when it was sent again after the kill (the end line is written before
    the answer's last bytes leave, so a kill between the two leaves a 200
    the client never got whole);
  - C{netlog har} of the series is byte for byte the HAR of the same lines
    in one file (no field depends on the file: the two exports agree
    exactly; a second run of the same traffic would differ in its times,
    client ports and connection ids, which is why the traffic is exported
    twice rather than sent twice).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from netlog.log.series import listing  # noqa: E402
from tests.chaos.burst import Origin  # noqa: E402
from tests.log.test_rotation import seriesLines  # noqa: E402
from tests.log.test_rotation_processes import Follower, Poller, ask  # noqa: E402
from tests.supervise.running import Twistd, waitFor  # noqa: E402
from tests.support import netlogArgv, sourceEnv  # noqa: E402

#: Seconds the checks wait for the readers and the compression at most.
SETTLE = 300.0

#: The proxies the soak runs through: C{--proxy}'s choices and their twistd plugins.
PLUGINS = {"standin": "netlog-standin", "site": "netlog-proxy"}


class Clients:
    """
    C{clients} threads sending requests C{/r/0} .. C{/r/(total-1)} through
    the proxy, each once answered; a request cut by the kill is sent again.
    """

    def __init__(self, port: int, originPort: int, total: int, clients: int) -> None:
        self.port, self.originPort, self.total = port, originPort, total
        self.done = 0
        self.retried: set[int] = set()
        #: requests whose answer came cut short (a 200 head, not all its body)
        self.cut: set[int] = set()
        self.failed: list[tuple[int, bytes]] = []
        self._next = itertools.count()
        self._lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, daemon=True) for _ in range(clients)]
        for thread in self.threads:
            thread.start()

    def _run(self) -> None:
        while True:
            with self._lock:
                index = next(self._next)
            if index >= self.total:
                return
            for attempt in range(20):
                try:
                    answer = ask(self.port, self.originPort, index)
                except OSError:
                    answer = b""
                # whole: a kill may cut an answer after its head
                if answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"\r\n\r\norigin /r/%d\n" % index):
                    break
                if answer.startswith(b"HTTP/1.1 200 "):
                    with self._lock:
                        self.cut.add(index)
                with self._lock:
                    self.retried.add(index)
                time.sleep(0.1)
            else:
                self.failed.append((index, answer[:200]))
            with self._lock:
                self.done += 1

    def join(self) -> None:
        for thread in self.threads:
            thread.join()


def siteArgs(folder: str, originPort: int) -> list[str]:
    """
    The site proxy's options for one site, C{http://origin.test:PORT}, whose
    backend is the soak's origin: every request goes the site's way (sent to
    its backend, kept whole), not a live host's.
    """
    sites = os.path.join(folder, "sites.toml")
    with open(sites, "w") as f:
        f.write(f'[[site]]\nname = "origin"\norigins = ["http://origin.test:{originPort}"]\n'
                f'backend = "http://127.0.0.1:{originPort}"\n')
    return ["--sites", sites, "--state", os.path.join(folder, "state")]


def soak(folder: str, requests: int, clients: int, rotateSize: str, proxy: str = "standin") -> list[tuple[str, bool, str]]:
    """
    Run the soak in C{folder} through C{proxy} (a key of L{PLUGINS}); each
    check's name, whether it held, and what was seen.
    """
    logs = os.path.join(folder, "logs")
    os.mkdir(logs, 0o755)
    log = os.path.join(logs, "network.jsonl")
    origin = Origin()
    twistd = Twistd(folder, PLUGINS[proxy], [
        "--log", log, "--listen", "tcp:0:interface=127.0.0.1",
        "--resolve", "origin.test=127.0.0.1", "--resolve-only",
        "--api", "tcp:0:interface=127.0.0.1", "--api-token-file", os.path.join(folder, "token"),
        "--rotate-size", rotateSize,
    ] + (siteArgs(folder, origin.port) if proxy == "site" else []))
    checks: list[tuple[str, bool, str]] = []

    def check(name: str, held: bool, seen: str) -> None:
        checks.append((name, held, seen))
        print(f"{'ok  ' if held else 'FAIL'} {name}: {seen}", flush=True)

    follower: Follower | None = None
    poller: Poller | None = None
    try:
        port = twistd.listenerPort("forward")
        poller = Poller()
        poller.port = twistd.apiPort()
        follower = Follower(log)
        began = time.monotonic()
        load = Clients(port, origin.port, requests, clients)
        waitFor(lambda: load.done >= requests // 3, "a third of the requests", SETTLE)
        os.kill(twistd.process.pid, signal.SIGUSR1)
        print(f"SIGUSR1 to the supervisor after {load.done} requests", flush=True)
        waitFor(lambda: load.done >= 2 * requests // 3, "two thirds of the requests", SETTLE)
        worker = twistd.waitServing(1)
        os.kill(worker, signal.SIGKILL)
        print(f"SIGKILL to worker {worker} after {load.done} requests", flush=True)
        twistd.waitServing(2)
        load.join()
        wall = time.monotonic() - began
        print(f"{requests} requests in {wall:.1f} s ({requests / wall:.0f}/s), "
              f"{len(load.retried)} sent again after the kill ({len(load.cut)} of them cut after a 200 head)", flush=True)
        check("every request answered 200, whole", not load.failed, f"{len(load.failed)} not: {load.failed[:3]}")

        lines = seriesLines(log)
        last = lines[-1]["n"]
        check("the series holds 1..N once, in order", [r["n"] for r in lines] == list(range(1, last + 1)),
              f"N = {last}")
        waitFor(lambda: follower.numbers[-1:] == [last] and poller.numbers[-1:] == [last], "the readers", SETTLE)
        for name, reader in (("netlog read --follow", follower), ("the API poller", poller)):
            check(f"{name} saw 1..N once, in order", reader.numbers == list(range(1, last + 1)),
                  f"{len(reader.numbers)} lines")
            flagged = [{k: v for k, v in page.items() if k != "lines"} for page in reader.pages
                       if page["begun_again"] or "removed_up_to" in page]
            check(f"{name} was told of no restart or removal", not flagged, str(flagged[:3]))
        waitFor(lambda: not listing(log).toCompress, "every closed segment compressed", SETTLE)
        found = listing(log)
        check("every closed segment compressed, at least 10",
              len(found.segments) >= 10 and all(s.compressed for s in found.segments),
              f"{len(found.segments)} segments")
        opened = {r["id"] for r in lines if r["type"] == "open"}
        endings = [r for r in lines if r["type"] == "end"]
        restarted = sum(1 for r in endings if (r.get("_failed") or {}).get("reason") == "the proxy restarted")
        check("every exchange opened has an end line", opened == {r["id"] for r in endings},
              f"{len(opened)} exchanges, {restarted} ended by the restart")
        writers = {r["proxy"] for r in lines if r["type"] == "open"}
        check(f"every exchange written by the {proxy} proxy", writers == {proxy}, f"open lines' proxy: {sorted(writers)}")

        whole = os.path.join(folder, "whole.jsonl")
        with open(whole, "wb") as f:
            f.write(b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines))
        hars = []
        for path in (log, whole):
            start = time.monotonic()
            done = subprocess.run(netlogArgv() + ["har", path, "--progress", "never"],
                                  capture_output=True, env=sourceEnv(), timeout=SETTLE)
            print(f"netlog har {os.path.basename(path)}: {time.monotonic() - start:.1f} s, "
                  f"{len(done.stdout) >> 20} MiB", flush=True)
            if done.returncode:
                check(f"netlog har {path}", False, done.stderr.decode(errors="replace")[-500:])
                return checks
            hars.append(done.stdout)
        check("netlog har of the series == netlog har of the same lines in one file", hars[0] == hars[1],
              f"{len(hars[0])} bytes")
        entries = json.loads(hars[0])["log"]["entries"]
        answered: dict[str, int] = {}
        others: dict[str, list[Any]] = {}
        for entry in entries:
            match = re.search(r"/r/(\d+)$", entry["request"]["url"])
            if match and entry["response"]["status"] == 200:
                answered[match.group(1)] = answered.get(match.group(1), 0) + 1
            elif match:
                others.setdefault(match.group(1), []).append(
                    (entry["response"]["status"], entry.get("_failed"), entry.get("_open")))
        unanswered = {i: others.get(i) for i in map(str, range(requests)) if i not in answered}
        twice = {int(i) for i, count in answered.items() if count > 1}
        check("each request has an entry answered 200; two only if sent again after the kill",
              set(answered) == {str(i) for i in range(requests)} and twice <= load.retried,
              f"{len(entries)} entries, {len(answered)} requests answered, {len(twice)} twice "
              f"(a 200 whose end line was written before the kill cut its last bytes)"
              + (f"; with no 200: {unanswered}" if unanswered else ""))
    finally:
        if follower is not None:
            follower.stop()
        if poller is not None:
            poller.stop()
        twistd.stop()
        origin.stop()
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_rotation_soak")
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--clients", type=int, default=8, help="requests in flight at once")
    parser.add_argument("--rotate-size", default="1MiB")
    parser.add_argument("--proxy", choices=[*PLUGINS, "both"], default="both",
                        help="the stand-in, the site proxy (one site whose backend is the origin), "
                             "or both one after the other (the default)")
    parser.add_argument("--keep", action="store_true", help="keep the folders (their paths are printed)")
    args = parser.parse_args(argv)
    failed: list[str] = []
    for proxy in PLUGINS if args.proxy == "both" else [args.proxy]:
        print(f"-- {PLUGINS[proxy]}", flush=True)
        folder = tempfile.mkdtemp(prefix=f"netlog-soak-{proxy}-")
        os.chmod(folder, 0o755)
        try:
            checks = soak(folder, args.requests, args.clients, args.rotate_size, proxy)
        finally:
            if args.keep:
                print(f"kept {folder}")
            else:
                shutil.rmtree(folder, ignore_errors=True)
        missed = [f"{proxy}: {name}" for name, held, _ in checks if not held] or ([] if checks else [f"{proxy}: no check ran"])
        failed += missed
        held = sum(1 for _, ok, _ in checks if ok)
        print(f"{PLUGINS[proxy]}: {held} of {len(checks)} checks held", flush=True)
    if failed:
        print(f"FAILED: {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
