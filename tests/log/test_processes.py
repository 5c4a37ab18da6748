"""
The LogWriter and the reader in real processes: a writer killed mid-stream
and started again, writes failing under a file size limit, a writer that
drops from root to nobody, and a reader polling while another process writes.
"""

from __future__ import annotations

import json
import os
import pwd
import select
import signal
import stat
import subprocess
import sys
import time
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import REASON_RESTARTED, REASON_STOPPED
from tests.support import sourceEnv

from .test_writer import publicTempDir

#: Seconds any child may take before the test gives up on it.
CHILD_TIMEOUT = 60

STREAM = """
import sys
from netlog.log.writer import LogWriter
writer = LogWriter(sys.argv[1])
writer.startService()
print("started", writer.nextNumber, flush=True)
held = []
for i in range(10**7):
    held.append(writer.open({"i": i, "pad": "x" * (i % 300)}))
    if len(held) > 3:
        writer.end(held.pop(0), {"i": i})
    if i == 300:
        print("streaming", flush=True)
"""

RESTART = """
import json, sys
from netlog.log.writer import LogWriter
writer = LogWriter(sys.argv[1])
writer.startService()
state = {"next": writer.nextNumber, "open": sorted(writer.openIds)}
state["new"] = writer.open({"after": "restart"})
writer.stopService()
print(json.dumps(state), flush=True)
"""

SIZE_LIMIT = """
import json, resource, sys
from twisted.internet import reactor
from twisted.logger import globalLogBeginner, textFileLogObserver
from netlog.log import writer as writerModule
globalLogBeginner.beginLoggingTo([textFileLogObserver(sys.stderr)], redirectStandardIO=False)
writerModule.RETRY_INTERVAL = 0.05
writer = writerModule.LogWriter(sys.argv[1], reactor=reactor)
writer.startService()
ids = [writer.open({"pad": "x" * 200}) for _ in range(40)]
first = {"ids": ids, "failed": writer.failedWrites, "held": writer.heldBytes}

def lift():
    first["failedBeforeLift"] = writer.failedWrites
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))

def finish():
    first["heldAfterLift"] = writer.heldBytes
    first["after"] = writer.open({"after": "lift"})
    writer.stopService()
    print(json.dumps(first), flush=True)
    reactor.stop()

reactor.callLater(0.3, lift)
reactor.callLater(0.6, finish)
reactor.run()
"""

DROP = """
import json, os, sys
from netlog.log.writer import LogWriter
uid, gid = int(sys.argv[2]), int(sys.argv[3])
writer = LogWriter(sys.argv[1], uid=uid, gid=gid)
writer.privilegedStartService()
os.setgroups([])
os.setgid(gid)
os.setuid(uid)
writer.startService()
exchange = writer.open({"as": os.getuid()})
writer.end(exchange, {})
writer.stopService()
print(json.dumps({"uid": os.getuid(), "exchange": exchange}), flush=True)
"""

ATTACK = """
import errno, json, os, sys
path = sys.argv[1]
folder = os.path.dirname(path)
# Become nobody first thing (this interpreter may live where nobody can't
# start it, so the drop is the child's own, before it touches anything).
os.setgroups([])
os.setgid(int(sys.argv[3]))
os.setuid(int(sys.argv[2]))
result = {"uid": os.getuid()}

def attempt(name, action):
    try:
        action()
        result[name] = "done"
    except OSError as e:
        result[name] = errno.errorcode[e.errno]

def readIt():
    with open(path, "rb") as f:
        result["lines"] = len(f.read().splitlines())

def appendIt():
    with open(path, "ab") as f:
        f.write(b'{"n":999}\\n')

def replaceIt():
    other = "/tmp/netlog-attack-%d" % os.getpid()
    with open(other, "wb") as f:
        f.write(b"forged\\n")
    try:
        os.rename(other, path)
    finally:
        if os.path.exists(other):
            os.unlink(other)

def newFileBeside():
    with open(os.path.join(folder, "forged"), "wb") as f:
        f.write(b"x")

attempt("read", readIt)
attempt("append", appendIt)
attempt("truncate", lambda: os.truncate(path, 0))
attempt("openTruncate", lambda: os.close(os.open(path, os.O_WRONLY | os.O_TRUNC)))
attempt("renameOver", replaceIt)
attempt("unlink", lambda: os.unlink(path))
attempt("createBeside", newFileBeside)
attempt("chmod", lambda: os.chmod(path, 0o666))
print(json.dumps(result), flush=True)
"""

WRITE_MANY = """
import sys, time
from netlog.log.writer import LogWriter
writer = LogWriter(sys.argv[1])
writer.startService()
exchanges = int(sys.argv[2])
for i in range(exchanges):
    big = "y" * (200_000 if i % 97 == 0 else i % 500)
    exchange = writer.open({"i": i, "pad": big})
    writer.end(exchange, {"i": i})
    if i % 50 == 0:
        time.sleep(0.001)
writer.stopService()
print("done", flush=True)
"""

