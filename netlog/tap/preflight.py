"""
What the taps check before anything is bound or opened, so that each mistake
on a proxy's command line ends twistd with one line naming the option, the
value and what to do, instead of a traceback from the privileged step.

Two kinds of check: L{netlog.net.endpoints.checkListen} reads an endpoint
description and needs nothing but the text (the options call it, in the
worker too); L{preflight}, here, tries the machine (a listener's address and port, the log's path) and runs
only in the twistd process, before its privileged step.
"""

from __future__ import annotations

import errno
import os
import pwd
import socket
import sys
from typing import Sequence

from twisted.python import usage


from netlog.config import ProxyConfig
from netlog.log.logfile import UnsafeLogPath, checkLogPath
from netlog.net.endpoints import tcpAddress
from netlog.state import DEFAULT_STATE, NoSuchFolder, checkInAFolder

#: The option that gave a proxy's listener of each role.
OPTION_OF_ROLE = {"forward": "--listen", "https-route": "--https-route", "http-route": "--http-route"}


class Mistake(Exception):
    """
    A mistake on the command line, found by trying: the message is the one
    line to print (the option, the value, what to do).
    """


def _tryBinding(where: str, description: str, held: list[socket.socket]) -> None:
    """
    Bind, and keep in C{held}, a socket where C{description} will listen,
    so that a port in use (or given twice) or an address this machine hasn't
    shows now, in one line beginning with C{where} (the option and its
    value).
    """
    address = tcpAddress(description)
    if address is None:
        return
    family, host, port = address
    s = socket.socket(family, socket.SOCK_STREAM)
    held.append(s)
    try:
        # As Twisted's listening ports do: a port left in TIME_WAIT is free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host, port))
        s.listen(1)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise Mistake(
                f"{where}: port {port} on {host} is in use already (by another "
                f"program, or given twice); stop that or choose another port"
            ) from None
        if e.errno == errno.EADDRNOTAVAIL:
            raise Mistake(
                f"{where}: {host} is not an address of this machine; use one it "
                f"has (ip address lists them), such as 127.0.0.1"
            ) from None
        if e.errno == errno.EACCES:
            raise Mistake(
                f"{where}: port {port} is below 1024 and needs root; start as root "
                f"(with --uid to drop privileges) or choose a port above 1023"
            ) from None
        raise Mistake(f"{where}: can't listen there: {e.strerror or e}") from None


def checkListeners(listeners: list[tuple[str, str]]) -> None:
    """
    Try each C{(where, description)} as L{_tryBinding} does, all held at
    once, then let them go.

    @raise Mistake: the first that can't be bound.
    """
    held: list[socket.socket] = []
    try:
        for where, description in listeners:
            _tryBinding(where, description, held)
    finally:
        for s in held:
            s.close()


def _unusableBy(uid: int, gid: int, executable: str | None, folders: list[str]) -> str | None:
    """
    The first of C{executable} (to run) and C{folders} (to read) that user
    C{uid} can't use, found in a child process that drops to that user; None
    when it can use them all.
    """
    try:
        name: str | None = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = None
    readEnd, writeEnd = os.pipe()
    pid = os.fork()
    if pid == 0:
        answer = b""
        try:
            os.close(readEnd)
            if name is not None:
                os.initgroups(name, gid)
            else:
                os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            if executable is not None and not os.access(executable, os.X_OK):
                answer = b"run " + os.fsencode(executable)
            else:
                for folder in folders:
                    if not os.access(folder, os.R_OK | os.X_OK):
                        answer = b"read " + os.fsencode(folder)
                        break
            os.write(writeEnd, answer or b"ok")
        finally:
            os._exit(0)
    os.close(writeEnd)
    try:
        answer = os.read(readEnd, 65536)
    finally:
        os.close(readEnd)
        os.waitpid(pid, 0)
    if answer == b"ok":
        return None
    return os.fsdecode(answer) or "run netlog"


def importFolders(names: list[str]) -> list[str]:
    """
    The folders on C{sys.path} that the modules C{names} were imported from.
    """
    folders = []
    for name in names:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if not path:
            continue
        root = os.path.dirname(os.path.abspath(path))
        for _ in range(name.count(".") + (1 if path.endswith("__init__.py") else 0)):
            root = os.path.dirname(root)
        if root not in folders:
            folders.append(root)
    return folders


def checkDropUser(uid: int | None, gid: int | None, supervised: bool) -> None:
    """
    When twistd will drop from root to C{--uid}, check that this user can
    run this Python (the worker is started with it) and read the packages
    netlog runs from (modules are imported after the drop): a virtual
    environment in root's home, or made from a Python there, can't be.

    @raise Mistake: it can't.
    """
    if uid is None or os.geteuid() != 0 or uid == 0:
        return
    try:
        entry = pwd.getpwuid(uid)
        name, primary = entry.pw_name, entry.pw_gid
    except KeyError:
        name, primary = str(uid), uid
    folders = importFolders(["netlog", "twisted", "zope.interface"])
    what = _unusableBy(uid, primary if gid is None else gid, sys.executable if supervised else None, folders)
    if what is None:
        return
    raise Mistake(
        f"--uid {name}: {name} can't {what}, and netlog runs as {name} after the "
        f"drop (a virtual environment in root's home, or made by a Python installed "
        f"there such as pyenv's, can't be used by {name}); make one with the "
        f"system's Python where {name} can read it and install netlog into it "
        f"from its clone (/usr/bin/python3 -m venv /opt/netlog, then in the clone "
        f"/opt/netlog/bin/pip install .), and start /opt/netlog/bin/twistd"
    )


