"""
Where netlog keeps its state (the site proxy's CA, the API's token) when no
C{--state} is given. Standard library only: the client imports it.
"""

from __future__ import annotations

import os


def defaultState() -> str:
    """
    C{/var/lib/netlog} as root, else C{~/.local/state/netlog}.
    """
    if os.geteuid() == 0:
        return "/var/lib/netlog"
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "netlog")
