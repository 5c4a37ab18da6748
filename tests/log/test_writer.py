"""
The LogWriter in this process: numbering, start-up recovery, the file's
safety checks, and writes that fail.
"""

from __future__ import annotations

import errno
import json
import grp
import os
import pwd
import stat
import tempfile
from typing import Any, cast

from twisted.internet.task import Clock
from twisted.logger import ILogObserver, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import REASON_LOG_FAILED, REASON_RESTARTED, REASON_STOPPED
from netlog.log import writer as writerModule
from netlog.log.logfile import UnsafeLogPath, openLogFile
from netlog.log.writer import LogWriter


def readLines(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [json.loads(line) for line in f.read().splitlines()]


def drainHeld(writer: LogWriter, clock: Any, readEnd: int, rounds: int) -> bytes:
    """
    Read a non-blocking pipe the writer writes to while it retries its held
    lines (the clock turned one retry interval a round, at most C{rounds}
    times); return all that was read.
    """
    received = b""
    for _ in range(rounds):
        try:
            received += os.read(readEnd, 1 << 20)
        except BlockingIOError:
            pass
        if not writer.heldBytes:
            break
        clock.advance(writerModule.RETRY_INTERVAL)
    try:
        received += os.read(readEnd, 1 << 20)
    except BlockingIOError:
        pass
    return received


def publicTempDir(test: SynchronousTestCase) -> str:
    """
    A fresh folder under /tmp that every user may enter (root's, 0755).
    """
    folder = tempfile.mkdtemp(prefix="netlog-test-")
    os.chmod(folder, 0o755)

    def remove() -> None:
        for root, dirs, files in os.walk(folder, topdown=False):
            for name in files:
                os.unlink(os.path.join(root, name))
            for name in dirs:
                path = os.path.join(root, name)
                if os.path.islink(path):
                    os.unlink(path)
                else:
                    os.rmdir(path)
        os.rmdir(folder)

    test.addCleanup(remove)
    return folder


class Umask:
    def __init__(self, mask: int) -> None:
        self.mask = mask

    def __enter__(self) -> None:
        self.saved = os.umask(self.mask)

    def __exit__(self, *exc: object) -> None:
        os.umask(self.saved)


class NumberingTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.path = os.path.join(publicTempDir(self), "log.jsonl")

    def startWriter(self, **kw: Any) -> LogWriter:
        writer = LogWriter(self.path, clock=lambda: 1000.0, **kw)
        writer.startService()
        self.addCleanup(self.stopIfRunning, writer)
        return writer

    def stopIfRunning(self, writer: LogWriter) -> None:
        if writer.running:
            writer.stopService()

    def test_numbersAndIds(self) -> None:
        """
        Lines are numbered 1, 2, 3…; an open line's id is its n, an end line
        names its open line's id; each is on the file when open/end returns.
        """
        writer = self.startWriter()
        first = writer.open({"proxy": "site"})
        second = writer.open({"proxy": "site"})
        self.assertEqual(len(readLines(self.path)), 2)
        writer.end(first, {"response": {"status": 200}})
        lines = readLines(self.path)
        self.assertEqual([(r["n"], r["type"], r["id"]) for r in lines], [(1, "open", 1), (2, "open", 2), (3, "end", 1)])
        self.assertEqual((first, second), (1, 2))
        self.assertEqual(writer.openIds, {2})
        self.assertEqual(lines[2]["open_from"], 2)

    def test_endTwiceOrUnknown(self) -> None:
        """
        Ending an exchange twice, an unknown id or 0 writes nothing.
        """
        writer = self.startWriter()
        exchangeId = writer.open({})
        writer.end(exchangeId, {})
        writer.end(exchangeId, {})
        writer.end(99, {})
        writer.end(0, {})
        self.assertEqual(len(readLines(self.path)), 2)

    def test_refuse(self) -> None:
        """
        A refusal is an open line and its end line at once.
        """
        writer = self.startWriter()
        exchangeId = writer.refuse({"request": {"method": "CONNECT"}}, {"_refused": {"reason": "no", "status": 403}})
        lines = readLines(self.path)
        self.assertEqual([(r["type"], r["id"]) for r in lines], [("open", exchangeId), ("end", exchangeId)])
        self.assertEqual(writer.openIds, set())

    def test_stopEndsOpenExchanges(self) -> None:
        """
        A clean stop ends every exchange still open with "the proxy stopped".
        """
        writer = self.startWriter()
        writer.open({})
        writer.open({})
        writer.stopService()
        lines = readLines(self.path)
        self.assertEqual([(r["type"], r["id"]) for r in lines[2:]], [("end", 1), ("end", 2)])
        self.assertEqual({r["_failed"]["reason"] for r in lines[2:]}, {REASON_STOPPED})

    def test_restartNumbersOn(self) -> None:
        """
        A writer started on an existing log numbers on, ends a cut last line
        and ends the exchanges left open with "the proxy restarted".
        """
        writer = self.startWriter()
        writer.open({})
        writer.end(writer.open({}), {})
        # A dead process: its fd closed without a stop, a line cut short.
        fd = writer._fd
        assert fd is not None
        os.write(fd, b'{"n":4,"type":"op')
        os.close(fd)
        writer._fd = None
        writer.running = False
        again = self.startWriter()
        with open(self.path, "rb") as f:
            raw = f.read().split(b"\n")
        self.assertEqual(raw[3], b'{"n":4,"type":"op')
        lines = [json.loads(line) for line in raw if line.startswith(b"{") and line.endswith(b"}")]
        self.assertEqual([r["n"] for r in lines], [1, 2, 3, 4])
        self.assertEqual((lines[3]["type"], lines[3]["id"], lines[3]["_failed"]["reason"]), ("end", 1, REASON_RESTARTED))
        self.assertEqual(again.open({}), 5)

    def test_notesLeaveTheExchangeOpen(self) -> None:
        """
        Head and message lines are numbered like every line, name their
        exchange, leave it open, and aren't written for an exchange that
        isn't open.
        """
        writer = self.startWriter()
        exchangeId = writer.open({})
        self.assertEqual(writer.head(exchangeId, {"response": {"status": 101}}), 2)
        self.assertEqual(writer.message(exchangeId, {"direction": "up", "opcode": 1, "size": 2, "data": "hi"}), 3)
        self.assertEqual(writer.openIds, {exchangeId})
        writer.end(exchangeId, {})
        self.assertEqual(writer.message(exchangeId, {"direction": "up"}), 0)
        self.assertEqual(writer.message(99, {}), 0)
        lines = readLines(self.path)
        self.assertEqual([(r["n"], r["type"], r["id"]) for r in lines],
                         [(1, "open", 1), (2, "head", 1), (3, "message", 1), (4, "end", 1)])
        self.assertEqual(lines[2]["open_from"], 1)

    def test_restartAfterMessageLine(self) -> None:
        """
        A process that died after a message line: the next numbers on after
        it and ends the WebSocket it left open.
        """
        writer = self.startWriter()
        exchangeId = writer.open({})
        writer.message(exchangeId, {"direction": "down", "opcode": 1, "size": 1, "data": "x"})
        fd = writer._fd
        assert fd is not None
        os.close(fd)
        writer._fd = None
        writer.running = False
        again = self.startWriter()
        lines = readLines(self.path)
        self.assertEqual([(r["n"], r["type"], r["id"]) for r in lines],
                         [(1, "open", 1), (2, "message", 1), (3, "end", 1)])
        self.assertEqual(lines[2]["_failed"]["reason"], REASON_RESTARTED)
        self.assertEqual(again.open({}), 4)

    def test_unencodableFields(self) -> None:
        """
        Fields JSON can't hold still give a numbered line, saying so.
        """
        writer = self.startWriter()
        writer.open({"bad": float("nan")})
        writer.open({"bad": object()})
        lines = readLines(self.path)
        self.assertEqual([r["n"] for r in lines], [1, 2])
        self.assertIn("_unencodable", lines[0])
        self.assertIn("_unencodable", lines[1])
        self.flushLoggedErrors()

    def test_lineBeforeStart(self) -> None:
        """
        A line handed over before the writer started (so before it knows
        where the file's numbers are) is dropped and counted, never given a
        number the file may hold.
        """
        writer = LogWriter(self.path)
        self.assertEqual(writer.open({}), 0)
        self.assertEqual(writer.droppedLines, 1)
        self.flushLoggedErrors()

    def test_disabled(self) -> None:
        """
        With no path nothing is written and open returns 0.
        """
        writer = LogWriter(None)
        writer.startService()
        self.assertFalse(writer.enabled)
        self.assertEqual(writer.open({}), 0)
        writer.stopService()


class FileSafetyTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = publicTempDir(self)
        self.path = os.path.join(self.folder, "log.jsonl")

    def test_mode0644UnderUmask077(self) -> None:
        """
        Under umask 077 the file is still 0644, and folders made for it 0755,
        each of them.
        """
        path = os.path.join(self.folder, "a", "b", "log.jsonl")
        with Umask(0o077):
            os.close(openLogFile(path))
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o644)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.folder, "a")).st_mode), 0o755)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(self.folder, "a", "b")).st_mode), 0o755)

    def test_existingFileMadeSafe(self) -> None:
        """
        An existing 0600 or 0666 file becomes 0644 and, as root, root's.
        """
        with open(self.path, "wb"):
            pass
        os.chmod(self.path, 0o666)
        nobody = pwd.getpwnam("nobody")
        if os.geteuid() == 0:
            os.chown(self.path, nobody.pw_uid, nobody.pw_gid)
        os.close(openLogFile(self.path))
        st = os.stat(self.path)
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o644)
        if os.geteuid() == 0:
            self.assertEqual((st.st_uid, st.st_gid), (0, 0))

    def test_symlinkRefused(self) -> None:
        """
        A symbolic link at the path is refused, saying so; its target is
        untouched (not created, not written, mode unchanged).
        """
        target = os.path.join(self.folder, "target")
        with open(target, "wb") as f:
            f.write(b"precious\n")
        os.chmod(target, 0o600)
        os.symlink(target, self.path)
        e = self.assertRaises(UnsafeLogPath, openLogFile, self.path)
        self.assertIn("symbolic link", str(e))
        self.assertIn(self.path, str(e))
        with open(target, "rb") as f:
            self.assertEqual(f.read(), b"precious\n")
        self.assertEqual(stat.S_IMODE(os.stat(target).st_mode), 0o600)

    def test_danglingSymlinkRefused(self) -> None:
        """
        A symbolic link to nothing is refused and nothing is created.
        """
        target = os.path.join(self.folder, "nothing")
        os.symlink(target, self.path)
        self.assertRaises(UnsafeLogPath, openLogFile, self.path)
        self.assertFalse(os.path.exists(target))

    def test_fifoRefused(self) -> None:
        """
        A FIFO at the path is refused at once (no hang waiting for a reader).
        """
        os.mkfifo(self.path)
        e = self.assertRaises(UnsafeLogPath, openLogFile, self.path)
        self.assertIn("not a regular file", str(e))

    def test_folderRefused(self) -> None:
        """
        A folder at the path is refused.
        """
        os.mkdir(self.path)
        self.assertRaises((UnsafeLogPath, IsADirectoryError), openLogFile, self.path)

    def test_hardLinkRefused(self) -> None:
        """
        A file with a second name is refused, and its mode is left alone.
        """
        other = os.path.join(self.folder, "other")
        with open(other, "wb"):
            pass
        os.chmod(other, 0o600)
        os.link(other, self.path)
        e = self.assertRaises(UnsafeLogPath, openLogFile, self.path)
        self.assertIn("hard link", str(e))
        self.assertEqual(stat.S_IMODE(os.stat(other).st_mode), 0o600)

    def test_folderWritableByDropUserRefused(self) -> None:
        """
        A folder the unprivileged user can write is refused, with a message
        naming the folder and what to do.
        """
        nobody = pwd.getpwnam("nobody")
        folder = os.path.join(self.folder, "logs")
        os.mkdir(folder)
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        e = self.assertRaises(UnsafeLogPath, openLogFile, os.path.join(folder, "log"), nobody.pw_uid, nobody.pw_gid)
        self.assertIn(folder, str(e))
        self.assertIn("chmod 755", str(e))
        os.chown(folder, 0, 0)
        os.chmod(folder, 0o777)
        e = self.assertRaises(UnsafeLogPath, openLogFile, os.path.join(folder, "log"), nobody.pw_uid, nobody.pw_gid)
        self.assertIn(folder, str(e))
        os.chmod(folder, 0o755)
        os.close(openLogFile(os.path.join(folder, "log"), nobody.pw_uid, nobody.pw_gid))

    def test_folderAboveWritableRefused(self) -> None:
        """
        A folder above the log's that the unprivileged user can write (and
        so move the log's folder) is refused, naming it; a sticky one (like
        /tmp) is fine when the folder below isn't that user's.
        """
        nobody = pwd.getpwnam("nobody")
        above = os.path.join(self.folder, "above")
        os.mkdir(above)
        os.chmod(above, 0o777)
        os.mkdir(os.path.join(above, "logs"))
        path = os.path.join(above, "logs", "log")
        e = self.assertRaises(UnsafeLogPath, openLogFile, path, nobody.pw_uid, nobody.pw_gid)
        self.assertIn(above, str(e))
        os.chmod(above, 0o1777)
        os.close(openLogFile(path, nobody.pw_uid, nobody.pw_gid))

    def requireRoot(self) -> None:
        if os.geteuid() != 0:
            raise self.failureException("this test gives folders to other users and must run as root")

    def test_worldWritableFolderRefusedWithoutUid(self) -> None:
        """
        Without a user to drop to, a log folder every user can write is
        refused, naming it, and so is one above it; nothing is created.
        """
        folder = os.path.join(self.folder, "logs")
        os.mkdir(folder)
        os.chmod(folder, 0o777)
        path = os.path.join(folder, "log.jsonl")
        e = self.assertRaises(UnsafeLogPath, openLogFile, path)
        self.assertIn(f"the folder {folder}, the log's folder", str(e))
        self.assertIn("every user", str(e))
        self.assertIn(f"chmod go-w {folder}", str(e))
        self.assertFalse(os.path.exists(path))
        os.chmod(folder, 0o755)
        os.chmod(self.folder, 0o777)
        self.addCleanup(os.chmod, self.folder, 0o755)
        e = self.assertRaises(UnsafeLogPath, openLogFile, path)
        self.assertIn(f"the folder {self.folder}, above the log's folder {folder}", str(e))
        self.assertFalse(os.path.exists(path))

    def test_folderOfAnotherUserRefused(self) -> None:
        """
        A folder on the way owned by another user (who may chmod it) is
        refused, even not writable.
        """
        self.requireRoot()
        nobody = pwd.getpwnam("nobody")
        folder = os.path.join(self.folder, "logs")
        os.mkdir(folder)
        os.chmod(folder, 0o555)
        os.chown(folder, nobody.pw_uid, nobody.pw_gid)
        e = self.assertRaises(UnsafeLogPath, openLogFile, os.path.join(folder, "log.jsonl"))
        self.assertIn("its owner nobody", str(e))

    def test_groupWritable(self) -> None:
        """
        A group-writable folder is refused when the group has a member other
        than root and the user running netlog, and accepted when it has not.
        """
        self.requireRoot()
        nogroup = pwd.getpwnam("nobody").pw_gid
        folder = os.path.join(self.folder, "logs")
        os.mkdir(folder)
        os.chmod(folder, 0o775)
        os.chown(folder, 0, nogroup)
        e = self.assertRaises(UnsafeLogPath, openLogFile, os.path.join(folder, "log.jsonl"))
        self.assertIn("the group " + grp.getgrgid(nogroup).gr_name, str(e))
        os.chown(folder, 0, 0)
        self.assertEqual({u.pw_uid for u in pwd.getpwall() if u.pw_gid == 0}, {0}, "group root must hold root alone")
        os.close(openLogFile(os.path.join(folder, "log.jsonl")))

    def test_stickyFolder(self) -> None:
        """
        A sticky folder every user can write (as /tmp) is fine when the log
        file in it is ours; a file of another user's there is refused and
        left alone, as is a folder of another user's below a sticky one.
        """
        self.requireRoot()
        nobody = pwd.getpwnam("nobody")
        folder = os.path.join(self.folder, "shared")
        os.mkdir(folder)
        os.chmod(folder, 0o1777)
        os.close(openLogFile(os.path.join(folder, "ours.jsonl")))
        theirs = os.path.join(folder, "theirs.jsonl")
        with open(theirs, "wb"):
            pass
        os.chown(theirs, nobody.pw_uid, nobody.pw_gid)
        os.chmod(theirs, 0o600)
        e = self.assertRaises(UnsafeLogPath, openLogFile, theirs)
        self.assertIn("belongs to nobody", str(e))
        st = os.stat(theirs)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (nobody.pw_uid, 0o600))
        below = os.path.join(folder, "below")
        os.mkdir(below)
        os.chown(below, nobody.pw_uid, nobody.pw_gid)
        e = self.assertRaises(UnsafeLogPath, openLogFile, os.path.join(below, "log.jsonl"))
        self.assertIn(below, str(e))

    def test_startServiceRefuses(self) -> None:
        """
        The service refuses to start on an unsafe path.
        """
        os.symlink("/etc/passwd", self.path)
        self.assertRaises(UnsafeLogPath, LogWriter(self.path).startService)


