"""
Rotation under the supervisor: the worker that writes the main log closes
its segments (it knows where the lines end); the supervisor hands a
C{SIGUSR1} or C{POST /rotate} on to it, and follows the rotation before it
hands the log to a new worker (L{netlog.log.series.followRotation}).
"""

from __future__ import annotations

import signal
from typing import Any, Callable

from twisted.internet.error import ProcessExitedAlready

from netlog.log.writer import forgetRotations, listenForRotation, rotationForwarders

_following: dict[int, Callable[[], None]] = {}


def followRotations(supervisor: Any) -> None:
    """
    Hand C{SIGUSR1} (and C{POST /rotate}) on to C{supervisor}'s serving
    worker of the main log, once it serves (before, the signal would end it).
    """

    def signalWorker() -> None:
        worker = supervisor.worker
        if worker is not None and worker.ready:
            try:
                # By number: Twisted names only KILL, TERM, INT and HUP.
                worker.transport.signalProcess(int(signal.SIGUSR1))
            except ProcessExitedAlready:
                pass

    def forward() -> None:
        supervisor._reactor.callFromThread(signalWorker)

    unfollowRotations(supervisor)
    _following[id(supervisor)] = forward
    rotationForwarders.append(forward)
    listenForRotation()


def unfollowRotations(supervisor: Any) -> None:
    forward = _following.pop(id(supervisor), None)
    if forward is not None:
        rotationForwarders.remove(forward)


def forgetParentRotations() -> None:
    """
    In a worker forked from the supervisor: forget the supervisor's hand-on
    of C{SIGUSR1} and its writers, copied into the child with its memory.
    The worker's own writer registers itself as it starts.
    """
    _following.clear()
    forgetRotations()
