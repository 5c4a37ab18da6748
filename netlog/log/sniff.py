"""
Telling a file that is no netlog log from one that is, before a command
reads it: see L{netlog.core.sniff}.
"""

from __future__ import annotations

import os
import stat

from netlog.core.sniff import SNIFF_BYTES, hasLogLine, lookOf

#: What a log line starts with, after a newline, as the writer writes it.
_LINE_START = b'\n{"n":'


def notALog(path: str) -> str | None:
    """
    Why the file at C{path} is not a netlog log, in words that follow its
    name ("is a folder, not a netlog log"; "is not a netlog log (...): it
    looks like TOML ..."), or L{None} when it is one: empty (a log with no line yet),
    or holding at least one netlog line (unusable lines among good ones are
    the export's and the reader's to count). A file that can't be opened is
    L{None} too: the command says why as it opens it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            return "is a folder, not a netlog log"
        if not stat.S_ISREG(mode):
            return None
        head = os.pread(fd, SNIFF_BYTES, 0)
        if not head.strip() or hasLogLine(head) or _lineFurtherOn(fd, len(head)):
            return None
        return f"is not a netlog log (no line in it is one netlog writes): it looks like {lookOf(head)}"
    finally:
        os.close(fd)


def _lineFurtherOn(fd: int, offset: int) -> bool:
    """
    Whether a line that starts as netlog's do follows C{offset} (a long
    run of unusable lines before the first good one).
    """
    carry = b""
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return False
        if _LINE_START in carry + chunk:
            return True
        carry = chunk[-len(_LINE_START):]
        offset += len(chunk)
