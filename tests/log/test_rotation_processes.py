"""
Segments with real processes: a stand-in run by twistd rotating its log by
size and on SIGUSR1, killed with SIGKILL and started again, while
C{netlog read --follow} and a poller of C{GET /network} read along.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
import urllib.request
from typing import Any, cast

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.segments import partialName, segmentName
from netlog.log.reader import LogReader, LogUnreadable
from netlog.log.series import listing, segmentPath, tidy
from tests.chaos.burst import Origin
from tests.supervise.running import Twistd, alive, waitFor
from tests.support import netlogArgv, sourceEnv

from .test_processes import STREAM, readLine, startChild
from .test_rotation import WAIT, readAll, seriesLines
from .test_writer import publicTempDir

#: Requests sent in all; the kill comes after two thirds of them.
REQUESTS = 240


class Follower:
    """
    C{netlog read LOG --follow --json}, its pages gathered by a thread.
    """

    def __init__(self, log: str) -> None:
        self.process = subprocess.Popen(
            netlogArgv() + ["read", log, "--follow", "--json", "--limit", "8000"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=sourceEnv(),
        )
        self.numbers: list[int] = []
        self.pages: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._gather, daemon=True)
        self.thread.start()

    def _gather(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            page = json.loads(line)
            self.pages.append(page)
            self.numbers.extend(record["n"] for record in page["lines"])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(WAIT)
        self.thread.join(WAIT)


class Along:
    """
    A thread reading the log along, page after page, from line 1: what it
    saw, and what the pages said.
    """

    def __init__(self) -> None:
        self.numbers: list[int] = []
        self.pages: list[dict[str, Any]] = []
        self.removed: list[tuple[int, int]] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def page(self, cursor: int) -> dict[str, Any] | None:
        """
        The page after C{cursor} as the API serves it; None to try again.
        """
        raise NotImplementedError()

    def _run(self) -> None:
        cursor = 0
        while not self._stop.is_set():
            page = self.page(cursor)
            if page is None:
                time.sleep(0.02)
                continue
            self.pages.append(page)
            if "removed_up_to" in page:
                self.removed.append((cursor, page["removed_up_to"]))
            self.numbers.extend(record["n"] for record in page["lines"])
            cursor = page["next"]
            if not page["lines"]:
                time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(WAIT)


class Poller(Along):
    """
    Polls C{GET /network?after=N} on whichever API port the proxy has now.
    """

    port: int | None = None

    def page(self, cursor: int) -> dict[str, Any] | None:
        if self.port is None:
            return None
        try:
            url = f"http://127.0.0.1:{self.port}/network?after={cursor}&limit=8000"
            with urllib.request.urlopen(url, timeout=10) as answer:
                return cast(dict[str, Any], json.loads(answer.read()))
        except OSError:
            return None


class ReaderThread(Along):
    """
    A L{LogReader} following the log in this process.
    """

    def __init__(self, log: str) -> None:
        self.reader = LogReader(log)
        super().__init__()

    def page(self, cursor: int) -> dict[str, Any] | None:
        try:
            return cast(dict[str, Any], json.loads(self.reader.read(cursor, 16000).envelope()))
        except LogUnreadable:
            # Renamed away by logrotate, until netlog opens the next.
            return None


def ask(port: int, originPort: int, index: int) -> bytes:
    host = f"origin.test:{originPort}"
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(f"GET http://{host}/r/{index} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


class _ProxyLog(SynchronousTestCase):
    """
    A loopback origin, and stand-ins run by twistd writing one log.
    """

    def setUp(self) -> None:
        self.folder = publicTempDir(self)
        logs = os.path.join(self.folder, "logs")
        os.mkdir(logs, 0o755)
        self.log = os.path.join(logs, "network.jsonl")
        self.origin = Origin()
        self.addCleanup(self.origin.stop)

    def start(self, run: int, extra: list[str], supervised: bool = False) -> Twistd:
        folder = os.path.join(self.folder, f"run{run}")
        os.mkdir(folder)
        twistd = Twistd(folder, "netlog-standin", [
            *([] if supervised else ["--no-supervise"]), "--log", self.log, "--listen", "tcp:0:interface=127.0.0.1",
            "--resolve", "origin.test=127.0.0.1", "--resolve-only", *extra,
        ])
        self.addCleanup(twistd.stop)
        return twistd


@pytest.mark.slow
class RotatingProxyTests(_ProxyLog):
    def startRotating(self, run: int, supervised: bool) -> Twistd:
        return self.start(run, [
            "--api", "tcp:0:interface=127.0.0.1", "--api-token-file", os.path.join(self.folder, "token"),
            "--rotate-size", "24KiB",
        ], supervised)

    def rotateOverApi(self, apiPort: int | None, supervised: bool) -> None:
        """
        C{netlog rotate} closes a segment, given the token; without it,
        nothing changes and it says why.
        """
        api = ["--api", f"http://127.0.0.1:{apiPort}"]
        before = len(listing(self.log).segments)
        refused = subprocess.run(netlogArgv() + ["rotate", *api, "--token", "wrong"],
                                 capture_output=True, env=sourceEnv(), timeout=WAIT)
        self.assertEqual(refused.returncode, 1)
        self.assertIn(b"netlog rotate: ", refused.stderr)
        self.assertEqual(len(listing(self.log).segments), before)
        done = subprocess.run(netlogArgv() + ["rotate", *api, "--token-file", os.path.join(self.folder, "token")],
                              capture_output=True, env=sourceEnv(), timeout=WAIT)
        self.assertEqual(done.returncode, 0, done.stderr)
        if supervised:
            # The supervisor hands it on to its worker.
            self.assertEqual(json.loads(done.stdout), {"logs": [], "forwarded": True})
        else:
            self.assertEqual([log["log"] for log in json.loads(done.stdout)["logs"]], [self.log])
        waitFor(lambda: len(listing(self.log).segments) == before + 1, "a rotation by netlog rotate")
        # The Python client's rotate() does the same.
        from netlog.client import Netlog

        client = Netlog(f"http://127.0.0.1:{apiPort}", token_file=os.path.join(self.folder, "token"))
        answer = client.rotate()
        if supervised:
            self.assertEqual(answer, {"logs": [], "forwarded": True})
        else:
            self.assertEqual([log["log"] for log in answer["logs"]], [self.log])

    def test_killAndSignal(self) -> None:
        """
        Through a stand-in closing a segment every 24 KiB and on SIGUSR1,
        killed with SIGKILL and started again: C{netlog read --follow} and
        an API poller each see every line once, in order, with no gap and no
        page saying the log began again (C{netlog rotate} closing one more
        segment along the way); every closed segment ends up compressed,
        and the numbering goes on across the restart.
        """
        self.exercise(supervised=False)

    def test_supervised(self) -> None:
        """
        The same through a supervised stand-in: SIGUSR1 to the supervisor
        and C{netlog rotate} are handed on to the worker, whose SIGKILL the
        next worker (a standby handed the log before the rotations) takes
        over from without a gap.
        """
        self.exercise(supervised=True)

    def exercise(self, supervised: bool) -> None:
        twistd = self.startRotating(1, supervised)
        port = twistd.listenerPort("forward")
        poller = Poller()
        poller.port = twistd.apiPort()
        self.addCleanup(poller.stop)
        follower = Follower(self.log)
        self.addCleanup(follower.stop)
        for index in range(REQUESTS):
            if index == REQUESTS // 3:
                before = len(listing(self.log).segments)
                os.kill(twistd.process.pid, signal.SIGUSR1)
                waitFor(lambda: len(listing(self.log).segments) == before + 1, "a rotation on SIGUSR1")
            if index == 2 * REQUESTS // 3 and supervised:
                pid = twistd.waitServing(1)
                os.kill(pid, signal.SIGKILL)
                twistd.waitServing(2)
            elif index == 2 * REQUESTS // 3:
                pid = twistd.process.pid
                os.kill(pid, signal.SIGKILL)
                twistd.process.wait(WAIT)
                self.assertFalse(alive(pid))
                twistd = self.startRotating(2, supervised)
                port = twistd.listenerPort("forward")
                poller.port = twistd.apiPort()
            if index == 5 * REQUESTS // 6:
                self.rotateOverApi(poller.port, supervised)
            answer = ask(port, self.origin.port, index)
            self.assertTrue(answer.startswith(b"HTTP/1.1 200 "), answer[:200])
        lines = seriesLines(self.log, killed=True)
        last = lines[-1]["n"]
        self.assertEqual([r["n"] for r in lines], list(range(1, last + 1)))
        self.assertGreaterEqual(sum(1 for r in lines if r["type"] == "open"), REQUESTS)
        waitFor(lambda: follower.numbers[-1:] == [last] and poller.numbers[-1:] == [last], "the readers")
        self.assertEqual(follower.numbers, list(range(1, last + 1)))
        self.assertEqual(poller.numbers, list(range(1, last + 1)))
        for page in follower.pages + poller.pages:
            self.assertFalse(page["begun_again"])
            self.assertNotIn("removed_up_to", page)
        waitFor(lambda: not listing(self.log).toCompress, "every closed segment compressed")
        found = listing(self.log)
        self.assertGreaterEqual(len(found.segments), 10)
        self.assertTrue(all(s.compressed for s in found.segments))
        self.assertHarOfSeries(lines)

    def assertHarOfSeries(self, lines: list[dict[str, Any]]) -> None:
        """
        C{netlog har} of the series is the HAR of the same lines in one
        file: every exchange of every segment, in order.
        """
        whole = os.path.join(self.folder, "whole.jsonl")
        with open(whole, "wb") as f:
            f.write(b"".join(json.dumps(line, separators=(",", ":")).encode() + b"\n" for line in lines))
        hars = []
        for log in (self.log, whole):
            done = subprocess.run(netlogArgv() + ["har", log, "--progress", "never"],
                                  capture_output=True, env=sourceEnv(), timeout=WAIT)
            self.assertEqual(done.returncode, 0, done.stderr + b"\n" + folderReport(self.folder).encode())
            hars.append(json.loads(done.stdout))
        self.assertEqual(hars[0], hars[1])
        self.assertEqual(len(hars[0]["log"]["entries"]), sum(1 for line in lines if line["type"] == "open"))


def folderReport(folder: str) -> str:
    """
    What a failed read of a series found in its folder: each file's name,
    size, mode time and first bytes (a compressed segment starts with
    zstd's magic, 28 b5 2f fd).
    """
    rows = []
    for name in sorted(os.listdir(folder)):
        full = os.path.join(folder, name)
        try:
            stat = os.stat(full)
            with open(full, "rb") as f:
                start = f.read(8)
        except OSError as e:
            rows.append(f"{name}: {e}")
            continue
        rows.append(f"{name}: {stat.st_size} bytes, mtime {stat.st_mtime:.3f}, starts {start.hex(' ')}")
    return "\n".join(rows)


class Load:
    """
    Requests through the proxy, one after another, until stopped.
    """

    def __init__(self, port: int, originPort: int) -> None:
        self.port, self.originPort = port, originPort
        self.answered = 0
        self.failures: list[bytes] = []
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        for index in range(20000):
            if self._stop.is_set():
                return
            answer = ask(self.port, self.originPort, index)
            if answer.startswith(b"HTTP/1.1 200 "):
                self.answered += 1
            else:
                self.failures.append(answer[:200])

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(WAIT)


def numbersIn(path: str) -> list[int]:
    with open(path, "rb") as f:
        return [json.loads(line)["n"] for line in f.read().splitlines()]


@pytest.mark.slow
class LogrotateTests(_ProxyLog):
    def setUp(self) -> None:
        if not shutil.which("logrotate"):
            raise AssertionError("logrotate is not installed (.ci/install.d/40-logrotate.sh installs it)")
        super().setUp()

    def logrotate(self, stanza: str) -> None:
        conf = os.path.join(self.folder, "logrotate.conf")
        with open(conf, "w") as f:
            f.write(f"{self.log} {{\n{stanza}\n}}\n")
        os.chmod(conf, 0o644)
        subprocess.run(["logrotate", "-f", "-s", os.path.join(self.folder, "logrotate.state"), conf],
                       check=True, timeout=WAIT)

    def test_logrotate(self) -> None:
        """
        Debian's logrotate on a live stand-in under load, first with
        copytruncate, then renaming the log and sending SIGUSR1 in
        postrotate: neither loses a line (logrotate's copy and the live
        file hold every line once, the lines written between its copy and
        its truncate written again by netlog), the numbering goes on
        without a repeat, the rename leaves the series whole for readers,
        and a reader following along sees every line of the series once, in
        order, told of those only logrotate's copy holds that it had not
        read yet.
        """
        twistd = self.start(1, [])
        load = Load(twistd.listenerPort("forward"), self.origin.port)
        self.addCleanup(load.stop)
        reader = ReaderThread(self.log)
        self.addCleanup(reader.stop)
        waitFor(lambda: load.answered >= 100, "100 answers")
        self.logrotate("    copytruncate\n    rotate 5\n    nocompress")
        waitFor(lambda: load.answered >= 300, "300 answers")
        pid = twistd.process.pid
        self.logrotate(f"    rotate 5\n    nocompress\n    nocreate\n    postrotate\n        kill -USR1 {pid}\n"
                       f"    endscript")
        waitFor(lambda: load.answered >= 500, "500 answers")
        load.stop()
        self.assertEqual(load.failures, [])
        twistd.stop()
        copied = numbersIn(self.log + ".2")
        # netlog noticed the cut and found logrotate's copy (then .1).
        said = twistd.text()
        self.assertIn(f"netlog's log {self.log} was cut under it (copytruncate); its copy {self.log}.1 "
                      f"ends at line {copied[-1]}", said)
        renamed = numbersIn(self.log + ".1")
        series = [r["n"] for r in seriesLines(self.log)]
        self.assertEqual(copied[0], 1)
        self.assertEqual(copied, list(range(1, copied[-1] + 1)))
        # The rename loses nothing: the renamed file is a segment of the
        # series too, and the series goes on from it without a gap.
        self.assertEqual(series[: len(renamed)], renamed)
        self.assertEqual(series, list(range(series[0], series[-1] + 1)))
        # copytruncate loses nothing: the series goes on from the copy's
        # last line.
        self.assertEqual(series[0], copied[-1] + 1)
        self.assertGreaterEqual(len(listing(self.log).segments), 1)
        waitFor(lambda: reader.numbers[-1:] == series[-1:], "the reader to reach the end")
        reader.stop()
        self.assertEqual([(i, [r["n"] for r in page["lines"]][:3], page.get("removed_up_to"))
                          for i, page in enumerate(reader.pages) if page["begun_again"]], [])
        self.assertEqual([n for n in reader.numbers if n >= series[0]], series)
        self.assertEqual(reader.numbers, sorted(set(reader.numbers)))
        # A line the reader had not read when the copy was cut away is in
        # logrotate's copy alone (not in netlog's series): the reader was
        # told of it, and it is no line written after the copy.
        for n in range(1, series[0]):
            if n not in reader.numbers:
                self.assertTrue(any(cursor < n <= upTo for cursor, upTo in reader.removed), (n, reader.removed))
        self.assertTrue(all(upTo <= copied[-1] for _, upTo in reader.removed), (reader.removed, copied[-1]))


@pytest.mark.slow
class SessionRetentionTests(_ProxyLog):
    def test_inProcess(self) -> None:
        """
        With C{--session-retention}, a deleted session's log is kept for
        that long and then removed; the main log stays, and a live
        session's log is never removed.
        """
        self.deletedSessionRemoved(supervised=False)

    def test_supervised(self) -> None:
        """
        The same under the supervisor, which holds the sessions' logs.
        """
        self.deletedSessionRemoved(supervised=True)

    def deletedSessionRemoved(self, supervised: bool) -> None:
        from netlog.client import Netlog

        twistd = self.start(1, [
            "--api", "tcp:0:interface=127.0.0.1", "--api-token-file", os.path.join(self.folder, "token"),
            "--session-retention", "2s",
        ], supervised)
        client = Netlog(f"http://127.0.0.1:{twistd.apiPort()}", token_file=os.path.join(self.folder, "token"))
        gone = client.create_session("gone")
        kept = client.create_session("kept")
        for session in (gone, kept):
            answer = ask(session.info["port"], self.origin.port, 1)
            self.assertTrue(answer.startswith(b"HTTP/1.1 200 "), answer[:200])
        logs = {name: session.info["log"] for name, session in (("gone", gone), ("kept", kept))}
        # the retention is counted from the moment the proxy deleted it,
        # before its answer reached the client
        deletedBy = time.monotonic()
        client.delete_session("gone")
        self.assertTrue(os.path.exists(logs["gone"]))
        waitFor(lambda: not os.path.exists(logs["gone"]), "the deleted session's log to be removed")
        self.assertGreaterEqual(time.monotonic() - deletedBy, 1.5)
        # the proxy says so just after it removes each file
        waitFor(lambda: "the log of the deleted session gone (--session-retention)" in twistd.text(),
                "the proxy to say it removed the deleted session's log")
        time.sleep(2.5)
        self.assertTrue(os.path.exists(logs["kept"]))
        self.assertTrue(os.path.exists(self.log))


#: test_processes' streaming writer, closing a segment every argv[2] bytes.
ROTATING_STREAM = STREAM.replace(
    "writer = LogWriter(sys.argv[1])",
    "from netlog.core.segments import Rotation\n"
    "writer = LogWriter(sys.argv[1], rotation=Rotation(size=int(sys.argv[2])))",
)
assert ROTATING_STREAM != STREAM


@pytest.mark.slow
class KilledWhileRotatingTests(SynchronousTestCase):
    def test_killedAtAnyPoint(self) -> None:
        """
        A writer closing a segment every 16 KiB and compressing them,
        killed with SIGKILL again and again at whatever point it is (in a
        write, a rename, a compression) and started again: the series holds
        every number from 1 once, in order (a line a kill cut short stays,
        ended, and its number is given again); each segment is named after
        its first line; a last start finishes every compression.
        """
        path = os.path.join(publicTempDir(self), "network.jsonl")
        starts = []
        for round in range(8):
            child = startChild(self, ROTATING_STREAM, path, str(16 * 1024))
            starts.append(int(readLine(child).split()[1]))
            self.assertEqual(readLine(child), b"streaming\n")
            time.sleep(0.05 + 0.02 * round)
            os.kill(child.pid, signal.SIGKILL)
            child.wait(WAIT)
        final = startChild(self, ROTATING_STREAM, path, str(16 * 1024))
        readLine(final)
        readLine(final)
        os.kill(final.pid, signal.SIGTERM)
        final.wait(WAIT)
        tidy(path, None, None, 0.0)
        lines = seriesLines(path, killed=True)
        numbers = [r["n"] for r in lines]
        self.assertEqual(numbers, list(range(1, len(numbers) + 1)))
        self.assertEqual(readAll(LogReader(path), 0, 1 << 20)[0], numbers)
        self.assertEqual(starts, sorted(starts))
        found = listing(path)
        self.assertGreater(len(found.segments), 20)
        self.assertTrue(all(s.compressed for s in found.segments))
        self.assertEqual(found.leftovers, ())
        self.assertEqual([n for n in os.listdir(os.path.dirname(path)) if n.endswith(".tmp")], [])
        for segment in found.segments:
            self.assertIn(segment.first, numbers)
        # Every exchange left open by a kill was ended when the writer
        # started again, in whichever segment it opened.
        ended = {r["id"] for r in lines if r["type"] == "end"}
        opened = [r["n"] for r in lines if r["type"] == "open"]
        self.assertEqual([n for n in opened[:-10] if n not in ended], [])


#: A child that compresses the log argv[1]'s oldest closed segment.
COMPRESSING = """
import sys
from netlog.log.series import compressSegment, listing
segment = listing(sys.argv[1]).segments[0]
print("compressing", flush=True)
compressSegment(sys.argv[1], segment)
print("done", flush=True)
"""

#: A child that only lives (a process other than ours whose PID is known).
LIVING = "import time; print('living', flush=True); time.sleep(120)"

#: Bytes of the closed segment killed while being compressed: about a
#: second of zstandard's work, so that the kill lands in it.
BIG_SEGMENT = 64 << 20


def writeBigSegment(path: str, size: int) -> int:
    """
    Write a closed segment (uncompressed) of about C{size} bytes of log
    lines from line 1 beside the empty live log C{path}; its last line.
    """
    pad = os.urandom(1 << 19).hex()
    lines = []
    total = n = 0
    while total < size:
        n += 1
        start = (n * 97) % (len(pad) - 100)
        line = b'{"n":%d,"type":"open","id":%d,"url":"http://a.test/%s"}\n' % (n, n, pad[start:start + 100].encode())
        lines.append(line)
        total += len(line)
    with open(os.path.join(os.path.dirname(path), segmentName(os.path.basename(path), 1)), "wb") as f:
        f.write(b"".join(lines))
    open(path, "wb").close()
    return n


@pytest.mark.slow
class KilledWhileCompressingTests(SynchronousTestCase):
    def test_partialOfTheDeadOnly(self) -> None:
        """
        A process killed with SIGKILL while it compresses a large segment
        leaves its partial copy (named with its PID); the listing calls it
        a leftover and the next pass removes it and compresses the segment
        whole. A partial named after a process that still lives is
        another's compression at work: it is never removed. One named
        after this process, which is compressing nothing, is stale: it
        goes.
        """
        path = os.path.join(publicTempDir(self), "network.jsonl")
        last = writeBigSegment(path, BIG_SEGMENT)
        plain = segmentName("network.jsonl", 1)
        living = startChild(self, LIVING)
        self.assertEqual(readLine(living), b"living\n")
        theirs = segmentPath(path, partialName(plain, living.pid))
        ours = segmentPath(path, partialName(plain, os.getpid()))
        for where in (theirs, ours):
            with open(where, "wb") as f:
                f.write(b"\x28\xb5\x2f\xfd half")

        child = startChild(self, COMPRESSING, path)
        self.assertEqual(readLine(child), b"compressing\n")
        killed = segmentPath(path, partialName(plain, child.pid))
        deadline = time.monotonic() + WAIT
        while not (os.path.exists(killed) and os.path.getsize(killed) > 0):
            self.assertIsNone(child.poll(), "the compression ended before the kill")
            self.assertLess(time.monotonic(), deadline, "no partial copy appeared")
            time.sleep(0.005)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(WAIT)
        self.assertEqual(child.returncode, -signal.SIGKILL)
        self.assertTrue(os.path.exists(killed))
        self.assertTrue(os.path.exists(segmentPath(path, plain)))

        found = listing(path)
        self.assertEqual(sorted(found.leftovers), sorted([os.path.basename(killed), os.path.basename(ours)]))
        tidy(path, None, None, 0.0)
        self.assertEqual(
            sorted(os.listdir(os.path.dirname(path))),
            sorted(["network.jsonl", plain + ".zst", os.path.basename(theirs)]),
        )
        self.assertEqual([r["n"] for r in seriesLines(path)], list(range(1, last + 1)))
        # once that process is gone, its partial goes with the next pass
        os.kill(living.pid, signal.SIGKILL)
        living.wait(WAIT)
        tidy(path, None, None, 0.0)
        self.assertEqual(sorted(os.listdir(os.path.dirname(path))), sorted(["network.jsonl", plain + ".zst"]))