def preflight(
    config: ProxyConfig[object],
    listeners: list[tuple[str, str]],
    uid: int | None,
    gid: int | None,
    supervised: bool = True,
) -> None:
    """
    Try what twistd's privileged step will do (bind C{listeners}, given as
    C{(role, description)}, and the API; open the log), and what the user
    of C{--uid} will need, and end the process with one line if it would
    fail.

    @raise SystemExit: with that line.
    """
    tried = _tried(listeners, config.listenIsDefault, config.api.description if config.api else None,
                   config.sessions)
    try:
        checkDropUser(uid, gid, supervised)
        checkListeners(tried)
        log = config.log
        if log is not None:
            what = f"the default log {log} (no --log given)" if config.logIsDefault else f"--log {log}"
            try:
                checkLogPath(log, uid, gid, makeFolders=config.logFolderMade)
            except UnsafeLogPath as e:
                raise Mistake(f"{what}: {e}") from None
            except OSError as e:
                raise Mistake(f"{what}: can't be used: {e.strerror or e}; choose another --log") from None
        try:
            checkFolders(config)
        except NoSuchFolder as e:
            raise Mistake(str(e)) from None
    except Mistake as e:
        raise SystemExit(f"{config.command}: {e}") from None


def _tried(
    listeners: list[tuple[str, str]], listenIsDefault: bool, api: str | None, sessions: Sequence[tuple[str, int]],
) -> list[tuple[str, str]]:
    """
    What to bind, as C{(where, description)}: C{listeners} (C{(role,
    description)}), the API (its description) and the sessions' ports
    (C{(name, port)}); C{where} names the option, and says when a
    C{--listen} is the default (none given).
    """
    tried = []
    for role, description in listeners:
        where = f"{OPTION_OF_ROLE.get(role, '--listen')} {description}"
        if role == "forward" and listenIsDefault:
            where = f"the default --listen {description} (no --listen given)"
        tried.append((where, description))
    if api:
        tried.append((f"--api {api}", api))
    for name, port in sessions:
        # A session's port (0: any) on loopback; said as the option gave it.
        description = f"tcp:{port}:interface=127.0.0.1"
        tried.append((f"--session {name}={port}, as {description}", description))
    return tried


def checkOtherTwistd(options: usage.Options) -> None:
    """
    Under twistd, before it checks its pidfile: when that file names a
    twistd still running (a proxy started earlier in this folder), end with
    the one line that says what is in the way: a port that proxy holds, as
    L{preflight} says it, else the pidfile itself and how to do without it.
    twistd's own words ("Another twistd server is running") name neither.

    @raise SystemExit: with that line.
    """
    parent = getattr(options, "parent", None)
    pidfile = parent.get("pidfile") if parent is not None else None
    if not pidfile:
        return
    try:
        with open(pidfile, encoding="ascii") as f:
            pid = int(f.read().strip())
        os.kill(pid, 0)
    except PermissionError:
        pass
    except (OSError, ValueError):
        # No pidfile, not a number, or a process long gone: twistd goes on.
        return
    # Called from postOptions, before the typed config is built: it reads
    # the options checked so far.
    listeners = [("forward", description) for description in options["listen"]]
    try:
        checkListeners(_tried(listeners, bool(options.get("listen-is-default")), options["api"], options["session"]))
    except Mistake as e:
        raise SystemExit(f"{commandName(options)}: {e}") from None
    raise SystemExit(
        f"{commandName(options)}: {os.path.abspath(pidfile)} says another twistd started in this folder "
        f"is running (process {pid}); stop it, or give twistd --pidfile= (no pidfile) or another --pidfile"
    )


def commandName(config: usage.Options) -> str:
    """
    How the user started the proxy (C{twistd netlog-standin}), to begin a
    line about a mistake with.
    """
    parent = getattr(config, "parent", None)
    sub = getattr(parent, "subCommand", None) if parent is not None else None
    return f"twistd {sub}" if sub else "twistd"


def checkFolders(config: ProxyConfig[object]) -> None:
    """
    A C{--state} given by hand must be in a folder that exists (the state
    folder itself is made if need be), and so must an C{--api-token-file};
    a C{--state} must not be something other than a folder. (A C{--log}
    given by hand is checked with the log's other checks, by
    L{netlog.log.logfile.checkLogPath}.)

    @raise NoSuchFolder: one of them isn't.
    """
    if config.api is not None and not config.api.tokenFileIsDefault:
        token = config.api.tokenFile
        checkInAFolder(f"--api-token-file {token}", token)
    state = config.state
    if state and os.path.abspath(state) != os.path.abspath(DEFAULT_STATE):
        checkInAFolder(f"--state {state}", state)
        if os.path.exists(state) and not os.path.isdir(state):
            raise NoSuchFolder(f"--state {state}: not a folder")
