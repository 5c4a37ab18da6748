"""
Replay's shell: a recording loaded (L{Replay}, an L{IAnswers}) and the
answer source of one replayed exchange (L{RecordedSource}, an
L{IAnswerSource}).

The exchange hands a L{RecordedSource} the request as it would hand an
upstream connection; once the request has ended, the source matches it
(L{netlog.core.replay}), reads the recorded answer back from the file by
offset, and hands the exchange its events (at once, or after the recorded
wait with C{--replay-pace recorded}). The exchange keeps, logs and sends
them exactly as an upstream's. No
connection is made and no name looked up unless an unmatched request is
forwarded (C{--replay-unmatched forward}).
"""

from __future__ import annotations

import json
import os
from stat import S_ISREG
from collections import OrderedDict
from functools import partial
from typing import Any, Callable

from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IReactorTime
from twisted.python.failure import Failure
from zope.interface import implementer

from netlog.core.har import exchangeLines
from netlog.core.http1 import RequestHead
from netlog.core.replay import (
    MatchRules,
    Recorded,
    RecordedAnswer,
    ReplayIndex,
    answerFromHar,
    answerFromLog,
    bodyKey,
    OP_CLOSE,
    answerEvents,
    handshake,
    recordedFromHar,
    recordedFromLog,
    recordedResponse,
    refreshed,
    replayMarks,
    requestKey,
    serverFrame,
    unmatchedAnswer,
    webSocketPlan,
)
from netlog.core.wsmessages import MessageAssembler
from netlog.log.series import openSeries
from netlog.proxy.contracts import IAnswerSink, IAnswerSource
from netlog.proxy.mode import IAnswers
from netlog.proxy.held import AnswerEvents, HeldSource

#: What C{--replay-unmatched} takes: answer C{404}, or send it to the backend.
UNMATCHED_404 = "404"
UNMATCHED_FORWARD = "forward"
UNMATCHED_CHOICES = (UNMATCHED_404, UNMATCHED_FORWARD)
#: What C{--replay-pace} takes: answer at once, or wait as the recording did.
PACE_NOW = "now"
PACE_RECORDED = "recorded"
PACE_CHOICES = (PACE_NOW, PACE_RECORDED)
#: The longest a paced answer waits, whatever the recording says (seconds).
MAX_PACE_WAIT = 30.0
#: Bytes of recorded answers' bodies kept read back, the most recently
#: served (a page's scripts, styles and images are asked for again and again).
MAX_CACHED_ANSWER_BYTES = 32 * 1024 * 1024
#: Bytes read from the start of a recording to tell a log from a HAR.
_SNIFF_SIZE = 64


class RecordingError(Exception):
    """
    A recording that can't be read: one line saying why.
    """


def _lineReader(path: str) -> Callable[[int, int], bytes]:
    """
    C{readAt(offset, length)} over the file at C{path}, opened again in a
    process that didn't open it (a forked worker has the supervisor's
    descriptors closed).
    """
    held: list[tuple[int, int]] = []

    def readAt(offset: int, length: int) -> bytes:
        pid = os.getpid()
        if not held or held[0][0] != pid:
            held[:] = [(pid, openSeries(path))]
        return os.pread(held[0][1], length, offset)

    return readAt


def _answerSize(answer: RecordedAnswer) -> int:
    return len(answer.body) + sum(len(m.data) for m in answer.messages)


