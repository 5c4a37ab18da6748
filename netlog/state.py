"""
netlog's state folder (C{--state}): the site proxy's CA, and the API's token
of either proxy.
"""

from __future__ import annotations

import os


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
