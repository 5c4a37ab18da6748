"""
C{netlog warc LOG -o out.warc.gz}: export the log as WARC 1.1.
"""

from __future__ import annotations

import argparse
import sys
from typing import BinaryIO, Callable

from netlog.har.cli import PARALLEL_MIN_BYTES, _cpus, logSize
from netlog.warc.export import WarcResult, writeWarc
from netlog.wholefile import writeWhole


def addArguments(parser: argparse.ArgumentParser, what: str = "the WARC (.warc.gz: a gzip member per record; "
                                                               ".warc: plain)") -> None:
    parser.add_argument("log", metavar="LOG", help="the network log (JSON lines)")
    parser.add_argument("-o", "--output", metavar="FILE", required=True, help=f"where to write {what}")
    parser.add_argument(
        "-j", "--jobs", metavar="N", type=int, default=None,
        help="processes to build the records in (default: one per CPU for a log of 16 MB or more, else 1)",
    )


def run(args: argparse.Namespace) -> int:
    return exportTo("warc", args, lambda out, workers: writeWarc(
        args.log, out, gzip=not args.output.endswith(".warc"), workers=workers))


def exportTo(command: str, args: argparse.Namespace, write: Callable[[BinaryIO, int], WarcResult]) -> int:
    """
    Run C{write(out, workers)} into C{args.output} (through a C{.partial}
    file renamed when whole), and say in one line on stderr what went in
    and what was left out.
    """
    size = logSize(command, args.log)
    if size is None:
        return 1
    workers = args.jobs if args.jobs is not None else (_cpus() if size >= PARALLEL_MIN_BYTES else 1)
    try:
        with writeWhole(args.output) as out:
            result = write(out, max(1, workers))
    except OSError as e:
        print(f"netlog {command}: {e.filename or args.output}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"netlog {command}: {result.summary()}", file=sys.stderr)
    return 0
