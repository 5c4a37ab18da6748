"""
The export's fast paths give the bytes of the plain one: entries built in
worker processes and written in order, orjson in place of the json module.
"""

from __future__ import annotations

import base64
import gzip
import io
import os
import random
import subprocess
import tempfile
from concurrent.futures.process import BrokenProcessPool

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core import har as core
from netlog.core.har import LineIndex, encodeEntry, entriesFromLines
from netlog.core.logline import encodeLine
from netlog.core.records import headRecord, messageRecord
from netlog.har import export
from netlog.har.export import writeHar
from tests.har.support import T0, Log
from tests.har.test_export import CLI_TIMEOUT, bigLog
from tests.har.test_fuzz import madeUpLog
from tests.support import netlogArgv, sourceEnv

#: Text that JSON escapes, or that is not ASCII, or that UTF-8 can't carry
#: (a lone surrogate).
ODD_TEXT = ["\x00\x01\x1f\x7f", '"quoted" \\ back', "é日本🙂", "\u2028\u2029", "\ud800lone", "tab\there\nnl\r", "\x85\xa0"]
#: Floats that the json module and orjson write differently, and ints past 64 bits.
ODD_NUMBERS: list = [1e-05, 1.5e300, 2**70, -(2**64), 12345.678e3, 1e16, 0.0001]


def variedLog(seed: int, exchanges: int = 300) -> bytes:
    """
    A log of varied exchanges (seeded): odd text in every field, head and
    message lines, bodies
    plain, gzipped and binary, base64 that is not as netlog writes it, odd
    numbers, exchanges that end out of order or stay open, starts out of
    order, lines that can't be used.
    """
    rng = random.Random(seed)
    lines: list[bytes] = []
    opened: list[int] = []
    for i in range(exchanges):
        n = len(lines) + 1
        text = rng.choice(ODD_TEXT)
        started = rng.choice([T0 + i, T0 + i - rng.random() * 5, *ODD_NUMBERS])
        lines.append(encodeLine(n, "open", n, 1, T0, {
            "proxy": "site",
            "kind": rng.choice(["exchange", "exchange", "tunnel"]),
            "started": started,
            "connection": "c" + text,
            "request": {
                "method": rng.choice(["GET", "POST"]),
                "url": "https://shop.test/" + text + "?q=" + text,
                "version": "HTTP/1.1",
                "headers": [["Host", "shop.test"], ["X-Odd", text], ["Cookie", "a=" + text],
                            ["Content-Type", rng.choice(["application/json", "application/x-www-form-urlencoded"])]],
                "headers_size": rng.choice([100, 2**65]),
            },
            "server": {"host": "shop.test", "port": 443, "address": rng.choice(["127.0.0.1", "::1", "bad"])},
        }))
        opened.append(n)
        if rng.random() < 0.2:
            # an answer still streaming, or a WebSocket: its head and message
            # lines, between its open and its end
            lines.append(encodeLine(len(lines) + 1, "head", n, 1, T0 + i, headRecord(T0 + i, {
                "status": 101, "reason": text, "version": "HTTP/1.1",
                "headers": [["Upgrade", "websocket"], ["X-Odd", text]], "headers_size": 80})))
            for _ in range(rng.randrange(4)):
                data = text.encode("utf-8", "surrogatepass") if rng.random() < 0.5 else bytes(rng.randrange(256) for _ in range(9))
                lines.append(encodeLine(len(lines) + 1, "message", n, 1, T0 + i + rng.random(), messageRecord(
                    rng.choice(["up", "down"]), rng.choice([1, 2]), len(data), data, rng.random() < 0.1)))
        while len(opened) > rng.randrange(1, 6):
            exchangeId = opened.pop(rng.randrange(len(opened)))
            page = (text * rng.randrange(1, 300)).encode("utf-8", "surrogatepass")
            roll = rng.random()
            if roll < 0.3:
                body = {"size": len(page), "data": base64.b64encode(gzip.compress(page)).decode()}
                headers = [["Content-Type", "text/html; charset=utf-8"], ["Content-Encoding", "gzip"]]
            elif roll < 0.6:
                body = {"size": len(page), "data": base64.b64encode(page).decode()}
                headers = [["Content-Type", rng.choice(["text/html", "application/json", "text/plain; charset=latin-1", ""])]]
            else:
                raw = bytes(rng.randrange(256) for _ in range(rng.randrange(300)))
                body = {"size": len(raw), "data": base64.b64encode(raw).decode() + rng.choice(["", "\n", "=", "!!", " QQ"])}
                headers = [["Content-Type", rng.choice(["application/octet-stream", "text/plain"])]]
            times = {"connected": None, "sent": T0 + i, "first_byte": T0 + i + rng.random(),
                     "end": rng.choice([T0 + i + 1, *ODD_NUMBERS])}
            lines.append(encodeLine(len(lines) + 1, "end", exchangeId, 1, T0, {
                "ended": T0 + i + 1,
                "times": times,
                "request_body": {"size": 4, "data": base64.b64encode(("a=" + text).encode("utf-8", "surrogatepass")).decode()},
                "response": {"status": 200, "reason": text, "version": "HTTP/1.1",
                             "headers": headers + [["Set-Cookie", "k=" + text + "; Max-Age=60"]],
                             "headers_size": 60, "body": body},
                "bytes": {"up": 1, "down": rng.choice([2, 2**64 + 1])},
            }))
        if rng.random() < 0.03:
            lines.append(b"not json\n")
        if rng.random() < 0.03:
            lines.append(b'{"n":%d,"type":"end","id":999999}\n' % (len(lines) + 1))
    lines.append(b'{"n":1,"type":"op')
    return b"".join(lines)


