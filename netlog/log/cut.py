"""
Where logrotate's copy of a cut log ended (see L{netlog.core.cut}): the
last line of the newest plain file beside the log whose name is the log's
and more (C{network.jsonl.1}, C{network.jsonl-20261206}), netlog's own
segments aside.

A copy compressed already (logrotate's C{compress} without
C{delaycompress}) or kept in another folder (C{olddir}) is not read: then
the writer writes every line it still holds again, and the lines the copy
has are in both files, never in neither.
"""

from __future__ import annotations

import os
import stat

from netlog.core.cut import lineNumber
from netlog.core.segments import COMPRESSED_SUFFIX

#: Seconds between two looks at an idle log for a cut, by its writer.
CUT_CHECK_INTERVAL = 1.0
#: Seconds a reader waits for lines a cut left in neither file to be
#: written again (the writer does so at its next line, or within
#: L{CUT_CHECK_INTERVAL} when idle) before it takes them for lost.
WRITTEN_AGAIN_WITHIN = 3 * CUT_CHECK_INTERVAL
#: The bytes read from a copy's end to find its last whole line.
TAIL_BYTES = 1 << 20
#: How many of the newest files beside the log are read.
_LOOKED_AT = 4
#: Suffixes of compressed copies, which are not read.
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".Z", COMPRESSED_SUFFIX)


def _candidates(path: str) -> list[tuple[float, str]]:
    folder, name = os.path.split(os.path.abspath(path))
    found = []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    for other in names:
        if len(other) <= len(name) or not other.startswith(name) or other[len(name)] not in ".-_":
            continue
        if other.endswith(_COMPRESSED):
            continue
        full = os.path.join(folder, other)
        try:
            info = os.stat(full, follow_symlinks=False)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and info.st_size:
            found.append((info.st_mtime, full))
    return sorted(found, reverse=True)


def lastLineIn(path: str) -> int | None:
    """
    The number of the last whole netlog line of the file C{path}, read
    from its end; None when it has none there (or can't be read).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - TAIL_BYTES)
        tail = os.pread(fd, size - start, start)
    except OSError:
        return None
    finally:
        os.close(fd)
    for line in reversed(tail.split(b"\n")):
        n = lineNumber(line)
        if n is not None:
            return n
    return None


def copiedUpTo(path: str, upTo: int) -> tuple[str, int] | None:
    """
    logrotate's copy of the log C{path} and its last line: of the newest
    few files beside it, the one whose last line is the highest at most
    C{upTo} (the writer's last line: a file with a later one is not a copy
    of this log); None when there is none.
    """
    best: tuple[str, int] | None = None
    for _, candidate in _candidates(path)[:_LOOKED_AT]:
        last = lastLineIn(candidate)
        if last is not None and last <= upTo and (best is None or last > best[1]):
            best = (candidate, last)
    return best
