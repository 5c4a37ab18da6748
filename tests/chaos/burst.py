"""
Chaos: a burst of requests through a supervised proxy while its worker is
killed with SIGKILL, and a poller reading the API meanwhile.

  python -m tests.chaos.burst [--proxy dummy|standin|proxy] [--requests 4096]
      [--concurrency 16] [--kills 1] [--no-standby] [--as-nobody] [--keep]

Then checks what a user would: every line whole JSON, numbers without gap or
repeat, every open ended, every request the origin received in the log, no
client refused, and the poller saw every line once, in order. It measures
the time from each kill to the next request served, and how many requests
waited in the backlog while no worker ran.

The stand-in (C{netlog-standin}) and the site proxy (C{netlog-proxy}) are
driven with plain-HTTP requests to a loopback origin named C{origin.test};
the dummy (C{netlog-dummy}, see L{tests.supervise.dummy}) with lines.
"""

from __future__ import annotations

import argparse
import grp
import http.server
import json
import os
import pwd
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from tests.supervise.running import Twistd, alive, interpreterFor, readLog, uidOf, waitFor

#: Seconds a client waits on one request before calling it failed.
REQUEST_TIMEOUT = 30.0
#: Seconds between the poller's requests.
POLL_INTERVAL = 0.02
#: Bytes per page the poller asks for.
POLL_LIMIT = 64 * 1024
#: Seconds the whole burst may take before it is called stuck.
BURST_TIMEOUT = 300.0


@dataclass
class Outcome:
    """
    One request as its client saw it.
    """

    index: int
    started: float = 0.0
    connected: float = 0.0
    answered: float = 0.0
    result: str = ""  # "ok", "refused", "cut", "error: ..."
    attempts: int = 0
    server: int | None = None  # the worker that answered (dummy only)


@dataclass
class Report:
    requests: int = 0
    concurrency: int = 0
    ok: int = 0
    refused: int = 0
    cut: int = 0
    errors: list[str] = field(default_factory=list)
    kills: list[dict[str, Any]] = field(default_factory=list)
    lines: int = 0
    problems: list[str] = field(default_factory=list)
    polled: int = 0
    seconds: float = 0.0
    cutAndAskedAgain: int = 0
    workerUids: list[int] = field(default_factory=list)
    endedAsRestarted: int = 0


class _Origin(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    received: list[str] = []
    lock = threading.Lock()

    def do_GET(self) -> None:
        with self.lock:
            self.received.append(self.path)
        body = b"origin " + self.path.encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


class Origin:
    """
    A loopback HTTP origin that remembers each path it was asked for.
    """

    def __init__(self) -> None:
        handler = type("Handler", (_Origin,), {"received": [], "lock": threading.Lock()})
        self.handler = handler
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        # A proxy killed mid-answer breaks the origin's pipe: expected here.
        self.server.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def received(self) -> list[str]:
        return list(self.handler.received)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _exchange(port: int, payload: bytes, outcome: Outcome) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT) as s:
        outcome.connected = time.monotonic()
        s.sendall(payload)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


