"""
Write a log's HAR to a binary file object, streaming: the shell around
L{netlog.core.har}.

L{writeHar} does blocking file I/O and holds no reactor state, so the HTTP
API can run it in a thread (C{deferToThread(writeHar, path, out)}).

With C{workers} above 1 (C{netlog har} asks for one per CPU on a
large log), the entries are built and encoded in that many forked
processes, a stretch of exchanges (L{BATCH_BYTES} of log lines) at a time,
and written here in order: the bytes are the same as from one process. The
workers are forked before the index is made; each stretch tells its worker
where its lines lie, the worker reads them from the log itself and hands
the stretch's HAR back through a slot of shared memory. At most
L{BATCHES_AHEAD} stretches per worker are in flight, so memory stays
bounded whatever the log's size. Forking is only safe in a process with no
other threads, so the HTTP API keeps to one.
"""

from __future__ import annotations

import mmap
import multiprocessing
import os
from bisect import bisect_left, bisect_right
from collections import deque
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import nullcontext
from itertools import islice
from typing import Any, BinaryIO, Callable, Generator, Iterator

from netlog.core.exchange import sizeThrough
from netlog.log.series import openSeries
from netlog.log.span import openSeriesRange
from netlog.core.har import (
    ExchangeLines,
    JoinStats,
    LineIndex,
    ScannedLines,
    encodeEntry,
    exchangeLines,
    harHead,
    harTail,
    joinEntries,
    joinLines,
    scanLines,
)

#: Bytes read from the log at a time: the first pass's reads, and at most
#: the second pass's blocks (see L{_Reader}).
READ_SIZE = 1024 * 1024
#: Bytes of HAR gathered before a write to C{out}.
WRITE_SIZE = 256 * 1024
#: Bytes of log lines (open and end) in one worker's stretch of exchanges.
#: Each stretch costs a round trip through the pool: on the 1 GB log, 2 MB
#: took the parent a fifth less CPU time than 1 MB, and 4 MB more (its
#: larger slots and spans).
BATCH_BYTES = 2 * 1024 * 1024
#: Bytes of shared memory a stretch's HAR comes back through (a stretch's
#: HAR is smaller than its lines, whose bodies are base64, but for text
#: JSON escapes a lot; one that doesn't fit comes back through the pool's
#: pipe).
SLOT_SIZE = 2 * BATCH_BYTES
#: The most of the log a worker reads in one go for a stretch: its lines
#: and those between them (a line further on is read alone).
SPAN_LIMIT = 2 * BATCH_BYTES
#: Lines in the log's first L{READ_SIZE} from which the workers read the
#: lines for the index pass: where lines are long, reading them is most of
#: the pass, which one process does for less CPU time (measured on the 1
#: GB log: 0.3 s less) than workers that read each range's last line twice.
SCAN_MIN_LINES = 256
#: The most exchanges in one stretch (many small ones add up slowly): about
#: 1 MB of small exchanges, as many as a stretch of 1 MB held.
BATCH_ENTRIES = 1024
#: Stretches in flight per worker: one being built, one waiting to be.
BATCHES_AHEAD = 2

#: C{progress(bytesIndexed, entriesWritten, logSize, totalEntries)}.
Progress = Callable[[int, int, int, int], None]
#: What each entry goes through before it is written (a redaction, in place).
Transform = Callable[[dict[str, Any]], dict[str, Any]]


class MissingLine(LookupError):
    """
    The export was asked to begin after a line the log doesn't have.
    """

    def __init__(self, n: int) -> None:
        LookupError.__init__(self, n)
        self.n = n


class ExportResult:
    """
    What an export wrote: entries, and lines it could not use.
    """

    def __init__(self, entries: int, unreadable: int) -> None:
        self.entries = entries
        self.unreadable = unreadable

    def __repr__(self) -> str:
        return f"ExportResult(entries={self.entries}, unreadable={self.unreadable})"


