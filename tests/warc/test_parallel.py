"""
The WARC built in forked workers is the one built in one process: the same
records in the same order (but for their random ids), each a gzip member
of its own, the same counts and pages.
"""

from __future__ import annotations

import io
import os

from twisted.trial.unittest import SynchronousTestCase

from netlog.warc.export import writeWarc
from tests.har.support import T0, Log
from tests.standin.support import tempDirectory
from tests.warc.support import readWarc
from tests.warc.test_wacz import NAVIGATE

#: Exchanges in the log: past a stretch's 1024, so that there are several.
EXCHANGES = 2600
#: Fields that differ between two exports of the same log.
_RANDOM = ("WARC-Record-ID", "WARC-Concurrent-To", "WARC-Date")


def bigLog() -> bytes:
    log = Log()
    for i in range(EXCHANGES):
        if i % 7 == 0:
            n = log.open(url=f"https://shop.test/page/{i}", headers=NAVIGATE, started=T0 + i)
            log.end(n, headers=[("Content-Type", "text/html")], body=b"<title>page %d</title>" % i)
        elif i % 7 == 1:
            n = log.open(url=f"https://shop.test/{i}.png", started=T0 + i)
            log.end(n, headers=[("Content-Type", "image/png")], responseBody={"size": 10, "sha256": "00"})
        else:
            n = log.open(url=f"https://shop.test/api/{i}", started=T0 + i)
            log.end(n, headers=[("Content-Type", "application/json")], body=b'{"n":%d}' % i)
    return log.bytes()


class ParallelTests(SynchronousTestCase):
    def test_sameAsOneProcess(self) -> None:
        """
        Two workers write the records one process writes, in its order,
        with the same counts and pages; the file is gzip members that
        warcio reads with every digest right.
        """
        path = os.path.join(tempDirectory(self), "network.jsonl")
        with open(path, "wb") as f:
            f.write(bigLog())
        exports = []
        for workers in (1, 2):
            out, pages = io.BytesIO(), io.StringIO()
            result = writeWarc(path, out, workers=workers, pages=pages)
            records = [(r.type, {k: v for k, v in r.fields.items() if k not in _RANDOM}, r.payload)
                       for r in readWarc(out.getvalue())[1:]]
            exports.append((records, result.summary(), pages.getvalue()))
        self.assertEqual(exports[0], exports[1])
        records, summary, pages = exports[0]
        self.assertEqual(len(records), 2 * (EXCHANGES - EXCHANGES // 7 - 1))
        self.assertEqual(summary, f"{EXCHANGES - EXCHANGES // 7 - 1} exchanges in {len(records) + 1} records; "
                                  f"left out {EXCHANGES // 7 + 1} body not kept (record with --keep-bodies all)")
        self.assertEqual(len(pages.splitlines()), EXCHANGES // 7 + 1)
        self.assertIn('"title": "page 7"', pages)
