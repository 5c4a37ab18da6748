"""
Wiring for C{twistd netlog-standin}.
"""

from __future__ import annotations

from typing import Any

from twisted.application.service import MultiService

from netlog.standin.service import StandinConfig
from netlog.net.options import DestinationOptions, _seconds
from netlog.net.reactors import IProxyReactor
from netlog.net.timeouts import DEFAULT_HEADER_TIMEOUT
from netlog.standin.mode import DEFAULT_CONNECT_PORTS
from netlog.standin.service import buildProxy
from netlog.tap.common import LogOptions, makeProxyService


def _ports(value: str) -> list[int]:
    ports = []
    for part in value.split(","):
        part = part.strip()
        if not part.isdigit() or not 0 < int(part) < 65536:
            raise ValueError(f"--connect-ports wants ports such as 443,8443, got {value!r}")
        ports.append(int(part))
    return ports


_ports.coerceDoc = "Comma-separated ports."  # type: ignore[attr-defined]


class Options(DestinationOptions, LogOptions[StandinConfig]):
    synopsis = "[options]"
    longdesc = (
        "A forward proxy that decrypts nothing and logs every connection: each "
        "CONNECT tunnel and each plain-HTTP request is a pair of lines in the log."
    )
    logName = "standin"

    optParameters: list[Any] = [
        ["connect-ports", None, ",".join(str(p) for p in sorted(DEFAULT_CONNECT_PORTS)),
         "Ports a CONNECT may reach (others get 403).", _ports],
        ["header-timeout", None, DEFAULT_HEADER_TIMEOUT,
         "Seconds a browser has to send a whole request head once begun (then 408).",
         _seconds("header-timeout")],
    ]

    def postOptions(self) -> None:
        LogOptions.postOptions(self)
        self.checkDestinations()
        if isinstance(self["connect-ports"], str):
            self["connect-ports"] = _ports(self["connect-ports"])

    def pluginConfig(self) -> StandinConfig:
        return StandinConfig(
            destinations=self.destinations(),
            headerTimeout=self["header-timeout"],
            connectPorts=frozenset(self["connect-ports"]),
        )


def makeService(options: Options, reactor: IProxyReactor | None = None) -> MultiService:
    return makeProxyService(options.config(), buildProxy, reactor)
