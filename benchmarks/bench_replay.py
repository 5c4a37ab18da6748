"""
Benchmark replay: the site proxy answering from a recording against the same
proxy answering from its backend, in the same interleaved rounds; and how
long a large log takes to index, and what it holds.

    .venv/bin/python -m benchmarks.bench_replay --only "keep-alive small" --only "HTTPS through" --rounds 5
    .venv/bin/python -m benchmarks.bench_replay --index 1000 8000   # MB, answer bytes

The replaying proxy's recording is made first, by a site proxy kept with
C{--keep-bodies all} fetching each scenario's URL once (a repeat gets the
last recorded answer). C{--index MB [BYTES]} writes a log of that many
megabytes of exchanges (answers of BYTES, 200 by default) (the proxy's own record builders and line encoder) and
times L{netlog.proxy.replay.Replay} indexing it, with the peak RSS of the
process that did it.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from benchmarks.bench_site import SiteTarget, siteArgv
from benchmarks.harness import HOST, Environment, ProcessTarget, Target, freePort, sourceEnv, stopProcess, waitListening
from benchmarks.runner import main

#: The URLs the scenarios fetch, recorded once each: plain, and in a tunnel.
PLAIN_PATHS = ("/small", "/gzip-json")
TUNNELLED_PATHS = ("/small",)
#: Seconds a recording fetch may take.
FETCH_TIMEOUT = 10.0


def _fetch(sock: socket.socket | ssl.SSLSocket, target: str, authority: str) -> None:
    sock.sendall(f"GET {target} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        if not piece:
            raise SystemExit(f"the recording proxy closed the connection: {data!r}")
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        piece = sock.recv(65536)
        if not piece:
            raise SystemExit("the recording proxy closed the connection in an answer")
        body += piece


def record(env: Environment) -> str:
    """
    Fetch each scenario's URL once through a site proxy keeping every body;
    return its log.
    """
    port = freePort()
    argv = [("site-record.jsonl" if a.endswith("site.jsonl") else a) for a in siteArgv(env, port)]
    argv = [a.replace("site-state", "site-record-state") for a in argv] + ["--keep-bodies", "all"]
    process = subprocess.Popen(argv, env=sourceEnv(), cwd=env.directory, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        waitListening(port, process, "site-record")
        with socket.create_connection(("127.0.0.1", port), timeout=FETCH_TIMEOUT) as sock:
            for path in PLAIN_PATHS:
                _fetch(sock, f"http://{HOST}:{env.port}{path}", f"{HOST}:{env.port}")
        with socket.create_connection(("127.0.0.1", port), timeout=FETCH_TIMEOUT) as sock:
            sock.sendall(f"CONNECT {HOST}:{env.tlsPort} HTTP/1.1\r\nHost: {HOST}:{env.tlsPort}\r\n\r\n".encode())
            answer = b""
            while b"\r\n\r\n" not in answer:
                answer += sock.recv(1)
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            with context.wrap_socket(sock, server_hostname=HOST) as tls:
                for path in TUNNELLED_PATHS:
                    _fetch(tls, path, f"{HOST}:{env.tlsPort}")
        time.sleep(0.5)  # the end lines
    finally:
        stopProcess(process)
    return os.path.join(env.directory, "site-record.jsonl")


@dataclass
class ReplayTarget(SiteTarget):
    """
    The site proxy answering from a recording it makes first.
    """

    def start(self, env: Environment) -> None:
        recording = record(env)
        base = self.argv

        def replaying(env: Environment, port: int) -> list[str]:
            return base(env, port) + ["--replay", recording, "--keep-bodies", "all"]

        self.argv = replaying
        SiteTarget.start(self, env)


def replayArgv(env: Environment, port: int) -> list[str]:
    return [a.replace("site.jsonl", "site-replay.jsonl").replace("site-state", "site-replay-state")
            .replace("site-twistd", "site-replay-twistd") for a in siteArgv(env, port)]


def indexBenchmark(megabytes: int, bodySize: int = 200) -> str:
    """
    Write a log of C{megabytes} MB of exchanges whose answers are
    C{bodySize} bytes, then index it as C{--replay} does, in a child
    process; report its time and peak RSS.
    """
    from tests.proxy.recordings import Exchange, lines

    folder = tempfile.mkdtemp(prefix="netlog-replay-index-")
    path = os.path.join(folder, "big.jsonl")
    chunk = lines([Exchange("GET", f"http://shop.test/item/{i}?page={i % 7}", body=b"x" * bodySize)
                   for i in range(1000)])
    written = 0
    with open(path, "wb") as f:
        n = 0
        while written < megabytes * 1000 * 1000:
            # Renumber each thousand exchanges so the log's numbers run on.
            f.write(_renumbered(chunk, n))
            written += len(chunk)
            n += 2000
    code = (
        "import sys, time\n"
        "def hwm():\n"
        "    return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
        "from netlog.core.replay import MatchRules\n"
        "from netlog.proxy.replay import Replay\n"
        "import netlog.har.export\n"
        "before = hwm()\n"
        "start = time.process_time(); wall = time.monotonic()\n"
        f"replay = Replay({path!r}, MatchRules())\n"
        "print(len(replay.index), time.process_time() - start, time.monotonic() - wall,\n"
        "      hwm(), before)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=sourceEnv(), capture_output=True, check=True)
    entries, cpu, wall, peak, importOnly_ = done.stdout.split()
    os.remove(path)
    os.rmdir(folder)
    importOnly = int(importOnly_)
    return (f"Indexing a {written / 1e6:.0f} MB log of {int(entries):,} exchanges: {float(cpu):.2f} s CPU, "
            f"{float(wall):.2f} s wall; peak RSS {int(peak) / 1024:.1f} MiB "
            f"({(int(peak) - importOnly) / 1024:.1f} MiB over the imports' {importOnly / 1024:.1f} MiB).")


def _renumbered(chunk: bytes, offset: int) -> bytes:
    import re

    return re.sub(rb'^\{"n":(\d+),"type":"(\w+)","id":(\d+),"open_from":(\d+)',
                  lambda m: b'{"n":%d,"type":"%s","id":%d,"open_from":%d' % (
                      int(m.group(1)) + offset, m.group(2), int(m.group(3)) + offset, int(m.group(4)) + offset),
                  chunk, flags=re.M)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--index"]:
        print(indexBenchmark(int(sys.argv[2]), *(int(a) for a in sys.argv[3:4])))
        sys.exit(0)
    proxies: list[Target] = [
        SiteTarget("site", argv=siteArgv),
        ReplayTarget("site-replay", argv=replayArgv),
    ]
    main(proxies, sys.argv[1:] + ["--no-squid"], title="replay against the backend")
