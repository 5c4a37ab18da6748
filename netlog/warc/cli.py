"""
C{netlog warc LOG -o out.warc.gz}: export the log as WARC 1.1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO, Callable

from netlog.warc.export import WarcResult, writeWarc


def addArguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", metavar="LOG", help="the network log (JSON lines)")
    parser.add_argument("-o", "--output", metavar="FILE", required=True,
                        help="where to write the WARC (.warc.gz: a gzip member per record; .warc: plain)")


def run(args: argparse.Namespace) -> int:
    return exportTo("warc", args.log, args.output,
                    lambda out: writeWarc(args.log, out, gzip=not args.output.endswith(".warc")))


def exportTo(command: str, log: str, output: str, write: Callable[[BinaryIO], WarcResult]) -> int:
    """
    Run C{write} into C{output} (through a C{.partial} file renamed when
    whole), and say in one line on stderr what went in and what was left
    out.
    """
    if not os.path.isfile(log):
        print(f"netlog {command}: can't read the log {log}", file=sys.stderr)
        return 1
    tmp = output + ".partial"
    try:
        with open(tmp, "wb") as out:
            result = write(out)
        os.replace(tmp, output)
    except OSError as e:
        print(f"netlog {command}: {e.filename or output}: {e.strerror}", file=sys.stderr)
        return 1
    print(f"netlog {command}: {result.summary()}", file=sys.stderr)
    return 0
