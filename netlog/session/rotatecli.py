"""
C{netlog rotate [--api URL] [--token T | --token-file F]}: close the live
segment of the running proxy's logs now, over its API (C{POST /rotate}),
as C{SIGUSR1} to it does. Prints the API's answer. The API and its token
are found as C{netlog session} finds them.
"""

from __future__ import annotations

import argparse
import json
import sys

from netlog.client import NetlogError
from netlog.session.cli import ClientOptionError, api, clientOf


def addArguments(parser: argparse.ArgumentParser) -> None:
    api(parser)


def run(args: argparse.Namespace) -> int:
    try:
        client = clientOf(args)
    except ClientOptionError as e:
        sys.stderr.write(f"netlog rotate: {e}\n")
        return 1
    try:
        answer = client.rotate()
    except (NetlogError, OSError) as e:
        sys.stderr.write(f"netlog rotate: {e}\n")
        return 1
    sys.stdout.write(json.dumps(answer, indent=2) + "\n")
    return 0
