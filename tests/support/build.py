"""
Which build of netlog the suite is meant to run: C{NETLOG_BUILD=compiled}
(CI's trial run, over extension modules built in place beside the sources),
or C{pure} (the default: a checkout as cloned, which the README's test
command runs).
"""

from __future__ import annotations

import os

#: The environment variable that names the build expected.
BUILD_VARIABLE = "NETLOG_BUILD"


def compiledExpected() -> bool:
    """
    Whether this run expects the compiled build; a value other than
    C{compiled} or C{pure} is a mistake, said as such.
    """
    build = os.environ.get(BUILD_VARIABLE, "pure")
    if build not in ("compiled", "pure"):
        raise ValueError(f"{BUILD_VARIABLE}={build!r}: say compiled or pure")
    return build == "compiled"