def indexLog(fd: int, size: int, progress: Progress | None = None, start: int = 0,
             first: int = 0, pool: _Workers | None = None) -> LineIndex:
    """
    The first pass: index the lines in the first C{size} bytes of C{fd}
    (the size when the export began: lines written after it wait for the
    next export), from the offset C{start} (where line C{first} begins).

    The log is read into the same buffer each time, after the line not yet
    whole at the last one's end: a new megabyte each time would cost a
    page fault per page, and joining the line's start to it a copy.

    With C{pool}, its workers read the lines (L{_indexInWorkers}) when they
    are many (L{SCAN_MIN_LINES}).
    """
    if pool is not None and os.pread(fd, READ_SIZE, start).count(b"\n") >= SCAN_MIN_LINES:
        return _indexInWorkers(pool, size, progress, start, first)
    index = LineIndex(first)
    buffer = bytearray(2 * READ_SIZE)
    offset = start  # where the buffer's first byte lies in the log
    held = 0  # bytes at the buffer's start: a line not yet whole
    while offset + held < size:
        if len(buffer) - held < READ_SIZE:
            # a line longer than the buffer so far
            buffer.extend(bytes(len(buffer)))
        with memoryview(buffer) as whole:
            got = os.preadv(fd, [whole[held : held + min(READ_SIZE, size - offset - held)]], offset + held)
        if not got:
            break
        filled = held + got
        taken = index.addLines(offset, buffer, 0, filled)
        held = filled - taken
        if taken:
            buffer[:held] = buffer[taken:filled]
            offset += taken
        if progress is not None:
            progress(offset + held, 0, size, 0)
    if held:
        index.add(offset, bytes(buffer[:held]))
    return index


def _indexInWorkers(pool: _Workers, size: int, progress: Progress | None, start: int, first: int) -> LineIndex:
    """
    L{indexLog}, the log's lines read in the workers a range of
    L{SPAN_LIMIT} at a time (L{_scanRange}) and taken here in order
    (L{LineIndex.addScanned}): the index is the same, and this process,
    which alone can keep it, does only its bookkeeping (a fifth of the
    pass on small exchanges) while the workers read and match the lines.
    """
    index = LineIndex(first)
    ranges = ((at, min(at + SPAN_LIMIT, size), size, at == start) for at in range(start, size, SPAN_LIMIT))
    for scanned, tail, end in pool.inOrder(_scanRange, ranges):
        index.addScanned(scanned)
        if tail is not None:
            index.add(*tail)
        if progress is not None:
            progress(end, 0, size, 0)
    return index


#: What a worker reads first of the line that runs past its range's end.
_FIRST_STEP = 16 * 1024


def _scanRange(begin: int, end: int, size: int, first: bool) -> tuple[ScannedLines, tuple[int, bytes] | None, int]:
    """
    In a worker: the heads of the lines that begin in the log's bytes from
    C{begin} to C{end} (C{first}: a line begins at C{begin}), the last of
    them read through its newline wherever it is; that line, if the log's
    first C{size} bytes end before its newline (where it lies, and its
    bytes); and C{end}.
    """
    assert _worker is not None
    fd = _worker.fd
    with memoryview(_worker.buffer) as whole:
        got = os.preadv(fd, [whole[: end - begin]], begin)
    data = _worker.buffer
    at = 0
    if not first and os.pread(fd, 1, begin - 1) != b"\n":
        # the line that begins before begin is the range before's
        at = data.find(b"\n", 0, got) + 1
        if at == 0:
            return ScannedLines(), None, end
    scanned, taken = scanLines(begin, data, at, got)
    if taken == got:
        return scanned, None, end
    # the last line, begun before end: read through its newline
    line = bytearray(data[taken:got])
    lineAt = begin + taken
    # a little at first (most lines end soon), twice as much each time
    step = _FIRST_STEP
    while True:
        more = os.pread(fd, min(step, size - lineAt - len(line)), lineAt + len(line))
        nl = more.find(b"\n")
        line += more if nl < 0 else more[: nl + 1]
        if nl >= 0 or not more:
            break
        step = min(2 * step, READ_SIZE)
    last, lastTaken = scanLines(lineAt, line)
    scanned.extend(last)
    return scanned, (None if lastTaken == len(line) else (lineAt, bytes(line))), end