def _dying(batch: object, slot: int) -> None:
    """
    In a worker: die as a process killed does.
    """
    os._exit(9)


class ParallelExportTests(SynchronousTestCase):
    """
    writeHar with workers: the same bytes and counts as with none.
    """

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.dir, ignore_errors=True))
        self.path = os.path.join(self.dir, "network.jsonl")

    def exportBoth(self, data: bytes) -> tuple[bytes, bytes]:
        with open(self.path, "wb") as f:
            f.write(data)
        serial, parallel = io.BytesIO(), io.BytesIO()
        one = writeHar(self.path, serial)
        two = writeHar(self.path, parallel, workers=2)
        self.assertEqual((one.entries, one.unreadable), (two.entries, two.unreadable))
        return serial.getvalue(), parallel.getvalue()

    def test_variedLogs(self) -> None:
        """
        Logs of varied entries, cut into stretches of a few exchanges (some
        too big for their slot, so they come back through the pipe): the
        workers' HAR is the serial one, byte for byte.
        """
        self.patch(export, "BATCH_BYTES", 4000)
        self.patch(export, "SLOT_SIZE", 8000)
        self.patch(export, "SPAN_LIMIT", 8000)
        for seed in (1, 2):
            serial, parallel = self.exportBoth(variedLog(seed))
            self.assertIn(b'"_unreadable":', serial)
            self.assertGreater(serial.count(b'"startedDateTime"'), 250)
            self.assertEqual(parallel, serial, f"seed {seed}")

    def test_oddValues(self) -> None:
        """
        The fuzz tests' logs of odd values, in stretches of one exchange to
        many: the same bytes.
        """
        for batch in (1, 3000, export.BATCH_BYTES):
            self.patch(export, "BATCH_BYTES", batch)
            serial, parallel = self.exportBoth(madeUpLog(batch))
            self.assertEqual(parallel, serial, f"stretches of {batch} bytes")

    def test_tunnelOpenThroughout(self) -> None:
        """
        A tunnel open from the first line to the last (its end far from its
        open line, outside any stretch's span): the same bytes.
        """
        self.patch(export, "BATCH_BYTES", 20_000)
        self.patch(export, "SPAN_LIMIT", 40_000)
        serial, parallel = self.exportBoth(bigLog(200, 3000).bytes())
        self.assertEqual(parallel, serial)

    def test_empty(self) -> None:
        """
        A log with no lines, or with one exchange: the same bytes.
        """
        self.assertEqual(*self.exportBoth(b""))
        log = Log()
        log.end(log.open())
        self.assertEqual(*self.exportBoth(log.bytes()))

    def test_workerDies(self) -> None:
        """
        A worker that dies fails the export (BrokenProcessPool) instead of
        leaving it waiting for the stretch that worker had.
        """
        self.patch(export, "BATCH_BYTES", 4000)
        self.patch(export, "_buildBatch", _dying)
        with open(self.path, "wb") as f:
            f.write(variedLog(5, 100))
        self.assertRaises(BrokenProcessPool, writeHar, self.path, io.BytesIO(), workers=2)

    def test_commandLine(self) -> None:
        """
        netlog har -j 2 writes what netlog har -j 1 writes.
        """
        with open(self.path, "wb") as f:
            f.write(variedLog(3, 100))
        outputs = []
        for jobs in ("1", "2"):
            out = os.path.join(self.dir, f"jobs{jobs}.har")
            proc = subprocess.run(netlogArgv() + ["har", self.path, "-o", out, "-j", jobs], capture_output=True,
                                  env=sourceEnv(), timeout=CLI_TIMEOUT, cwd=self.dir)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            with open(out, "rb") as f:
                outputs.append(f.read())
        self.assertEqual(outputs[0], outputs[1])