class FailingWriteTests(SynchronousTestCase):
    """
    Writes that fail: /dev/full says "no space left"; putting a real file
    under the same descriptor (dup2) is space coming back.
    """

    def setUp(self) -> None:
        self.folder = publicTempDir(self)
        self.path = os.path.join(self.folder, "log.jsonl")
        self.clock = Clock()
        self.events: list[dict[str, Any]] = []
        observer = cast(ILogObserver, self.events.append)
        globalLogPublisher.addObserver(observer)
        self.addCleanup(globalLogPublisher.removeObserver, observer)
        self.fd = os.open("/dev/full", os.O_WRONLY | os.O_APPEND)
        self.writer = LogWriter(None, fd=self.fd, reactor=self.clock, clock=lambda: 1.0)
        self.writer.startService()
        self.addCleanup(self.stopIfRunning)

    def stopIfRunning(self) -> None:
        if self.writer.running:
            self.writer.stopService()

    def spaceComesBack(self) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, self.fd)
        os.close(fd)

    def errors(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("reason") and "could not write" in e.get("log_format", "")]

    def test_failedWriteLoggedCountedAndRetried(self) -> None:
        """
        A write that fails is logged with its reason and counted; the writer
        goes on numbering, and writes every held line, in order, once it can.
        """
        first = self.writer.open({})
        self.writer.end(first, {})
        self.assertEqual(self.writer.failedWrites, 1)
        [event] = self.errors()
        self.assertEqual(event["errno"], errno.ENOSPC)
        self.assertEqual(event["reason"], os.strerror(errno.ENOSPC))
        self.assertEqual(self.writer.open({}), 3)
        self.clock.advance(writerModule.RETRY_INTERVAL)
        self.assertEqual(self.writer.failedWrites, 2)
        self.assertEqual(len(self.errors()), 1, "the same reason is logged once")
        self.spaceComesBack()
        self.clock.advance(writerModule.RETRY_INTERVAL)
        self.assertEqual([r["n"] for r in readLines(self.path)], [1, 2, 3])
        self.assertEqual(self.writer.heldBytes, 0)
        self.assertFalse(self.clock.getDelayedCalls())
        self.writer.open({})
        self.assertEqual([r["n"] for r in readLines(self.path)], [1, 2, 3, 4])
        self.assertTrue(any("writes its log" in e.get("log_format", "") for e in self.events))

    def test_pastTheBoundDroppedWithoutNumbers(self) -> None:
        """
        Past the bound of held bytes, lines are dropped without a number
        (open returns 0); an exchange whose end line was dropped is ended
        "the log could not be written" once writing works again, and the
        file's numbers have no gap.
        """
        self.patch(writerModule, "MAX_PENDING_BYTES", 300)
        opened = [self.writer.open({"pad": "x" * 50}) for _ in range(8)]
        self.assertIn(0, opened)
        kept = [i for i in opened if i]
        self.assertEqual(kept, list(range(1, len(kept) + 1)))
        self.writer.end(kept[0], {})
        self.assertGreater(self.writer.droppedLines, 0)
        self.spaceComesBack()
        self.clock.advance(writerModule.RETRY_INTERVAL)
        lines = readLines(self.path)
        self.assertEqual([r["n"] for r in lines], list(range(1, len(lines) + 1)))
        [lost] = [r for r in lines if r["type"] == "end"]
        self.assertEqual((lost["id"], lost["_failed"]["reason"]), (kept[0], REASON_LOG_FAILED))

    def test_stopWhileFailing(self) -> None:
        """
        Stopping while writes fail loses the held lines, says so, and
        leaves nothing pending.
        """
        self.writer.open({})
        self.writer.stopService()
        self.assertFalse(self.clock.getDelayedCalls())
        self.assertTrue(any("lost" in e.get("log_format", "") for e in self.events))