class _Reader:
    """
    C{readAt} for the second pass, reading the log in blocks rather than a
    line at a time: reading an open line past the current block loads the
    block from it through the last open line that fits in C{READ_SIZE} (so
    a block never holds more than the log's next stretch), and lines within
    the block, most end lines among them, come from memory. Lines outside
    it are read alone, an open line before the block among them: the second
    pass goes in the order exchanges started, which is the log's order but
    for an open line written a little late, and such a line is read alone
    rather than moving the block back over what was just read. Whatever the
    order, each read returns the log's bytes there; the order only decides
    how often the log is read.

    The block is read into the same buffer each time: memory the process
    already has costs nothing to fill, where a new megabyte costs a page
    fault per page (on a virtual machine, more than the copy).
    """

    def __init__(self, fd: int, index: LineIndex, buffer: bytearray | None = None) -> None:
        self._fd = fd
        self._offsets = index.openOffsets
        self._lengths = index.openLengths
        self._buffer = buffer if buffer is not None else bytearray(READ_SIZE)
        self._block = memoryview(self._buffer)[:0]
        self._start = 0
        self._end = 0

    def readAt(self, offset: int, length: int) -> bytes:
        if self._start <= offset and offset + length <= self._end:
            start = offset - self._start
            return self._block[start : start + length].tobytes()
        if offset < self._end:
            # behind the block's end: a line written before the block's
            # first, or one running past its end
            return os.pread(self._fd, length, offset)
        offsets = self._offsets
        i = bisect_left(offsets, offset)
        if i < len(offsets) and offsets[i] == offset:
            # an open line: load the stretch through the last open that fits
            j = bisect_right(offsets, offset + READ_SIZE) - 1
            while j > i and offsets[j] + self._lengths[j] > offset + READ_SIZE:
                j -= 1
            if j > i:
                self._block = memoryview(self._buffer)[: offsets[j] + self._lengths[j] - offset]
                got = os.preadv(self._fd, [self._block], offset)
                self._block = self._block[:got]
                self._start = offset
                self._end = offset + got
                return self._block[:length].tobytes()
        return os.pread(self._fd, length, offset)


def exportSpan(fd: int, upTo: Callable[[int, int], int] | None, fromLine: int,
               wholeIfMissing: bool) -> tuple[int, int]:
    """
    How many of the log's first bytes an export reads, and the offset it
    starts at (see L{writeHar}'s parameters, which this reads).

    @raise MissingLine: the log has no line C{fromLine - 1}.
    """
    size = os.fstat(fd).st_size
    if upTo is not None:
        size = min(size, upTo(fd, size))
    start = 0
    if fromLine > 1:
        found = sizeThrough(lambda offset, length: os.pread(fd, length, offset), os.fstat(fd).st_size,
                            fromLine - 1)
        if found is None and not wholeIfMissing:
            raise MissingLine(fromLine - 1)
        start = found or 0
    return size, start


