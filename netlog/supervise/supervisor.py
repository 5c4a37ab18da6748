"""
The supervisor: what runs in the twistd process when a proxy is supervised.

In twistd's privileged step it opens the log and binds the listeners (and the
API); twistd then drops to C{--uid/--gid}; only then does it start the proxy,
as a worker process (forked from this one, see L{netlog.supervise.fork}) that
inherits the log and the listening sockets. A worker that dies is started
again (see L{netlog.supervise.policy}); the sockets stay open in the
supervisor meanwhile, so connections wait in the backlog and are served by
the next worker instead of being refused.
"""

from __future__ import annotations

import atexit
import json
import os
import resource
import signal
import sys
from typing import Any, Callable, Sequence

from twisted.application.service import MultiService
from twisted.internet.defer import Deferred, gatherResults, succeed
from twisted.internet.error import ProcessDone, ProcessExitedAlready, ProcessTerminated
from twisted.internet.protocol import ProcessProtocol
from twisted.internet.task import LoopingCall
from twisted.logger import InvalidLogLevelError, Logger, LogLevel
from twisted.python.failure import Failure

from netlog.core.logline import REASON_STOPPED
from netlog.core.recovery import recover
from netlog.core.rules import NO_RULES, Rules
from netlog.log.logfile import openLogFile
from netlog.log.reader import lastLineOf
from netlog.log.series import followRotation
from netlog.log.supervised import followRotations, unfollowRotations
from netlog.log.writer import LogWriter
from netlog.net.chatter import quietPortChatter
from netlog.net.reactors import IProxyReactor
from netlog.supervise.adopt import BoundListener, bindListener
from netlog.supervise.control import SupervisorSide, connectSupervisorSide
from netlog.supervise.policy import RestartPolicy
from netlog.supervise.worker import (
    GO,
    READY,
    STANDING_BY,
    STATUS_FD,
    HandedListener,
    HandedLog,
    HandedSession,
    WorkerSpec,
    readAlive,
)

_log = Logger(namespace="netlog.supervisor")

#: Seconds a worker has to stop after C{SIGTERM} before it gets C{SIGKILL}.
GRACE = 10.0
#: Seconds past a session's stop timeout the supervisor waits for a worker
#: to say it stopped serving it, before it ends the session itself.
DELETE_MARGIN = 5.0
#: Seconds new rules wait for the workers to say they have them before the
#: API is answered anyway (a stuck worker is replaced by the hang check, and
#: its replacement starts with the rules).
RULES_TIMEOUT = 10.0
#: The supervisor's exit code when it gave up on a worker that keeps dying.
EXIT_GAVE_UP = 70  # EX_SOFTWARE
#: Where the log and the listeners start among the worker's descriptors.
FIRST_HANDED_FD = STATUS_FD + 1
#: Seconds a serving worker may go without a heartbeat before it is taken
#: for hung and killed (0: never).
HANG_TIMEOUT = 30.0
#: Seconds between looks at the serving worker's heartbeat.
HANG_CHECK_INTERVAL = 1.0
#: Seconds after a standby took over before the next standby is started (so
#: that the new worker has the CPU to itself while it takes over).
STANDBY_DELAY = 1.0
#: The longest delay between tries to start a standby that keeps dying.
MAX_STANDBY_DELAY = 60.0
#: Longest worker output line copied to the supervisor's log, in bytes.
MAX_OUTPUT_LINE = 16 * 1024
#: The most open files the soft limit is raised to at start (the hard limit
#: may be far higher).
MAX_OPEN_FILES = 65536
#: The worker slot that serves the main listeners and writes the main log.
MAIN_SLOT = 0


def placeSession(slots: Sequence[tuple[int, int]]) -> int:
    """
    Which worker slot a new session goes to: the one whose serving worker
    has the fewest open connections, among equals the one with the fewest
    sessions (so that sessions made at once, before any traffic, spread
    evenly), among those the first.

    @param slots: C{(open connections, sessions)} of each slot, in order.
    @return: the index of the chosen slot.
    """
    return min(range(len(slots)), key=lambda index: (slots[index][0], slots[index][1], index))