class Burst:
    """
    One chaos run.
    """

    def __init__(
        self,
        proxy: str,
        requests: int,
        concurrency: int,
        kills: int,
        folder: str,
        standby: bool = True,
        asNobody: bool = False,
    ) -> None:
        self.standby = standby
        self.asNobody = asNobody
        self.proxy = proxy
        self.requests = requests
        self.concurrency = concurrency
        self.kills = kills
        self.folder = folder
        self.port = 0  # both bound on port 0, read from twistd's log
        self.apiPort = 0
        self.logPath = os.path.join(folder, "log", "network.jsonl")
        self.origin: Origin | None = None
        self.outcomes = [Outcome(i) for i in range(requests)]
        self._next = 0
        self._done = 0
        self._lock = threading.Lock()
        self.polled: list[dict[str, Any]] = []
        self.workerUids: set[int] = set()
        self.pollProblems: list[str] = []
        self._stopPolling = threading.Event()

    # -- the proxy ----------------------------------------------------------

    def start(self) -> Twistd:
        # a --log by hand is in a folder that exists (netlog makes only its defaults')
        os.makedirs(os.path.dirname(self.logPath), exist_ok=True)
        os.chmod(os.path.dirname(self.logPath), 0o755)
        common = ["--log", self.logPath, "--listen", "tcp:0:interface=127.0.0.1", "--api", "tcp:0",
                  "--api-token-file", os.path.join(self.folder, "api-token")] + ([] if self.standby else ["--no-standby"])
        twistdArgs: list[str] = []
        interpreter = None
        if self.asNobody:
            # As in production: twistd started as root drops to nobody; the
            # workers never hold root.
            uid, gid = pwd.getpwnam("nobody").pw_uid, grp.getgrnam("nogroup").gr_gid
            interpreter = interpreterFor(uid, gid)
            if interpreter is None:
                raise SystemExit("no Python with this tree's packages that nobody can run")
            os.chmod(self.folder, 0o755)
            twistdArgs = ["--uid", "nobody", "--gid", "nogroup"]
        if self.proxy == "dummy":
            twistd = Twistd(self.folder, "netlog-dummy", common, twistdArgs, interpreter)
        else:
            self.origin = Origin()
            extra = ["--resolve", "origin.test=127.0.0.1", "--resolve-only"]
            if self.proxy == "proxy":
                sites = os.path.join(self.folder, "sites.toml")
                with open(sites, "w") as f:
                    # No sites: origin.test is a live host, relayed and kept whole.
                    f.write('[live]\nhosts = ["origin.test"]\n')
                extra += ["--sites", sites, "--state", os.path.join(self.folder, "state")]
            twistd = Twistd(self.folder, f"netlog-{self.proxy}", common + extra, twistdArgs, interpreter)
        self.twistd = twistd
        self.port = twistd.listenerPort("answer" if self.proxy == "dummy" else "forward")
        self.apiPort = twistd.apiPort()
        twistd.waitServing(1)
        if self.standby:
            waitFor(lambda: twistd.standingByCount() >= 1, "a standby", BURST_TIMEOUT)
        return twistd

    def payload(self, index: int) -> bytes:
        if self.proxy == "dummy":
            return b"r%d\n" % index
        assert self.origin is not None
        host = f"origin.test:{self.origin.port}"
        return (
            f"GET http://{host}/r/{index} HTTP/1.1\r\nHost: {host}\r\n"
            f"Connection: close\r\n\r\n"
        ).encode()

    def answered(self, index: int, answer: bytes, outcome: Outcome) -> bool:
        if self.proxy == "dummy":
            match = re.fullmatch(rb"ok r%d (\d+)\n" % index, answer)
            if match:
                outcome.server = int(match.group(1))
            return match is not None
        return answer.startswith(b"HTTP/1.1 200 ") and answer.endswith(b"origin /r/%d\n" % index)

    # -- clients --------------------------------------------------------------

    def _client(self) -> None:
        while True:
            with self._lock:
                if self._next >= self.requests:
                    return
                index = self._next
                self._next += 1
            outcome = self.outcomes[index]
            outcome.started = time.monotonic()
            # A request cut by the kill (reset, or an answer cut short) is
            # asked again once, as a browser would; a refused connection is
            # never retried: it must not happen.
            for _ in range(2):
                outcome.attempts += 1
                try:
                    answer = _exchange(self.port, self.payload(index), outcome)
                except ConnectionRefusedError:
                    outcome.result = "refused"
                    break
                except (ConnectionResetError, BrokenPipeError):
                    outcome.result = "cut"
                    continue
                except OSError as e:
                    outcome.result = f"error: {e}"
                    break
                if self.answered(index, answer, outcome):
                    outcome.result = "ok"
                    outcome.answered = time.monotonic()
                    break
                outcome.result = "cut" if not answer else f"error: answer {answer[:80]!r}"
            with self._lock:
                self._done += 1

    # -- the poller -----------------------------------------------------------

    def _poll(self) -> None:
        cursor = 0
        while True:
            stopping = self._stopPolling.is_set()
            url = f"http://127.0.0.1:{self.apiPort}/network?after={cursor}&limit={POLL_LIMIT}"
            try:
                with urllib.request.urlopen(url, timeout=REQUEST_TIMEOUT) as response:
                    page = json.loads(response.read())
            except Exception as e:  # noqa: BLE001 - recorded, judged at the end
                self.pollProblems.append(f"poll failed: {e}")
                time.sleep(POLL_INTERVAL)
                if stopping:
                    return
                continue
            if page["begun_again"]:
                self.pollProblems.append(f"the log was begun again after {cursor}")
            for line in page["lines"]:
                if line["n"] != cursor + 1:
                    self.pollProblems.append(f"poller got {line['n']} after {cursor}")
                cursor = line["n"]
                self.polled.append(line)
            if stopping and not page["lines"]:
                return
            if not page["lines"]:
                time.sleep(POLL_INTERVAL)

    # -- the run --------------------------------------------------------------

    def run(self) -> Report:
        twistd = self.start()
        began = time.monotonic()
        poller = threading.Thread(target=self._poll, daemon=True)
        poller.start()
        clients = [threading.Thread(target=self._client, daemon=True) for _ in range(self.concurrency)]
        for client in clients:
            client.start()
        killed: list[dict[str, Any]] = []
        for k in range(self.kills):
            # Kill at evenly spread points of the burst.
            due = self.requests * (k + 1) // (self.kills + 1)
            waitFor(lambda: self._done >= due, f"{due} requests done", BURST_TIMEOUT)
            victim = twistd.waitServing(k + 1)
            self.workerUids.add(uidOf(victim))
            if self.standby:
                # Kill a worker in its steady state: with its standby ready.
                waitFor(lambda: twistd.standingByCount() >= k + 1, "a standby", BURST_TIMEOUT)
            at = time.monotonic()
            os.kill(victim, signal.SIGKILL)
            killed.append({"worker": victim, "at": at})
            self.killedAt = at
            waitFor(lambda: not alive(victim), "the worker's death")
            twistd.waitServing(k + 2)
        for client in clients:
            client.join(BURST_TIMEOUT)
        seconds = time.monotonic() - began
        # Let the poller catch up with the file, then stop it.
        total = len(readLog(self.logPath))
        waitFor(lambda: len(self.polled) >= total or self.pollProblems, "the poller to catch up", 30)
        self._stopPolling.set()
        poller.join(30)
        report = self.judge(killed)
        report.seconds = round(seconds, 3)
        return report

    def judge(self, killed: list[dict[str, Any]]) -> Report:
        report = Report(requests=self.requests, concurrency=self.concurrency)
        for outcome in self.outcomes:
            if outcome.result == "ok":
                report.ok += 1
            elif outcome.result == "refused":
                report.refused += 1
            elif outcome.result == "cut":
                report.cut += 1
            else:
                report.errors.append(f"request {outcome.index}: {outcome.result or 'never ended'}")
        problems = report.problems
        try:
            records = readLog(self.logPath)
        except (AssertionError, ValueError) as e:
            problems.append(f"the log is not whole JSON lines: {e}")
            records = []
        report.lines = len(records)
        numbers = [r["n"] for r in records]
        if numbers != list(range(1, len(numbers) + 1)):
            problems.append("the numbers have a gap or a repeat")
        opened = {r["id"] for r in records if r["type"] == "open"}
        ended = [r["id"] for r in records if r["type"] == "end"]
        if sorted(ended) != sorted(opened):
            problems.append(f"opens without an end: {sorted(opened - set(ended))[:10]}")
        if len(ended) != len(set(ended)):
            problems.append("an exchange ended twice")
        restarted = sum(1 for r in records if r.get("_failed", {}).get("reason") == "the proxy restarted")
        if self.origin is not None:
            with open(self.logPath, "rb") as f:
                logged = set(re.findall(rb"/r/(\d+)", f.read()))
            missing = [p for p in self.origin.received if p.split("/")[-1].encode() not in logged]
            if missing:
                problems.append(f"the origin received requests the log lacks: {missing[:10]}")
        report.polled = len(self.polled)
        if [line["n"] for line in self.polled] != numbers:
            problems.append(f"the poller saw {len(self.polled)} lines, the file has {len(numbers)}")
        elif [json.dumps(a, sort_keys=True) for a in self.polled] != [json.dumps(b, sort_keys=True) for b in records]:
            problems.append("the poller's lines differ from the file's")
        problems.extend(self.pollProblems)
        # Measurements, per kill.
        text = self.twistd.text()
        for kill in killed:
            at = kill["at"]
            after = [o for o in self.outcomes if o.result == "ok" and o.connected >= at]
            firstServed = min((o.answered for o in after), default=None)
            match = re.search(rf"serving again, ([0-9.]+) s after worker {kill['worker']} died", text)
            down = float(match.group(1)) if match else None
            readyAt = at + down if down is not None else firstServed
            waited = [o for o in after if readyAt is not None and o.connected <= readyAt]
            report.kills.append(
                {
                    "worker": kill["worker"],
                    "kill_to_next_served_s": round(firstServed - at, 3) if firstServed else None,
                    "supervisor_down_s": down,
                    "waited_in_backlog": len(waited),
                }
            )
        report.cutAndAskedAgain = sum(1 for o in self.outcomes if o.attempts > 1)
        report.workerUids = sorted(self.workerUids)
        report.endedAsRestarted = restarted
        return report

    def stop(self) -> None:
        if getattr(self, "twistd", None) is not None:
            self.twistd.stop()
        if self.origin is not None:
            self.origin.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos.burst", description=__doc__.split("\n\n")[0])
    parser.add_argument("--proxy", choices=["dummy", "standin", "proxy"], default="dummy")
    parser.add_argument("--requests", type=int, default=4096)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--kills", type=int, default=1)
    parser.add_argument("--no-standby", action="store_true", help="run the proxy with --no-standby")
    parser.add_argument("--as-nobody", action="store_true", help="run twistd as root with --uid nobody --gid nogroup")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder")
    args = parser.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="netlog-chaos-")
    burst = Burst(args.proxy, args.requests, args.concurrency, args.kills, folder, not args.no_standby, args.as_nobody)
    try:
        report = burst.run()
    finally:
        burst.stop()
    result = {k: v for k, v in report.__dict__.items()}
    result["errors"] = report.errors[:20]
    result["folder"] = folder
    print(json.dumps(result, indent=2))
    if not args.keep:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return 0 if not report.problems and not report.refused and not report.errors else 1


if __name__ == "__main__":
    sys.exit(main())
