"""
An exchange's state, one enum per direction (as mitmproxy keeps
C{client_state} and C{server_state} apart), and the table of the moves
each may make (as h2's C{stream.py} keeps its stream's): a move the table
doesn't hold is a bug in the engine, and says so loudly
(L{WrongTransition}) instead of passing as a silent no-op.

Pure: no Twisted, no I/O.
"""

from __future__ import annotations

from enum import Enum
from typing import Mapping, TypeVar


#: The states hash as the objects they are (each is one object, equal only
#: to itself), not by their names as L{Enum} does in Python: the table's
#: check, a lookup per move, then costs no call.
_identityHash = object.__hash__


class RequestState(Enum):
    """
    The request, from the browser toward the answer's source.
    """

    __hash__ = _identityHash

    #: Waiting for its source (a connection being made, the rules' latency).
    CONNECTING = "connecting"
    #: Its head has gone to the source; its body may follow.
    SENDING = "sending"
    #: It has been handed whole.
    SENT = "sent"
    #: The exchange has ended.
    ENDED = "ended"


class AnswerState(Enum):
    """
    The answer, from its source toward the browser.
    """

    __hash__ = _identityHash

    #: Nothing of it yet (an interim head may have come).
    AWAITING = "awaiting"
    #: Its head has come; its body streams.
    STREAMING = "streaming"
    #: Both sides are relayed as they come (a C{101}, or an answer that
    #: isn't HTTP).
    RELAYING = "relaying"
    #: It has come whole.
    COMPLETE = "complete"
    #: The exchange has ended.
    ENDED = "ended"


class HeadLine(Enum):
    """
    An answer's head line, written for an answer still streaming a second
    after its head (or at once for one that streams by design).
    """

    __hash__ = _identityHash

    NOT_DUE = "not due"
    DUE = "due"
    WRITTEN = "written"


# Each member by a name of its own, for the engine's hot path: in Python
# 3.11 a member read from its class goes through EnumType's __getattr__
# hook (some 75 ns, a global takes 25), and an exchange reads its states
# a few dozen times a request.
CONNECTING = RequestState.CONNECTING
SENDING = RequestState.SENDING
SENT = RequestState.SENT
REQUEST_ENDED = RequestState.ENDED
AWAITING = AnswerState.AWAITING
STREAMING = AnswerState.STREAMING
RELAYING = AnswerState.RELAYING
COMPLETE = AnswerState.COMPLETE
ANSWER_ENDED = AnswerState.ENDED
NOT_DUE = HeadLine.NOT_DUE
DUE = HeadLine.DUE
WRITTEN = HeadLine.WRITTEN


#: The moves a request may make.
REQUEST_MOVES: Mapping[RequestState, frozenset[RequestState]] = {
    RequestState.CONNECTING: frozenset({RequestState.SENDING, RequestState.ENDED}),
    RequestState.SENDING: frozenset({RequestState.SENT, RequestState.ENDED}),
    RequestState.SENT: frozenset({RequestState.ENDED}),
    RequestState.ENDED: frozenset(),
}

#: The moves an answer may make.
ANSWER_MOVES: Mapping[AnswerState, frozenset[AnswerState]] = {
    AnswerState.AWAITING: frozenset({AnswerState.STREAMING, AnswerState.RELAYING, AnswerState.ENDED}),
    AnswerState.STREAMING: frozenset({AnswerState.COMPLETE, AnswerState.RELAYING, AnswerState.ENDED}),
    AnswerState.RELAYING: frozenset({AnswerState.ENDED}),
    AnswerState.COMPLETE: frozenset({AnswerState.ENDED}),
    AnswerState.ENDED: frozenset(),
}


class WrongTransition(Exception):
    """
    A move the table doesn't allow: the engine did something out of order.
    """


_S = TypeVar("_S", RequestState, AnswerState)


def move(table: Mapping[_S, frozenset[_S]], old: _S, new: _S) -> _S:
    """
    C{new}, when C{table} allows the move from C{old} to it.

    @raise WrongTransition: it doesn't.
    """
    if new not in table[old]:
        raise WrongTransition(f"{type(old).__name__}: {old.name} can't become {new.name}")
    return new
