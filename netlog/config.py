"""
A proxy's configuration as typed values, built once from twistd's parsed
options (C{Options.config()} of each tap, after its C{postOptions} has
checked and normalised them) and read by the wiring and the engine's
builders instead of the options' dictionary.

L{ProxyConfig} holds what every proxy shares (the log, the API, the
supervision); its C{plugin} field holds what only one proxy has, defined
beside the service that builds that proxy
(L{netlog.standin.service.StandinConfig},
L{netlog.site.service.SiteProxyConfig}), each with the
L{netlog.net.options.Destinations} it may go to. An option added later is
one field in one of them and one line where its C{Options} builds the
config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from netlog.core.rules import Rules
    from netlog.core.segments import Rotation

#: What only one plugin's proxy has: its C{ProxyConfig.plugin}.
PluginConfig = TypeVar("PluginConfig", covariant=True)


@dataclass(frozen=True, kw_only=True)
class ApiConfig:
    """
    The loopback HTTP API's options (given C{--api}).

    @ivar description: its endpoint description, loopback unless C{--api}
        named an interface (L{netlog.tap.common.apiDescription}).
    @ivar hosts: the C{Host} names it answers besides loopback and its own
        address (C{--api-host}).
    @ivar tokenFile: its token's file (C{--api-token-file}, by default in
        the state folder).
    @ivar tokenFileIsDefault: no C{--api-token-file} was given.
    @ivar tokenReads: its reads need the token too (C{--api-token-reads}).
    @ivar sessionRate: sessions it makes a second at most.
    @ivar idleTimeout: seconds a connection may sit idle.
    """

    description: str
    hosts: frozenset[str]
    tokenFile: str
    tokenFileIsDefault: bool
    tokenReads: bool
    sessionRate: float
    idleTimeout: float


@dataclass(frozen=True, kw_only=True)
class ProxyConfig(Generic[PluginConfig]):
    """
    What every proxy's options say (L{netlog.tap.common.LogOptions}), and
    what twistd's own options and the command line say that the wiring needs.

    @ivar command: how the user started the proxy (C{twistd netlog-standin}),
        to begin a line about a mistake with.
    @ivar argv: the arguments, which a supervised worker parses again.
    @ivar optionsClass: the dotted name of the C{Options} class that parsed
        them, for the worker to parse them with.
    @ivar uid: the user twistd drops to (its C{--uid}), if any.
    @ivar gid: the group twistd drops to (its C{--gid}), if any.
    @ivar twistdLogsToStdout: twistd's log is standard output (C{-n} with
        no C{--logfile}, or C{--logfile -}).
    @ivar log: the log file (L{None}: C{--no-log}).
    @ivar logIsDefault: no C{--log} was given: the log is the default one.
    @ivar logFolderMade: netlog may make the log's folder (it is the
        default log's folder or the default state folder).
    @ivar state: the state folder (C{--state}).
    @ivar hasCA: the proxy has a CA (in C{state}) for the API to serve.
    @ivar listen: the forward port's endpoint descriptions (C{--listen}).
    @ivar listenIsDefault: no C{--listen} was given.
    @ivar api: the API's options, or L{None} when it is off.
    @ivar apiAddress: the C{(host, port)} the API serves on (or L{None}),
        which the proxy's destination policy refuses: from C{--api}, or in
        a worker, where the supervisor bound it.
    @ivar rules: the main listener's rules (C{--rules}).
    @ivar sessions: the sessions fixed at start, as C{(name, port)}
        (C{--session}).
    @ivar sessionRetention: seconds a deleted session's log is kept
        (L{None}: kept).
    @ivar rotation: when the log's live segment is closed, and how many
        closed ones are kept.
    @ivar grace: seconds a worker has to stop after SIGTERM.
    @ivar hangTimeout: seconds a worker's event loop may be stuck (0: never).
    @ivar giveUpAfter: quick deaths in a row to give up after (L{None}: never).
    @ivar workers: serving workers (processes).
    @ivar supervised: the proxy runs in workers under a supervisor (no
        C{--no-supervise}).
    @ivar standby: each worker has a standby started ahead (no
        C{--no-standby}).
    @ivar plugin: what only this proxy has.
    """

    command: str
    argv: tuple[str, ...]
    optionsClass: str
    uid: int | None
    gid: int | None
    twistdLogsToStdout: bool
    log: str | None
    logIsDefault: bool
    logFolderMade: bool
    state: str
    hasCA: bool
    listen: tuple[str, ...]
    listenIsDefault: bool
    api: ApiConfig | None
    apiAddress: tuple[str, int] | None
    rules: Rules
    sessions: tuple[tuple[str, int], ...]
    sessionRetention: float | None
    rotation: Rotation
    grace: float
    hangTimeout: float
    giveUpAfter: int | None
    workers: int
    supervised: bool
    standby: bool
    plugin: PluginConfig
