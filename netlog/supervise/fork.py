"""
Workers forked from the supervisor instead of started afresh, so that they
share its memory.

A worker started as a new Python (C{python -m netlog.supervise.worker})
imports Twisted and the proxy again: about 33 MB of its own, the same again
for the standby. Forked from the supervisor, which has imported all that
already (it builds the proxy once to learn its listeners), a worker shares
those pages with it and with the other worker until one of them writes
them: the supervisor freezes its objects first (C{gc.freeze}), so that its
collector never writes them, and a worker's own memory is mostly what it
builds and serves with.

The child is made as Twisted makes any: the same pipes and handed
descriptors at the same numbers, every other descriptor closed (the
supervisor's listeners, its log, its twistd log, its reactor's). Then,
instead of an C{exec}, it forgets the supervisor's process (its log
observers, its reactor, its C{atexit} work, its children) and runs
L{netlog.supervise.worker.main} with a reactor of its own, and ends with
C{os._exit}: nothing of the supervisor's runs in it.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from typing import Any

from twisted.internet.process import Process

from netlog.net.reactors import IProxyReactor


class ForkedWorker(Process):
    """
    A worker process forked from this one, running the worker's C{main}
    with the last argument (the SPEC) instead of executing anything.
    """

    def _trySpawnInsteadOfFork(self, *args: Any, **kwargs: Any) -> bool:
        # posix_spawn can only exec.
        return False

    def _execChild(self, path: Any, uid: Any, gid: Any, executable: Any, args: Any, environment: Any) -> None:
        runWorker(args[-1])


def spawnForked(reactor: IProxyReactor, protocol: Any, args: list[str], childFDs: dict[int, Any]) -> ForkedWorker:
    """
    Fork a worker that runs with C{args} (C{[..., SPEC]}) and C{childFDs},
    as C{reactor.spawnProcess} would start it.
    """
    # Objects that exist now are left alone by the collector from now on,
    # here and in the child: it would otherwise write every page holding
    # one, and the child would copy them. (What is garbage now is collected
    # first; a cycle alive now that becomes garbage later stays: measured,
    # about 2.5 KB per worker started.)
    gc.collect()
    gc.freeze()
    return ForkedWorker(reactor, sys.executable, args, None, None, protocol, None, None, childFDs)


def _forgetParent() -> None:
    """
    In the child: drop what belongs to the supervisor's process.
    """
    import atexit

    import twisted.internet
    from twisted.internet import process
    from twisted.logger import globalLogPublisher

    from netlog.log.supervised import forgetParentRotations

    # Its log observers write to its twistd log, whose descriptor is closed
    # here (and its number may now be a listener's or the log's).
    for observer in list(getattr(globalLogPublisher, "_observers", [])):
        globalLogPublisher.removeObserver(observer)
    # Its own stdout and stderr (twistd's went to its log), by line: the
    # worker ends with os._exit, which flushes nothing.
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    atexit._clear()
    process.reapProcessHandlers.clear()
    # Its SIGUSR1 hand-on wakes its reactor's copy, whose waker descriptor
    # number is another file's here.
    forgetParentRotations()
    # Twisted set every signal back to its default for an exec; a Python
    # starts with these two ignored (a write to a closed pipe is then an
    # EPIPE, not death), and the worker relies on it.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    signal.set_wakeup_fd(-1)
    # A reactor of its own: the supervisor's is a copy whose descriptors
    # are closed.
    sys.modules.pop("twisted.internet.reactor", None)
    if hasattr(twisted.internet, "reactor"):
        del twisted.internet.reactor
    from netlog.net.reactors import install

    install()


def runWorker(spec: str) -> None:
    """
    In the forked child: become a worker serving C{spec}; never returns.
    """
    code = 1
    try:
        gc.enable()
        _forgetParent()
        from netlog.supervise.worker import main

        code = main(["worker", spec], forked=True)
    except BaseException:
        try:
            import traceback

            traceback.print_exc()
            sys.stderr.flush()
        except BaseException:
            pass
    finally:
        try:
            sys.stdout.flush()
        except BaseException:
            pass
        os._exit(code)
