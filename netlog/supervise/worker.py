"""
The worker: one proxy process started by the supervisor.

L{main} with SPEC, the JSON of a L{WorkerSpec}: in a process forked
from the supervisor (see L{netlog.supervise.fork}), or as
C{python -m netlog.supervise.worker SPEC}. The worker inherits from the supervisor the log file,
open for appending, and the listening sockets, already bound; it never opens
the one nor binds the others, so it needs no privilege and holds none. It
parses the plugin's options again from the same arguments, builds the proxy
with the same C{buildProxy}, starts a LogWriter on the inherited file (which
numbers on and ends the dead worker's open exchanges with "the proxy
restarted") and serves the inherited sockets.

Its file descriptors, as the supervisor hands them over:

  - 0: the lifeline. When it closes (the supervisor died), the worker
    stops. A I{standby} worker (started ahead, so that a dead worker is
    replaced in milliseconds, not in the time it takes to build a proxy)
    waits, built but not started, until it reads L{GO} there.
  - 1: its log events, a JSON object per line (C{level}, C{text}), which the
    supervisor logs at their level; 2: anything else it prints.
  - L{STATUS_FD}: the worker writes L{READY} there once it serves, then
    a heartbeat every second while its event loop turns: L{ALIVE}, or
    C{alive N} with N its open browser connections (see L{aliveLine}).
  - the log and the listeners at the numbers the SPEC names, then each
    session's log and listener, and the control channel
    (L{netlog.supervise.control}).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from netlog.net.reactors import IProxyReactor, install, theReactor
from netlog.state import stateFileReader

if TYPE_CHECKING:
    from netlog.core.rules import ReadFile

#: Where the worker tells the supervisor it serves.
STATUS_FD = 3
#: What it writes there once it serves.
READY = b"ready\n"
#: What a standby writes there once it is built and waits for L{GO}.
STANDING_BY = b"standby\n"
#: What the supervisor writes on a standby's lifeline to make it serve.
GO = b"go\n"
#: What a serving worker writes there every L{HEARTBEAT_INTERVAL} seconds,
#: from its event loop: a worker whose loop is stuck stops writing it.
ALIVE = b"alive\n"
#: Seconds between two L{ALIVE}.
HEARTBEAT_INTERVAL = 1.0
#: The most digits of a connection count a heartbeat may carry.
MAX_COUNT_DIGITS = 9


def aliveLine(connections: int) -> bytes:
    """
    A heartbeat that says how many browser connections the worker has open
    (what the supervisor places new sessions by).
    """
    return b"alive %d\n" % (connections,)


def readAlive(line: bytes) -> int | None:
    """
    The open connections a heartbeat line says (0 for a bare L{ALIVE}), or
    L{None} when it is no heartbeat.
    """
    if line == ALIVE:
        return 0
    word, _, count = line.rstrip(b"\n").partition(b" ")
    if word != ALIVE.strip() or not count.isdigit() or len(count) > MAX_COUNT_DIGITS:
        return None
    return int(count)


def connectionPrefix(slot: int) -> str:
    """
    What a worker of slot C{slot} puts before its connection ids, so that
    each says which worker slot it came from: nothing for slot 0 (C{c17},
    as with one worker), C{w1.} for slot 1 (C{w1.c17}).
    """
    return f"w{slot}." if slot else ""

class ServedProxy(Protocol):
    """
    What a tap's C{buildProxy} gives the supervisor and each worker: a
    service, the listeners it serves as C{(role, description, factory)} (in
    the order the supervisor binds them), the files only root may read that
    it needs, and what its privileged step made for the workers (by the path
    they open it by).
    """

    listeners: list[tuple[str, str, Any]]
    #: Its open browser connections (a worker's heartbeat counts them).
    connections: set[Any]
    #: What its connection ids start with (see L{connectionPrefix}).
    connectionPrefix: str
    #: The rules of its main listener (L{netlog.core.rules.Rules}).
    rules: Any

    @property
    def privilegedFiles(self) -> list[str]: ...

    @property
    def handedData(self) -> dict[str, bytes]: ...

    def privilegedStartService(self) -> None: ...

    def mint(self, host: str) -> Any:
        """
        In the supervisor: a Deferred of the certificate (PEM) of the live
        host C{host} a worker asked for.
        """

    def mintVia(self, ask: Any) -> None:
        """
        In a worker: C{ask(host)} gets a live host's certificate from the
        supervisor.
        """

    def setServiceParent(self, parent: Any) -> Any: ...


#: The worker's exit code when its SPEC or the proxy can't be set up.
EXIT_SETUP_FAILED = 3


@dataclass(frozen=True)
class HandedLog:
    """
    A log a worker is handed: its path, and the worker's descriptor for it
    (L{None}: no log).
    """

    path: str | None
    fd: int | None


@dataclass(frozen=True)
class HandedListener:
    """
    A listener a worker is handed, bound by the supervisor: the worker's
    descriptor for it, its socket family (C{"AF_INET"}, C{"AF_INET6"}), and
    the role and description the proxy lists it under.
    """

    fd: int
    family: str
    role: str
    description: str


@dataclass(frozen=True)
class HandedSession:
    """
    A session a worker is handed: its log, its listener's descriptor,
    family and port, its rules document and the slot it is served in.
    """

    name: str
    log: HandedLog
    fd: int
    family: str
    port: int
    rules: dict[str, Any]
    slot: int = 0


@dataclass(frozen=True)
class WorkerSpec:
    """
    What a worker is told to serve: the JSON of its command line (L{toJSON},
    L{fromJSON}), so that it crosses the process boundary as text.

    @ivar optionsClass: the dotted name of the plugin's C{Options}.
    @ivar buildProxy: the dotted name of its C{buildProxy}.
    @ivar argv: the plugin's own arguments, as given to twistd.
    @ivar log: the main log.
    @ivar listeners: the main listeners, in the order C{buildProxy}'s
        C{listeners} lists them.
    @ivar apiAddress: where the API listens, if it does.
    @ivar files: the proxy's C{privilegedFiles}, opened by the supervisor:
        path -> the worker's descriptor.
    @ivar standby: it waits for L{GO} before it serves.
    @ivar sessions: the sessions held by the supervisor that it may serve.
    @ivar control: the worker's end of the control channel (see
        L{netlog.supervise.control}).
    @ivar adoptSession: the dotted name of what serves a session from its
        handed log and listener (L{netlog.session.manager.AdoptedSession}),
        called with C{(proxy, reactor, name, log path, log fd, listener fd,
        family, port, rules document)}; named, like C{buildProxy}, by
        whoever set sessions up, so that the worker needs to know nothing of
        them.
    @ivar rules: the main listener's rules document (L{netlog.core.rules}),
        as the supervisor holds it.
    @ivar slot: the worker slot it serves in (its connection ids say so).
    @ivar servesMain: it serves the main listeners and writes the main log;
        a worker of another slot builds the proxy only as the pattern of its
        sessions, and writes no main log.
    """

    optionsClass: str
    buildProxy: str
    argv: list[str]
    log: HandedLog
    listeners: list[HandedListener]
    apiAddress: tuple[str, int] | None
    files: dict[str, int] = field(default_factory=dict)
    standby: bool = False
    sessions: list[HandedSession] = field(default_factory=list)
    control: int | None = None
    adoptSession: str | None = None
    rules: dict[str, Any] | None = None
    slot: int = 0
    servesMain: bool = True

    def toJSON(self) -> str:
        """
        The worker's command line argument.
        """
        return json.dumps(
            {
                "options": self.optionsClass,
                "build": self.buildProxy,
                "argv": self.argv,
                "log": asdict(self.log),
                "listeners": [asdict(h) for h in self.listeners],
                "api": list(self.apiAddress) if self.apiAddress else None,
                "files": self.files,
                "standby": self.standby,
                "sessions": [asdict(h) for h in self.sessions],
                "control": self.control,
                "adoptSession": self.adoptSession,
                "rules": self.rules,
                "slot": self.slot,
                "servesMain": self.servesMain,
            }
        )

    @classmethod
    def fromJSON(cls, text: str) -> WorkerSpec:
        """
        The spec L{toJSON} wrote.
        """
        spec = json.loads(text)
        api = spec.get("api")
        return cls(
            optionsClass=spec["options"],
            buildProxy=spec["build"],
            argv=list(spec["argv"]),
            log=HandedLog(**spec["log"]),
            listeners=[HandedListener(**h) for h in spec["listeners"]],
            apiAddress=(api[0], int(api[1])) if api else None,
            files=dict(spec.get("files") or {}),
            standby=bool(spec.get("standby")),
            sessions=[HandedSession(**dict(h, log=HandedLog(**h["log"]), rules=h.get("rules") or {}))
                      for h in spec.get("sessions") or []],
            control=spec.get("control"),
            adoptSession=spec.get("adoptSession"),
            rules=spec.get("rules"),
            slot=int(spec.get("slot") or 0),
            servesMain=bool(spec.get("servesMain", True)),
        )


def dottedName(thing: Any) -> str:
    """
    The name under which the worker can import C{thing} again.
    """
    return f"{thing.__module__}.{thing.__qualname__}"


def _startLogging(forked: bool = False) -> None:
    """
    Send each log event to the supervisor as one JSON line on stdout, with
    its level, so that the supervisor logs it at that level.

    @param forked: this process is a fork of the supervisor, whose logging
        has begun already (see L{netlog.supervise.fork}).
    """
    from twisted.logger import eventAsText, globalLogBeginner, globalLogPublisher

    from netlog.net.chatter import withoutPortChatter

    out = sys.stdout

    def observer(event: dict[str, Any]) -> None:
        text = eventAsText(event, includeTimestamp=False, includeSystem=False)
        level = event.get("log_level")
        record = {"level": getattr(level, "name", "info"), "text": text}
        try:
            out.write(json.dumps(record) + "\n")
            out.flush()
        except (OSError, ValueError):
            pass

    quiet = withoutPortChatter(observer)  # type: ignore[arg-type]
    if forked:
        globalLogPublisher.addObserver(quiet)
    else:
        globalLogBeginner.beginLoggingTo([quiet], redirectStandardIO=False)


def handedToSlot(name: str, logPath: str | None, theirs: int, ours: int) -> bool:
    """
    Whether session C{name}, handed over, is this worker's to write: the
    slot the supervisor put it in (C{theirs}, the one record of who writes
    which log) is this worker's (C{ours}). A session of another slot is
    refused, with an error: two workers appending to one log would number
    it twice.
    """
    if theirs == ours:
        return True
    from twisted.logger import Logger

    Logger(namespace="netlog.worker").error(
        "refusing the log {path} of session {name}: it is written by worker slot {theirs}, "
        "this worker serves slot {ours}", path=logPath, name=name, theirs=theirs, ours=ours)
    return False


def _serveControl(reactor: IProxyReactor, fd: int, proxy: Any, sessions: Any, AdoptedSession: Any, slot: int,
                  readFile: ReadFile | None) -> None:
    """
    Serve the supervisor's control channel on C{fd}: sessions made and
    deleted over the API while this worker runs, each served by
    C{AdoptedSession} (see L{WorkerSpec.adoptSession}) if it was
    handed to this worker's C{slot}, and rules set (C{readFile}: how their
    answer rules' body files are read).
    """
    from netlog.supervise.control import SideFactory, WorkerSide

    def add(message: dict[str, Any], logFd: int, listenFd: int) -> None:
        name = str(message["name"])
        if not handedToSlot(name, str(message["log"]), int(message.get("slot") or 0), slot):
            os.close(logFd)
            os.close(listenFd)
            return
        if AdoptedSession is None:
            from twisted.logger import Logger

            Logger(namespace="netlog.worker").error(
                "the session {name} was handed to a worker that serves none", name=name)
        if AdoptedSession is None or name in sessions.namedServices:
            os.close(logFd)
            os.close(listenFd)
            return
        AdoptedSession(
            proxy, reactor, name, str(message["log"]), logFd, listenFd,
            getattr(socket, message["family"]), int(message["port"]), message.get("rules") or {}, readFile,
        ).setServiceParent(sessions)

    def setRules(message: dict[str, Any]) -> None:
        from netlog.core.rules import compileRules

        name = message.get("name")
        rules = compileRules(message.get("rules") or {}, readFile)
        if name is None:
            proxy.rules = rules
        elif name in sessions.namedServices:
            sessions.namedServices[name].proxy.rules = rules

    def delete(message: dict[str, Any]) -> Any:
        from twisted.internet.defer import succeed

        session = sessions.namedServices.get(str(message.get("name")))
        if session is None:
            return succeed(None)
        return session.stop(float(message.get("timeout", 0)))

    side = WorkerSide(add, delete, setRules)
    proxy.mintVia(side.mint)
    reactor.adoptStreamConnection(fd, socket.AF_UNIX, SideFactory(lambda: side))
    os.close(fd)


def handedWriter(logSpec: HandedLog, servesMain: bool, reactor: IProxyReactor, log: Any) -> Any:
    """
    The main log's writer, made only from the descriptor the supervisor
    handed over. A worker whose slot does not write the main log gets a
    writer that writes nothing: should it have been handed the log anyway,
    it refuses it (an error, and the descriptor closed unused), since two
    processes appending to one log would number it twice.
    """
    from netlog.log.writer import LogWriter

    if logSpec.fd is not None and not servesMain:
        log.error("refusing the log {path}: it was handed to a worker that does not write it",
                  path=logSpec.path)
        os.close(logSpec.fd)
        return LogWriter(None, reactor=reactor)
    if logSpec.fd is None:
        return LogWriter(None, reactor=reactor)
    return LogWriter(logSpec.path, reactor=reactor, fd=logSpec.fd)


def openConnections(proxy: Any, sessions: Any) -> int:
    """
    The browser connections a worker has open: its main listeners' and its
    sessions' (a set's size each: cheap enough for every heartbeat).
    """
    return len(proxy.connections) + sum(len(session.proxy.connections) for session in sessions)


def main(argv: list[str], forked: bool = False) -> int:
    """
    Serve as the SPEC C{argv[1]} says until stopped; the exit code.

    @param forked: this process is a fork of the supervisor (see
        L{netlog.supervise.fork}).
    """
    if len(argv) != 2:
        sys.stderr.write("usage: python -m netlog.supervise.worker SPEC\n")
        return EXIT_SETUP_FAILED
    spec = WorkerSpec.fromJSON(argv[1])
    # Ctrl-C in a terminal reaches the whole process group: let the
    # supervisor alone decide, and stop its workers with SIGTERM. (Twisted
    # leaves an ignored SIGINT ignored.)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # A worker started afresh installs netlog's reactor as twistd's plugins
    # do (a forked one has, in fork.py).
    install()
    _startLogging(forked)

    from twisted.application.service import MultiService
    from twisted.internet.protocol import Protocol
    from twisted.internet.stdio import StandardIO
    from twisted.internet.task import LoopingCall
    from twisted.logger import Logger
    from twisted.python.reflect import namedAny

    from netlog.log.writer import LogWriter
    from netlog.supervise.adopt import AdoptedListeners
    from netlog.privileged import inheritPrivilegedFiles

    reactor = theReactor()
    log = Logger(namespace="netlog.worker")

    try:
        inheritPrivilegedFiles(spec.files)
        options = namedAny(spec.optionsClass)()
        options.parseOptions(spec.argv)
        # Where the supervisor bound the API (its port, when --api said 0).
        config = replace(options.config(), apiAddress=spec.apiAddress)
        buildProxy = namedAny(spec.buildProxy)
        logSpec = spec.log
        servesMain = spec.servesMain
        # One writer per log: the supervisor hands each log to the workers
        # of one slot only, and the worker writes only what it was handed
        # (a log it was not handed, it refuses, see handedWriter).
        writer = handedWriter(logSpec, servesMain, reactor, log)
        if servesMain and logSpec.fd is not None:
            writer.rotateHanded(config.rotation)
        top = MultiService()
        writer.setServiceParent(top)
        proxy: ServedProxy = buildProxy(config, writer, reactor)
        proxy.connectionPrefix = connectionPrefix(spec.slot)
        # The bodies answer rules name are read from the state folder by
        # each worker, as its rules are set.
        readFile = stateFileReader(config.state) if config.state else None
        if spec.rules is not None:
            from netlog.core.rules import compileRules

            proxy.rules = compileRules(spec.rules, readFile)
        proxy.setServiceParent(top)
        listeners = list(proxy.listeners) if servesMain else []
        handed = spec.listeners
        if [(r, d) for r, d, _ in listeners] != [(h.role, h.description) for h in handed]:
            raise RuntimeError(
                "the worker's proxy has other listeners than the supervisor bound: "
                f"{[(r, d) for r, d, _ in listeners]} against "
                f"{[(h.role, h.description) for h in handed]}"
            )
        adopted = AdoptedListeners(
            reactor,
            [(h.fd, getattr(socket, h.family), factory) for h, (_, _, factory) in zip(handed, listeners)],
        )
        adopted.setServiceParent(top)
        handedSessions = spec.sessions
        AdoptedSession: Any = namedAny(spec.adoptSession) if spec.adoptSession else None
        if AdoptedSession is None and handedSessions:
            raise RuntimeError("the worker was handed sessions but no adoptSession to serve them")
        sessions = MultiService()
        sessions.setServiceParent(top)
        slot = spec.slot
        for held in handedSessions:
            if not handedToSlot(held.name, held.log.path, held.slot, slot):
                if held.log.fd is not None:
                    os.close(held.log.fd)
                os.close(held.fd)
                continue
            AdoptedSession(
                proxy, reactor, held.name, held.log.path, held.log.fd,
                held.fd, getattr(socket, held.family), held.port, held.rules, readFile,
            ).setServiceParent(sessions)
        if spec.control is not None:
            _serveControl(reactor, spec.control, proxy, sessions, AdoptedSession, slot, readFile)
    except Exception:
        log.failure("the worker could not set up the proxy")
        return EXIT_SETUP_FAILED

    waiting = [spec.standby]

    class _Lifeline(Protocol):
        def dataReceived(self, data: bytes) -> None:
            if waiting[0] and GO.strip() in data:
                waiting[0] = False
                start()

        def connectionLost(self, reason: Any = None) -> None:
            if reactor.running:
                log.info("the supervisor is gone; stopping")
                reactor.stop()

    lifeline = _Lifeline()
    status = StandardIO(lifeline, stdin=0, stdout=STATUS_FD, reactor=reactor)  # type: ignore[call-arg]

    def stop() -> Any:
        if top.running:
            return top.stopService()
        return None

    def begin() -> None:
        if waiting[0]:
            status.write(STANDING_BY)
        else:
            start()

    def start() -> None:
        try:
            top.startService()
        except Exception:
            log.failure("the worker could not start the proxy")
            failed.append(True)
            reactor.stop()
            return
        status.write(READY)
        heartbeat.start(HEARTBEAT_INTERVAL, now=False)

    def beat() -> None:
        status.write(aliveLine(openConnections(proxy, sessions)))

    heartbeat = LoopingCall(beat)
    heartbeat.clock = reactor
    failed: list[bool] = []
    reactor.callWhenRunning(begin)
    reactor.addSystemEventTrigger("before", "shutdown", stop)
    reactor.run()
    return EXIT_SETUP_FAILED if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