class PartialWriteTests(SynchronousTestCase):
    """
    Writes cut short: a non-blocking pipe takes part of a line, then nothing
    until it is read.
    """

    def test_cutWritesResumeWhereTheyStopped(self) -> None:
        """
        Lines bigger than what the pipe takes arrive whole and in order, each
        with its newline, once the reader drains the pipe: a cut write is
        resumed at the first byte not written.
        """
        readEnd, writeEnd = os.pipe()
        self.addCleanup(os.close, readEnd)
        os.set_blocking(writeEnd, False)
        os.set_blocking(readEnd, False)
        clock = Clock()
        writer = LogWriter(None, fd=writeEnd, reactor=clock, clock=lambda: 1.0)
        writer.startService()
        self.addCleanup(lambda: writer.stopService() if writer.running else None)
        pads = ["a" * 40000, "b" * 50000, "c" * 70000, "d"]
        opened = [writer.open({"pad": pad}) for pad in pads]
        self.assertEqual(opened, [1, 2, 3, 4])
        self.assertGreater(writer.failedWrites, 0)
        self.assertGreater(writer.heldBytes, 0)
        received = drainHeld(writer, clock, readEnd, 100)
        self.assertEqual(writer.heldBytes, 0)
        lines = received.split(b"\n")
        self.assertEqual(lines[-1], b"")
        records = [json.loads(line) for line in lines[:-1]]
        self.assertEqual([(r["n"], r["pad"]) for r in records], list(zip(opened, pads)))


