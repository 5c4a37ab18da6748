"""
What the WARC tests share: an export of a log given as bytes, read back
with warcio (every digest checked), and where pywb's side environment is.
"""

from __future__ import annotations

import io
import os
from typing import Any

from warcio.archiveiterator import ArchiveIterator

from netlog.warc.export import WarcResult, writeWarc
from tests.har.support import exportLog
from tests.support import REPO

PYWB_BIN = os.path.join(REPO, ".ci", "pywb", ".venv", "bin")


class Record:
    """
    A record read back: its type, WARC fields, HTTP head and block's payload.
    """

    def __init__(self, record: Any) -> None:
        self.type: str = record.rec_type
        self.fields = dict(record.rec_headers.headers)
        self.http = record.http_headers
        self.payload: bytes = record.content_stream().read()

    def __repr__(self) -> str:
        return f"Record({self.type}, {self.fields.get('WARC-Target-URI')})"


def readWarc(data: bytes) -> list[Record]:
    """
    The records of a WARC, each digest checked (a wrong one raises).
    """
    records = []
    for record in ArchiveIterator(io.BytesIO(data), check_digests="raise"):
        records.append(Record(record))
    return records


def exportWarc(log: bytes) -> tuple[list[Record], bytes, WarcResult]:
    """
    Export a log given as bytes: its records, the file's bytes, the result.
    """
    data, result = exportLog(writeWarc, log)
    return readWarc(data), data, result


def pywbTool(name: str) -> str:
    """
    A pywb or py-wacz command from the side environment; fails (never
    skips) when it isn't installed.
    """
    path = os.path.join(PYWB_BIN, name)
    if not os.path.exists(path):
        raise AssertionError(f"{path} is missing: run .ci/install.d/40-pywb.sh")
    return path
