"""
Logs made for the pure tests: a model of the writer's numbering, and a way to
shrink the paging and recovery block sizes so small logs cross many blocks.
"""

from __future__ import annotations

import contextlib
import heapq
from typing import Iterator

from netlog.core import paging, recovery
from netlog.core.logline import END, OPEN, encodeLine


def modelLog(ops: list[tuple[str, int]], start: int = 1, openAtStart: tuple[int, ...] = ()) -> tuple[bytes, list[int]]:
    """
    Lines as the writer numbers them: C{("open", size)} opens an exchange,
    C{("end", k)} ends the k-th still open one (modulo), C{("junk", size)}
    puts a line that isn't JSON.

    @return: the bytes, and the offset just past each line.
    """
    out = []
    ends = []
    pos = 0
    n = start
    opened: list[int] = list(openAtStart)
    heap: list[int] = list(openAtStart)
    heapq.heapify(heap)
    for kind, arg in ops:
        if kind == "junk":
            line = b"x" * arg + b"\n"
        elif kind == "open":
            opened.append(n)
            heapq.heappush(heap, n)
            line = encodeLine(n, OPEN, n, _openFrom(heap, opened, n + 1), 0.0, {"pad": "p" * arg})
            n += 1
        else:
            if not opened:
                continue
            exchangeId = opened.pop(arg % len(opened))
            line = encodeLine(n, END, exchangeId, _openFrom(heap, opened, n + 1), 0.0, {})
            n += 1
        out.append(line)
        pos += len(line)
        ends.append(pos)
    return b"".join(out), ends


def _openFrom(heap: list[int], opened: list[int], nextNumber: int) -> int:
    while heap and heap[0] not in opened:
        heapq.heappop(heap)
    return heap[0] if heap else nextNumber


def reader(data: bytes):  # type: ignore[no-untyped-def]
    def readAt(offset: int, size: int) -> bytes:
        return data[offset : offset + size]

    return readAt


@contextlib.contextmanager
def smallBlocks(block: int = 7, window: int = 16, chunk: int = 5) -> Iterator[None]:
    """
    Make paging and recovery read a few bytes at a time.
    """
    saved = paging.BLOCK, paging.SCAN_WINDOW, recovery.CHUNK
    paging.BLOCK, paging.SCAN_WINDOW, recovery.CHUNK = block, window, chunk
    try:
        yield
    finally:
        paging.BLOCK, paging.SCAN_WINDOW, recovery.CHUNK = saved

