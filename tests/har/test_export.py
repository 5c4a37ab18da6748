"""
The export's shell: writeHar streams to a binary file object, reads the log
as it was when the export began, and netlog har runs from the command line.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import tempfile
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.har import LineIndex
from netlog.har import export as exportModule
from netlog.har.export import WRITE_SIZE, indexLog, writeHar
from tests.har.support import T0, Log, validate
from tests.support import netlogArgv, sourceEnv

#: Seconds a CLI run may take before the test fails.
CLI_TIMEOUT = 60


def bigLog(entries: int, bodySize: int) -> Log:
    log = Log()
    ids = []
    # a tunnel that stays open across everything else
    log.open(method="CONNECT", url="https://live.test:443/", kind="tunnel", server={"host": "live.test", "port": 443, "address": "127.0.0.1"})
    for i in range(entries):
        ids.append(log.open(url=f"https://shop.test/item/{i}", started=T0 + i))
        if len(ids) > 3:
            n = ids.pop(0)
            log.end(n, headers=[("Content-Type", "text/plain")], body=(b"%d " % n) * (bodySize // 4))
    for n in ids:
        log.end(n, headers=[("Content-Type", "text/plain")], body=b"last")
    return log


class RecordingFile(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []

    def write(self, data) -> int:  # type: ignore[override]
        self.writes.append(len(data))
        return super().write(data)


class WriteHarTests(SynchronousTestCase):
    """
    writeHar.
    """

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.dir, ignore_errors=True))
        self.path = os.path.join(self.dir, "network.jsonl")

    def write(self, log: Log) -> None:
        with open(self.path, "wb") as f:
            f.write(log.bytes())

    def test_streams(self) -> None:
        """
        The HAR goes out in pieces as entries are made, each piece about
        WRITE_SIZE (plus one entry), in open order, behind a tunnel left open.
        """
        self.write(bigLog(60, 40_000))
        out = RecordingFile()
        result = writeHar(self.path, out)
        self.assertEqual(result.entries, 61)
        self.assertGreater(len(out.writes), 4)
        self.assertLess(max(out.writes), WRITE_SIZE + 200_000)
        har = json.loads(out.getvalue())
        urls = [e["request"]["url"] for e in har["log"]["entries"]]
        self.assertEqual(urls, ["https://live.test:443/"] + [f"https://shop.test/item/{i}" for i in range(60)])
        self.assertTrue(har["log"]["entries"][0]["_open"])
        self.assertEqual(validate(out.getvalue()), [])

    def test_fromLine(self) -> None:
        """
        fromLine=N exports only the exchanges opened at line N or later: the
        end lines of earlier ones after it (a tunnel still open across it)
        are passed over, not counted unreadable; 0 and 1 export all; a line
        the log doesn't have before N is MissingLine, or the whole log with
        wholeIfMissing (begun again since).
        """
        log = bigLog(10, 100)
        self.write(log)
        with open(self.path, "rb") as f:
            records = [json.loads(line) for line in f]
        # the line on from which the last four exchanges opened
        first = [r["n"] for r in records if r["type"] == "open"][-4]

        def urls(**kwargs: Any) -> tuple[list[str], int]:
            out = io.BytesIO()
            result = writeHar(self.path, out, **kwargs)
            har = json.loads(out.getvalue())
            return [e["request"]["url"] for e in har["log"]["entries"]], har["log"]["_unreadable"]

        self.assertEqual(urls(fromLine=first), ([f"https://shop.test/item/{i}" for i in range(6, 10)], 0))
        everything = ["https://live.test:443/"] + [f"https://shop.test/item/{i}" for i in range(10)]
        self.assertEqual(urls(fromLine=0), (everything, 0))
        self.assertEqual(urls(fromLine=1), (everything, 0))
        self.assertEqual(urls(fromLine=len(records) + 1), ([], 0))
        with self.assertRaises(exportModule.MissingLine) as caught:
            writeHar(self.path, io.BytesIO(), fromLine=len(records) + 2)
        self.assertEqual(caught.exception.n, len(records) + 1)
        self.assertEqual(urls(fromLine=len(records) + 2, wholeIfMissing=True), (everything, 0))

    def test_indexInSmallReads(self) -> None:
        """
        The first pass, reading the log a few bytes at a time (lines much
        longer than a read, the last line cut short), indexes it as the
        lines taken one by one do.
        """
        self.patch(exportModule, "READ_SIZE", 64)
        log = bigLog(5, 2_000)
        data = log.bytes() + b'{"n":99,"type":"open"'
        with open(self.path, "wb") as f:
            f.write(data)
        expected = LineIndex()
        at = 0
        for line in data.splitlines(keepends=True):
            expected.add(at, line)
            at += len(line)
        fd = os.open(self.path, os.O_RDONLY)
        self.addCleanup(os.close, fd)
        index = indexLog(fd, len(data))
        self.assertEqual(
            (list(index.openOffsets), list(index.openLengths), list(index.openStarts), index.lines, index.unreadable),
            (list(expected.openOffsets), list(expected.openLengths), list(expected.openStarts), 12, 1),
        )
        self.assertEqual([index.endOf(n) for n in index.openIds], [expected.endOf(n) for n in expected.openIds])

    def test_snapshot(self) -> None:
        """
        Lines written while the export runs are left for the next export:
        not in this HAR, and not counted as unreadable.
        """
        log = Log()
        a = log.open(url="https://shop.test/a")
        log.end(a)
        self.write(log)
        late = Log()
        late.lines = list(log.lines)
        b = late.open(url="https://shop.test/b")

        def progress(indexed: int, written: int, size: int, total: int) -> None:
            with open(self.path, "ab") as f:
                if os.path.getsize(self.path) == size:
                    f.write(late.lines[b - 1][:10])

        out = io.BytesIO()
        result = writeHar(self.path, out, progress)
        har = json.loads(out.getvalue())
        self.assertEqual([e["request"]["url"] for e in har["log"]["entries"]], ["https://shop.test/a"])
        self.assertEqual(har["log"]["_unreadable"], 0)
        self.assertEqual(result.unreadable, 0)


class CommandLineTests(SynchronousTestCase):
    """
    netlog har LOG [-o FILE].
    """

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.dir, ignore_errors=True))
        self.path = os.path.join(self.dir, "network.jsonl")
        log = Log()
        n = log.open(url="https://shop.test/é")
        log.end(n, headers=[("Content-Type", "text/html; charset=utf-8")], body="été".encode())
        log.raw(b"not json\n")
        with open(self.path, "wb") as f:
            f.write(log.bytes())

    def run_(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            netlogArgv() + ["har", *args], capture_output=True, env=sourceEnv(), timeout=CLI_TIMEOUT, cwd=self.dir
        )

    def test_output(self) -> None:
        """
        -o writes the HAR to a file (UTF-8, no BOM, valid), and says on
        stderr how many lines couldn't be used.
        """
        out = os.path.join(self.dir, "network.har")
        proc = self.run_(self.path, "-o", out)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout, b"")
        self.assertIn(b"1 lines could not be used", proc.stderr)
        with open(out, "rb") as f:
            raw = f.read()
        self.assertEqual(validate(raw), [])
        har = json.loads(raw.decode("utf-8"))
        self.assertEqual(har["log"]["entries"][0]["response"]["content"]["text"], "été")
        self.assertEqual(har["log"]["entries"][0]["request"]["url"], "https://shop.test/%E9")
        self.assertFalse(os.path.exists(out + ".partial"))

    def test_stdout(self) -> None:
        """
        Without -o the HAR goes to standard output, and no progress bar to a
        stderr that isn't a terminal.
        """
        proc = self.run_(self.path)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(len(json.loads(proc.stdout)["log"]["entries"]), 1)
        self.assertNotIn(b"[", proc.stderr)

    def test_progress(self) -> None:
        """
        --progress always draws the bar on stderr.
        """
        proc = self.run_(self.path, "--progress", "always", "-o", os.path.join(self.dir, "x.har"))
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn(b"100%", proc.stderr)
        self.assertIn(b"1/1 entries", proc.stderr)

    def test_missingLog(self) -> None:
        """
        A log that isn't there: exit 1 with a message naming it, no file.
        """
        out = os.path.join(self.dir, "network.har")
        proc = self.run_(os.path.join(self.dir, "nope.jsonl"), "-o", out)
        self.assertEqual(proc.returncode, 1)
        self.assertIn(b"nope.jsonl", proc.stderr)
        self.assertFalse(os.path.exists(out))


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class _OneEntryLog(SynchronousTestCase):
    """
    A log of one exchange, in a folder of its own.
    """

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.dir, ignore_errors=True))
        self.path = os.path.join(self.dir, "network.jsonl")
        log = Log()
        log.end(log.open())
        with open(self.path, "wb") as f:
            f.write(log.bytes())


class ProgressTests(_OneEntryLog):
    """
    The progress bar's automatic choice.
    """

    def runCli(self, stderr: io.StringIO, minBytes: int) -> str:
        import argparse
        import sys

        from netlog.har import cli as harCli

        self.patch(harCli, "PROGRESS_MIN_BYTES", minBytes)
        self.patch(sys, "stderr", stderr)
        parser = argparse.ArgumentParser()
        harCli.addArguments(parser)
        args = parser.parse_args([self.path, "-o", os.path.join(self.dir, "out.har")])
        self.assertEqual(harCli.run(args), 0)
        return stderr.getvalue()

    def test_terminalLargeLog(self) -> None:
        """
        A terminal and a log past the threshold: a bar, ended by a newline.
        """
        shown = self.runCli(_Terminal(), 0)
        self.assertIn("1/1 entries", shown)
        self.assertTrue(shown.endswith("\n"))

    def test_smallLogOrNoTerminal(self) -> None:
        """
        A log under the threshold, or a stderr that isn't a terminal: no bar.
        """
        self.assertEqual(self.runCli(_Terminal(), 10**12), "")
        self.assertEqual(self.runCli(io.StringIO(), 0), "")


class DefaultJobsTests(_OneEntryLog):
    """
    How many processes C{netlog har} builds the entries in when not told.
    """
    def workers(self, parallelFrom: int, busy: float, *flags: str) -> int:
        import argparse

        from netlog.har import cli as harCli

        used: list[int] = []
        real = harCli.writeHar

        def spy(path: str, out: Any, progress: Any, workers: int, **options: Any) -> Any:
            used.append(workers)
            return real(path, out, progress, workers, **options)

        self.patch(harCli, "writeHar", spy)
        self.patch(harCli, "PARALLEL_MIN_BYTES", parallelFrom)
        self.patch(os, "getloadavg", lambda: (busy, busy, busy))
        parser = argparse.ArgumentParser()
        harCli.addArguments(parser)
        args = parser.parse_args([self.path, "-o", os.path.join(self.dir, "out.har"), *flags])
        self.assertEqual(harCli.run(args), 0)
        return used[0]

    def test_everyCpu(self) -> None:
        """
        A large log is built by a process per CPU this process may use,
        however busy the load average says they are.
        """
        cpus = len(os.sched_getaffinity(0))
        self.assertEqual(self.workers(0, 0.0), cpus)
        self.assertEqual(self.workers(0, 100.0), cpus)

    def test_smallLogOrAsked(self) -> None:
        """
        A log under the threshold is built in one process; C{-j} wins.
        """
        self.assertEqual(self.workers(10**12, 0.0), 1)
        self.assertEqual(self.workers(0, 0.0, "-j", "3"), 3)
