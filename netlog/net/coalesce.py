"""
Many asking at once for one key ask once: the L{Deferred}s waiting on one
answer per key (a certificate a worker, the supervisor or the minter is
asked for while the same host's is on its way).
"""

from __future__ import annotations

from typing import Generic, Hashable, TypeVar

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Coalesced(Generic[K, V]):
    """
    The callers waiting on each key's answer, in the order they asked.
    """

    def __init__(self) -> None:
        self._waiting: dict[K, list[Deferred[V]]] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    def join(self, key: K) -> tuple[Deferred[V], bool]:
        """
        Wait for C{key}'s answer: a L{Deferred} that fires with it, and
        whether this caller is the first (the one who must ask).
        """
        d: Deferred[V] = Deferred()
        waiting = self._waiting.get(key)
        if waiting is not None:
            waiting.append(d)
            return d, False
        self._waiting[key] = [d]
        return d, True

    def answer(self, key: K, value: V) -> None:
        """
        Give every caller waiting on C{key} its answer.
        """
        for d in self._waiting.pop(key, []):
            d.callback(value)

    def refuse(self, key: K, error: Exception | Failure) -> None:
        """
        Fail every caller waiting on C{key} with C{error}.
        """
        for d in self._waiting.pop(key, []):
            d.errback(error)

    def refuseAll(self, error: Exception) -> None:
        """
        Fail every caller waiting on any key with C{error} (the one who
        would answer is gone).
        """
        waiting, self._waiting = self._waiting, {}
        for ds in waiting.values():
            for d in ds:
                d.errback(error)
