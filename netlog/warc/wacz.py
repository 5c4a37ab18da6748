"""
Write a log as a WACZ 1.1.1 package: the WARC (C{archive/data.warc.gz},
stored, not deflated, so that a reader can seek in it), its sorted CDXJ
index (C{indexes/index.cdx}, made by C{cdxj-indexer}, py-wacz's own
indexer), the top-level navigations (C{pages/pages.jsonl}) and
C{datapackage.json} with each file's sha256 (and
C{datapackage-digest.json} with its own).

Everything is written to files in a folder beside the output first and
copied into the ZIP from there: the index is sorted by the indexer's
external sort, so memory stays bounded whatever the log's size.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from datetime import datetime, timezone
from typing import BinaryIO

from cdxj_indexer.main import CDXJIndexer

import netlog
from netlog.warc.export import WarcResult, writeWarc

WACZ_VERSION = "1.1.1"
#: The files of the package, by where they go in it.
WARC_PATH = "archive/data.warc.gz"
INDEX_PATH = "indexes/index.cdx"
PAGES_PATH = "pages/pages.jsonl"
#: The first line of pages.jsonl.
PAGES_HEADER = {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"}
#: Bytes hashed at a time.
HASH_CHUNK = 1024 * 1024


def writeWacz(logPath: str, out: BinaryIO, workDir: str | None = None, workers: int = 1) -> WarcResult:
    """
    Write the WACZ of the log at C{logPath} to C{out} (a seekable binary
    file), its parts made first in a folder in C{workDir} (default the
    system's); C{workers} as for L{writeWarc}.
    """
    with tempfile.TemporaryDirectory(dir=workDir, prefix=".netlog-wacz-") as work:
        warc = os.path.join(work, "data.warc.gz")
        pages = os.path.join(work, "pages.jsonl")
        index = os.path.join(work, "index.cdx")
        with open(warc, "wb") as warcOut, open(pages, "w", encoding="utf-8") as pagesOut:
            pagesOut.write(json.dumps(PAGES_HEADER) + "\n")
            result = writeWarc(logPath, warcOut, workers=workers, pages=pagesOut)
        # (Without post_append, py-wacz's choice, which keys a POST by its
        # body too: warcio undoes a br coding to read it only with brotlipy,
        # whose module's name is the brotli netlog reads bodies with.)
        CDXJIndexer(index, [warc], sort=True, filename="data.warc.gz").process_all()
        files = [(warc, WARC_PATH, zipfile.ZIP_STORED), (index, INDEX_PATH, zipfile.ZIP_DEFLATED),
                 (pages, PAGES_PATH, zipfile.ZIP_DEFLATED)]
        resources = []
        with zipfile.ZipFile(out, "w", allowZip64=True) as package:
            for path, name, compression in files:
                package.write(path, name, compression)
                resources.append({"name": os.path.basename(name), "path": name,
                                  "hash": "sha256:" + _sha256(path), "bytes": os.path.getsize(path)})
            datapackage = json.dumps({
                "profile": "data-package",
                "resources": resources,
                "created": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "wacz_version": WACZ_VERSION,
                "software": f"netlog {netlog.__version__}",
            }, indent=2).encode("utf-8")
            package.writestr("datapackage.json", datapackage, zipfile.ZIP_DEFLATED)
            package.writestr("datapackage-digest.json", json.dumps({
                "path": "datapackage.json", "hash": "sha256:" + hashlib.sha256(datapackage).hexdigest(),
            }, indent=2), zipfile.ZIP_DEFLATED)
    return result


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
