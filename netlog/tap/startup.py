"""
What a proxy says when it starts: that it runs uncompiled (when it does),
where its log is, where its CA is (the site proxy), where its API serves,
and which folders it made, one line each, on standard error and in
twistd's log; and the rule for the folders it may make.

Folders are made only under the documented defaults (the default log's
folder, the default state folder): a C{--log} or C{--state} given by hand
must be in a folder that exists, so that a typo ends the start with one
line rather than quietly making a new folder (or a new CA no browser
trusts).
"""

from __future__ import annotations

import os
from typing import Sequence

from twisted.application.service import Service
from twisted.logger import Logger

from netlog.api.service import CA_CERT_FILE, ApiService
from netlog.compiled import uncompiledReason
from netlog.config import ProxyConfig

_log = Logger(namespace="netlog.startup")

#: Standard error's descriptor (twistd replaces C{sys.stderr} once it logs).
STDERR_FD = 2
#: Standard output's descriptor.
STDOUT_FD = 1


def missingFolders(config: ProxyConfig[object]) -> list[str]:
    """
    The folders that aren't there yet and the start will make: the log's
    and those above it, the state folder and those above it (when the proxy
    uses one: the site proxy's CA, the API's token), in the order made.
    """
    wanted = []
    if config.log:
        wanted.append(os.path.dirname(os.path.abspath(config.log)))
    if config.state and (config.hasCA or config.api is not None):
        wanted.append(os.path.abspath(config.state))
    missing: list[str] = []
    for folder in wanted:
        chain = []
        while not os.path.isdir(folder) and folder not in missing:
            chain.append(folder)
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
        missing.extend(reversed(chain))
    return missing


def _logsToStderr(config: ProxyConfig[object]) -> bool:
    """
    Whether twistd's log is the terminal standard error is (C{twistd -n}
    with no C{--logfile} logs to standard output): a line said to both
    would show twice.
    """
    if not config.twistdLogsToStdout:
        return False
    try:
        out, err = os.fstat(STDOUT_FD), os.fstat(STDERR_FD)
    except OSError:
        return False
    return (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino)


class StartupReport(Service):
    """
    Says where things are once the proxy has started (its log opened, its
    listeners and its API bound, its CA loaded or made): a child of the
    proxy's top service, started after the others.
    """

    def __init__(self, config: ProxyConfig[object], missing: list[str], api: ApiService | None = None,
                 pluginLines: Sequence[str] = ()) -> None:
        """
        @param missing: what L{missingFolders} said before the start.
        @param api: the API's service (L{netlog.api.service.ApiService}), if any.
        @param pluginLines: what only this plugin's proxy says (the site
            proxy's replay), after where its CA is.
        """
        self._config = config
        self._pluginLines = list(pluginLines)
        self._missing = missing
        self._api = api

    def lines(self) -> list[str]:
        config = self._config
        said = []
        reason = uncompiledReason()
        if reason is not None:
            said.append(f"running uncompiled: {reason}")
        log = config.log
        said.append(f"the log is {os.path.abspath(log)}" if log else "it keeps no log (--no-log)")
        if config.hasCA:
            state = os.path.abspath(config.state)
            said.append(f"the CA is {os.path.join(state, CA_CERT_FILE)}; its SPKI hash: "
                        f"netlog ca --state {state} --spki-only")
        said.extend(self._pluginLines)
        if self._api is not None and self._api.port is not None and config.api is not None:
            address = self._api.port.getHost()
            said.append(f"the API serves on http://{address.host}:{address.port}/ "
                        f"(its token: {config.api.tokenFile})")
        said.extend(f"made the folder {folder}" for folder in self._missing if os.path.isdir(folder))
        return said

    def startService(self) -> None:
        Service.startService(self)
        toStderr = not _logsToStderr(self._config)
        for line in self.lines():
            _log.info("{line}", line=line)
            if toStderr:
                try:
                    os.write(STDERR_FD, f"{self._config.command}: {line}\n".encode("utf-8", "replace"))
                except OSError:
                    pass
