"""
Wiring for C{twistd netlog-proxy}: its options, then L{makeProxyService} with
the site proxy's L{buildProxy}.
"""

from __future__ import annotations

from twisted.application.service import MultiService
from twisted.python import usage

from netlog.site.service import SiteProxyConfig
from netlog.core.capture import KEEP_CHOICES, KEEP_TEXT
from netlog.core.replay import MatchRules
from netlog.net.options import DestinationOptions, _seconds
from netlog.net.reactors import IProxyReactor
from netlog.proxy.replay import PACE_CHOICES, PACE_NOW, UNMATCHED_404, UNMATCHED_CHOICES, RecordingError
from netlog.net.timeouts import DEFAULT_HEADER_TIMEOUT
from netlog.site.config import ConfigError, SitesConfig, loadSites
from netlog.site.replay import loadReplays
from netlog.tap.common import LogOptions, makeProxyService
from netlog.net.endpoints import checkListen



class Options(LogOptions[SiteProxyConfig], DestinationOptions):
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
        ["replay", None, None,
         "Answer the sites from this recording (a netlog log kept with --keep-bodies all, a HAR or a WARC) "
         "instead of their backends; a site's replay = \"PATH\" in sites.toml wins."],
        ["replay-unmatched", None, UNMATCHED_404,
         "What a replayed request with no recorded answer gets: 404 (an answer saying so) or forward "
         "(sent to the site's backend)."],
        ["replay-pace", None, PACE_NOW,
         "now (answer at once) or recorded (wait as long as the recording did for the answer)."],
        ["header-timeout", None, DEFAULT_HEADER_TIMEOUT,
         "Seconds a browser has to send a whole request head once begun (then 408).",
         _seconds("header-timeout")],
    ]

    optFlags = LogOptions.optFlags + [  # type: ignore[assignment]
        ["replay-refresh", None, "Replayed answers' Date is now; Expires, Last-Modified and cookies' "
                                 "Expires move by as much."],
        ["no-h2", None, "Offer the browser HTTP/1.1 only (by default ALPN offers h2 first on decrypted "
                        "tunnels and the HTTPS route)."],
        ["no-h2-upstream", None, "Speak HTTP/1.1 only to https:// backends (by default ALPN offers them h2 "
                                 "first, and HTTP/2 is spoken when they pick it)."],
    ]

    def __init__(self) -> None:
        LogOptions.__init__(self)
        self.sitesConfig: SitesConfig | None = None
        self.ignoreParams: set[str] = set()
        self.ignoreFields: set[str] = set()

    def opt_replay_ignore_param(self, name: str) -> None:
        """
        Leave this query parameter out of replay's matching (repeatable).
        """
        if not name:
            raise usage.UsageError("--replay-ignore-param was given an empty value")
        self.ignoreParams.add(name)

    def opt_replay_ignore_field(self, name: str) -> None:
        """
        Leave this JSON (at any depth) or form field out of the comparison of
        a replayed request's body (repeatable).
        """
        if not name:
            raise usage.UsageError("--replay-ignore-field was given an empty value")
        self.ignoreFields.add(name)

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
        for option, choices in (("replay-unmatched", UNMATCHED_CHOICES), ("replay-pace", PACE_CHOICES)):
            if self[option] not in choices:
                raise usage.UsageError(f"--{option} takes {' or '.join(choices)}, not {self[option]!r}")
        try:
            self["replays"] = loadReplays(self.sitesConfig, self["replay"],
                                          MatchRules(frozenset(self.ignoreParams), frozenset(self.ignoreFields)),
                                          self["replay-unmatched"], self["replay-pace"],
                                          bool(self["replay-refresh"]))
        except RecordingError as e:
            raise usage.UsageError(f"replay: {e}") from None
        if self["https-route"] and not any(
            o.scheme == "https" for s in self.sitesConfig.sites for o in s.origins
        ):
            raise usage.UsageError("--https-route needs at least one site with an https:// origin")

    def pluginConfig(self) -> SiteProxyConfig:
        if self.sitesConfig is None:
            raise RuntimeError("the config is built once postOptions has loaded the sites")
        return SiteProxyConfig(
            destinations=self.destinations(),
            headerTimeout=self["header-timeout"],
            sites=self.sitesConfig,
            httpsRoute=self["https-route"],
            httpRoute=self["http-route"],
            keepBodies=self["keep-bodies"],
            replays=self["replays"],
            h2=not self["no-h2"],
            h2Upstream=not self["no-h2-upstream"],
        )


def makeService(options: Options, reactor: IProxyReactor | None = None) -> MultiService:
    from netlog.site.replay import replayLines
    from netlog.site.service import buildProxy

    config = options.config()
    return makeProxyService(config, buildProxy, reactor, replayLines(dict(config.plugin.replays)))