POLL = """
import json, sys, time
from netlog.log.reader import LogReader
path, total, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
reader = LogReader(path)
seen = []
after = 0
deadline = time.monotonic() + 90
polls = 0
while time.monotonic() < deadline and (not seen or seen[-1] < total):
    try:
        page = reader.read(after, limit)
    except Exception as e:
        time.sleep(0.002)
        continue
    polls += 1
    if page.begunAgain:
        print(json.dumps({"begunAgain": True}), flush=True)
        sys.exit(1)
    for record in page.records():
        seen.append(record["n"])
    after = page.next
    if not page.lines:
        time.sleep(0.003)
print(json.dumps({"seen": seen, "polls": polls}), flush=True)
"""


def startChild(test: SynchronousTestCase, script: str, *args: str, **kw: Any) -> subprocess.Popen[bytes]:
    """
    Start a Python child running C{script} with this source tree; it is
    killed by PID at cleanup if still running.
    """
    child = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=sourceEnv({"PYTHONDONTWRITEBYTECODE": "1"}),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )

    def end() -> None:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        child.wait()
        child.stdout.close()  # type: ignore[union-attr]
        child.stderr.close()  # type: ignore[union-attr]

    test.addCleanup(end)
    return child


def runChild(test: SynchronousTestCase, script: str, *args: str, **kw: Any) -> tuple[Any, bytes]:
    child = startChild(test, script, *args, **kw)
    out, err = child.communicate(timeout=CHILD_TIMEOUT)
    test.assertEqual(child.returncode, 0, err.decode("utf-8", "replace"))
    return json.loads(out.splitlines()[-1]), err


_buffers: dict[int, bytearray] = {}


def readLine(child: subprocess.Popen[bytes], timeout: float = CHILD_TIMEOUT) -> bytes:
    """
    The child's next line of output, waiting at most C{timeout} seconds.
    """
    assert child.stdout is not None
    fd = child.stdout.fileno()
    buffer = _buffers.setdefault(child.pid, bytearray())
    deadline = time.monotonic() + timeout
    while b"\n" not in buffer:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError("the child said nothing in time")
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            raise AssertionError("the child ended its output")
        buffer += chunk
    idx = buffer.index(b"\n")
    line = bytes(buffer[: idx + 1])
    del buffer[: idx + 1]
    return line


