"""
C{netlog rotate [--api URL] [--token T | --token-file F]}: close the live
segment of the running proxy's logs now, over its API (C{POST /rotate}),
as C{SIGUSR1} to it does. Prints the API's answer.
"""

from __future__ import annotations

import argparse
import json
import sys

from netlog.client import API_ENV, CALL_TIMEOUT, TOKEN_ENV, TOKEN_FILE, Netlog, NetlogError


def addArguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--api", metavar="URL", help=f"the proxy's API, e.g. http://127.0.0.1:8081 (default ${API_ENV})")
    parser.add_argument("--token", help=f"the API's token (default ${TOKEN_ENV}, else --token-file)")
    parser.add_argument("--token-file", metavar="FILE",
                        help=f"where the API's token is kept (default {TOKEN_FILE} in the state folder)")
    parser.add_argument("--timeout", type=float, default=CALL_TIMEOUT, metavar="SECONDS",
                        help=f"how long to wait for the API (default {CALL_TIMEOUT:g})")


def run(args: argparse.Namespace) -> int:
    try:
        answer = Netlog(args.api, token=args.token, token_file=args.token_file, timeout=args.timeout)._json(
            "POST", "/rotate", {}
        )
    except ValueError as e:
        # No API named, or not a URL (NetlogError is not one).
        sys.stderr.write(f"netlog rotate: --api: {e}\n")
        return 1
    except (NetlogError, OSError) as e:
        sys.stderr.write(f"netlog rotate: {e}\n")
        return 1
    sys.stdout.write(json.dumps(answer, indent=2) + "\n")
    return 0
