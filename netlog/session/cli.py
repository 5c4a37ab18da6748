"""
C{netlog session create|list|har|delete --api URL ...}: a proxy's sessions
over its API, for shell scripts.

Each prints the API's JSON answer (C{har} writes the HAR); a JSON error is
printed on stderr and the exit status is 1.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import urllib.error
import urllib.request
from typing import Any, BinaryIO
from urllib.parse import quote

from netlog.api.token import TOKEN_ENV, defaultTokenPath, findToken
from netlog.state import DEFAULT_STATE

#: Seconds a request to the API may take (a delete waits for open exchanges).
REQUEST_TIMEOUT = 60.0


def addArguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)

    def api(p: argparse.ArgumentParser) -> None:
        p.add_argument("--api", required=True, metavar="URL", help="the proxy's API, e.g. http://127.0.0.1:8081")
        p.add_argument("--token", help=f"the API's token (default: ${TOKEN_ENV}, else the token file)")
        p.add_argument("--token-file", default=defaultTokenPath(DEFAULT_STATE), metavar="PATH",
                       help="where the proxy keeps its token (its --api-token-file; default %(default)s)")

    create = sub.add_parser("create", help="make a session; prints it (its proxy address among it)")
    api(create)
    create.add_argument("name", nargs="?", help="its name (default: netlog picks one)")
    create.add_argument("--port", type=int, default=None, help="its forward port (default: a free one)")
    listing = sub.add_parser("list", help="print the sessions")
    api(listing)
    har = sub.add_parser("har", help="write a session's HAR")
    api(har)
    har.add_argument("name")
    har.add_argument("-o", "--output", metavar="FILE", help="where (default: standard output)")
    delete = sub.add_parser("delete", help="stop a session; prints its last line number")
    api(delete)
    delete.add_argument("name")


def _request(method: str, url: str, body: dict[str, Any] | None = None, token: str | None = None) -> Any:
    data = json.dumps(body).encode("utf-8") if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if token:
        request.add_header("authorization", f"Bearer {token}")
    if data is not None:
        request.add_header("content-type", "application/json")
    return urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT)


def _copy(response: Any, out: BinaryIO) -> None:
    shutil.copyfileobj(response, out)


def run(args: argparse.Namespace) -> int:
    base = args.api.rstrip("/") + "/sessions"
    token = findToken(args.token, args.token_file)
    try:
        if args.action == "create":
            body: dict[str, Any] = {}
            if args.name is not None:
                body["name"] = args.name
            if args.port is not None:
                body["port"] = args.port
            response = _request("POST", base, body, token)
        elif args.action == "list":
            response = _request("GET", base, token=token)
        elif args.action == "delete":
            response = _request("DELETE", f"{base}/{quote(args.name, safe='')}", token=token)
        else:
            response = _request("GET", f"{base}/{quote(args.name, safe='')}/network.har", token=token)
            with response:
                if args.output:
                    with open(args.output, "wb") as f:
                        _copy(response, f)
                else:
                    _copy(response, sys.stdout.buffer)
            return 0
        with response:
            sys.stdout.write(json.dumps(json.loads(response.read()), indent=2) + "\n")
        return 0
    except urllib.error.HTTPError as e:
        text = e.read().decode("utf-8", "replace").strip()
        sys.stderr.write(f"netlog session {args.action}: {e.code} {text}\n")
        return 1
    except (urllib.error.URLError, OSError) as e:
        sys.stderr.write(f"netlog session {args.action}: the API at {args.api} can't be reached: {e}\n")
        return 1
