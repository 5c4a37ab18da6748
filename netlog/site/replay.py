"""
The site proxy's recordings: which sites are answered from which recording
(C{--replay} for all, a site's C{replay = "PATH"} for one), loaded once per
file at start.
"""

from __future__ import annotations

from netlog.core.replay import MatchRules
from netlog.proxy.replay import Replay
from netlog.site.config import SitesConfig


def loadReplays(config: SitesConfig, everySite: str | None, rules: MatchRules, unmatched: str,
                pace: str, refresh: bool = False) -> dict[str, Replay]:
    """
    The recording each replayed site is answered from, by site name: its
    own C{replay}, else C{everySite} (C{--replay}); a site with neither
    isn't replayed. Each file is indexed once, whatever the sites naming it.

    @raise netlog.proxy.replay.RecordingError: a recording can't be read.
    """
    loaded: dict[str, Replay] = {}
    replays: dict[str, Replay] = {}
    for site in config.sites:
        path = site.replay or everySite
        if path is None:
            continue
        if path not in loaded:
            loaded[path] = Replay(path, rules, unmatched, pace, refresh)
        replays[site.name] = loaded[path]
    return replays