def writeHar(
    logPath: str, out: BinaryIO, progress: Progress | None = None, workers: int = 1,
    upTo: Callable[[int, int], int] | None = None, fromLine: int = 0, wholeIfMissing: bool = False,
    transform: Transform | None = None, lines: tuple[int, int | None] | None = None,
) -> ExportResult:
    """
    Write the HAR of the log at C{logPath} to C{out} (binary, UTF-8 JSON, no
    BOM). Memory: the largest entry, plus about 48 bytes per exchange for the
    index (see L{netlog.core.har}); with C{workers}, that in each process,
    and the stretches in flight.

    @param workers: processes to build the entries in (forked: call it with
        more than 1 only from a process that runs no other thread).
    @param upTo: C{upTo(fd, size)} gives how many of the log's first bytes
        to export (the log as it was at a reader's cursor); default all.
    @param fromLine: export only the exchanges whose open line is this one
        or later (a session's, in a log an earlier session of its name
        began); 0 or 1 for all.
    @param wholeIfMissing: when the log has no line C{fromLine - 1} (it was
        begun again since), export it whole rather than raise.
    @param transform: what each entry goes through before it is encoded
        (L{netlog.har.redact.Redactor}), in whichever process builds it.
    @param lines: export only the exchanges whose open line is within
        C{(first, last)} (last None: to the end), each whole, reading only
        the segments that hold them (L{netlog.log.span.openSeriesRange});
        C{upTo} and C{fromLine} are then not used.
    @raise MissingLine: the log has no line C{fromLine - 1}.
    """
    fd = openSeries(logPath) if lines is None else openSeriesRange(logPath, *lines)
    try:
        if lines is None:
            size, start = exportSpan(fd, upTo, fromLine, wholeIfMissing)
            first = fromLine if start else 0
        else:
            size, start, first = os.fstat(fd).st_size, 0, lines[0]
        with _Workers(fd, workers, transform=transform) if workers > 1 else nullcontext() as pool:
            # forked first, so that they start while this process indexes,
            # and hold none of the index
            index = indexLog(fd, max(size, start), progress, start, first, pool)
            total = len(index)
            if pool is not None and total > 1:
                built = pool.build(index)
            else:
                built = _inOrder(fd, index, transform)
            count = 0
            unreadable = index.unreadable
            pending = _Pending(out)
            pending.add(harHead())
            try:
                for encoded, entries, lost in built:
                    unreadable += lost
                    if not entries:
                        continue
                    if count:
                        pending.add(b",")
                    count += entries
                    if pending.add(encoded) and progress is not None:
                        progress(size, count, size, total)
            finally:
                # stop the workers now if writing failed, not when the
                # traceback goes
                built.close()
        pending.add(harTail(unreadable))
        pending.flush()
        if progress is not None:
            progress(size, count, size, total)
        return ExportResult(count, unreadable)
    finally:
        os.close(fd)


class _Pending:
    """
    The HAR's bytes gathered for C{out}, in a buffer of L{WRITE_SIZE} filled
    in place (so that its pages are touched once, not once a write), and
    written when the next piece doesn't fit; a piece larger than the buffer
    is written as it is.
    """

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._buffer = memoryview(bytearray(WRITE_SIZE))
        self._size = 0

    def add(self, piece: bytes | memoryview) -> bool:
        """
        Add C{piece}; whether anything was written to C{out}.
        """
        size = self._size
        length = len(piece)
        if size + length <= WRITE_SIZE:
            self._buffer[size : size + length] = piece
            self._size = size + length
            return False
        self.flush()
        if length >= WRITE_SIZE:
            self._out.write(piece)
        else:
            self._buffer[:length] = piece
            self._size = length
        return True

    def flush(self) -> None:
        if self._size:
            self._out.write(self._buffer[: self._size])
            self._size = 0


#: What building a stretch gives: its entries encoded and joined by commas,
#: how many, and how many lines it could not use.
Built = tuple[bytes | memoryview, int, int]


def _inOrder(fd: int, index: LineIndex, transform: Transform | None = None) -> Generator[Built, None, None]:
    """
    Every entry, one at a time, in this process.
    """
    stats = JoinStats()
    for entry in joinEntries(index, _Reader(fd, index).readAt, stats):
        lost, stats.unreadable = stats.unreadable, 0
        yield encodeEntry(transform(entry) if transform is not None else entry), 1, lost
    yield b"", 0, stats.unreadable


class _Batch:
    """
    A stretch of exchanges for a worker: where their lines lie, in start
    order, and the stretch of the log that holds them but for far ones (a
    tunnel's end, long after), read in one go.
    """

    __slots__ = ("exchanges", "start", "end")

    def __init__(self, exchanges: list[ExchangeLines], start: int, end: int) -> None:
        self.exchanges = exchanges
        self.start = start
        self.end = end


