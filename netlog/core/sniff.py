"""
What a file that holds no netlog line looks like, from its first bytes, so
that C{netlog har} and C{netlog read} given the wrong file (a sites.toml, a
HAR, random bytes) say so in one line instead of exporting or printing
nothing and exiting 0.

Pure: bytes in, a description out.
"""

from __future__ import annotations

import re

from netlog.core.logline import decodeLine

#: How many of a file's first bytes are read to tell what it looks like.
SNIFF_BYTES = 64 * 1024

_TOML_LINE = re.compile(rb"\s*(\[\[?[\w.\" -]+\]\]?|[\w.\"-]+\s*=.*)\s*")


def hasLogLine(head: bytes) -> bool:
    """
    Whether one of the lines in C{head} (the last one even if cut short)
    is a line netlog writes.
    """
    return any(decodeLine(line) is not None for line in head.split(b"\n") if line.strip())


def lookOf(head: bytes) -> str:
    """
    What a file beginning with C{head} looks like, said after "it looks
    like": a HAR, JSON of another kind, TOML, binary data, or other text.
    """
    text = head.lstrip(b"\xef\xbb\xbf").lstrip()
    if b"\0" in head or _notText(head):
        return "binary data"
    if text.startswith(b"{") and b'"log"' in text[:4096] and (b'"entries"' in text or b'"creator"' in text):
        return "a HAR, which netlog har makes from a log"
    if text.startswith((b"{", b"[{", b"[]")):
        return "JSON of another kind"
    lines = [line for line in text.splitlines()[:20] if line.strip() and not line.lstrip().startswith(b"#")]
    if lines and all(_TOML_LINE.fullmatch(line) for line in lines[:5]):
        return "TOML, a sites.toml or a rules file"
    return "text"


def _notText(head: bytes) -> bool:
    """
    Whether C{head} is not UTF-8 (allowing a character cut at its end).
    """
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        return e.start < len(head) - 3
    return False
