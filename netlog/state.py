"""
Where netlog keeps its state (C{--state}: the site proxy's CA, the API's
token of either proxy) when no C{--state} is given, and the environment its
tools read the API's address and token from. Standard library only, and
light: the client and the pytest plugin (loaded by every pytest run) import
it.
"""

from __future__ import annotations

import os

#: The environment variable that names the API (C{netlog session}, the
#: client, the pytest plugin).
API_ENV = "NETLOG_API"
#: The environment variable that holds the API's token.
TOKEN_ENV = "NETLOG_API_TOKEN"
#: The token's file in the state folder.
TOKEN_FILE = "api-token"


def defaultState() -> str:
    """
    Where netlog keeps its state when no C{--state} is given:
    C{/var/lib/netlog} as root, else C{~/.local/state/netlog}.
    """
    if os.geteuid() == 0:
        return "/var/lib/netlog"
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "netlog")


DEFAULT_STATE = defaultState()


class NoSuchFolder(Exception):
    """
    A path given by hand is in a folder that isn't there: the message is the
    line to print.
    """


def checkInAFolder(what: str, path: str) -> None:
    """
    netlog makes folders only for its defaults: a path given by hand (as
    C{what}, the option and its value) must be in a folder that exists, so
    that a typo is said rather than made.

    @raise NoSuchFolder: it isn't.
    """
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise NoSuchFolder(f"{what}: no such folder: {parent} (netlog makes folders only for its defaults)")