def _batches(index: LineIndex) -> Iterator[_Batch]:
    """
    L{exchangeLines} cut into stretches of about L{BATCH_BYTES} of log
    lines.
    """
    batch: list[ExchangeLines] = []
    size = 0
    for exchange in exchangeLines(index):
        batch.append(exchange)
        _, length, ends, notes = exchange
        size += length
        for _, length in ends:
            size += length
        for _, length in notes:
            size += length
        if size >= BATCH_BYTES or len(batch) >= BATCH_ENTRIES:
            yield _batch(batch)
            batch = []
            size = 0
    if batch:
        yield _batch(batch)


def _batch(exchanges: list[ExchangeLines]) -> _Batch:
    start = min([offset for offset, _, _, _ in exchanges])
    end = start
    limit = start + SPAN_LIMIT
    for offset, length, ends, notes in exchanges:
        lineEnd = offset + length
        if lineEnd <= limit and lineEnd > end:
            end = lineEnd
        for lines in (notes, ends) if notes else (ends,):
            for lineOffset, lineLength in lines:
                lineEnd = lineOffset + lineLength
                if lineOffset >= start and lineEnd <= limit and lineEnd > end:
                    end = lineEnd
    return _Batch(exchanges, start, end)


class _SpanReader:
    """
    C{readAt} for a worker's stretch: its span of the log, read in one go
    into the worker's buffer; a line outside it is read alone.
    """

    def __init__(self, fd: int, start: int, end: int, buffer: bytearray) -> None:
        self._fd = fd
        self._start = start
        with memoryview(buffer) as whole:
            got = os.preadv(fd, [whole[: end - start]], start)
        self._span = memoryview(buffer)[:got]
        self._end = start + got

    def readAt(self, offset: int, length: int) -> bytes:
        if self._start <= offset and offset + length <= self._end:
            start = offset - self._start
            return self._span[start : start + length].tobytes()
        return os.pread(self._fd, length, offset)

    def close(self) -> None:
        self._span.release()


class _Worker:
    """
    What a worker inherits when it is forked: the log, and the slots its
    stretches go back through.
    """

    def __init__(self, fd: int, slots: mmap.mmap, transform: Transform | None) -> None:
        self.fd = fd
        self.slots = slots
        self.transform = transform
        #: each stretch's span of the log is read into it
        self.buffer = bytearray(SPAN_LIMIT)


_worker: _Worker | None = None


def _startWorker(worker: _Worker) -> None:
    global _worker
    _worker = worker
    _keepFreedMemory()


#: glibc's C{mallopt} parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
#: What a worker's allocator keeps rather than gives back to the kernel.
_KEEP_FREED = 32 * 1024 * 1024


