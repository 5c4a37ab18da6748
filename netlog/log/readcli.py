"""
C{netlog read LOG --after N [--limit BYTES] [--follow] [--json]}.

Prints the log's lines with C{n > N}, one per line as they are in the file;
C{--json} prints the envelope the HTTP API serves instead,
C{{"lines": [...], "next": N, "begun_again": false}}, one per page.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import BinaryIO

from netlog.log.reader import DEFAULT_LIMIT, FOLLOW_INTERVAL, LogReader, LogUnreadable, Page, follow, lastLineOf
from netlog.log.sniff import notALog


def addArguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", metavar="LOG", help="the log file the proxy writes")
    parser.add_argument(
        "--after", type=int, default=0, metavar="N", help="print the lines numbered above N (default 0: all)"
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_LIMIT,
        metavar="BYTES",
        help=f"at most this many bytes of lines (at least one line) (default {DEFAULT_LIMIT})",
    )
    parser.add_argument(
        "--follow", action="store_true", help="keep printing new lines as they come, until interrupted"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"lines": [...], "next": N, "begun_again": false} per page',
    )


def _emit(out: BinaryIO, result: Page, asJson: bool, why: str | None = None) -> None:
    """
    Print a page; C{why} says why it starts from the log's start, when that
    is not that the log was begun again.
    """
    if asJson:
        out.write(result.envelope() + b"\n")
    else:
        if result.begunAgain:
            sys.stderr.write(f"netlog read: {why or 'the log was begun again (replaced or truncated)'}; "
                             f"reading from its start:\n")
            sys.stderr.flush()
        if result.removedUpTo is not None:
            sys.stderr.write(f"netlog read: the lines up to {result.removedUpTo} are no longer kept (removed by "
                             f"retention, or cut by an outside rotation); reading on from {result.removedUpTo + 1}:\n")
            sys.stderr.flush()
        for line in result.lines:
            out.write(line + b"\n")
    out.flush()


def run(args: argparse.Namespace) -> int:
    if args.limit < 1:
        sys.stderr.write("netlog read: --limit must be at least 1 byte\n")
        return 1
    if args.after < 0:
        sys.stderr.write("netlog read: --after must be 0 or more\n")
        return 1
    why = notALog(args.log)
    if why is not None:
        sys.stderr.write(f"netlog read: {args.log} {why}; give the log file a proxy writes (its --log)\n")
        return 1
    out = sys.stdout.buffer
    try:
        # Read once first: say at once when the log isn't there, rather
        # than wait silently.
        reader = LogReader(args.log)
        first = reader.read(args.after, args.limit)
        # At the first read the cursor can only be past the log's end: the
        # API calls that "begun again" (a poller's cursor from before), but
        # here it was never read before.
        why = _pastTheEnd(_lastLine(args.log), args.after) if first.begunAgain else None
        _emit(out, first, args.json, why)
        if not args.follow:
            return 0
        for result in follow(args.log, first.next, args.limit, FOLLOW_INTERVAL, reader=reader):
            _emit(out, result, args.json)
    except LogUnreadable as e:
        sys.stderr.write(f"netlog read: {e}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:
        # The reader went away (| head): nothing more to say.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return 0


def _pastTheEnd(last: int, after: int) -> str:
    """
    Why a first read from C{--after} printed the log from its start.
    """
    if last == 0:
        return f"the log has no line yet, none after {after}"
    return f"the log has only {last} line{'' if last == 1 else 's'}, none after {after}"


def _lastLine(path: str) -> int:
    """
    The number of the log's last whole line.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return lastLineOf(fd)
    finally:
        os.close(fd)


def main(argv: list[str] | None = None) -> int:
    """
    C{python -m netlog.log.readcli}: the same as C{netlog read}.
    """
    from netlog.cli import OneLineParser

    parser = OneLineParser(prog="netlog read")
    addArguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
