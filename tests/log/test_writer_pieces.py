"""
The LogWriter writing lines with spliced values (L{AsciiText}, as the site
proxy hands it kept bodies): the file gets the same bytes as for the plain
line, each line in one append, also when writes fail, are cut short, or
lines are held past what one C{writev} takes.
"""

from __future__ import annotations

import base64
import os
from typing import Any

from twisted.internet.task import Clock
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.capture import BodyCapture
from netlog.core.logline import END, OPEN, AsciiText, encodeLine
from netlog.log import writer as writerModule
from netlog.log.writer import LogWriter

from .test_writer import drainHeld, publicTempDir, readLines


def bodyFields(body: bytes, spliced: bool) -> dict[str, Any]:
    """
    End fields with C{body} kept, as an L{AsciiText} over a capture's
    memory map (C{spliced}) or as plain text.
    """
    capture = BodyCapture(len(body), keep=True, hashAll=False)
    for at in range(0, len(body), 65536):
        capture.feed(body[at:at + 65536])
    record = capture.record(splice=spliced)
    return {"request_body": record, "bytes": {"up": len(body), "down": 0}, "v": "\udcff\u00e9"}


class Recorder:
    """
    Wraps C{os.write} and C{os.writev} to keep what each call was given.
    """

    def __init__(self, test: SynchronousTestCase) -> None:
        self.calls: list[bytes] = []
        realWrite, realWritev = os.write, os.writev

        def write(fd: int, data: Any) -> int:
            self.calls.append(bytes(data))
            return realWrite(fd, data)

        def writev(fd: int, buffers: Any) -> int:
            self.calls.append(b"".join(bytes(b) for b in buffers))
            return realWritev(fd, buffers)

        test.patch(writerModule.os, "write", write)
        test.patch(writerModule.os, "writev", writev)


class SplicedWriteTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.path = os.path.join(publicTempDir(self), "log.jsonl")

    def startWriter(self, path: str | None = None, **kw: Any) -> LogWriter:
        writer = LogWriter(path if path is not None else self.path, clock=lambda: 7.25, **kw)
        writer.startService()
        self.addCleanup(lambda: writer.stopService() if writer.running else None)
        return writer

    def test_sameBytesAsPlain(self) -> None:
        """
        A 1 MB body spliced into its end line gives the file exactly the
        bytes of the plain line, written in one C{writev}.
        """
        body = bytes(range(256)) * 4000
        recorder = Recorder(self)
        writer = self.startWriter()
        exchangeId = writer.open({"proxy": "site"})
        writer.end(exchangeId, bodyFields(body, spliced=True))
        writer.stopService()
        with open(self.path, "rb") as f:
            raw = f.read()
        self.assertEqual(
            raw,
            encodeLine(1, OPEN, 1, 1, 7.25, {"proxy": "site"})
            + encodeLine(2, END, 1, 3, 7.25, bodyFields(body, spliced=False)),
        )
        self.assertEqual(len(recorder.calls), 2, "one write per line")
        self.assertEqual(base64.b64decode(readLines(self.path)[1]["request_body"]["data"]), body)

    def test_heldWhileFailing(self) -> None:
        """
        Spliced lines held while the file takes nothing (/dev/full) count
        their whole size as held, and are written whole and in order, the
        same bytes as plain lines, once the file takes them again.
        """
        clock = Clock()
        fd = os.open("/dev/full", os.O_WRONLY | os.O_APPEND)
        writer = LogWriter(None, fd=fd, reactor=clock, clock=lambda: 7.25)
        writer.startService()
        self.addCleanup(lambda: writer.stopService() if writer.running else None)
        bodies = [b"a" * 100, b"", b"\xff" * 300001]
        expected = b""
        for i, body in enumerate(bodies):
            n = writer.open({})
            held = writer.heldBytes
            writer.end(n, bodyFields(body, spliced=True))
            plainLine = encodeLine(2 * i + 2, END, n, 2 * i + 3, 7.25, bodyFields(body, spliced=False))
            self.assertEqual(writer.heldBytes - held, len(plainLine))
            expected += encodeLine(2 * i + 1, OPEN, n, n, 7.25, {}) + plainLine
        self.assertEqual(writer.heldBytes, len(expected))
        self.assertGreater(writer.failedWrites, 0)
        spare = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(spare, fd)
        os.close(spare)
        clock.advance(writerModule.RETRY_INTERVAL)
        self.assertEqual(writer.heldBytes, 0)
        with open(self.path, "rb") as f:
            self.assertEqual(f.read(), expected)

    def test_heldLinesNeverSplitAcrossWrites(self) -> None:
        """
        Held lines go several to a C{writev}, but only whole lines, as many
        as one C{writev} takes (here 7 buffers): every write ends at the end
        of a line, and a line is never split between two writes.
        """
        self.patch(writerModule, "_IOV_MAX", 7)
        clock = Clock()
        fd = os.open("/dev/full", os.O_WRONLY | os.O_APPEND)
        writer = LogWriter(None, fd=fd, reactor=clock, clock=lambda: 7.25)
        writer.startService()
        self.addCleanup(lambda: writer.stopService() if writer.running else None)
        for i in range(6):
            n = writer.open({"i": i})
            writer.end(n, {"a": {"data": AsciiText(b"QUJD")}, "b": {"data": AsciiText(b"REVG")}})
        spare = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(spare, fd)
        os.close(spare)
        recorder = Recorder(self)
        clock.advance(writerModule.RETRY_INTERVAL)
        self.assertEqual(writer.heldBytes, 0)
        self.assertGreater(len(recorder.calls), 1)
        with open(self.path, "rb") as f:
            raw = f.read()
        self.assertEqual(b"".join(recorder.calls), raw)
        for call in recorder.calls:
            self.assertTrue(call.endswith(b"\n"))
        lines = readLines(self.path)
        self.assertEqual([r["n"] for r in lines], list(range(1, 13)))
        self.assertEqual({r["a"]["data"] for r in lines if r["type"] == END}, {"QUJD"})

    def test_cutWritesOfSplicedLines(self) -> None:
        """
        Spliced lines bigger than a pipe takes are cut, resumed where they
        stopped, and arrive whole and in order.
        """
        readEnd, writeEnd = os.pipe()
        self.addCleanup(os.close, readEnd)
        os.set_blocking(writeEnd, False)
        os.set_blocking(readEnd, False)
        clock = Clock()
        writer = LogWriter(None, fd=writeEnd, reactor=clock, clock=lambda: 7.25)
        writer.startService()
        self.addCleanup(lambda: writer.stopService() if writer.running else None)
        bodies = [bytes([i]) * size for i, size in enumerate((70000, 3, 150000, 0, 90001))]
        expected = b""
        for i, body in enumerate(bodies):
            n = writer.open({})
            writer.end(n, bodyFields(body, spliced=True))
            expected += encodeLine(2 * i + 1, OPEN, n, n, 7.25, {})
            expected += encodeLine(2 * i + 2, END, n, 2 * i + 3, 7.25, bodyFields(body, spliced=False))
        self.assertGreater(writer.heldBytes, 0)
        received = drainHeld(writer, clock, readEnd, 200)
        self.assertEqual(writer.heldBytes, 0)
        self.assertEqual(received, expected)