class FastPathTests(SynchronousTestCase):
    """
    The compiled libraries the export uses write and read what the standard
    library does.
    """

    def test_encodeEntry(self) -> None:
        """
        encodeEntry gives, for every entry of logs of varied and odd values,
        the json module's bytes (lone surrogates as C{?}).
        """
        if core.orjson is None:
            raise self.skipTest("orjson is not installed: encodeEntry is the json module")
        for data in (variedLog(4), madeUpLog(4)):
            entries, _ = entriesFromLines(data.splitlines(keepends=True))
            self.assertGreaterEqual(len(entries), 300)
            for entry in entries:
                expected = core._entryEncoder.encode(entry).encode("utf-8", "replace")
                self.assertEqual(encodeEntry(entry), expected)



#: Where a line lies: offset and length.
SPOTS = st.tuples(st.integers(0, 3 * 2**20), st.integers(1, 2**20))


class SpanTests(SynchronousTestCase):
    """
    The span of the log a worker reads for a stretch.
    """

    @given(st.lists(st.tuples(SPOTS, st.lists(SPOTS, max_size=2), st.lists(SPOTS, max_size=3)), min_size=1, max_size=8))
    @settings(max_examples=300, deadline=None)
    def test_span(self, exchanges: list) -> None:
        """
        A stretch's span runs from its first open line through the end of
        the last of its lines (open, end, head or message) that begins in
        it and ends within L{export.SPAN_LIMIT} of its start.
        """
        lines = [(offset, length, tuple(ends), tuple(notes)) for (offset, length), ends, notes in exchanges]
        batch = export._batch(lines)
        start = min(offset for offset, _, _, _ in lines)
        ending = [offset + length for o, l, ends, notes in lines for offset, length in ((o, l), *ends, *notes)
                  if offset >= start and offset + length - start <= export.SPAN_LIMIT]
        self.assertEqual((batch.start, batch.end), (start, max([start, *ending])))


def indexState(index: LineIndex) -> dict:
    """
    Everything an index holds that the export reads.
    """
    ids = list(index.openIds)
    return {
        "opens": (ids, list(index.openOffsets), list(index.openLengths), list(index.openStarts)),
        "ends": [index.endOf(i) for i in ids],
        "extra": index.extraEnds,
        "notes": {i: list(v) for i, v in index.notes.items()},
        "counts": (index.unreadable, index.lines, len(index)),
        "order": list(index.startOrder()),
    }


class IndexInWorkersTests(SynchronousTestCase):
    """
    The index made from lines the workers read, range by range, is the one
    made in one pass.
    """

    def setUp(self) -> None:
        self.dir = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(self.dir, ignore_errors=True))
        path = os.path.join(self.dir, "network.jsonl")
        open(path, "wb").close()
        self.fd = os.open(path, os.O_RDWR)
        self.addCleanup(os.close, self.fd)
        # ranges of a few lines, shorter than many lines; forked after
        self.patch(export, "SPAN_LIMIT", 3000)
        self.patch(export, "READ_SIZE", 1000)
        self.pool = export._Workers(self.fd, 2).__enter__()
        self.addCleanup(self.pool.__exit__, None, None, None)

    @given(st.integers(0, 10_000), st.integers(1, 120), st.floats(0, 1), st.floats(0, 1))
    @settings(max_examples=40, deadline=None)
    def test_sameIndex(self, seed: int, exchanges: int, cut: float, begin: float) -> None:
        """
        Varied logs, cut anywhere (a last line without its newline), indexed
        from their start or from a line further on: the same index, and the
        same progress reported at the end.
        """
        data = variedLog(seed, exchanges)
        data = data[: int(len(data) * (0.5 + cut / 2))]
        start = data.find(b"\n", int(len(data) * begin / 2)) + 1
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data, 0)
        first = 3 if start else 0
        seen: list[int] = []
        serial = indexState(export.indexLog(self.fd, len(data), None, start, first))
        inWorkers = export._indexInWorkers(self.pool, len(data), lambda i, *_: seen.append(i), start, first)
        self.assertEqual(indexState(inWorkers), serial)
        self.assertEqual(seen[-1:], [len(data)] if len(data) > start else [])
