"""
What the tests share: where the repository is, how to start real netlog
processes from the source tree, free loopback ports.
"""

from __future__ import annotations

import os
import socket
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sourceEnv(extra: dict[str, str] | None = None) -> dict[str, str]:
    """
    The environment for a child process that must run this source tree's
    netlog (not an installed copy): the repository first on C{PYTHONPATH}.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


def twistdArgv() -> list[str]:
    """
    The command that starts C{twistd} with this interpreter.
    """
    return [sys.executable, "-c", "from twisted.scripts.twistd import run; run()"]


def netlogArgv() -> list[str]:
    """
    The command that runs C{netlog} (the CLI) with this interpreter.
    """
    return [sys.executable, "-m", "netlog.cli"]


def freePort(host: str = "127.0.0.1") -> int:
    """
    A TCP port on loopback that nothing listens on right now.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
