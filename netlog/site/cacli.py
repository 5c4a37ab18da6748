"""
C{netlog ca --state DIR}: print the site proxy's CA certificate and its SPKI
hash, creating the CA on first use.

The hash is what Chromium's C{--ignore-certificate-errors-spki-list} takes;
the PEM is what a browser's or a system's trust store takes.
"""

from __future__ import annotations

import argparse
import os
import sys

from netlog.site.ca import CAError, CertificateAuthority
from netlog.state import DEFAULT_STATE, NoSuchFolder, checkInAFolder, defaultState  # noqa: F401 (named here before)


def addArguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--state", default=DEFAULT_STATE,
        help=f"the site proxy's state folder, as given to twistd netlog-proxy --state "
             f"(default {DEFAULT_STATE})",
    )
    parser.add_argument(
        "--spki-only", action="store_true",
        help="print only the SPKI hash (for --ignore-certificate-errors-spki-list)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        if os.path.abspath(args.state) != os.path.abspath(DEFAULT_STATE):
            checkInAFolder(f"--state {args.state}", args.state)
    except NoSuchFolder as e:
        print(f"netlog ca: {e}", file=sys.stderr)
        return 1
    try:
        ca = CertificateAuthority.loadOrCreate(args.state)
    except CAError as e:
        print(f"netlog ca: {e}", file=sys.stderr)
        return 1
    if args.spki_only:
        print(ca.spkiHash())
        return 0
    sys.stdout.write(ca.certPEM().decode("ascii"))
    print(f"SPKI sha256 (base64): {ca.spkiHash()}")
    print(f"Chromium: --ignore-certificate-errors-spki-list={ca.spkiHash()}")
    return 0
