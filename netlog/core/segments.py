"""
A log as a series of segments: naming, choosing and retention, with no I/O.

A log at C{NAME.jsonl} is the I{live} segment, the one being written, and
closed segments beside it, C{NAME.000000000042.jsonl} while just closed and
C{NAME.000000000042.jsonl.zst} once compressed, where C{42} is the C{n} of
the segment's first line. Numbers go on across segments without a gap, so a
segment's last line is the next one's first less one, and the names alone
are an index of where each line is: a reader after line N opens the one
segment that holds N+1 (see L{locate}).

The shell (L{netlog.log.series}) lists the folder, opens, compresses and
removes; this module only decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

#: The suffix of a live log's name that closed segments keep after their number.
LIVE_SUFFIX = ".jsonl"
#: The suffix a compressed segment adds.
COMPRESSED_SUFFIX = ".zst"
#: The suffix of a compressed segment being written (never read).
PARTIAL_SUFFIX = ".tmp"
#: Digits of the first line number in a segment's name (more when needed).
NUMBER_DIGITS = 12

_UNITS_SIZE = {
    "": 1, "b": 1,
    "k": 1000, "kb": 1000, "m": 1000**2, "mb": 1000**2, "g": 1000**3, "gb": 1000**3, "t": 1000**4, "tb": 1000**4,
    "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
}
_UNITS_TIME = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_AMOUNT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*\Z")


def _split(liveName: str) -> tuple[str, str]:
    """
    The live name's stem and suffix: C{("network", ".jsonl")}; a name not
    ending in C{.jsonl} keeps no suffix.
    """
    if liveName.endswith(LIVE_SUFFIX) and len(liveName) > len(LIVE_SUFFIX):
        return liveName[: -len(LIVE_SUFFIX)], LIVE_SUFFIX
    return liveName, ""


@dataclass(frozen=True, order=True)
class Segment:
    """
    A closed segment.

    @ivar first: the C{n} of its first line.
    @ivar name: its file name (no folder).
    @ivar compressed: whether it is zstandard-compressed.
    """

    first: int
    name: str
    compressed: bool


def segmentName(liveName: str, first: int, compressed: bool = False) -> str:
    """
    The file name of the closed segment of the log C{liveName} whose first
    line is C{first}.
    """
    stem, suffix = _split(liveName)
    name = f"{stem}.{first:0{NUMBER_DIGITS}d}{suffix}"
    return name + COMPRESSED_SUFFIX if compressed else name


def _pattern(liveName: str) -> re.Pattern[str]:
    stem, suffix = _split(liveName)
    return re.compile(
        re.escape(stem) + r"\.([0-9]{%d,})" % NUMBER_DIGITS + re.escape(suffix)
        + r"(?:(" + re.escape(COMPRESSED_SUFFIX) + r")(?:\.([0-9]+))?)?(" + re.escape(PARTIAL_SUFFIX) + r")?\Z"
    )


def partialName(segmentName: str, pid: int) -> str:
    """
    The name the process C{pid} writes the compressed copy of the closed
    segment C{segmentName} under, until it is whole: one of its own, so
    that two processes compressing the same segment never share a file.
    """
    return f"{segmentName}{COMPRESSED_SUFFIX}.{pid}{PARTIAL_SUFFIX}"


@dataclass(frozen=True)
class Partial:
    """
    A compressed copy still being written, or left half written by a kill.

    @ivar name: its file name (no folder).
    @ivar pid: the process writing it; None for the older name without one.
    """

    name: str
    pid: int | None


def _nobodyWriting(partial: Partial) -> bool:
    return False


@dataclass(frozen=True)
class Listing:
    """
    What a folder's names say of a log's closed segments.

    @ivar segments: the closed segments, oldest first, one per first line
        (the uncompressed file while both are there: it is whole, and its
        compressed copy may be the one being made).
    @ivar toCompress: closed segments not yet compressed, oldest first.
    @ivar leftovers: names to remove: an uncompressed segment whose
        compressed copy is whole (the copy was renamed in place only once
        written and synced), and partial compressed copies no process is
        writing any more (a kill left them).
    @ivar partials: every partial compressed copy found, being written
        or not.
    """

    segments: tuple[Segment, ...] = ()
    toCompress: tuple[Segment, ...] = ()
    leftovers: tuple[str, ...] = ()
    partials: tuple[Partial, ...] = ()


def listSegments(
    liveName: str,
    names: Iterable[str],
    beingWritten: Callable[[Partial], bool] = _nobodyWriting,
) -> Listing:
    """
    Sort a folder's names into the log C{liveName}'s closed segments.

    @param beingWritten: whether a process is still writing a partial
        compressed copy (the shell asks whether its process lives); one
        being written is never a leftover.
    """
    pattern = _pattern(liveName)
    plain: dict[int, str] = {}
    packed: dict[int, str] = {}
    partials: list[Partial] = []
    for name in names:
        match = pattern.match(name)
        if match is None:
            continue
        first = int(match.group(1))
        if match.group(4):
            if match.group(2):
                pid = match.group(3)
                partials.append(Partial(name, None if pid is None else int(pid)))
        elif match.group(3):
            continue  # a number with no partial suffix: not ours
        elif match.group(2):
            packed[first] = name
        else:
            plain[first] = name
    segments = []
    toCompress = []
    partials.sort(key=lambda p: p.name)
    leftovers = [p.name for p in partials if not beingWritten(p)]
    for first in sorted(set(plain) | set(packed)):
        if first in plain:
            segment = Segment(first, plain[first], False)
            if first in packed:
                leftovers.append(plain[first])
            else:
                toCompress.append(segment)
        else:
            segment = Segment(first, packed[first], True)
        segments.append(segment)
    return Listing(tuple(segments), tuple(toCompress), tuple(leftovers), tuple(partials))


@dataclass(frozen=True)
class Location:
    """
    Where a reader after line C{after} goes on.

    @ivar index: the segment to read: an index into the closed segments,
        or their count for the live one.
    @ivar after: the cursor to read that segment with: the one asked, or
        0 when the lines after it are no longer kept.
    @ivar removedUpTo: when lines after the cursor were removed (retention,
        or a log cut under netlog), the first line still kept less one;
        else None.
    """

    index: int
    after: int
    removedUpTo: int | None = None


def locate(after: int, firsts: Sequence[int], liveFirst: int | None) -> Location:
    """
    Which segment holds line C{after + 1}.

    @param firsts: the closed segments' first lines, oldest first.
    @param liveFirst: the live segment's first line; None when it has none
        yet (it will begin after the last closed segment).
    """
    live = len(firsts)
    starts = list(firsts) + ([liveFirst] if liveFirst is not None else [])
    if not starts:
        return Location(live, after)
    if after <= 0:
        return Location(0, 0)
    want = after + 1
    if want < starts[0]:
        return Location(0, 0, starts[0] - 1)
    index = 0
    for i, first in enumerate(starts):
        if first <= want:
            index = i
        else:
            break
    return Location(index, after)


def expired(
    segments: Sequence[tuple[Segment, float]],
    keepSegments: int | None,
    keepFor: float | None,
    now: float,
) -> list[Segment]:
    """
    The closed segments retention removes, oldest first: all but the newest
    C{keepSegments}, and those last written more than C{keepFor} seconds
    ago. The live segment is never among them.

    @param segments: each closed segment with when it was last written,
        oldest first.
    """
    gone: list[Segment] = []
    count = len(segments)
    for i, (segment, written) in enumerate(segments):
        tooMany = keepSegments is not None and count - i > keepSegments
        tooOld = keepFor is not None and now - written > keepFor
        if tooMany or tooOld:
            gone.append(segment)
    return gone


@dataclass(frozen=True)
class Rotation:
    """
    When a log's live segment is closed, and how many closed ones are kept.

    @ivar size: close it once it holds this many bytes (None: never by size).
    @ivar every: close it every this many seconds (None: never by time).
    @ivar keepSegments: keep at most this many closed segments.
    @ivar keepFor: remove closed segments last written longer ago, in seconds.
    """

    size: int | None = None
    every: float | None = None
    keepSegments: int | None = None
    keepFor: float | None = None


def closingSize(rotation: Rotation) -> float:
    """
    How many bytes the live segment holds when it is closed: the writer
    compares each write's total with it (infinite: never by size).
    """
    return float("inf") if rotation.size is None else rotation.size


def _amount(text: str, units: dict[str, int], what: str) -> float:
    match = _AMOUNT.match(text)
    if match is None or match.group(2).lower() not in units:
        known = ", ".join(sorted(u for u in units if u))
        raise ValueError(f"{text!r} is not a {what} (a number and a unit: {known})")
    value = float(match.group(1)) * units[match.group(2).lower()]
    if value <= 0:
        raise ValueError(f"{text!r}: a {what} must be more than 0")
    return value


def parseSize(text: str) -> int:
    """
    A size such as C{1GiB}, C{500MB}, C{65536}, in bytes.

    @raise ValueError: not a size, or not more than 0.
    """
    return int(_amount(text, _UNITS_SIZE, "size"))


def parseDuration(text: str) -> float:
    """
    A duration such as C{1d}, C{12h}, C{30m}, C{90} (seconds), in seconds.

    @raise ValueError: not a duration, or not more than 0.
    """
    return _amount(text, _UNITS_TIME, "duration")
