"""
Wiring for C{twistd netlog-proxy}: its options, then L{makeProxyService} with
the site proxy's L{buildProxy}.
"""

from __future__ import annotations

from typing import Any

from twisted.application.service import MultiService
from twisted.python import usage

from netlog.core.capture import KEEP_CHOICES, KEEP_TEXT
from netlog.net.options import DestinationOptions, _seconds
from netlog.net.timeouts import DEFAULT_HEADER_TIMEOUT
from netlog.site.config import ConfigError, SitesConfig, loadSites
from netlog.tap.common import LogOptions, makeProxyService
from netlog.tap.preflight import checkListen



class Options(LogOptions, DestinationOptions):
    synopsis = "[options]"
    longdesc = (
        "The site proxy: a forward port that decrypts the configured sites and keeps "
        "each exchange whole in the network log, blind tunnels to allowed live hosts, "
        "and optional HTTPS and HTTP route listeners. Listeners are endpoint "
        "descriptions (tcp:3128:interface=127.0.0.1); TLS on the HTTPS route is netlog's own."
    )
    logName = "network"
    hasCA = True

    optParameters = LogOptions.optParameters + [  # type: ignore[assignment]
        ["sites", None, None, "The sites.toml naming the sites and live hosts (required)."],
        ["https-route", None, None,
         "Also serve the sites directly over HTTPS by SNI and Host on this endpoint "
         "(a plain TCP description, e.g. tcp:443:interface=127.0.0.1)."],
        ["http-route", None, None,
         "Also answer plain HTTP on this endpoint with a 308 to the site's HTTPS origin."],
        ["keep-bodies", None, KEEP_TEXT,
         "What of answers' bodies the log keeps: text (text, JSON, forms, XML, scripts; other types as "
         "size and sha256) or all (every type, to the same limit: a recording to --replay)."],
        ["header-timeout", None, DEFAULT_HEADER_TIMEOUT,
         "Seconds a browser has to send a whole request head once begun (then 408).",
         _seconds("header-timeout")],
    ]

    optFlags = LogOptions.optFlags + [  # type: ignore[assignment]
        ["no-h2", None, "Offer the browser HTTP/1.1 only (by default ALPN offers h2 first on decrypted "
                        "tunnels and the HTTPS route)."],
    ]

    def __init__(self) -> None:
        LogOptions.__init__(self)
        self.sitesConfig: SitesConfig | None = None

    def postOptions(self) -> None:
        LogOptions.postOptions(self)
        self.checkDestinations()
        if not self["sites"]:
            raise usage.UsageError("--sites FILE is required (see examples/sites.toml)")
        if self["keep-bodies"] not in KEEP_CHOICES:
            raise usage.UsageError(f"--keep-bodies takes {' or '.join(KEEP_CHOICES)}, not {self['keep-bodies']!r}")
        for option in ("https-route", "http-route"):
            if self[option]:
                checkListen("--" + option, self[option])
        try:
            self.sitesConfig = loadSites(self["sites"])
        except ConfigError as e:
            raise usage.UsageError(f"--sites {e}") from None
        if self["https-route"] and not any(
            o.scheme == "https" for s in self.sitesConfig.sites for o in s.origins
        ):
            raise usage.UsageError("--https-route needs at least one site with an https:// origin")


def makeService(config: Options, reactor: Any = None) -> MultiService:
    from netlog.site.service import buildProxy

    return makeProxyService(config, buildProxy, reactor)  # type: ignore[arg-type]