@implementer(IAnswers)
class Replay:
    """
    A recording, indexed: what answers a replayed site's requests.

    @ivar index: the recorded requests (L{netlog.core.replay.ReplayIndex}).
    """

    def __init__(self, path: str, rules: MatchRules, unmatched: str = UNMATCHED_404,
                 pace: str = PACE_NOW, refresh: bool = False) -> None:
        """
        Index the recording at C{path} (a netlog log, a HAR or a WARC).

        @param refresh: move the answers' dates to now
            (L{netlog.core.replay.refreshed}).

        @raise RecordingError: it can't be read, or holds nothing to replay.
        """
        self.path = path
        self.rules = rules
        self.forwardUnmatched = unmatched == UNMATCHED_FORWARD
        self.paced = pace == PACE_RECORDED
        #: Dates in the answers moved to now (C{--replay-refresh}).
        self.refresh = refresh
        self.index = ReplayIndex()
        self._har: list[Any] | None = None
        self._warc: str | None = None
        #: Answers read back, by their recorded mark, least recently served
        #: first, their bodies at most L{MAX_CACHED_ANSWER_BYTES} together.
        self._answers: OrderedDict[int, RecordedAnswer] = OrderedDict()
        self._answerBytes = 0
        try:
            fd = openSeries(path)
        except OSError as e:
            raise RecordingError(f"can't open the recording {path}: {e.strerror}") from None
        try:
            stat = os.fstat(fd)
            if not S_ISREG(stat.st_mode):
                raise RecordingError(f"the recording {path} is not a file (a netlog log or a HAR)")
            size = stat.st_size
            start = os.pread(fd, _SNIFF_SIZE, 0).lstrip()
            if start.startswith(b'{"n":'):
                from netlog.har.export import indexLog

                self._readAt = _lineReader(path)
                recordedFromLog(exchangeLines(indexLog(fd, size)), self._readAt, rules, self.index)
            elif start.startswith(b"{"):
                self._loadHar(fd, size)
            elif start.startswith((b"\x1f\x8b", b"WARC/")):
                from netlog.warc.replay import recordedFromWarc

                with open(path, "rb") as stream:
                    recordedFromWarc(stream, rules, self.index)
                self._warc = path
            else:
                raise RecordingError(f"the recording {path} is neither a netlog log nor a HAR (nor a WARC)")
        finally:
            os.close(fd)
        if not self.index.firstServable(self.answerFor):
            skipped = ", ".join(f"{n} {why}" for why, n in sorted(self.index.skipped.items())) or "no entries"
            raise RecordingError(f"the recording {path} has no answer to replay ({skipped})")

    def _loadHar(self, fd: int, size: int) -> None:
        chunks = []
        offset = 0
        while offset < size:
            chunk = os.pread(fd, size - offset, offset)
            if not chunk:
                break
            chunks.append(chunk)
            offset += len(chunk)
        try:
            har = json.loads(b"".join(chunks))
            entries = har["log"]["entries"]
            if not isinstance(entries, list):
                raise TypeError
        except (ValueError, KeyError, TypeError, RecursionError):
            raise RecordingError(f"the recording {self.path} is not a HAR with log.entries") from None
        recordedFromHar(har, self.rules, self.index)
        # The entries the index serves from, less their requests' bodies.
        self._har = [{"response": e.get("response"), "timings": e.get("timings"),
                      "_webSocketMessages": e.get("_webSocketMessages"), "serverIPAddress": e.get("serverIPAddress")}
                     if isinstance(e, dict) else None for e in entries]

    def answerFor(self, recorded: Recorded) -> RecordedAnswer:
        """
        C{recorded}'s answer, read back once and kept while it is among
        those most recently served.

        @raise netlog.core.replay.NotServed: it may not be served (found
            when it is first read back: see L{ReplayIndex.match}).
        """
        answers = self._answers
        answer = answers.get(recorded.mark)
        if answer is not None:
            answers.move_to_end(recorded.mark)
            return answer
        answer = self.answerAt(recorded.where)
        size = _answerSize(answer)
        if size <= MAX_CACHED_ANSWER_BYTES:
            answers[recorded.mark] = answer
            self._answerBytes += size
            while self._answerBytes > MAX_CACHED_ANSWER_BYTES:
                _, old = answers.popitem(last=False)
                self._answerBytes -= _answerSize(old)
        return answer

    def answerAt(self, where: Any) -> RecordedAnswer:
        """
        The recorded answer L{netlog.core.replay.Recorded.where} names.
        """
        if self._har is not None:
            return answerFromHar(self._har[where])
        if self._warc is not None:
            from netlog.warc.replay import answerFromWarc

            with open(self._warc, "rb") as stream:
                stream.seek(where)
                return answerFromWarc(stream)
        openOffset, openLength, endOffset, endLength, notes = where
        return answerFromLog(self._readAt(openOffset, openLength), self._readAt(endOffset, endLength),
                             [self._readAt(offset, length) for offset, length in notes])

    def sourceFor(self, reactor: IReactorTime, head: RequestHead, url: str) -> RecordedSource:
        return RecordedSource(self, reactor, head, url)


