"""
Where netlog keeps its state (C{--state}: the site proxy's CA, the API's
token of either proxy) when no C{--state} is given, and the environment its
tools read the API's address and token from. Standard library only, and
light: the client and the pytest plugin (loaded by every pytest run) import
it.
"""

from __future__ import annotations

import os
import stat
from typing import Callable

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


def stateFileReader(state: str) -> Callable[[str, int], bytes]:
    """
    How a file under the state folder C{state} is read (an answer rule's
    C{body_file}, see L{netlog.core.rules.ReadFile}): C{(path, limit)},
    the path relative to the folder, at most C{limit} bytes and one more
    (so that a file too big is seen to be).

    @raise ValueError: (from the reader) the path leads out of the folder,
        a link included.
    @raise OSError: (likewise) it isn't there, isn't a regular file, or
        can't be read.
    """
    root = os.path.realpath(state)

    def read(path: str, limit: int) -> bytes:
        full = os.path.realpath(os.path.join(root, path))
        if os.path.commonpath([root, full]) != root:
            raise ValueError(path)
        # (Not blocking: a FIFO there is refused, not waited on.)
        with open(full, "rb", opener=lambda name, flags: os.open(name, flags | os.O_NONBLOCK)) as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise OSError(0, "not a regular file")
            return f.read(limit + 1)

    return read
