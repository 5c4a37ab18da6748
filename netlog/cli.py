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


def makeParser() -> argparse.ArgumentParser:
    """
    The parser of C{netlog} and its subcommands.
    """
    parser = OneLineParser(prog="netlog")
    from netlog.version import versionLine

    parser.add_argument("--version", action="version", version=versionLine())
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (moduleName, helpText) in _COMMANDS.items():
        module = importlib.import_module(moduleName)
        module.addArguments(sub.add_parser(name, help=helpText, description=helpText))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = makeParser().parse_args(argv)
    module = importlib.import_module(_COMMANDS[args.command][0])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
