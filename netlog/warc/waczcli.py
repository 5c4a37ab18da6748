"""
C{netlog wacz LOG -o out.wacz}: export the log as a WACZ 1.1.1 package.
"""

from __future__ import annotations

import argparse
import os

from netlog.warc import cli
from netlog.warc.wacz import writeWacz


def addArguments(parser: argparse.ArgumentParser) -> None:
    cli.addArguments(parser, "the WACZ")


def run(args: argparse.Namespace) -> int:
    workDir = os.path.dirname(os.path.abspath(args.output))
    return cli.exportTo("wacz", args, lambda out, workers: writeWacz(args.log, out, workDir, workers))