def _keepFreedMemory() -> None:
    """
    Have glibc's allocator keep what a worker frees (up to L{_KEEP_FREED})
    for its next entry. Its defaults give back any 128 KB free at the top
    of the heap, and an entry of 100 KB bodies frees about that much: the
    next one then faults the same pages in again, tens of thousands of
    faults a gigabyte (measured), which cost a worker more system time than
    its reads. A no-op where there is no glibc.
    """
    try:
        import ctypes

        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_TRIM_THRESHOLD, _KEEP_FREED)
    mallopt(_M_MMAP_THRESHOLD, _KEEP_FREED // 2)


def _buildBatch(batch: _Batch, slot: int) -> tuple[int | bytes, int, int]:
    """
    In a worker: a stretch of entries, encoded and joined by commas, put in
    its slot of the shared memory as each is made (the bytes themselves,
    rarely, when they don't fit): the stretch's length there, its entries,
    and the lines it could not use.
    """
    assert _worker is not None
    stats = JoinStats()
    reader = _SpanReader(_worker.fd, batch.start, batch.end, _worker.buffer)
    count = 0
    at = 0
    overflow: list[bytes] | None = None
    with memoryview(_worker.slots) as slots, slots[slot * SLOT_SIZE : (slot + 1) * SLOT_SIZE] as view:
        for entry in joinLines(batch.exchanges, reader.readAt, stats):
            piece = encodeEntry(_worker.transform(entry) if _worker.transform is not None else entry)
            if overflow is None and at + 1 + len(piece) <= SLOT_SIZE:
                if count:
                    view[at : at + 1] = b","
                    at += 1
                view[at : at + len(piece)] = piece
                at += len(piece)
            else:
                if overflow is None:
                    overflow = [view[:at].tobytes()] if count else []
                overflow.append(piece)
            count += 1
    reader.close()
    if overflow is not None:
        return b",".join(overflow), count, stats.unreadable
    return at, count, stats.unreadable


class _Workers:
    """
    The forked processes that build stretches of entries, and the shared
    memory their stretches come back through, one slot per stretch in
    flight (a stretch of megabytes through a pipe costs more than building
    it).
    """

    def __init__(self, fd: int, workers: int, transform: Transform | None = None,
                 buildBatch: Callable[[_Batch, int], tuple[Any, ...]] | None = None) -> None:
        """
        @param transform: what each entry goes through before it is encoded
            (L{netlog.har.redact.Redactor}), in the worker.
        @param buildBatch: C{buildBatch(batch, slot)}, run in a worker: the
            stretch's bytes' length in its slot of the shared memory (or
            the bytes themselves), then what else it tells; default
            L{_buildBatch}, a stretch of HAR entries.
        """
        self._buildBatch = buildBatch or _buildBatch
        self._workers = workers
        self._limit = workers * BATCHES_AHEAD
        self._slots = mmap.mmap(-1, self._limit * SLOT_SIZE)
        self._pool = ProcessPoolExecutor(
            workers, multiprocessing.get_context("fork"), initializer=_startWorker,
            initargs=(_Worker(fd, self._slots, transform),),
        )

    def __enter__(self) -> _Workers:
        # forking processes start all of theirs at the first task
        self._pool.submit(int).result()
        return self

    def __exit__(self, *exc: object) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._slots.close()

    def build(self, index: LineIndex) -> Generator[tuple[Any, ...], None, None]:
        """
        Every stretch built (by default: its entries, their count and the
        lines it could not use), given back in order; at most
        L{BATCHES_AHEAD} stretches per worker in flight.
        """
        pool, slots, buildBatch = self._pool, self._slots, self._buildBatch
        inFlight: deque[tuple[int, Future[tuple[Any, ...]]]] = deque()
        batches = _batches(index)
        for slot, batch in enumerate(islice(batches, self._limit)):
            inFlight.append((slot, pool.submit(buildBatch, batch, slot)))
        while inFlight:
            slot, result = inFlight.popleft()
            # a worker that died (killed, out of memory) fails the export
            # with BrokenProcessPool rather than leave it waiting
            built, *told = result.result()
            if isinstance(built, bytes):
                yield built, *told
            else:
                # the caller writes or copies it before asking for the next
                with memoryview(slots) as view, view[slot * SLOT_SIZE : slot * SLOT_SIZE + built] as stretch:
                    yield stretch, *told
            for batch in islice(batches, 1):
                inFlight.append((slot, pool.submit(buildBatch, batch, slot)))


    def inOrder(self, task: Callable[..., Any], arguments: Iterator[tuple[Any, ...]]) -> Iterator[Any]:
        """
        C{task(*each)} for each of C{arguments}, run in the workers, what
        each gives in order; at most L{BATCHES_AHEAD} tasks per worker in
        flight.
        """
        pool = self._pool
        inFlight: deque[Future[Any]] = deque(pool.submit(task, *each) for each in islice(arguments, self._limit))
        while inFlight:
            done = inFlight.popleft().result()
            for each in islice(arguments, 1):
                inFlight.append(pool.submit(task, *each))
            yield done
