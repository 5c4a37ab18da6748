"""
C{netlog read|har|ca|view|session|mcp}: the command line.

Each subcommand lives with the code it drives; this only dispatches.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from typing import NoReturn

#: subcommand -> (module, help). Each module has C{addArguments(parser)} and
#: C{run(args) -> int}.
_COMMANDS = {
    "read": ("netlog.log.readcli", "print the log's lines after a number"),
    "har": ("netlog.har.cli", "export the log as HAR 1.2"),
    "ca": ("netlog.site.cacli", "print the site proxy's CA certificate and its SPKI hash"),
    "view": ("netlog.api.viewcli", "serve the live view of a log file on loopback and print its URL"),
    "session": ("netlog.session.cli", "make, list, export and stop a proxy's sessions over its API"),
    "mcp": ("netlog.mcp.cli", "serve a proxy's API to agents over the Model Context Protocol"),
    "rotate": ("netlog.session.rotatecli", "close the running proxy's live log segment now, over its API"),
    "warc": ("netlog.warc.cli", "export the log as WARC 1.1 (.warc.gz)"),
    "wacz": ("netlog.warc.waczcli", "export the log as a WACZ 1.1.1 package (WARC, index, pages)"),
}


#: The exit status of a mistake on the command line (as of any other failure).
EXIT_MISTAKE = 1


class OneLineParser(argparse.ArgumentParser):
    """
    An argument parser that says a mistake in one line, C{PROG: MESSAGE (see
    PROG --help)}, and exits with L{EXIT_MISTAKE}, as the proxies do;
    argparse would print the usage first and exit with 2. Its subcommands'
    parsers are of this class too.
    """

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_MISTAKE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def makeParser(only: str | None = None) -> argparse.ArgumentParser:
    """
    The parser of C{netlog} and its subcommands.

    @param only: the subcommand whose arguments to add (its module alone
        imported: C{netlog read} need not load the WACZ writer's
        dependencies); the others are named, with their help, but take
        none. L{None}: every subcommand's.
    """
    parser = OneLineParser(prog="netlog")
    from netlog.version import versionLine

    parser.add_argument("--version", action="version", version=versionLine())
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (moduleName, helpText) in _COMMANDS.items():
        subparser = sub.add_parser(name, help=helpText, description=helpText)
        if only is None or name == only:
            importlib.import_module(moduleName).addArguments(subparser)
    return parser


def _subcommand(argv: list[str]) -> str | None:
    """
    The subcommand C{argv} names (its first word that isn't an option), if
    it names one.
    """
    for word in argv:
        if not word.startswith("-"):
            return word if word in _COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    args = makeParser(_subcommand(argv)).parse_args(argv)
    module = importlib.import_module(_COMMANDS[args.command][0])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
