"""
What both twistd plugins share: the log's options, and how a proxy is wired to
its LogWriter and its listeners.

A proxy package offers C{buildProxy(config, writer, reactor) -> IService}
whose C{listeners} attribute lists C{(role, description, factory)}: the
endpoint descriptions to serve and the factory for each. This module binds
them (in twistd's privileged step, through L{strports.service}) and puts the
LogWriter first, so the file is open before privileges drop.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from twisted.application import strports
from twisted.application.service import IService, MultiService
from twisted.python import usage

from netlog.log.writer import LogWriter


def defaultLogPath(name: str) -> str:
    """
    Where a proxy logs when no C{--log} is given: C{/var/log/netlog/NAME.jsonl}
    as root, else C{~/.local/state/netlog/NAME.jsonl}.
    """
    if os.geteuid() == 0:
        return f"/var/log/netlog/{name}.jsonl"
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(state, "netlog", f"{name}.jsonl")


class LogOptions(usage.Options):
    """
    The options every proxy has for its log.
    """

    optParameters = [
        ["log", None, None, "The log file (default: /var/log/netlog/NAME.jsonl as root, "
         "else ~/.local/state/netlog/NAME.jsonl)."],
    ]
    optFlags = [
        ["no-log", None, "Keep no log (bodies are counted, neither kept nor hashed)."],
    ]

    def postOptions(self) -> None:
        if self["no-log"]:
            self["log"] = None
        elif not self.get("log"):
            self["log"] = defaultLogPath(self.logName)

    logName = "network"


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


BuildProxy = Callable[[Any, LogWriter, Any], IService]


def makeProxyService(config: Any, buildProxy: BuildProxy, reactor: Any = None) -> MultiService:
    """
    Wire a proxy in this process: its LogWriter, the proxy, its listeners.
    """
    if reactor is None:
        from twisted.internet import reactor as _reactor

        reactor = _reactor
    uid, gid = dropIds(config)
    top = MultiService()
    writer = LogWriter(config["log"], reactor=reactor, uid=uid, gid=gid)
    writer.setServiceParent(top)
    proxy = buildProxy(config, writer, reactor)
    proxy.setServiceParent(top)
    for role, description, factory in getattr(proxy, "listeners", []):
        listener = strports.service(description, factory, reactor=reactor)
        listener.setName(role + ":" + description)
        listener.setServiceParent(top)
    return top
