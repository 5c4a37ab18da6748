"""
What a session is called and where its log goes: pure, no files, no sockets.
"""

from __future__ import annotations

import os
import re
from typing import Callable

#: A session's name: letters, digits, C{.}, C{_} and C{-}, 1 to 64 of them.
NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
#: The names netlog picks when none is asked for: C{session-1}, C{session-2}...
AUTO_PREFIX = "session-"
#: The highest TCP port.
MAX_PORT = 65535


class BadSession(ValueError):
    """
    A session's name or port is not one netlog takes; the message says why.
    """


def checkName(name: object) -> str:
    """
    @raise BadSession: C{name} is not a session name.
    """
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise BadSession(
            f"a session's name is 1 to 64 letters, digits, '.', '_' or '-', got {name!r}"
        )
    if name in (".", ".."):
        raise BadSession(f"a session can't be called {name!r}")
    return name


def checkPort(port: object) -> int:
    """
    @raise BadSession: C{port} is not a TCP port number (0: a free one).
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= MAX_PORT:
        raise BadSession(f"a session's port is a whole number from 0 to {MAX_PORT}, got {port!r}")
    return port


def parseSessionOption(value: str) -> tuple[str, int]:
    """
    C{--session NAME=PORT} (or C{NAME}, a free port) as C{(name, port)}.

    @raise BadSession: either part is wrong.
    """
    name, equals, port = value.partition("=")
    if (equals and not port.strip().isdigit()) or ":" in value or name.strip().isdigit():
        # a port, host:port or an endpoint description where a name goes
        raise BadSession(f"--session wants NAME=PORT (its port on 127.0.0.1), such as task-1=8101, got {value!r}")
    try:
        return checkName(name.strip()), checkPort(int(port) if equals else 0)
    except BadSession as e:
        raise BadSession(f"--session {value}: {e}") from None


def sessionLogPath(mainLog: str, name: str) -> str:
    """
    The log of session C{name}: beside the main log, the session's name
    before its extension (C{network.jsonl} gives C{network.NAME.jsonl}), so
    it is in a folder already checked as safe for the main log.
    """
    folder, base = os.path.split(mainLog)
    stem, extension = os.path.splitext(base)
    return os.path.join(folder, f"{stem}.{name}{extension or '.jsonl'}")


def autoName(taken: set[str], used: Callable[[str], bool] = lambda name: False) -> str:
    """
    The first C{session-N} not in C{taken} and not C{used}.

    @param used: whether a name was used before, though no session holds it
        now (its log file is still there): such a name is skipped, so that a
        new session never appends to an ended one's log, whose lines its HAR
        would otherwise hold.
    """
    n = 1
    while f"{AUTO_PREFIX}{n}" in taken or used(f"{AUTO_PREFIX}{n}"):
        n += 1
    return f"{AUTO_PREFIX}{n}"

