"""
What both twistd plugins share: the log's options, and how a proxy is wired to
its LogWriter and its listeners.

A plugin's C{Options} builds a L{netlog.config.ProxyConfig} once parsed
(C{config()}), and the proxy package offers C{buildProxy(config, writer,
reactor)} for that config, a L{netlog.supervise.worker.ServedProxy} whose
C{listeners} attribute lists C{(role, description, factory)}: the endpoint
descriptions to serve and the factory for each.

Supervised (the default), L{makeProxyService} returns a
L{netlog.supervise.supervisor.Supervisor}: it opens the log and binds the
listeners in twistd's privileged step, and runs the proxy in a worker process
that inherits them and is started again when it dies. The worker imports the
plugin's C{Options} and C{buildProxy} by name, parses the same arguments
again and builds the same config from them, so both must be importable
module-level names, and C{buildProxy} must only build (start nothing) since
the supervisor calls it too: to learn the listeners, and to run the proxy's C{privilegedStartService} as root (the
worker never runs it). Files only root may read that the worker needs are
listed in the proxy's C{privilegedFiles}, and what the supervisor's copy made
in that step for the workers (the site proxy's certificates, never its CA
key) is its C{handedData}; the worker opens either with
L{netlog.privileged.openPrivileged}.

With C{--no-supervise} it wires everything in this process: the LogWriter
first, so the file is open before privileges drop, then the proxy, then a
listener service per listener, bound in the privileged step.

Either way C{--api DESCRIPTION} adds the loopback HTTP API (see
L{netlog.api}), and the config's C{apiAddress} is the C{(host, port)} it
serves on (or None), which a proxy's destination policy must refuse.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Callable, Generic, Sequence

from twisted.application.internet import StreamServerEndpointService
from twisted.application.service import MultiService
from twisted.internet.endpoints import serverFromString
from twisted.logger import Logger
from twisted.python import usage

from netlog.api import API_IDLE_TIMEOUT, SESSION_RATE
from netlog.api.door import apiHostName
from netlog.config import ApiConfig, PluginConfig, ProxyConfig
from netlog.core.rules import NO_RULES
from netlog.log.rotationoptions import ROTATION_OPTIONS, rotationOf
from netlog.log.writer import LogWriter
from netlog.net.chatter import QuietPorts
from netlog.net.endpoints import checkListen
from netlog.net.options import DEFAULT_LISTEN, _seconds, splitDescription, withBacklog
from netlog.net.reactors import IProxyReactor, theReactor
from netlog.state import DEFAULT_STATE
from netlog.supervise.adopt import NotAdoptable, checkAdoptable
from netlog.supervise.policy import RestartPolicy
from netlog.supervise.supervisor import GRACE, HANG_TIMEOUT, Supervisor, raiseFileLimit
from netlog.supervise.worker import ServedProxy, dottedName
from netlog.tap.preflight import OPTION_OF_ROLE, checkOtherTwistd, commandName, preflight
from netlog.token import TokenError, defaultTokenPath

if TYPE_CHECKING:
    from netlog.api.service import ApiService

_log = Logger(namespace="netlog.listeners")

#: The interface the API listens on when its description names none.
API_INTERFACE = "127.0.0.1"


def defaultLogPath(name: str) -> str:
    """
    Where a proxy logs when no C{--log} is given: C{/var/log/netlog/NAME.jsonl}
    as root, else C{~/.local/state/netlog/NAME.jsonl}.
    """
    if os.geteuid() == 0:
        return f"/var/log/netlog/{name}.jsonl"
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "netlog", f"{name}.jsonl")


#: What C{--workers} takes for one worker a core this process may run on.
WORKERS_AUTO = "auto"


def workerCount(value: str) -> int:
    """
    Read C{--workers}: a whole number, 1 or more, or C{auto} for the number
    of cores this process may run on (C{os.sched_getaffinity}: a container
    or C{taskset} limit counts, the machine's other cores don't).

    @raise ValueError: anything else (twistd's option parser makes it one
        line naming the option).
    """
    text = value.strip().lower()
    if text == WORKERS_AUTO:
        return max(1, len(os.sched_getaffinity(0)))
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"--workers wants a number of workers, 1 or more, or auto, got {value!r}")
    return int(text)


def apiDescription(value: str) -> str:
    """
    Check an C{--api} endpoint description and make it loopback unless it
    names an interface: C{tcp:8080} becomes C{tcp:8080:interface=127.0.0.1}.

    @raise usage.UsageError: it is not a TCP description with a port (a
        bare port or C{host:port} among them: the line shows what to write).
    """
    value = value.strip()
    checkListen("--api", value)
    parts = splitDescription(value)
    if parts[0].lower() not in ("tcp", "tcp6") or len(parts) < 2 or not parts[1].isdigit():
        raise usage.UsageError(
            f"--api {value}: it wants a TCP endpoint description with a port, such as "
            f"tcp:8081:interface=127.0.0.1"
        )
    if not any(p.startswith("interface=") for p in parts[2:]):
        value += ":interface=" + (API_INTERFACE if parts[0].lower() == "tcp" else "\\:\\:1")
    return value




def apiAddress(description: str) -> tuple[str, int]:
    """
    The C{(host, port)} an C{--api} description (as L{apiDescription} left
    it) listens on.
    """
    parts = splitDescription(description)
    host = API_INTERFACE
    for part in parts[2:]:
        if part.startswith("interface="):
            host = part[len("interface="):]
    return host, int(parts[1])


class LogOptions(usage.Options, Generic[PluginConfig]):
    """
    The options every proxy shares: its log, its supervision, its API.

    A plugin's C{Options} inherits these (and calls
    C{LogOptions.postOptions}); L{parseOptions} keeps the arguments in
    C{argv}, which a supervised worker parses again.
    """

    optParameters = [
        ["log", None, None, "The log file (default: /var/log/netlog/NAME.jsonl as root, "
         "else ~/.local/state/netlog/NAME.jsonl)."],
        ["api", None, None, "Serve the log over HTTP on this endpoint (off unless given; "
         "loopback unless it names an interface), e.g. tcp:8081:interface=127.0.0.1."],
        ["state", None, DEFAULT_STATE, "Folder for netlog's state: the API's token and the "
         "site proxy's CA (created on first start; default /var/lib/netlog as root, else "
         "~/.local/state/netlog)."],
        ["api-token-file", None, None, "The API's token, which any request that changes "
         "something must send (made at start if missing, mode 0600; default STATE/api-token)."],
        ["api-session-rate", None, SESSION_RATE, "Sessions the API makes a second at most "
         "(more get 429).", float],
        ["api-idle-timeout", None, API_IDLE_TIMEOUT, "Seconds an API connection may sit "
         "idle (before a request, or between two) before it is closed.", _seconds("api-idle-timeout")],
        ["grace", None, GRACE, "Seconds a worker has to stop after SIGTERM "
         "before it is killed.", _seconds("grace", orZero=True)],
        ["hang-timeout", None, HANG_TIMEOUT, "Seconds a worker's event loop may "
         "be stuck before the worker is killed and replaced (0: never).", _seconds("hang-timeout", orZero=True)],
        ["give-up-after", None, None, "Stop (exit status 70) after this many workers in a "
         "row died quickly, for an outer supervisor to fail over (default: never give up).", int],
        ["workers", None, "1", "Serving workers (processes), each with its own standby: the main "
         "listeners are one's, each session is one's (new ones go to the least busy); "
         "'auto' for one a core this process may run on.", workerCount],
    ] + ROTATION_OPTIONS
    optFlags = [
        ["no-log", None, "Keep no log (bodies are counted, neither kept nor hashed)."],
        ["api-token-reads", None, "The API's reads (the log, the HAR, the CA, the live view) "
         "need the token too; the live view opens through a one-time URL logged at start."],
        ["no-supervise", None, "Run the proxy in the twistd process itself, with no "
         "worker to start again (for debugging, or under an outer supervisor)."],
        ["no-standby", None, "Keep no second worker started ahead to take over at once "
         "(saves its memory; a restart then takes as long as a start)."],
    ]

    argv: list[str] = []
    #: Whether the proxy has a CA (in C{--state}) for the API to serve.
    hasCA = False

    def parseOptions(self, options: list[str] | None = None) -> None:
        """
        Parse, as usual; under twistd, a mistake ends the process with one
        line (twistd would print its whole help before it).
        """
        self.argv = list(sys.argv[1:] if options is None else options)
        try:
            usage.Options.parseOptions(self, options)
        except usage.UsageError as e:
            if getattr(self, "parent", None) is None:
                raise
            message = str(e).removeprefix("Parameter type enforcement failed: ")
            if "not recognized" in message:
                message += f" (see {commandName(self)} --help)"
            raise SystemExit(f"{commandName(self)}: {message}") from None

    def opt_api_host(self, name: str) -> None:
        """
        NAME: a Host the API answers besides loopback and its own address (repeatable).
        """
        # Any other Host gets 421: a web page that points a name of its own
        # at this machine (DNS rebinding) can't read the API.
        self.setdefault("api-host", []).append(apiHostName(name))

    def opt_session(self, value: str) -> None:
        """
        NAME=PORT: a session fixed at start, its own forward port on
        loopback and its own log (repeatable).
        """
        from netlog.session.names import BadSession, parseSessionOption

        try:
            session = parseSessionOption(value)
        except BadSession as e:
            raise usage.UsageError(str(e)) from None
        sessions = self.setdefault("session", [])
        if any(name == session[0] for name, _ in sessions):
            raise usage.UsageError(f"--session {session[0]} is given twice")
        sessions.append(session)

    def opt_rules(self, path: str) -> None:
        """
        FILE: the main listener's rules (headers, block and allow lists,
        remaps, latency, bandwidth), TOML, or JSON for a name ending .json.
        """
        # Checked now; read again in postOptions with its answer rules'
        # body files, which are in the state folder (given after it, maybe).
        self["rules"] = _readRules(path, None)
        self["rules-file"] = path

    def opt_listen(self, description: str) -> None:
        """
        The forward port (the browser's proxy setting), an endpoint
        description (repeatable; default tcp:3128:interface=127.0.0.1).
        """
        self.setdefault("listen", []).append(description)

    def postOptions(self) -> None:
        for name, value in sorted(self.items()):
            # Given as "" ("$UNSET" in a script): not the default, a mistake.
            if value == "" and name + "=" in self.longOpt:
                raise usage.UsageError(f"--{name} was given an empty value")
        if self.get("rules-file"):
            self["rules"] = _readRules(self["rules-file"], self.get("state") or DEFAULT_STATE)
        if not self.get("listen"):
            self["listen"] = [DEFAULT_LISTEN]
            self["listen-is-default"] = True
        for description in self["listen"]:
            checkListen("--listen", description)
        if self["no-log"]:
            self["log"] = None
        elif not self.get("log"):
            self["log"] = defaultLogPath(self.logName)
            # A refusal of it then says it is the default, not a --log given.
            self["log-is-default"] = True
        if self["log"] is not None:
            # netlog makes the default log's folder (a unit file may name it
            # by hand) and the default state folder (where a refusal of an
            # unsafe /var/log tells to put the log), and no other.
            self["log-folder-made"] = os.path.dirname(os.path.abspath(self["log"])) in (
                os.path.dirname(os.path.abspath(defaultLogPath(self.logName))), os.path.abspath(DEFAULT_STATE))
        self.checkApi()
        self.setdefault("session", [])
        if self["session"] and self["no-log"]:
            raise usage.UsageError("--session keeps a log of its own: it can't be used with --no-log")
        if isinstance(self["workers"], str):
            self["workers"] = workerCount(self["workers"])
        if self["workers"] > 1 and self["no-supervise"]:
            raise usage.UsageError(
                f"--workers {self['workers']} needs a supervisor to run them: one process can't be "
                f"{self['workers']} workers (leave out --no-supervise, or give --workers 1)")
        checkOtherTwistd(self)

    def config(self) -> ProxyConfig[PluginConfig]:
        """
        The typed configuration these options say, once C{postOptions} has
        checked them: what every proxy shares, and in its C{plugin} what
        L{pluginConfig} says.
        """
        parent = getattr(self, "parent", None)
        uid, gid = dropIds(self)
        logfile = parent.get("logfile") if parent is not None else None
        # twistd -n with no --logfile logs to standard output, as --logfile - does.
        logsToStdout = parent is not None and (logfile == "-" or (not logfile and bool(parent.get("nodaemon"))))
        return ProxyConfig(
            command=commandName(self),
            argv=tuple(self.argv),
            optionsClass=dottedName(type(self)),
            uid=uid,
            gid=gid,
            twistdLogsToStdout=logsToStdout,
            log=self["log"],
            logIsDefault=bool(self.get("log-is-default")),
            logFolderMade=bool(self.get("log-folder-made")),
            state=self["state"],
            hasCA=self.hasCA,
            listen=tuple(self["listen"]),
            listenIsDefault=bool(self.get("listen-is-default")),
            api=self.apiConfig(),
            apiAddress=self["api-address"],
            rules=self.get("rules") or NO_RULES,
            sessions=tuple(self["session"]),
            sessionRetention=self["session-retention"],
            rotation=rotationOf(self),
            grace=self["grace"],
            hangTimeout=self["hang-timeout"],
            giveUpAfter=self["give-up-after"],
            workers=self["workers"],
            supervised=not self["no-supervise"],
            standby=not self["no-standby"],
            plugin=self.pluginConfig(),
        )

    def apiConfig(self) -> ApiConfig | None:
        """
        The API's part of L{config}, or L{None} when it is off.
        """
        if not self["api"]:
            return None
        return ApiConfig(
            description=self["api"],
            hosts=frozenset(self["api-host"]),
            tokenFile=self["api-token-file"],
            tokenFileIsDefault=bool(self.get("api-token-file-is-default")),
            tokenReads=bool(self["api-token-reads"]),
            sessionRate=self["api-session-rate"],
            idleTimeout=self["api-idle-timeout"],
        )

    def pluginConfig(self) -> PluginConfig:
        """
        What only this plugin's proxy has: a plugin's C{Options} says.
        """
        raise NotImplementedError(f"{type(self).__name__} says no pluginConfig")

    def checkApi(self) -> None:
        """
        Check C{--api} and set C{self["api-address"]}.
        """
        self.setdefault("api-host", [])
        if self["api-host"] and not self.get("api"):
            raise usage.UsageError("--api-host names the API, which is off: give --api too")
        if self.get("api-token-reads") and not self.get("api"):
            raise usage.UsageError("--api-token-reads guards the API, which is off: give --api too")
        if not self.get("api-token-file"):
            self["api-token-file"] = defaultTokenPath(self.get("state") or DEFAULT_STATE)
            self["api-token-file-is-default"] = True
        rate = self.get("api-session-rate")
        if rate is not None and not 0 < rate < float("inf"):
            raise usage.UsageError(f"--api-session-rate wants sessions a second, more than 0, got {rate:g}")
        if self.get("api"):
            self["api"] = apiDescription(self["api"])
            self["api-address"] = apiAddress(self["api"])
        else:
            self["api"] = None
            self["api-address"] = None
        for name in ("grace", "hang-timeout"):
            if self.get(name) is not None and self[name] < 0:
                raise usage.UsageError(f"--{name} wants a number of seconds, 0 or more")
        giveUp = self.get("give-up-after")
        if giveUp is not None and giveUp < 1:
            raise usage.UsageError(f"--give-up-after wants a number of quick deaths, 1 or more, got {giveUp}")

    logName = "network"


def _readRules(path: str, state: str | None) -> Any:
    """
    C{--rules}: the file's rules, their answer rules' body files read from
    the state folder (L{None}: checked, not read, each body empty).
    """
    from netlog.core.rules import BadRules
    from netlog.session.rulesfile import readRulesFile
    from netlog.state import stateFileReader

    try:
        return readRulesFile(path, stateFileReader(state) if state else lambda name, limit: b"")
    except BadRules as e:
        raise usage.UsageError(str(e)) from None


def dropIds(config: usage.Options) -> tuple[int | None, int | None]:
    """
    The uid and gid twistd will drop to (its C{--uid}/C{--gid}), if any.
    """
    parent = getattr(config, "parent", None)
    if parent is None:
        return None, None
    uid = parent.get("uid")
    gid = parent.get("gid")
    return uid, gid


#: How a proxy package builds its proxy from the config (see above).
BuildProxy = Callable[[ProxyConfig[PluginConfig], LogWriter, IProxyReactor], ServedProxy]


def makeProxyService(
    config: ProxyConfig[PluginConfig], buildProxy: BuildProxy[PluginConfig], reactor: IProxyReactor | None = None,
    pluginLines: Sequence[str] = (),
) -> MultiService:
    """
    Wire a proxy: supervised in a worker process, or with C{--no-supervise}
    in this one; with its API listener when C{--api} is given.

    @param pluginLines: what only this plugin's proxy says at start (see
        L{netlog.tap.startup.StartupReport}).
    """
    if reactor is None:
        reactor = theReactor()
    from netlog.tap.startup import StartupReport, missingFolders

    missing = missingFolders(config)
    api: ApiService | None = None

    def apiAddress() -> tuple[str, int] | None:
        # Where the API bound (its port, when the description said 0),
        # for the workers' destination policy.
        return api.address if api is not None else config.apiAddress

    sessions = None
    if not config.supervised:
        top = makeSingleProcess(config, buildProxy, reactor)
        sessions = top.getServiceNamed("sessions")
    else:
        top = makeSupervised(config, buildProxy, reactor, apiAddress)
        from netlog.session.manager import HeldSessions

        sessions = HeldSessions(top, config.log, retention=config.sessionRetention, state=config.state)
    if config.api is not None:
        from netlog.api.service import makeApiService

        try:
            api = makeApiService(config, config.api, reactor, sessions)
        except TokenError as e:
            raise SystemExit(f"{config.command}: --api-token-file: {e}") from None
        api.setServiceParent(top)
    # Last, so that it speaks once the others have started.
    StartupReport(config, missing, api, pluginLines).setServiceParent(top)
    return top


def makeSupervised(
    config: ProxyConfig[PluginConfig], buildProxy: BuildProxy[PluginConfig], reactor: IProxyReactor,
    apiAddress: Callable[[], tuple[str, int] | None],
) -> MultiService:
    """
    The supervisor of a worker that runs the proxy.

    @param apiAddress: where the API serves, once bound (or L{None}).
    """
    # Built here only to learn its listeners; the worker builds its own.
    proxy = buildProxy(config, LogWriter(None, reactor=reactor), reactor)
    listeners = [(role, description) for role, description, _ in proxy.listeners]
    for role, description in listeners:
        try:
            checkAdoptable(description)
        except NotAdoptable as e:
            option = OPTION_OF_ROLE.get(role, "--listen")
            raise SystemExit(f"{config.command}: {option} {description}: {e}") from None
    preflight(config, listeners, config.uid, config.gid)
    from netlog.session.manager import AdoptedSession

    return Supervisor(
        reactor=reactor,
        optionsClass=config.optionsClass,
        buildProxy=dottedName(buildProxy),
        argv=list(config.argv),
        logPath=config.log,
        listeners=listeners,
        privileged=proxy.privilegedStartService,
        privilegedFiles=lambda: proxy.privilegedFiles,
        handedData=lambda: proxy.handedData,
        mint=proxy.mint,
        uid=config.uid,
        gid=config.gid,
        apiAddress=apiAddress,
        grace=config.grace,
        standby=config.standby,
        hangTimeout=config.hangTimeout,
        policy=RestartPolicy(maxQuickDeaths=config.giveUpAfter),
        sessions=_heldSessions(config),
        fork=True,
        adoptSession=dottedName(AdoptedSession),
        rules=config.rules,
        workers=config.workers,
    )


def _heldSessions(config: ProxyConfig[object]) -> list[tuple[str, str, str]]:
    """
    The sessions fixed at start (C{--session}), as the supervisor holds them.
    """
    from netlog.session.manager import SESSION_INTERFACE
    from netlog.session.names import sessionLogPath

    if config.log is None:
        return []  # --session is refused with --no-log
    return [
        (name, f"tcp:{port}:interface={SESSION_INTERFACE}", sessionLogPath(config.log, name))
        for name, port in config.sessions
    ]


def makeSingleProcess(
    config: ProxyConfig[PluginConfig], buildProxy: BuildProxy[PluginConfig], reactor: IProxyReactor,
) -> MultiService:
    """
    Wire a proxy in this process: its LogWriter, the proxy, its listeners.
    """
    uid, gid = config.uid, config.gid
    top = MultiService()
    QuietPorts().setServiceParent(top)
    writer = LogWriter(config.log, reactor=reactor, uid=uid, gid=gid, rotation=config.rotation)
    writer.setServiceParent(top)
    proxy = buildProxy(config, writer, reactor)
    proxy.rules = config.rules
    listeners = [(role, description) for role, description, _ in proxy.listeners]
    preflight(config, listeners, uid, gid, supervised=False)
    raised = raiseFileLimit()
    if raised is not None:
        _log.info("raised the open files limit from {before} to {after}", before=raised[0], after=raised[1])
    proxy.setServiceParent(top)
    for role, description, factory in proxy.listeners:
        endpoint = serverFromString(reactor, withBacklog(description))
        listener = _Listener(role, description, endpoint, factory)
        listener.setName(role + ":" + description)
        listener.setServiceParent(top)
    from netlog.session.manager import SessionManager

    sessions = SessionManager(proxy, config.log, reactor, list(config.sessions), uid, gid,
                              retention=config.sessionRetention, state=config.state)
    sessions.setServiceParent(top)
    return top


class _Listener(StreamServerEndpointService):
    """
    A listener bound in twistd's privileged step that says where it bound
    (the port, when the description said 0), as the supervisor does.
    """

    def __init__(self, role: str, description: str, endpoint: Any, factory: Any) -> None:
        StreamServerEndpointService.__init__(self, endpoint, factory)
        self._role = role
        self._description = description

    def privilegedStartService(self) -> None:
        StreamServerEndpointService.privilegedStartService(self)
        waiting: Any = self._waitingForPort
        waiting.addCallback(self._bound)

    def _bound(self, port: Any) -> Any:
        _log.info(
            "{role} listener {description} bound on {address}",
            role=self._role,
            description=self._description,
            address=port.getHost(),
        )
        return port
