"""
An export's output file, there whole or not at all.
"""

from __future__ import annotations

import os
import stat
from contextlib import contextmanager
from typing import BinaryIO, Iterator


@contextmanager
def writeWhole(path: str, suffix: str = ".partial") -> Iterator[BinaryIO]:
    """
    A binary file to write C{path}'s bytes into: C{path + suffix}, renamed
    to C{path} when the block ends without an error, and removed when it
    ends with one, so that C{path} is either what it was or the whole new
    file.

    A C{path} that is not a regular file (C{/dev/null}, a named pipe, a
    terminal) is written as it is: a rename would replace the device or
    pipe with a file of its own.
    """
    try:
        special = not stat.S_ISREG(os.stat(path).st_mode)
    except FileNotFoundError:
        special = False
    if special:
        with open(path, "wb") as out:
            yield out
        return
    part = path + suffix
    try:
        with open(part, "wb") as out:
            yield out
        os.replace(part, path)
    except BaseException:
        try:
            os.unlink(part)
        except FileNotFoundError:
            pass
        raise
