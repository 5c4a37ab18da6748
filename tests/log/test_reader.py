"""
Reading the log file: pages, a log replaced or truncated under a reader,
following it, and C{netlog read}.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import OPEN, encodeLine
from netlog.log.reader import LogReader, LogUnreadable, follow, read
from tests.support import netlogArgv, sourceEnv

from .test_writer import publicTempDir


def writeLines(path: str, numbers: range, mode: str = "ab") -> None:
    with open(path, mode) as f:
        f.write(b"".join(encodeLine(n, OPEN, n, n, 0.0, {"pad": "p" * 20}) for n in numbers))


def numbers(page: Any) -> list[int]:
    return [r["n"] for r in page.records()]


class ReadTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.path = os.path.join(publicTempDir(self), "log.jsonl")

    def test_read(self) -> None:
        """
        read() gives the lines after the cursor as raw JSON text.
        """
        writeLines(self.path, range(1, 11))
        lineSize = len(encodeLine(5, OPEN, 5, 5, 0.0, {"pad": "p" * 20}))
        page = read(self.path, after=4, limit=3 * lineSize)
        self.assertEqual(numbers(page), [5, 6, 7])
        self.assertTrue(all(isinstance(line, bytes) and not line.endswith(b"\n") for line in page.lines))
        self.assertEqual(page.next, 7)
        self.assertFalse(page.begunAgain)

    def test_missing(self) -> None:
        """
        A missing log, or something that isn't a file, is a clear error.
        """
        e = self.assertRaises(LogUnreadable, read, self.path)
        self.assertIn(self.path, str(e))
        os.mkfifo(self.path)
        self.assertRaises(LogUnreadable, read, self.path)

    def test_replaced(self) -> None:
        """
        A log replaced by another file under a reader, even a longer one, is
        begun again; the page starts at the new file's first line.
        """
        writeLines(self.path, range(1, 6))
        reader = LogReader(self.path)
        self.assertEqual(reader.read(0).next, 5)
        other = self.path + ".new"
        writeLines(other, range(1, 21))
        os.replace(other, self.path)
        page = reader.read(5)
        self.assertTrue(page.begunAgain)
        self.assertEqual(numbers(page)[0], 1)

    def test_truncated(self) -> None:
        """
        A log truncated and written again under a reader is begun again.
        """
        writeLines(self.path, range(1, 6))
        reader = LogReader(self.path)
        reader.read(0)
        writeLines(self.path, range(1, 3), mode="wb")
        page = reader.read(5)
        self.assertTrue(page.begunAgain)
        self.assertEqual(numbers(page), [1, 2])

    def test_sameFileGoesOn(self) -> None:
        """
        The same file grown: the new lines only, not begun again.
        """
        writeLines(self.path, range(1, 6))
        reader = LogReader(self.path)
        reader.read(0)
        writeLines(self.path, range(6, 9))
        page = reader.read(5)
        self.assertEqual((numbers(page), page.begunAgain), ([6, 7, 8], False))

    def test_follow(self) -> None:
        """
        follow() yields new lines as they come, waiting between looks.
        """
        writeLines(self.path, range(1, 3))
        sleeps: list[float] = []
        grow = iter([range(3, 5), range(5, 6)])

        def sleep(seconds: float) -> None:
            sleeps.append(seconds)
            more = next(grow, None)
            if more is not None:
                writeLines(self.path, more)

        pages = follow(self.path, 0, sleep=sleep, interval=0.01)
        seen = []
        for _ in range(3):
            seen.extend(numbers(next(pages)))
        self.assertEqual(seen, [1, 2, 3, 4, 5])
        self.assertTrue(sleeps)


class ReadCommandTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.path = os.path.join(publicTempDir(self), "log.jsonl")
        writeLines(self.path, range(1, 6))

    def runRead(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(
            [*netlogArgv(), "read", *args],
            env=sourceEnv(),
            capture_output=True,
            timeout=60,
        )

    def test_lines(self) -> None:
        """
        netlog read LOG --after N prints the lines, one per line.
        """
        done = self.runRead(self.path, "--after", "2")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual([json.loads(line)["n"] for line in done.stdout.splitlines()], [3, 4, 5])

    def test_json(self) -> None:
        """
        --json prints the envelope the HTTP API serves.
        """
        done = self.runRead(self.path, "--after", "3", "--json", "--limit", "1")
        envelope = json.loads(done.stdout)
        self.assertEqual(set(envelope), {"lines", "next", "begun_again"})
        self.assertEqual(([r["n"] for r in envelope["lines"]], envelope["next"], envelope["begun_again"]), ([4], 4, False))

    def test_missing(self) -> None:
        """
        A missing log: a message naming it and a non-zero exit.
        """
        done = self.runRead(self.path + ".nope")
        self.assertEqual(done.returncode, 1)
        self.assertIn(b"no log at", done.stderr)

    def test_afterPastTheEnd(self) -> None:
        """
        C{--after} past the log's last line says so (not that the log was
        begun again) and prints it from its start; C{--json} keeps the
        API's envelope, whose cursor rule calls it begun again.
        """
        done = self.runRead(self.path, "--after", "100")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(done.stderr, b"netlog read: the log has only 5 lines, none after 100; reading from its start:\n")
        self.assertEqual([json.loads(line)["n"] for line in done.stdout.splitlines()], [1, 2, 3, 4, 5])
        envelope = json.loads(self.runRead(self.path, "--after", "100", "--json").stdout)
        self.assertEqual((envelope["next"], envelope["begun_again"]), (5, True))

    def test_badLimit(self) -> None:
        """
        A limit below 1 is refused with a message.
        """
        done = self.runRead(self.path, "--limit", "0")
        self.assertEqual(done.returncode, 1)
        self.assertIn(b"--limit", done.stderr)
