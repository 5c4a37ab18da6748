"""
C{netlog wacz LOG -o out.wacz}: export the log as a WACZ 1.1.1 package.
"""

from __future__ import annotations

import argparse
import os

from netlog.warc.cli import exportTo
from netlog.warc.wacz import writeWacz


def addArguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", metavar="LOG", help="the network log (JSON lines)")
    parser.add_argument("-o", "--output", metavar="FILE", required=True, help="where to write the WACZ")


def run(args: argparse.Namespace) -> int:
    workDir = os.path.dirname(os.path.abspath(args.output))
    return exportTo("wacz", args.log, args.output, lambda out: writeWacz(args.log, out, workDir))
