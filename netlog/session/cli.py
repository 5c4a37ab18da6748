"""
C{netlog session create|list|har|rules|delete [--api URL]}: a proxy's sessions
over its API, for shell scripts, on L{netlog.client} (so the command and the
Python client can't say different things).

Each prints the API's JSON answer (C{har} writes the HAR); an error is
printed on stderr (the API's JSON error, with its status) and the exit status
is 1. The API is C{--api} or else C{$NETLOG_API}; the token is C{--token},
else C{$NETLOG_API_TOKEN}, else the file C{--token-file} (default
C{api-token} in the state folder).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

import orjson

from netlog.client import API_ENV, CALL_TIMEOUT, TOKEN_ENV, TOKEN_FILE, Netlog, NetlogError, NoTokenFile, Session
from netlog.har.cli import redaction
from netlog.har.redact import BUILTIN, PolicyError, Redactor, redactorFor
from netlog.core.rules import BadRules, isTomlName, readRulesDocument
from netlog.wholefile import writeWhole
from netlog.net.options import _seconds
from netlog.session.rulesfile import readRulesText


#: Where a 401 says the token comes from: L{api}'s options, not the Python
#: client's keywords.
CLI_TOKEN_HINT = f"--token TOKEN, ${TOKEN_ENV}, or --token-file FILE (default {TOKEN_FILE} in the state folder)"


def api(p: argparse.ArgumentParser) -> None:
    """
    The options that say which API and its token (for L{clientOf}); C{netlog
    mcp} takes them too.
    """
    p.add_argument("--api", metavar="URL",
                   help=f"the proxy's API, e.g. http://127.0.0.1:8081 (default ${API_ENV})")
    p.add_argument("--token", help=f"the API's token (default ${TOKEN_ENV}, else --token-file)")
    p.add_argument("--token-file", metavar="FILE",
                   help=f"where the API's token is kept (default {TOKEN_FILE} in the state folder)")
    p.add_argument("--timeout", type=_timeout, default=CALL_TIMEOUT, metavar="SECONDS",
                   help=f"how long to wait for the API (default {CALL_TIMEOUT:g})")


def _timeout(text: str) -> float:
    """
    C{--timeout}: the proxies' own check of a number of seconds, said by
    argparse in its one line.
    """
    try:
        return float(_seconds("timeout")(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class ClientOptionError(Exception):
    """
    One of L{api}'s options is wrong: a command says C{{option}: {message}}
    in one line and exits 1.

    @ivar option: the option, e.g. C{--api}.
    @ivar message: what is wrong with it, in one line.
    """

    def __init__(self, option: str, message: str) -> None:
        super().__init__(option, message)
        self.option = option
        self.message = message

    def __str__(self) -> str:
        return f"{self.option}: {self.message}"


def clientOf(args: argparse.Namespace) -> Netlog:
    """
    The client that L{api}'s options name, whose 401s name those options.

    @raise ClientOptionError: C{--api} (or C{$NETLOG_API}) is not the API's
        URL, or C{--token-file} is not there.
    """
    try:
        client = Netlog(args.api, token=args.token, token_file=args.token_file, timeout=args.timeout)
    except ValueError as e:
        raise ClientOptionError("--api", str(e)) from None
    except NoTokenFile as e:
        raise ClientOptionError("--token-file", str(e)) from None
    client.token_hint = CLI_TOKEN_HINT
    return client


def addArguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True)
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
    har.add_argument("--from", dest="from_line", type=int, default=None, metavar="N",
                     help="the exchanges whose open line is N or later (default: the session's first "
                          "line, so none of an earlier session of its name; 0: the whole file)")
    redaction(har)
    rules = sub.add_parser("rules", help="print a session's rules, or set them from a file (TOML, or JSON "
                                         "for a name ending .json)")
    api(rules)
    rules.add_argument("name")
    rules.add_argument("file", nargs="?", help="the rules to set (default: print the session's)")
    delete = sub.add_parser("delete", help="stop a session; prints its last line number")
    api(delete)
    delete.add_argument("name")


def _print(answer: Any) -> None:
    sys.stdout.write(json.dumps(answer, indent=2) + "\n")


def run(args: argparse.Namespace) -> int:
    try:
        redactor = redactorFor(args.redact, args.redact_key) if args.action == "har" else None
    except PolicyError as e:
        sys.stderr.write(f"netlog session {args.action}: --redact: {e}\n")
        return 1
    try:
        client = clientOf(args)
    except ClientOptionError as e:
        sys.stderr.write(f"netlog session {args.action}: {e}\n")
        return 1
    try:
        if args.action == "create":
            _print(client.create_session(args.name, args.port).info)
        elif args.action == "list":
            _print({"sessions": [s.info for s in client.sessions()]})
        elif args.action == "delete":
            _print(client.delete_session(args.name))
        elif args.action == "rules":
            # The file first: its mistakes are said whatever the API says.
            rules = None if args.file is None else _rulesFile(args.file)
            session = client.get_session(args.name)
            _print({"rules": session.rules() if rules is None else session.set_rules(rules)})
        else:
            _har(client.get_session(args.name), args, redactor)
    except NetlogError as e:
        sys.stderr.write(f"netlog session {args.action}: {e}\n")
        return 1
    except OSError as e:
        sys.stderr.write(f"netlog session {args.action}: {e}\n")
        return 1
    except BadRules as e:
        sys.stderr.write(f"netlog session {args.action}: {e}\n")
        return 1
    return 0


def _rulesFile(path: str) -> Any:
    """
    The rules document in C{path} (TOML, or JSON for a C{.json} name), as
    the API checks it.

    @raise BadRules: it can't be read (the words start-up uses for
        C{--rules}), or is neither.
    """
    text = readRulesText(path, f"the rules file {path}")
    try:
        return readRulesDocument(text, isTomlName(path))
    except BadRules as e:
        raise BadRules(f"{path}: {e}") from None


def _har(session: Session, args: argparse.Namespace, redactor: Redactor | None) -> None:
    """
    Write C{session}'s HAR where C{--output} says. A built-in policy is
    done by the API, before a byte leaves it; a policy file (which the API
    never opens) here, on the HAR as it came.
    """
    if redactor is None or args.redact in BUILTIN:
        redact = {"redact": args.redact, "redact_key": args.redact_key}
        if args.output:
            session.save_har(args.output, from_line=args.from_line, **redact)
        else:
            session.write_har(sys.stdout.buffer, from_line=args.from_line, **redact)
        return
    got = io.BytesIO()
    session.write_har(got, from_line=args.from_line)
    har = orjson.loads(got.getvalue())
    for entry in har["log"]["entries"]:
        redactor(entry)
    redacted = orjson.dumps(har)
    if not args.output:
        sys.stdout.buffer.write(redacted)
        return
    with writeWhole(args.output, ".part") as out:
        out.write(redacted)
