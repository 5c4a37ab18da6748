"""
C{netlog har LOG [-o network.har]}: export the log as HAR 1.2.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import BinaryIO, TextIO

from netlog.har.export import writeHar
from netlog.har.range import exportRange
from netlog.har.redact import PolicyError, redactorFor
from netlog.log.sniff import notALog
from netlog.wholefile import writeWhole

#: A log at least this large gets a progress bar (when stderr is a terminal).
PROGRESS_MIN_BYTES = 32 * 1024 * 1024
#: A log at least this large is exported by a process per CPU (below it,
#: starting them costs more than they save).
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
#: Seconds between progress bar redraws.
PROGRESS_INTERVAL = 0.2
_BAR_WIDTH = 30


def addArguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log", metavar="LOG", help="the network log (JSON lines)")
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="where to write the HAR (default: standard output)"
    )
    parser.add_argument(
        "-j",
        "--jobs",
        metavar="N",
        type=int,
        default=None,
        help="processes to build the entries in (default: one per CPU for a log of 16 MB or more, else 1)",
    )
    redaction(parser)
    parser.add_argument(
        "--from", dest="start", metavar="LINE|TIME", default=None,
        help="export the exchanges opened from this line number or ISO 8601 time on (docs/rotation.rst)",
    )
    parser.add_argument(
        "--to", dest="end", metavar="LINE|TIME", default=None,
        help="... through this line number or ISO 8601 time, each exchange whole",
    )
    parser.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bar on stderr: auto shows it for a large log when stderr is a terminal",
    )


def logSize(command: str, path: str) -> int | None:
    """
    The size of the log at C{path} that C{netlog COMMAND} exports, or None
    once it has said on stderr, in one line, why it can't: the file can't
    be read, or it is not a netlog log (a folder, a HAR, TOML...).
    """
    try:
        size = os.stat(path).st_size
    except OSError as e:
        print(f"netlog {command}: can't read the log {path}: {e.strerror}", file=sys.stderr)
        return None
    why = notALog(path)
    if why is not None:
        print(f"netlog {command}: {path} {why}; give the log file a proxy writes (its --log)", file=sys.stderr)
        return None
    return size


class _Bar:
    """
    A one-line progress bar: the first pass (indexing) is the first half,
    writing entries the second.
    """

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._last = 0.0

    def __call__(self, indexed: int, written: int, size: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < PROGRESS_INTERVAL and not (total and written == total):
            return
        self._last = now
        if total:
            fraction = 0.5 + 0.5 * written / total
            label = f"{written}/{total} entries"
        else:
            fraction = 0.5 * indexed / size if size else 0.0
            label = f"reading {indexed >> 20}/{size >> 20} MB"
        filled = int(fraction * _BAR_WIDTH)
        self._stream.write(f"\r[{'#' * filled}{'.' * (_BAR_WIDTH - filled)}] {fraction:4.0%} {label}  ")
        self._stream.flush()

    def done(self) -> None:
        if self._last:
            self._stream.write("\n")
            self._stream.flush()


def redaction(parser: argparse.ArgumentParser) -> None:
    """
    C{--redact} and C{--redact-key}, for L{redactorFor}; C{netlog session
    har} takes them too.
    """
    parser.add_argument(
        "--redact", metavar="POLICY", default=None,
        help="redact by a policy: a built-in's name (secrets) or a TOML file (docs/redaction.rst)",
    )
    parser.add_argument(
        "--redact-key", metavar="KEY", default=None,
        help="the key values are hashed under (default: one made for this export)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        redactor = redactorFor(args.redact, args.redact_key)
    except PolicyError as e:
        print(f"netlog har: --redact: {e}", file=sys.stderr)
        return 1
    size = logSize("har", args.log)
    if size is None:
        return 1
    try:
        lines = exportRange(args.log, args.start, args.end, lambda text: print(f"netlog har: {text}", file=sys.stderr))
    except ValueError as e:
        print(f"netlog har: {e}", file=sys.stderr)
        return 1
    show = args.progress == "always" or (
        args.progress == "auto" and size >= PROGRESS_MIN_BYTES and sys.stderr.isatty()
    )
    bar = _Bar(sys.stderr) if show else None
    workers = args.jobs if args.jobs is not None else (_cpus() if size >= PARALLEL_MIN_BYTES else 1)
    workers = max(1, workers)
    out: BinaryIO
    try:
        if args.output:
            with writeWhole(args.output) as out:
                result = writeHar(args.log, out, bar, workers, transform=redactor, lines=lines)
        else:
            result = writeHar(args.log, sys.stdout.buffer, bar, workers, transform=redactor, lines=lines)
            sys.stdout.buffer.flush()
    except OSError as e:
        if bar:
            bar.done()
        print(f"netlog har: {e.filename or args.output or 'output'}: {e.strerror}", file=sys.stderr)
        return 1
    if bar:
        bar.done()
    if result.unreadable:
        print(
            f"netlog har: {result.entries} entries; {result.unreadable} lines could not be used "
            f"(counted in _unreadable)",
            file=sys.stderr,
        )
    return 0


def _cpus() -> int:
    """
    The CPUs this process may run on, busy or not. Counting only the idle
    ones by the load average (a minute's mean) left a CPU out on an idle
    machine right after another export, and on the 1 GB log a worker per
    CPU is twice as fast there; on a busy machine the two were within
    noise of each other (see benchmarks/README.md).
    """
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
