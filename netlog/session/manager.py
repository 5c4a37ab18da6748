"""
Sessions: each one a forward listener on loopback and a log of its own,
served by an engine of its own over the main proxy's mode, resolver and
destination rules. L{SessionManager} keeps them in a proxy run in one process
(C{--no-supervise}); L{HeldSessions} is the API's view of those a supervisor
holds, and L{AdoptedSession} one as its worker serves it.

Why an engine per session rather than one engine with a writer per listener:
the engine's connections, their ids and its pool then belong to one session,
so stopping a session (L{ProxyService.stopService}) ends exactly its own
connections and no line of one session can reach another's log, with no
change to the engine. What a session costs is a listening socket, an open
file and a few small objects; the mode (and the site proxy's CA), the
resolver and the rules are shared.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from twisted.application.service import MultiService
from twisted.internet import defer, error
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.logger import Logger

from netlog.core.rules import NO_RULES, ReadFile, Rules, compileRules
from netlog.log.logfile import UnsafeLogPath, openLogFile
from netlog.log.reader import lastLineOf
from netlog.log.series import removeSeries
from netlog.log.writer import LogWriter
from netlog.net.options import LISTEN_BACKLOG
from netlog.net.reactors import IProxyReactor
from netlog.proxy.service import ProxyService
from netlog.session.names import BadSession, autoName, checkName, checkPort, sessionLogPath
from netlog.state import stateFileReader

_log = Logger(namespace="netlog.sessions")

#: The interface every session listens on.
SESSION_INTERFACE = "127.0.0.1"
#: Seconds a deleted session's open exchanges have to end before they are
#: ended as stopped.
STOP_TIMEOUT = 10.0
#: Seconds between two looks at a stopping session's open exchanges.
STOP_POLL = 0.05
#: Sessions one proxy holds at once (each holds a socket and a file).
MAX_SESSIONS = 1024


def logUsed(mainLog: str | None) -> Callable[[str], bool]:
    """
    For L{autoName}: whether a session's log file is already there beside
    C{mainLog} (a name is used while its path holds anything).
    """
    if mainLog is None:
        return lambda name: False
    return lambda name: os.path.lexists(sessionLogPath(mainLog, name))


def sessionProxy(main: Any, writer: LogWriter, reactor: IProxyReactor, port: int, rules: Rules = NO_RULES) -> ProxyService:
    """
    A session's engine: over C{main}'s mode, resolver, destination rules and
    upstream proxy, with its own writer, connections, pool and C{rules} (its rules document,
    L{netlog.core.rules}), and one forward listener on loopback.
    """
    proxy = ProxyService(
        main.mode,
        writer,
        reactor,
        main.resolver,
        main.policy,
        [f"tcp:{port}:interface={SESSION_INTERFACE}"],
        connectTimeout=main.connectTimeout,
        idleTimeout=main.idleTimeout,
        headerTimeout=main.headerTimeout,
        rules=rules,
        h2Upstream=main.h2Upstream,
        upstreamProxy=main.upstreamProxy,
    )
    # Its connection ids say which worker slot it runs in, as its main's do.
    proxy.connectionPrefix = main.connectionPrefix
    return proxy


class AdoptedSession(MultiService):
    """
    A supervised worker's session: its log and its listener inherited from
    the supervisor, which holds both across workers (so its port and its
    numbering outlive a worker killed with C{kill -9}).
    """

    def __init__(self, main: Any, reactor: IProxyReactor, name: str, logPath: str, logFd: int,
                 listenFd: int, family: int, port: int, rules: dict[str, Any] | None = None,
                 readFile: ReadFile | None = None) -> None:
        """
        @param rules: its rules document, checked by the supervisor.
        @param readFile: how its answer rules' C{body_file}s are read.
        """
        from netlog.supervise.adopt import AdoptedListeners

        MultiService.__init__(self)
        self.setName(name)
        self._reactor = reactor
        self._fds = (logFd, listenFd)
        # One writer per log: the descriptor was handed to this worker's
        # slot alone (the worker refuses any other, see handedToSlot).
        self.writer = LogWriter(logPath, reactor=reactor, fd=logFd, guardCuts=False)
        proxy = self.proxy = sessionProxy(main, self.writer, reactor, port, compileRules(rules or {}, readFile))
        main.policy.addListener(SESSION_INTERFACE, port)
        self.writer.setServiceParent(self)
        proxy.setServiceParent(self)
        self.listening = AdoptedListeners(reactor, [(listenFd, family, proxy.listeners[0][2])])
        self.listening.setServiceParent(self)
        self._started = False

    def startService(self) -> None:
        self._started = True
        MultiService.startService(self)

    def stop(self, timeout: float) -> defer.Deferred[None]:
        """
        Stop serving it: no new connection at once, then its open exchanges
        have C{timeout} seconds to end before they are ended as stopped. A
        session never started (in a standby) only lets its descriptors go.
        """
        if not self._started:
            for fd in self._fds:
                os.close(fd)
            self.disownServiceParent()
            return defer.succeed(None)
        d = defer.maybeDeferred(self.listening.stopService)
        d.addCallback(lambda _: waitQuiet(self._reactor, self.writer, timeout))
        d.addCallback(lambda _: self.disownServiceParent())
        return d.addCallback(lambda _: None)


def waitQuiet(reactor: IProxyReactor, writer: LogWriter, timeout: float) -> defer.Deferred[None]:
    """
    Fires when C{writer}'s log has no open exchange, or after C{timeout}.
    """
    done: defer.Deferred[None] = defer.Deferred()
    deadline = reactor.seconds() + timeout

    def look() -> None:
        if not writer.openIds or reactor.seconds() >= deadline:
            done.callback(None)
        else:
            reactor.callLater(STOP_POLL, look)

    look()
    return done


class SessionError(Exception):
    """
    A session can't be made or found: C{status} is the API's answer.
    """

    def __init__(self, status: int, message: str) -> None:
        Exception.__init__(self, status, message)
        self.status = status
        self.message = message


class Session(MultiService):
    """
    One session: its LogWriter and its engine (children, in that order, so
    the engine stops first and the writer then ends what is still open), and
    its listening port.
    """

    def __init__(self, name: str, logPath: str, writer: LogWriter, proxy: ProxyService, port: Any,
                 first: int = 1) -> None:
        MultiService.__init__(self)
        self.setName(name)
        self.logPath = logPath
        #: The number of its first line (its log may hold an earlier
        #: session's of the same name before it).
        self.first = first
        self.writer = writer
        self.proxy = proxy
        self.port = port
        writer.setServiceParent(self)
        proxy.setServiceParent(self)

    @property
    def address(self) -> tuple[str, int]:
        host = self.port.getHost()
        return host.host, host.port

    def describe(self) -> dict[str, Any]:
        host, port = self.address
        return {
            "name": self.name,
            "proxy": f"{host}:{port}",
            "port": port,
            "log": self.logPath,
            "open": len(self.writer.openIds),
            "first": self.first,
            "last": self.writer.nextNumber - 1,
        }


class HeldSession:
    """
    A session as the supervisor holds it: its listener and its log's path
    (the worker serves it).
    """

    def __init__(self, name: str, logPath: str, listener: Any, first: int, logFd: int) -> None:
        self.name = name
        self.logPath = logPath
        self.listener = listener
        #: The number of its first line, as L{Session.first}.
        self.first = first
        self._logFd = logFd

    def describe(self) -> dict[str, Any]:
        host = self.listener.getHost()
        return {
            "name": self.name, "proxy": f"{host.host}:{host.port}", "port": host.port, "log": self.logPath,
            "first": self.first, "last": lastLineOf(self._logFd),
        }


def removeLater(reactor: Any, retention: float | None, name: str, logPath: str,
                inUse: Callable[[], bool]) -> None:
    """
    Remove a deleted session's log and its segments C{retention} seconds
    from now (C{--session-retention}; None: keep them), unless a session
    of its name writes it again by then.
    """
    if retention is None:
        return

    def remove() -> None:
        if inUse():
            return
        for path in removeSeries(logPath):
            _log.info("removed {path}, the log of the deleted session {name} (--session-retention)",
                      path=path, name=name)

    reactor.callLater(retention, remove)


class HeldSessions:
    """
    The sessions of a supervised proxy, for its API (served by the
    supervisor): the supervisor holds each one's listener and log, as it
    holds the main ones, and hands them to every worker (see
    L{netlog.supervise.control}).
    """

    def __init__(self, supervisor: Any, logPath: str | None, stopTimeout: float = STOP_TIMEOUT,
                 retention: float | None = None, state: str | None = None) -> None:
        """
        @param state: the state folder, where answer rules' C{body_file}s
            are read.
        """
        self.readFile = stateFileReader(state) if state else None
        self._supervisor = supervisor
        self._retention = retention
        self._logPath = logPath
        self._stopTimeout = stopTimeout

    def _held(self) -> dict[str, HeldSession]:
        return {
            name: HeldSession(name, logPath, listener, first, fd)
            for name, (logPath, listener, first, fd) in self._supervisor.heldSessions().items()
        }

    def get(self, name: str) -> HeldSession:
        held = self._held()
        if name not in held:
            raise SessionError(404, f"there is no session {name!r}")
        return held[name]

    def list(self) -> list[dict[str, Any]]:
        held = self._held()
        return [held[name].describe() for name in sorted(held)]

    def create(self, name: str | None = None, port: int = 0, rules: Rules = NO_RULES) -> HeldSession:
        """
        @raise SessionError: as L{SessionManager.create}.
        """
        taken = self._supervisor.sessionNames()
        try:
            name = autoName(taken, logUsed(self._logPath)) if name is None else checkName(name)
            port = checkPort(port)
        except BadSession as e:
            raise SessionError(400, str(e)) from None
        if name in taken:
            raise SessionError(409, f"the session {name!r} exists already, or is being deleted")
        if self._logPath is None:
            raise SessionError(409, "this proxy keeps no log (--no-log): a session would have none either")
        if len(taken) >= MAX_SESSIONS:
            raise SessionError(409, f"this proxy holds {MAX_SESSIONS} sessions already")
        logPath = sessionLogPath(self._logPath, name)
        try:
            listener = self._supervisor.addSession(name, f"tcp:{port}:interface={SESSION_INTERFACE}", logPath, rules)
        except error.CannotListenError as e:
            raise SessionError(409, f"port {port} can't be listened on: {e.socketError}") from None
        except UnsafeLogPath as e:
            raise SessionError(503, f"the session's log: {e}") from None
        except OSError as e:
            raise SessionError(503, f"the session's log {logPath} can't be opened: {e.strerror or e}") from None
        return self.get(name)

    def rulesOf(self, name: str | None) -> Rules:
        """
        @raise SessionError: as L{SessionManager.rulesOf}.
        """
        try:
            return self._supervisor.rulesOf(name)  # type: ignore[no-any-return]
        except KeyError:
            raise SessionError(404, f"there is no session {name!r}") from None

    def setRules(self, name: str | None, rules: Rules) -> defer.Deferred[Any]:
        """
        @return: fires once the workers serving now have them in force.
        @raise SessionError: as L{SessionManager.setRules}.
        """
        try:
            return self._supervisor.setRules(name, rules)  # type: ignore[no-any-return]
        except KeyError:
            raise SessionError(404, f"there is no session {name!r}") from None

    def delete(self, name: str, timeout: float | None = None) -> defer.Deferred[dict[str, Any]]:
        """
        @raise SessionError: (404) there is no session C{name}.
        """
        logPath = self.get(name).logPath
        d: defer.Deferred[dict[str, Any]] = self._supervisor.deleteSession(
            name, self._stopTimeout if timeout is None else timeout)

        def deleted(result: dict[str, Any]) -> dict[str, Any]:
            removeLater(self._supervisor._reactor, self._retention, name, logPath,
                        lambda: name in self._supervisor.sessionNames())
            return result

        return d.addCallback(deleted)


class SessionManager(MultiService):
    """
    The sessions of one in-process proxy: those fixed at start
    (C{--session}), made in twistd's privileged step like the main log and
    listeners, and those made and ended over the API.
    """

    name = "sessions"

    def __init__(
        self,
        proxy: Any,
        logPath: str | None,
        reactor: IProxyReactor,
        fixed: tuple[tuple[str, int], ...] | list[tuple[str, int]] = (),
        uid: int | None = None,
        gid: int | None = None,
        stopTimeout: float = STOP_TIMEOUT,
        retention: float | None = None,
        state: str | None = None,
    ) -> None:
        """
        @param retention: seconds after which a deleted session's log is
            removed (C{--session-retention}); None: kept.
        @param state: the state folder, where answer rules' C{body_file}s
            are read.
        """
        MultiService.__init__(self)
        self.readFile = stateFileReader(state) if state else None
        self._proxy = proxy
        self._retention = retention
        self._logPath = logPath
        self._reactor = reactor
        self._fixed = list(fixed)
        self._uid = uid
        self._gid = gid
        self._stopTimeout = stopTimeout
        self.sessions: dict[str, Session] = {}
        self._stopping: set[str] = set()
        self._madeFixed = False

    # -- service --------------------------------------------------------------------

    def _makeFixed(self, uid: int | None, gid: int | None) -> None:
        if self._madeFixed:
            return
        self._madeFixed = True
        for name, port in self._fixed:
            try:
                self._make(name, port, uid, gid)
            except SessionError as e:
                raise SystemExit(f"--session {name}={port}: {e.message}") from None

    def privilegedStartService(self) -> None:
        self._makeFixed(self._uid, self._gid)
        MultiService.privilegedStartService(self)

    def startService(self) -> None:
        self._makeFixed(self._uid, self._gid)
        MultiService.startService(self)

    def stopService(self) -> Any:
        for session in self.sessions.values():
            session.port.stopListening()
        return MultiService.stopService(self)

    # -- what the API asks -------------------------------------------------------------

    def get(self, name: str) -> Session:
        """
        @raise SessionError: (404) there is no session C{name}.
        """
        session = self.sessions.get(name)
        if session is None:
            raise SessionError(404, f"there is no session {name!r}")
        return session

    def list(self) -> list[dict[str, Any]]:
        return [self.sessions[name].describe() for name in sorted(self.sessions)]

    def create(self, name: str | None = None, port: int = 0, rules: Rules = NO_RULES) -> Session:
        """
        Make a session and start it.

        @param rules: its rules (checked already).
        @raise SessionError: 400 a bad name or port, 409 a name in use or a
            port taken, 503 its log can't be opened.
        """
        # After the privileged step, a session's log is opened as the user
        # the proxy runs as (twistd already dropped root).
        return self._make(name, port, None, None, rules)

    def rulesOf(self, name: str | None) -> Rules:
        """
        The rules of session C{name}, or of the main listener (L{None}).

        @raise SessionError: (404) there is no session C{name}.
        """
        return (self._proxy if name is None else self.get(name).proxy).rules  # type: ignore[no-any-return]

    def setRules(self, name: str | None, rules: Rules) -> None:
        """
        Give session C{name} (L{None}: the main listener) new rules: each
        request from now on asks them.

        @raise SessionError: (404) there is no session C{name}.
        """
        (self._proxy if name is None else self.get(name).proxy).rules = rules

    def _make(self, name: str | None, port: int, uid: int | None, gid: int | None,
              rules: Rules = NO_RULES) -> Session:
        try:
            name = autoName(set(self.sessions) | self._stopping, logUsed(self._logPath)) if name is None else checkName(name)
            port = checkPort(port)
        except BadSession as e:
            raise SessionError(400, str(e)) from None
        if name in self.sessions:
            raise SessionError(409, f"the session {name!r} exists already")
        if name in self._stopping:
            raise SessionError(409, f"the session {name!r} is being deleted; ask again once it is")
        if self._logPath is None:
            raise SessionError(409, "this proxy keeps no log (--no-log): a session would have none either")
        if len(self.sessions) >= MAX_SESSIONS:
            raise SessionError(409, f"this proxy holds {MAX_SESSIONS} sessions already")
        logPath = sessionLogPath(self._logPath, name)
        # Bound first: a port that can't be had leaves no log file behind.
        # The writer is put in once its file is open.
        proxy = sessionProxy(self._proxy, LogWriter(None), self._reactor, port, rules)
        factory = proxy.listeners[0][2]
        try:
            listening = self._reactor.listenTCP(port, factory, backlog=LISTEN_BACKLOG, interface=SESSION_INTERFACE)
        except error.CannotListenError as e:
            raise SessionError(409, f"port {port} can't be listened on: {e.socketError}") from None
        try:
            fd = openLogFile(logPath, uid, gid)
        except (UnsafeLogPath, OSError) as e:
            listening.stopListening()
            reason = str(e) if isinstance(e, UnsafeLogPath) else f"{logPath} can't be opened: {e.strerror or e}"
            raise SessionError(503, f"the session's log: {reason}") from None
        first = lastLineOf(fd) + 1
        writer = LogWriter(logPath, reactor=self._reactor, fd=fd, guardCuts=False)
        proxy.writer = writer
        bound = listening.getHost()
        # A session listens on TCP (sessionProxy binds it so).
        assert isinstance(bound, (IPv4Address, IPv6Address))
        # Its own port is refused as a destination, like the main listeners.
        self._proxy.policy.addListener(bound.host, bound.port)
        session = Session(name, logPath, writer, proxy, listening, first)
        self.sessions[name] = session
        session.setServiceParent(self)
        _log.info(
            "session {name} listens on {host}:{port}, logs to {log}",
            name=name, host=bound.host, port=bound.port, log=logPath,
        )
        return session

    def delete(self, name: str, timeout: float | None = None) -> defer.Deferred[dict[str, Any]]:
        """
        Stop a session: its listener at once, then wait (up to the stop
        timeout) for its open exchanges to end, then end its connections and
        any exchange still open (as stopped), and close its log.

        @param timeout: seconds to wait for open exchanges (default: the
            manager's stop timeout).
        @return: (a Deferred of) the session's name, log and last line number.
        @raise SessionError: (404) there is no session C{name}.
        """
        session = self.get(name)
        del self.sessions[name]
        self._stopping.add(name)
        d = defer.maybeDeferred(session.port.stopListening)
        d.addCallback(lambda _: waitQuiet(self._reactor, session.writer, self._stopTimeout if timeout is None else timeout))
        d.addCallback(lambda _: session.disownServiceParent())

        def stopped(_: object) -> dict[str, Any]:
            last = session.writer.nextNumber - 1
            _log.info("session {name} deleted; its log {log} ends at line {last}", name=name, log=session.logPath, last=last)
            removeLater(self._reactor, self._retention, name, session.logPath,
                        lambda: name in self.sessions or name in self._stopping)
            return {"name": name, "log": session.logPath, "last": last}

        def done(result: Any) -> Any:
            self._stopping.discard(name)
            return result

        d.addCallback(stopped)
        d.addBoth(done)
        return d