def fileLines(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        return f.read().split(b"\n")


@pytest.mark.slow
class CrashTests(SynchronousTestCase):
    def test_killedMidStreamAndStartedAgain(self) -> None:
        """
        A writer killed with SIGKILL while streaming, started again: the
        numbers go on with no gap and no repeat, a cut last line is ended
        first, and every exchange the dead process left open is ended with
        "the proxy restarted".
        """
        path = os.path.join(publicTempDir(self), "log.jsonl")
        child = startChild(self, STREAM, path)
        self.assertEqual(readLine(child).split()[0], b"started")
        self.assertEqual(readLine(child).strip(), b"streaming")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(CHILD_TIMEOUT)
        before = fileLines(path)
        if before[-1] == b"":
            # The kill seldom lands inside a write; cut a line as it would.
            with open(path, "ab") as f:
                f.write(before[-2][: len(before[-2]) // 2])
            before = fileLines(path)
        cut = before[-1]
        whole = [json.loads(line) for line in before[:-1]]
        self.assertEqual([r["n"] for r in whole], list(range(1, len(whole) + 1)))
        left: dict[int, None] = {}
        for record in whole:
            if record["type"] == "open":
                left[record["id"]] = None
            else:
                left.pop(record["id"])
        self.assertTrue(left)

        state, _ = runChild(self, RESTART, path)
        self.assertEqual(state["next"], len(whole) + 1 + len(left))
        self.assertEqual(state["open"], [])
        after = fileLines(path)
        self.assertEqual(after[len(before) - 1], cut, "the cut line is ended as it was")
        self.assertEqual(after[-1], b"")
        added = [json.loads(line) for line in after[len(before) : -1]]
        self.assertEqual([r["n"] for r in added], list(range(len(whole) + 1, len(whole) + len(added) + 1)))
        restarted = [r for r in added if r.get("_failed", {}).get("reason") == REASON_RESTARTED]
        self.assertEqual([r["id"] for r in restarted], list(left))
        self.assertEqual([r["type"] for r in restarted], ["end"] * len(left))
        self.assertEqual(added[len(left)]["n"], state["new"])
        self.assertEqual(added[-1]["_failed"]["reason"], REASON_STOPPED)


@pytest.mark.slow
class SizeLimitTests(SynchronousTestCase):
    def test_writesFailingUnderSizeLimit(self) -> None:
        """
        Under RLIMIT_FSIZE, writes fail with "File too large": logged with
        the reason and counted, the writer goes on numbering, and once the
        limit is lifted every held line reaches the file, in order, whole.
        """
        import resource

        path = os.path.join(publicTempDir(self), "log.jsonl")

        def limit() -> None:
            soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            resource.setrlimit(resource.RLIMIT_FSIZE, (4096, hard))

        state, err = runChild(self, SIZE_LIMIT, path, preexec_fn=limit)
        self.assertEqual(state["ids"], list(range(1, 41)))
        self.assertGreater(state["failed"], 0)
        self.assertGreater(state["failedBeforeLift"], state["failed"], "retried on the timer")
        self.assertGreater(state["held"], 0)
        self.assertEqual(state["heldAfterLift"], 0)
        self.assertIn(b"could not write to its log", err)
        self.assertIn(os.strerror(27).encode(), err)  # EFBIG: "File too large"
        self.assertIn(b"writes its log", err)
        lines = [json.loads(line) for line in fileLines(path)[:-1]]
        self.assertEqual([r["n"] for r in lines], list(range(1, len(lines) + 1)))
        self.assertEqual(state["after"], 41)
        self.assertEqual(len(lines), 41 + 41)


@pytest.mark.slow
class DropPrivilegesTests(SynchronousTestCase):
    def setUp(self) -> None:
        if os.geteuid() != 0:
            raise self.failureException("this test drops from root to nobody and must run as root")
        self.nobody = pwd.getpwnam("nobody")

    def test_nobodyReadsButCannotChange(self) -> None:
        """
        Opened as root before dropping to nobody: the writer goes on writing
        as nobody; the file is root's and 0644; nobody can read it and can
        neither append to it, truncate it, rename over it, remove it, nor
        put a file beside it.
        """
        folder = os.path.join(publicTempDir(self), "logs")
        path = os.path.join(folder, "log.jsonl")
        state, _ = runChild(self, DROP, path, str(self.nobody.pw_uid), str(self.nobody.pw_gid))
        self.assertEqual(state["uid"], self.nobody.pw_uid)
        st = os.stat(path)
        self.assertEqual((st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)), (0, 0, 0o644))
        self.assertEqual(stat.S_IMODE(os.stat(folder).st_mode), 0o755)
        with open(path, "rb") as f:
            before = f.read()
        self.assertEqual(len(before.splitlines()), 2)

        result, _ = runChild(self, ATTACK, path, str(self.nobody.pw_uid), str(self.nobody.pw_gid))
        self.assertEqual(result["uid"], self.nobody.pw_uid)
        self.assertEqual((result["read"], result["lines"]), ("done", 2))
        for attempt in ("append", "truncate", "openTruncate", "renameOver", "unlink", "createBeside"):
            self.assertEqual(result[attempt], "EACCES", attempt)
        self.assertEqual(result["chmod"], "EPERM")
        with open(path, "rb") as f:
            self.assertEqual(f.read(), before)


@pytest.mark.slow
class ConcurrentReadTests(SynchronousTestCase):
    def test_pollingReaderSeesEveryLineOnce(self) -> None:
        """
        A reader polling every few milliseconds while another process writes
        thousands of lines (some of them 200 kB) sees every line exactly
        once, in order.
        """
        path = os.path.join(publicTempDir(self), "log.jsonl")
        exchanges = 2000
        with open(path, "wb"):
            pass
        poller = startChild(self, POLL, path, str(2 * exchanges), "8192")
        writer = startChild(self, WRITE_MANY, path, str(exchanges))
        writer.communicate(timeout=CHILD_TIMEOUT)
        self.assertEqual(writer.returncode, 0)
        out, err = poller.communicate(timeout=CHILD_TIMEOUT + 30)
        self.assertEqual(poller.returncode, 0, err)
        result = json.loads(out.splitlines()[-1])
        self.assertEqual(result["seen"], list(range(1, 2 * exchanges + 1)))
        self.assertGreater(result["polls"], 10)

    def test_followCommand(self) -> None:
        """
        netlog read --follow prints new lines as another process writes
        them, and stops cleanly when interrupted.
        """
        path = os.path.join(publicTempDir(self), "log.jsonl")
        with open(path, "wb"):
            pass
        follower = startChild(self, "from netlog.cli import main; raise SystemExit(main())", "read", path, "--follow")
        writer = startChild(self, WRITE_MANY, path, "100")
        writer.communicate(timeout=CHILD_TIMEOUT)
        seen: list[int] = []
        deadline = time.monotonic() + CHILD_TIMEOUT
        while len(seen) < 200 and time.monotonic() < deadline:
            seen.append(json.loads(readLine(follower))["n"])
        self.assertEqual(seen, list(range(1, 201)))
        os.kill(follower.pid, signal.SIGINT)
        self.assertEqual(follower.wait(CHILD_TIMEOUT), 0)
