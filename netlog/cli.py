"""
C{netlog read|har|ca|view|session}: the command line.

Each subcommand lives with the code it drives; this only dispatches.
"""

from __future__ import annotations

import argparse
import importlib
import sys

#: subcommand -> (module, help). Each module has C{addArguments(parser)} and
#: C{run(args) -> int}.
_COMMANDS = {
    "read": ("netlog.log.readcli", "print the log's lines after a number"),
    "har": ("netlog.har.cli", "export the log as HAR 1.2"),
    "ca": ("netlog.site.cacli", "print the site proxy's CA certificate and its SPKI hash"),
    "view": ("netlog.api.viewcli", "serve the live view of a log file on loopback and print its URL"),
    "session": ("netlog.session.cli", "make, list, export and stop a proxy's sessions over its API"),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="netlog")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (moduleName, helpText) in _COMMANDS.items():
        module = importlib.import_module(moduleName)
        module.addArguments(sub.add_parser(name, help=helpText, description=helpText))
    args = parser.parse_args(argv)
    module = importlib.import_module(_COMMANDS[args.command][0])
    return int(module.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