@implementer(IAnswerSource)
class RecordedSource(HeldSource):
    """
    The answer source of one replayed exchange: it keeps the request's body
    to match by, then hands the exchange the recorded answer's events.
    """

    def __init__(self, replay: Replay, reactor: IReactorTime, head: RequestHead, url: str) -> None:
        super().__init__(reactor, head, url)
        self.replay = replay
        #: A replayed WebSocket's server frames by browser messages heard
        #: (L{netlog.core.replay.webSocketPlan}), and the browser's side read.
        self._plan: list[bytes] | None = None
        self._heard = 0
        self._browserFrames: MessageAssembler | None = None

    def answerRequest(self, exchange: IAnswerSink, body: bytes | None) -> None:
        head = self.head
        method = head.method.decode("latin-1")
        replay = self.replay
        matched = None
        if body is not None:
            contentType = self.fields.first(b"content-type")
            matched = replay.index.match(
                requestKey(method, self.url, replay.rules),
                bodyKey(body, contentType.decode("latin-1") if contentType is not None else None, replay.rules),
                replay.answerFor)
        if matched is None:
            if replay.forwardUnmatched:
                exchange.answerMarks(self, {"_forwarded": True})
                exchange.forward(self, self._sent)
                return
            answer = unmatchedAnswer(method, self.url)
            exchange.answerMarks(self, {"_unmatched": True})
        else:
            recorded, answer = matched
            if replay.refresh:
                answer = refreshed(answer, self.reactor.seconds())
            exchange.answerMarks(self, replayMarks(recorded, answer),
                                 partial(recordedResponse, answer=answer) if answer.cut else None)
        key = self.fields.first(b"sec-websocket-key")
        events: AnswerEvents
        if answer.status == 101 and head.upgrade and key is not None:
            events = [handshake(answer, key)]
            self._plan = webSocketPlan(answer.messages)
            self._browserFrames = MessageAssembler()
        else:
            events = answerEvents(answer, head.method)
        self.handAfter(min(answer.wait, MAX_PACE_WAIT) if replay.paced else 0.0, events)

    # -- a replayed WebSocket: the server's side -----------------------------------------

    def handed(self) -> None:
        if self.raw and self._plan is not None:
            # A WebSocket: the server's messages before the browser's first.
            self._sendPlanned()

    def _sendPlanned(self) -> None:
        """
        Send the recorded server messages due after the browser's
        L{_heard} messages so far.
        """
        plan = self._plan
        exchange = self.exchange
        if plan is None or exchange is None or self._heard >= len(plan):
            return
        frames = plan[self._heard]
        if frames:
            exchange.answerRaw(self, frames)

    def sendRaw(self, data: bytes) -> None:
        """
        The browser's WebSocket frames: each message it completes lets the
        recorded answers that followed it go; its close is answered with a
        close (its code and reason echoed, as a server does), and the
        WebSocket ends.
        """
        frames = self._browserFrames
        if frames is None:
            return
        for _ in frames.feed(data):
            self._heard += 1
            self._sendPlanned()
        if frames.closed and self.exchange is not None:
            code = frames.closeCode
            echoed = code.to_bytes(2, "big") + (frames.closeReason or "").encode("utf-8") if code else b""
            exchange, self.exchange = self.exchange, None
            exchange.answerRaw(self, serverFrame(OP_CLOSE, echoed))
            exchange.answerFailed(self, Failure(ConnectionDone()))