def raiseFileLimit() -> tuple[int, int] | None:
    """
    Raise the soft limit on open files to the hard limit (at most
    L{MAX_OPEN_FILES}), as nginx and squid do: a default soft limit of 1024
    (or less) is soon reached by a busy proxy, and a supervisor out of
    descriptors can't start a worker. The workers inherit it.

    @return: the soft limit before and after, if it was raised.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = MAX_OPEN_FILES if hard == resource.RLIM_INFINITY else min(hard, MAX_OPEN_FILES)
    if soft != resource.RLIM_INFINITY and soft >= target:
        return None
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return None
    return soft, target


def exitWhenDone(code: int) -> None:
    """
    Make the twistd process exit with C{code} once it has shut down cleanly
    (twistd itself always exits 0 after its reactor stops).
    """

    def exit() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)

    atexit.register(exit)


def describeEnd(reason: Failure) -> str:
    """
    How a worker ended, in words: C{"killed by SIGKILL"}, C{"exited with 1"}.
    """
    value = reason.value
    if isinstance(value, ProcessDone):
        return "exited with 0"
    if isinstance(value, ProcessTerminated):
        if value.signal is not None:
            try:
                name = signal.Signals(value.signal).name
            except ValueError:
                name = f"signal {value.signal}"
            return f"killed by {name}"
        return f"exited with {value.exitCode}"
    return str(value)


def importRoot(dotted: str) -> str | None:
    """
    The folder on C{sys.path} that the module naming C{dotted} (or holding
    the object it names) was imported from, if it is loaded.
    """
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:end]))
        path = getattr(module, "__file__", None)
        if path:
            root = os.path.dirname(os.path.abspath(path))
            for _ in range(end - 1 if not path.endswith("__init__.py") else end):
                root = os.path.dirname(root)
            return root
    return None


def _anonymousFile(data: bytes) -> int:
    """
    A descriptor of a file in memory only, holding C{data}.
    """
    fd = os.memfd_create("netlog-handed", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Lines:
    """
    Split a stream into lines, bounded.
    """

    def __init__(self, onLine: Callable[[bytes], None]) -> None:
        self._buffer = b""
        self._onLine = onLine

    def feed(self, data: bytes) -> None:
        self._buffer += data
        while True:
            line, sep, rest = self._buffer.partition(b"\n")
            if not sep:
                if len(self._buffer) > MAX_OUTPUT_LINE:
                    self._onLine(self._buffer[:MAX_OUTPUT_LINE])
                    self._buffer = b""
                return
            self._onLine(line[:MAX_OUTPUT_LINE])
            self._buffer = rest

    def close(self) -> None:
        if self._buffer:
            self._onLine(self._buffer)
            self._buffer = b""


class WorkerProtocol(ProcessProtocol):
    """
    One worker process as the supervisor sees it.

    @ivar standby: it was started ahead and waits for L{GO}.
    @ivar standingBy: it said it is built and waiting.
    @ivar ready: it said it serves.
    """

    transport: Any

    def __init__(self, slot: WorkerSlot, startedAt: float, standby: bool = False) -> None:
        self.slot = slot
        self.supervisor = slot.supervisor
        self.startedAt = startedAt
        self.standby = standby
        self.standingBy = False
        self.ready = False
        self.readyAt: float | None = None
        self.lastAlive: float | None = None
        #: The open browser connections it said it has in its last heartbeat.
        self.connections = 0
        self.hungKilled = False
        #: Its end of the control channel (L{netlog.supervise.control}).
        self.control: SupervisorSide | None = None
        #: Fires (with None) once the process has ended; C{endReason} says how.
        self.ended: Deferred[None] = Deferred()
        self.endReason: Failure | None = None
        self.pid: int | None = None
        self._streams = {
            1: _Lines(self._event),
            2: _Lines(self._output),
            STATUS_FD: _Lines(self._status),
        }

    def connectionMade(self) -> None:
        self.pid = self.transport.pid

    def childDataReceived(self, childFD: int, data: bytes) -> None:
        stream = self._streams.get(childFD)
        if stream is not None:
            stream.feed(data)

    def _output(self, line: bytes, level: LogLevel = LogLevel.warn) -> None:
        _log.emit(level, "worker {pid}: {line}", pid=self.pid, line=line.decode("utf-8", "replace"))

    def _event(self, line: bytes) -> None:
        """
        One of the worker's log events, at its level.
        """
        try:
            record = json.loads(line)
            level = LogLevel.levelWithName(record["level"])
            text = str(record["text"])
        except (ValueError, KeyError, TypeError, InvalidLogLevelError):
            self._output(line, LogLevel.info)
            return
        _log.emit(level, "worker {pid}: {line}", pid=self.pid, line=text)

    def _status(self, line: bytes) -> None:
        line += b"\n"
        alive = readAlive(line)
        if alive is not None:
            self.lastAlive = self.supervisor.now()
            self.connections = alive
        elif line == STANDING_BY and self.standby and not self.standingBy:
            self.standingBy = True
            self.slot.workerStandingBy(self)
        elif line == READY and not self.ready:
            self.ready = True
            self.readyAt = self.lastAlive = self.supervisor.now()
            self.slot.workerReady(self)

    def go(self, now: float) -> None:
        """
        Make a standby serve; its life counts from now.
        """
        self.standby = False
        self.startedAt = now
        self.transport.writeToChild(0, GO)

    def signal(self, name: str) -> None:
        try:
            self.transport.signalProcess(name)
        except ProcessExitedAlready:
            pass

    def processEnded(self, reason: Failure) -> None:
        for stream in self._streams.values():
            stream.close()
        if self.control is not None and self.control.transport is not None:
            self.control.transport.loseConnection()
        self.endReason = reason
        self.slot.workerEnded(self, reason)
        self.ended.callback(None)


class Supervisor(MultiService):
    """
    Keeps the log and the listeners, and a worker serving them.

    Its children (the API listener) start and stop with it.

    @param privileged: the proxy's own privileged step (loading a CA as
        root, say), run here once, in twistd's privileged step.
    @param privilegedFiles: after it, the files only root may read that the
        worker needs; they are opened here and handed over (see
        L{netlog.privileged.openPrivileged}).
    @param handedData: after it, what the proxy made there for its workers
        (by the path they open it by): written to anonymous files, handed
        over the same way.

    @param hangTimeout: seconds the serving worker may go without a
        heartbeat (its event loop stuck) before it is killed and replaced;
        0 for never.
    @param standby: keep a second worker started ahead, built and waiting,
        that takes over the moment the serving one dies.
    @param adoptSession: the dotted name of what serves a session in a
        worker (see L{netlog.supervise.worker.WorkerSpec}); without it, no
        session can be handed to one.
    @param fork: fork each worker from this process (sharing its memory,
        see L{netlog.supervise.fork}) instead of starting a new Python.

    @ivar exitCode: set when it gave up; twistd then exits with it.
    """

    name = "supervisor"

    def __init__(
        self,
        *,
        reactor: IProxyReactor,
        optionsClass: str,
        buildProxy: str,
        argv: list[str],
        logPath: str | None,
        listeners: list[tuple[str, str]],
        privileged: Callable[[], None] = lambda: None,
        privilegedFiles: Callable[[], list[str]] = lambda: [],
        handedData: Callable[[], dict[str, bytes]] = lambda: {},
        uid: int | None = None,
        gid: int | None = None,
        apiAddress: Callable[[], tuple[str, int] | None] = lambda: None,
        policy: RestartPolicy | None = None,
        grace: float = GRACE,
        executable: str = sys.executable,
        env: dict[str, str] | None = None,
        onGiveUp: Callable[[int], None] = exitWhenDone,
        standby: bool = True,
        hangTimeout: float = HANG_TIMEOUT,
        sessions: Sequence[tuple[str, str, str]] = (),
        fork: bool = False,
        adoptSession: str | None = None,
        rules: Rules = NO_RULES,
        workers: int = 1,
        mint: Callable[[str], Deferred[str]] | None = None,
    ) -> None:
        """
        @param rules: the main listener's rules (C{--rules}); each session's
            are kept here too, and handed to the workers that serve it.
        @param workers: how many workers serve at once (C{--workers}), each
            in a slot of its own with its own standby.
        @param mint: what mints a live host's certificate a worker asks for
            over its control channel (its proxy's, see
            L{netlog.site.minter}).
        """
        self._mint = mint
        MultiService.__init__(self)
        self._fork = fork
        self._adoptSession = adoptSession
        #: C{(name, description, log path)} of each session fixed at start.
        self._sessionSpecs = list(sessions)
        #: name -> (log fd, listener) of each, once opened and bound, and
        #: of those made over the API.
        self.sessions: dict[str, tuple[int, BoundListener]] = {}
        self._sessionPaths = {name: logPath for name, _, logPath in self._sessionSpecs}
        #: name -> the number of its first line: where its log stood when it
        #: was made (a name made again appends to the file it left).
        self._sessionFirst: dict[str, int] = {}
        #: The rules of the main listener (under L{None}) and of each session.
        self._rules: dict[str | None, Rules] = {None: rules}
        #: Sessions being deleted: not handed to new workers, names not free.
        self._deleting: set[str] = set()
        self._reactor = reactor
        self._optionsClass = optionsClass
        self._buildProxy = buildProxy
        self._argv = argv
        self.logPath = logPath
        self._listenerSpecs = listeners
        self._proxyPrivileged = privileged
        self._privilegedPaths = privilegedFiles
        self._handedData = handedData
        self.privilegedFiles: dict[str, int] = {}
        self._uid = uid
        self._gid = gid
        self._apiAddress = apiAddress
        self.policy = policy or RestartPolicy()
        self.grace = grace
        self._executable = executable
        self._env = env
        self._onGiveUp = onGiveUp
        self.logFd: int | None = None
        self.listeners: list[BoundListener] = []
        if workers < 1:
            raise ValueError("a supervisor needs at least one worker slot")
        #: The worker slots, L{MAIN_SLOT} first; each with its own restart
        #: policy (the one given serves slot 0, the others get its like).
        self.slots = [WorkerSlot(self, 0, self.policy)] + [
            WorkerSlot(self, index, self.policy.like()) for index in range(1, workers)
        ]
        self._useStandby = standby
        self.hangTimeout = hangTimeout
        self._hangCheck: Any = None
        self.exitCode: int | None = None
        self._stopping = False
        self._privilegedDone = False

    @property
    def worker(self) -> WorkerProtocol | None:
        """
        The worker serving the main listeners (slot 0's).
        """
        return self.slots[MAIN_SLOT].worker

    @property
    def standby(self) -> WorkerProtocol | None:
        """
        Slot 0's standby.
        """
        return self.slots[MAIN_SLOT].standby

    @property
    def restarts(self) -> int:
        """
        Workers started again after a death, in every slot.
        """
        return sum(slot.restarts for slot in self.slots)

    def slotOf(self, name: str) -> WorkerSlot:
        """
        The slot serving session C{name}.

        @raise KeyError: no slot serves it.
        """
        for slot in self.slots:
            if name in slot.sessions:
                return slot
        raise KeyError(name)

    def _placeSession(self, name: str) -> WorkerSlot:
        """
        Put a new session in a slot (see L{placeSession}).
        """
        slot = self.slots[placeSession([(s.openConnections(), len(s.sessions)) for s in self.slots])]
        slot.sessions.add(name)
        return slot

    # -- service ------------------------------------------------------------

    def privilegedStartService(self) -> None:
        if self._privilegedDone:
            return
        self._privilegedDone = True
        quietPortChatter()
        raised = raiseFileLimit()
        if raised is not None:
            _log.info("raised the open files limit from {before} to {after}", before=raised[0], after=raised[1])
        if self.logPath is not None:
            self.logFd = openLogFile(self.logPath, self._uid, self._gid)
        self._proxyPrivileged()
        for path in self._privilegedPaths():
            self.privilegedFiles[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
        for path, data in self._handedData().items():
            self.privilegedFiles[path] = _anonymousFile(data)
        for role, description in self._listenerSpecs:
            bound = bindListener(self._reactor, role, description)
            self.listeners.append(bound)
            _log.info(
                "{role} listener {description} bound on {address}",
                role=role,
                description=description,
                address=bound.getHost(),
            )
        for name, description, logPath in self._sessionSpecs:
            fd = openLogFile(logPath, self._uid, self._gid)
            try:
                bound = bindListener(self._reactor, "session", description)
            except BaseException:
                os.close(fd)
                raise
            self.sessions[name] = (fd, bound)
            self._sessionFirst[name] = lastLineOf(fd) + 1
            slot = self._placeSession(name)
            _log.info(
                "session {name} listens on {address}, logs to {log}{where}",
                name=name, address=bound.getHost(), log=logPath, where=slot.where(),
            )
        MultiService.privilegedStartService(self)

    def heldSessions(self) -> dict[str, tuple[str, BoundListener, int, int]]:
        """
        The sessions it holds: name -> (log path, listener, the number of its
        first line, its log's descriptor).
        """
        return {
            name: (self._sessionPaths[name], bound, self._sessionFirst[name], fd)
            for name, (fd, bound) in self.sessions.items()
        }

    def sessionNames(self) -> set[str]:
        """
        The names of the sessions it holds or is deleting: not free.
        """
        return set(self.sessions) | self._deleting

    def rulesOf(self, name: str | None) -> Rules:
        """
        The rules of session C{name}, or of the main listener (L{None}).

        @raise KeyError: no such session.
        """
        if name is not None and name not in self.sessions:
            raise KeyError(name)
        return self._rules.get(name, NO_RULES)

    def setRules(self, name: str | None, rules: Rules) -> Deferred[Any]:
        """
        Give session C{name} (L{None}: the main listener) new rules, in the
        workers running now and those started later.

        @return: fires once the workers running now have them in force.
        @raise KeyError: no such session.
        """
        if name is not None and name not in self.sessions:
            raise KeyError(name)
        self._rules[name] = rules
        d: Deferred[Any] = gatherResults([worker.control.setRules(name, rules.document)  # type: ignore[union-attr]
                                          for worker in self._liveWorkers(name)])
        timer = self._reactor.callLater(RULES_TIMEOUT, lambda: None if d.called else d.cancel())
        d.addErrback(lambda f: None)
        return d.addBoth(lambda result: timer.cancel() if timer.active() else None)

    def _liveWorkers(self, name: str | None) -> list[WorkerProtocol]:
        """
        The workers running now that serve session C{name} (L{None}: the
        main listeners): its slot's.
        """
        slot = self.slots[MAIN_SLOT] if name is None else self.slotOf(name)
        return slot.liveWorkers()


    def addSession(self, name: str, description: str, logPath: str, rules: Rules = NO_RULES) -> BoundListener:
        """
        Hold a new session (made over the API): bind its listener, open its
        log, and hand both to the workers running now; a worker started
        later gets it in its SPEC. Connections that come before a worker
        serves it wait in its backlog.

        @raise KeyError: the name is taken or being deleted.
        @raise Exception: what binding or opening raised.
        """
        if name in self.sessions or name in self._deleting:
            raise KeyError(name)
        bound = bindListener(self._reactor, "session", description)
        try:
            fd = openLogFile(logPath)
        except BaseException:
            bound.close()
            raise
        self.sessions[name] = (fd, bound)
        self._sessionPaths[name] = logPath
        self._sessionFirst[name] = lastLineOf(fd) + 1
        self._rules[name] = rules
        slot = self._placeSession(name)
        for worker in slot.liveWorkers():
            assert worker.control is not None
            try:
                worker.control.add(name, logPath, fd, bound.fd, bound.family, bound.getHost().port,
                                   rules.document, slot.index)
            except Exception:
                # A worker dying as the session is made: the session is held
                # here, and the worker that replaces it gets it at start.
                _log.failure("handing session {name} to worker {pid} failed", name=name, pid=worker.pid)
        _log.info("session {name} listens on {address}, logs to {log}{where}",
                  name=name, address=bound.getHost(), log=logPath, where=slot.where())
        return bound

    def deleteSession(self, name: str, timeout: float) -> Deferred[dict[str, Any]]:
        """
        Stop a session: the workers stop serving it (the serving one after
        its open exchanges end, or C{timeout} seconds), then what is still
        open is ended as stopped here, and its log and listener let go.

        @raise KeyError: no such session.
        """
        fd, bound = self.sessions.pop(name)
        self._rules.pop(name, None)
        logPath = self._sessionPaths[name]
        self._deleting.add(name)
        slot = self.slotOf(name)
        # Out of its slot at once: its workers started from now on are not
        # handed it, and the slot is free for the next session.
        slot.sessions.discard(name)
        waits = [worker.control.delete(name, timeout) for worker in slot.liveWorkers()]  # type: ignore[union-attr]
        d: Deferred[Any] = gatherResults(waits) if waits else succeed(None)
        # A worker that never answers (stuck) does not hold the answer forever.
        def giveUpWaiting() -> None:
            if not d.called:
                d.cancel()

        timer = self._reactor.callLater(timeout + DELETE_MARGIN, giveUpWaiting)
        d.addErrback(lambda f: None)

        def finish(_: object) -> dict[str, Any]:
            if timer.active():
                timer.cancel()
            self._endLeftOpenIn(logPath, fd)
            last = lastLineOf(fd)
            os.close(fd)
            bound.close()
            self._deleting.discard(name)
            del self._sessionPaths[name]
            self._sessionFirst.pop(name, None)
            _log.info("session {name} deleted; its log {log} ends at line {last}", name=name, log=logPath, last=last)
            return {"name": name, "log": logPath, "last": last}

        return d.addCallback(finish)

    def startService(self) -> None:
        # Without twistd's privileged step (plain twist, tests), do it now.
        self.privilegedStartService()
        MultiService.startService(self)
        self._stopping = False
        if self.logPath is not None:
            followRotations(self)
        if self.hangTimeout > 0:
            self._hangCheck = LoopingCall(self._checkAlive)
            self._hangCheck.clock = self._reactor
            self._hangCheck.start(HANG_CHECK_INTERVAL, now=False)
        for slot in self.slots:
            slot.replace()

    def _checkAlive(self) -> None:
        for slot in self.slots:
            slot.checkAlive()

    def stopService(self) -> Deferred[None]:
        self._stopping = True
        unfollowRotations(self)
        if self._hangCheck is not None and self._hangCheck.running:
            self._hangCheck.stop()
        d: Deferred[Any] = gatherResults([slot.stop() for slot in self.slots])
        d.addCallback(lambda _: self._endLeftOpen())
        d.addCallback(lambda _: self._release())
        d.addCallback(lambda _: MultiService.stopService(self))
        return d

    def _stopWorker(self, worker: WorkerProtocol | None) -> Deferred[None]:
        if worker is None:
            return succeed(None)
        _log.info("stopping worker {pid}", pid=worker.pid)
        worker.signal("TERM")
        kill = self._reactor.callLater(self.grace, self._kill, worker)

        def ended(_: None) -> None:
            if kill.active():
                kill.cancel()

        waiting: Deferred[None] = Deferred()
        worker.ended.addCallback(ended).addBoth(waiting.callback)
        return waiting

    def _kill(self, worker: WorkerProtocol) -> None:
        _log.warn(
            "worker {pid} did not stop within {grace} s of SIGTERM; killing it",
            pid=worker.pid,
            grace=self.grace,
        )
        worker.signal("KILL")

    def _endLeftOpen(self) -> None:
        """
        With every worker gone, end the exchanges none of them ended (one
        killed after the grace period, or one that crashed while stopping)
        with "the proxy stopped", numbering on, as a worker's LogWriter would.
        """
        paths = self._sessionPaths
        if self.logPath is not None and self.logFd is not None:
            self.logFd = followRotation(self.logPath, self.logFd, self._uid, self._gid)
        logs = [(self.logPath, self.logFd)] + [(paths[name], fd) for name, (fd, _) in self.sessions.items()]
        for path, fd in logs:
            if fd is not None:
                self._endLeftOpenIn(path, fd)

    def _endLeftOpenIn(self, path: str | None, fd: int) -> None:
        found = recover(lambda offset, length: os.pread(fd, length, offset), os.fstat(fd).st_size)
        if not found.unended and not found.cut:
            return
        writer = LogWriter(path, fd=os.dup(fd), recoveryReason=REASON_STOPPED)
        try:
            writer.startService()
        finally:
            writer.stopService()
        _log.info(
            "ended {count} exchanges the workers left open in {path}: the proxy stopped",
            count=len(found.unended),
            path=path,
        )

    def _release(self) -> None:
        for bound in self.listeners:
            bound.close()
        self.listeners = []
        if self.logFd is not None:
            os.close(self.logFd)
            self.logFd = None
        for fd in self.privilegedFiles.values():
            os.close(fd)
        self.privilegedFiles = {}
        for fd, bound in self.sessions.values():
            bound.close()
            os.close(fd)
        self.sessions = {}

    # -- workers ------------------------------------------------------------

    def _spawn(self, slot: WorkerSlot, standby: bool = False) -> WorkerProtocol:
        """
        Start a worker process for C{slot}, serving at once or standing by.

        It is handed the logs its slot writes and nothing else: the main log
        and listeners in slot 0 only, and the slot's own sessions. This is
        the one-writer rule (see C{docs/engine.rst}): the slots' sessions
        are the only record of which process writes which log, and a worker
        opens no log it was not handed here.
        """
        childFDs: dict[int, Any] = {0: "w", 1: "r", 2: "r", STATUS_FD: "r"}
        nextFd = FIRST_HANDED_FD
        logFd = None
        if self.logPath is not None and self.logFd is not None and slot.servesMain:
            self.logFd = followRotation(self.logPath, self.logFd, self._uid, self._gid)
            logFd = nextFd
            childFDs[logFd] = self.logFd
            nextFd += 1
        handed = []
        for bound in self.listeners if slot.servesMain else []:
            childFDs[nextFd] = bound.fd
            handed.append(HandedListener(nextFd, bound.family, bound.role, bound.description))
            nextFd += 1
        files = {}
        for path, fd in self.privilegedFiles.items():
            childFDs[nextFd] = fd
            files[path] = nextFd
            nextFd += 1
        sessions = []
        paths = self._sessionPaths
        for name, (fd, bound) in self.sessions.items():
            if name not in slot.sessions:
                continue
            childFDs[nextFd] = fd
            childFDs[nextFd + 1] = bound.fd
            sessions.append(HandedSession(
                name, HandedLog(paths[name], nextFd), nextFd + 1, bound.family, bound.getHost().port,
                self._rules.get(name, NO_RULES).document, slot.index,
            ))
            nextFd += 2
        spec = WorkerSpec(
            optionsClass=self._optionsClass,
            buildProxy=self._buildProxy,
            argv=self._argv,
            log=HandedLog(self.logPath, logFd),
            listeners=handed,
            apiAddress=self._apiAddress(),
            files=files,
            standby=standby,
            sessions=sessions,
            control=nextFd,
            adoptSession=self._adoptSession,
            rules=self._rules[None].document,
            slot=slot.index,
            servesMain=slot.servesMain,
        ).toJSON()
        control, theirs = connectSupervisorSide(self._reactor, self._mint)
        childFDs[nextFd] = theirs.fileno()
        worker = WorkerProtocol(slot, self._reactor.seconds(), standby)
        worker.control = control
        # -P: nothing from the working folder is imported.
        args = [self._executable, "-P", "-m", "netlog.supervise.worker", spec]
        try:
            if self._fork:
                from netlog.supervise.fork import spawnForked

                spawnForked(self._reactor, worker, args, childFDs)
            else:
                self._reactor.spawnProcess(worker, self._executable, args, env=self._workerEnv(), childFDs=childFDs)
        except BaseException:
            if control.transport is not None:
                control.transport.loseConnection()
            raise
        finally:
            theirs.close()
        _log.info("started worker {pid}{how}{where}", pid=worker.pid, how=" to stand by" if standby else "",
                  where=slot.where())
        return worker

    def _workerEnv(self) -> dict[str, str]:
        """
        The worker's environment: this one, with the folders this process
        imported netlog and the plugin from first on C{PYTHONPATH}, so that
        the worker runs the same code.
        """
        env = dict(self._env if self._env is not None else os.environ)
        roots = []
        for name in ("netlog", self._optionsClass, self._buildProxy):
            root = importRoot(name)
            if root is not None and root not in roots:
                roots.append(root)
        rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in roots]
        env["PYTHONPATH"] = os.pathsep.join(roots + rest)
        return env

    def _giveUp(self, what: str, quickDeaths: int) -> None:
        _log.critical(
            "{what}; that is {count} quick deaths in a row: giving up, the proxy "
            "stops (exit code {code})",
            what=what,
            count=quickDeaths,
            code=EXIT_GAVE_UP,
        )
        self.exitCode = EXIT_GAVE_UP
        self._onGiveUp(EXIT_GAVE_UP)
        if self._reactor.running:
            self._reactor.stop()

    def now(self) -> float:
        return float(self._reactor.seconds())


class WorkerSlot:
    """
    One serving worker's place: the worker serving it, the standby that
    takes over when that one dies, the restart policy's state and timers,
    and what it serves. Slot 0 serves the main listeners and the main log;
    every slot serves the sessions the supervisor put in it (see
    L{placeSession}). A slot's faults are its own: a death, a kill storm or
    a failed start in one leaves the others' workers alone.

    @ivar index: its number, 0 first; the prefix of its workers' connection
        ids (see L{connectionPrefix}).
    @ivar sessions: the names of the sessions it serves: the one place that
        says which worker writes a session's log.
    """

    def __init__(self, supervisor: Supervisor, index: int, policy: RestartPolicy) -> None:
        self.supervisor = supervisor
        self.index = index
        self.policy = policy
        self.worker: WorkerProtocol | None = None
        self.standby: WorkerProtocol | None = None
        self.sessions: set[str] = set()
        self.restarts = 0
        self._restartCall: Any = None
        self._standbyCall: Any = None
        self._standbyDelay = STANDBY_DELAY
        self._lastDeath: tuple[int | None, float] | None = None

    @property
    def servesMain(self) -> bool:
        """
        Whether its workers serve the main listeners and write the main log.
        """
        return self.index == MAIN_SLOT

    def where(self) -> str:
        """
        What the supervisor's log lines about its workers end with: the
        slot, when there is more than one (with one, the lines are as they
        always were).
        """
        return f" in slot {self.index}" if len(self.supervisor.slots) > 1 else ""

    def liveWorkers(self) -> list[WorkerProtocol]:
        """
        Its workers with a control channel: the serving one and the standby.
        """
        return [w for w in (self.worker, self.standby) if w is not None and w.control is not None]

    def openConnections(self) -> int:
        """
        The open browser connections its serving worker last said it has
        (none when nobody serves).
        """
        return self.worker.connections if self.worker is not None else 0

    def cancelTimers(self) -> None:
        for call in (self._restartCall, self._standbyCall):
            if call is not None and call.active():
                call.cancel()
        self._restartCall = self._standbyCall = None

    def stop(self) -> Deferred[Any]:
        """
        Stop its workers (TERM, then KILL after the grace period).
        """
        self.cancelTimers()
        stop = self.supervisor._stopWorker
        return gatherResults([stop(self.worker), stop(self.standby)])

    def replace(self) -> None:
        """
        Put a serving worker in place: the standby if it is waiting, else a
        new one.
        """
        self._restartCall = None
        if self.supervisor._stopping or self.worker is not None:
            return
        standby = self.standby
        if standby is not None and not standby.standingBy:
            # One is on its way: it takes over as soon as it stands by
            # (see workerStandingBy), sooner than a new one would.
            _log.info("waiting for worker {pid}, starting to stand by, to take over", pid=standby.pid)
            return
        if standby is not None:
            self.standby = None
            self.worker = standby
            standby.go(self.supervisor._reactor.seconds())
            _log.info("worker {pid}, standing by, takes over", pid=standby.pid)
        else:
            try:
                self.worker = self.supervisor._spawn(self)
            except OSError as e:
                self._spawnFailed(e)
                return
        self._planStandby(STANDBY_DELAY)

    def _spawnFailed(self, error: OSError) -> None:
        """
        No worker could be started (out of file descriptors, say): try
        again after the policy's delay, as after a quick death, never at
        once, and never sit with the listeners held and no worker.
        """
        decision = self.policy.died(0.0)
        reason = os.strerror(error.errno) if error.errno else str(error)
        if decision.giveUp:
            self.supervisor._giveUp(f"could not start a worker{self.where()} ({reason})", decision.quickDeaths)
            return
        delay = max(decision.delay, self.policy.minDelay)
        _log.error(
            "could not start a worker{where} ({reason}); nobody serves{what}; trying again in {delay:g} s",
            reason=reason,
            errno=error.errno,
            delay=delay,
            where=self.where(),
            what=" its listeners" if self.where() else "",
        )
        self._restartCall = self.supervisor._reactor.callLater(delay, self.replace)

    def _planStandby(self, delay: float) -> None:
        if not self.supervisor._useStandby or self.supervisor._stopping or self.standby is not None:
            return
        if self._standbyCall is not None and self._standbyCall.active():
            return
        self._standbyCall = self.supervisor._reactor.callLater(delay, self._startStandby)

    def _startStandby(self) -> None:
        self._standbyCall = None
        if self.supervisor._stopping or self.standby is not None:
            return
        try:
            self.standby = self.supervisor._spawn(self, standby=True)
        except OSError as e:
            self._standbyDelay = min(self._standbyDelay * 2, MAX_STANDBY_DELAY)
            _log.error(
                "could not start a worker to stand by{where} ({reason}); trying again in {delay:g} s",
                reason=os.strerror(e.errno) if e.errno else str(e),
                delay=self._standbyDelay,
                where=self.where(),
            )
            self._planStandby(self._standbyDelay)

    def checkAlive(self) -> None:
        """
        Kill the serving worker if its event loop has been stuck too long:
        a hung proxy serves nobody, and its connections pile up.
        """
        worker = self.worker
        if worker is None or worker.lastAlive is None or worker.hungKilled:
            return
        silent = self.supervisor.now() - worker.lastAlive
        if silent > self.supervisor.hangTimeout:
            worker.hungKilled = True
            _log.error(
                "worker {pid} has not answered for {silent:.1f} s (its event loop is "
                "stuck); killing it",
                pid=worker.pid,
                silent=silent,
            )
            worker.signal("KILL")

    def workerStandingBy(self, worker: WorkerProtocol) -> None:
        """
        A standby is built and waits; if nobody serves, it takes over now.
        """
        self._standbyDelay = STANDBY_DELAY
        _log.info(
            "worker {pid} standing by, {took:.3f} s after it was started",
            pid=worker.pid,
            took=self.supervisor._reactor.seconds() - worker.startedAt,
        )
        if self.worker is None and (self._restartCall is None or not self._restartCall.active()):
            self.replace()

    def workerReady(self, worker: WorkerProtocol) -> None:
        """
        The worker serves: say so, and how long nobody served.
        """
        if self._lastDeath is None:
            _log.info(
                "worker {pid} serving, {took:.3f} s after it was started{where}",
                pid=worker.pid,
                took=self.supervisor._reactor.seconds() - worker.startedAt,
                where=self.where(),
            )
            return
        deadPid, diedAt = self._lastDeath
        _log.info(
            "worker {pid} serving again, {down:.3f} s after worker {dead} died{where}",
            pid=worker.pid,
            down=self.supervisor._reactor.seconds() - diedAt,
            dead=deadPid,
            where=self.where(),
        )

    def workerEnded(self, worker: WorkerProtocol, reason: Failure) -> None:
        """
        A worker died or stopped: put another in its place, now or later, or
        give up.
        """
        how = describeEnd(reason)
        if worker is self.standby:
            self.standby = None
            if self.supervisor._stopping:
                _log.info("worker {pid} stopped ({how})", pid=worker.pid, how=how)
                return
            if self.worker is None and not (self._restartCall is not None and self._restartCall.active()):
                # It was to take over (see _replace): count it as a worker
                # that died, so that the policy decides what comes next.
                self.worker = worker
            else:
                self._standbyDelay = min(self._standbyDelay * 2, MAX_STANDBY_DELAY)
                _log.warn(
                    "worker {pid}, standing by, died ({how}); another will stand by in {delay:g} s",
                    pid=worker.pid,
                    how=how,
                    delay=self._standbyDelay,
                )
                self._planStandby(self._standbyDelay)
                return
        if worker is not self.worker:
            return
        self.worker = None
        now = self.supervisor._reactor.seconds()
        lived = now - worker.startedAt
        # A worker that never served, or served only a moment, died quickly.
        served = now - worker.readyAt if worker.readyAt is not None else 0.0
        if self.supervisor._stopping:
            _log.info("worker {pid} stopped ({how})", pid=worker.pid, how=how)
            return
        self._lastDeath = (worker.pid, now)
        decision = self.policy.died(served)
        if decision.giveUp:
            self.supervisor._giveUp(f"worker {worker.pid}{self.where()} died ({how}) after {lived:.3f} s", decision.quickDeaths)
            return
        self.restarts += 1
        when = "at once" if not decision.delay else f"in {decision.delay:g} s"
        if decision.quickDeaths > 1:
            # Loud: a worker that keeps dying quickly is worth a look, and
            # nobody serves while the next one waits.
            _log.error(
                "worker {pid}{where} died ({how}) after {lived:.3f} s, {count} quick deaths in "
                "a row; starting another {when}",
                pid=worker.pid,
                how=how,
                lived=lived,
                count=decision.quickDeaths,
                when=when,
                where=self.where(),
            )
        else:
            _log.warn(
                "worker {pid}{where} died ({how}) after {lived:.3f} s; starting another {when}",
                pid=worker.pid,
                how=how,
                lived=lived,
                when=when,
                where=self.where(),
            )
        if decision.delay:
            self._restartCall = self.supervisor._reactor.callLater(decision.delay, self.replace)
        else:
            self.replace()
