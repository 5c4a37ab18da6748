"""
The proxies' options for segments: C{--rotate-size}, C{--rotate-every},
C{--keep-segments}, C{--keep-for}, added to L{netlog.tap.common.LogOptions}.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.python import usage

from netlog.core.segments import Rotation, parseDuration, parseSize


def _coerce(name: str, parse: Callable[[str], Any], doc: str) -> Callable[[str], Any]:
    def coerce(value: str) -> Any:
        try:
            return parse(value)
        except ValueError as e:
            raise ValueError(f"--{name}: {e}") from None

    coerce.coerceDoc = doc  # type: ignore[attr-defined]
    return coerce


def _count(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{value!r} is not a number of segments (1 or more)")
    return int(value)


#: The options, in C{usage.Options.optParameters}' shape.
ROTATION_OPTIONS: list[list[Any]] = [
    ["rotate-size", None, None, "Close the log's live segment once it holds this much (e.g. 1GiB, "
     "500MB); closed segments are compressed beside it.", _coerce("rotate-size", parseSize, "A size.")],
    ["rotate-every", None, None, "Close the log's live segment this often (e.g. 1d, 12h, 30m); "
     "SIGUSR1 closes it at once.", _coerce("rotate-every", parseDuration, "A duration.")],
    ["keep-segments", None, None, "Keep at most this many closed segments (the oldest go first; "
     "default: all).", _coerce("keep-segments", _count, "A number.")],
    ["keep-for", None, None, "Remove closed segments last written longer ago than this (e.g. 30d; "
     "default: never).", _coerce("keep-for", parseDuration, "A duration.")],
    ["session-retention", None, None, "Remove a deleted session's log this long after it was deleted "
     "(e.g. 7d; default: kept).", _coerce("session-retention", parseDuration, "A duration.")],
]


def rotationOf(options: usage.Options) -> Rotation:
    """
    The rotation and retention a proxy's parsed options ask for (its
    config's C{rotation}).
    """
    return Rotation(
        size=options["rotate-size"],
        every=options["rotate-every"],
        keepSegments=options["keep-segments"],
        keepFor=options["keep-for"],
    )