class CrashCycleTests(SynchronousTestCase):
    """
    Many lives of a writer on one file, each cut short at a random byte, as
    a crash mid-write leaves it.
    """

    def check(self, path: str) -> None:
        """
        Whole lines numbered 1, 2, 3… with no gap or repeat, the only other
        lines being cut ones; every exchange opened is ended exactly once.
        """
        with open(path, "rb") as f:
            raw = f.read()
        self.assertTrue(raw.endswith(b"\n"))
        records = []
        for text in raw.split(b"\n")[:-1]:
            try:
                records.append(json.loads(text))
            except ValueError:
                continue
        self.assertEqual([r["n"] for r in records], list(range(1, len(records) + 1)))
        opened = [r["id"] for r in records if r["type"] == "open"]
        ended = [r["id"] for r in records if r["type"] == "end"]
        self.assertEqual(sorted(ended), sorted(opened))

    def live(self, path: str, steps: list[int]) -> None:
        writer = LogWriter(path, clock=lambda: 1.0)
        writer.startService()
        for step in steps:
            if step % 3 == 0 and writer.openIds:
                writer.end(sorted(writer.openIds)[step % len(writer.openIds)], {"s": {"t": step}})
            else:
                writer.open({"server": {"host": "a.test", "port": step}})
        fd = writer._fd
        assert fd is not None
        os.close(fd)
        writer._fd = None

    def test_cutAfterInnerBrace(self) -> None:
        """
        A line cut just after an inner C{}} (so it ends like a whole line)
        is still known for a cut line: its number is given again, not
        skipped, and its exchange isn't taken for open.
        """
        path = os.path.join(publicTempDir(self), "log.jsonl")
        self.live(path, [1, 3, 1])
        with open(path, "rb") as f:
            raw = f.read()
        self.assertTrue(raw.endswith(b'"port":1}}\n'))
        os.truncate(path, len(raw) - 2)
        # The next life numbers 3 again and leaves that exchange open.
        self.live(path, [1])
        writer = LogWriter(path)
        writer.startService()
        writer.stopService()
        self.check(path)
        with open(path, "rb") as f:
            self.assertEqual(len(f.read().splitlines()), 5)

    def test_randomCuts(self) -> None:
        """
        Twenty lives, each cut at a random byte of what it wrote: the log
        stays whole by the rules above.
        """
        import random

        rng = random.Random(1234)
        for _ in range(10):
            path = os.path.join(publicTempDir(self), "log.jsonl")
            for _ in range(20):
                before = os.path.getsize(path) if os.path.exists(path) else 0
                self.live(path, [rng.randrange(100) for _ in range(rng.randrange(1, 12))])
                after = os.path.getsize(path)
                os.truncate(path, rng.randrange(before, after + 1))
            writer = LogWriter(path)
            writer.startService()
            writer.stopService()
            self.check(path)
