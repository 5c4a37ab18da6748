"""
The site proxy's recordings: which sites are answered from which recording
(C{--replay} for all, a site's C{replay = "PATH"} for one), loaded once per
file at start.
"""

from __future__ import annotations

import os

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


def replayLines(replays: dict[str, Replay]) -> list[str]:
    """
    What start-up says of replay, a line per recording: the sites it
    answers, its path, how many recorded answers it holds (and what it
    skipped), and what a request it has no answer for gets.
    """
    bySource: dict[int, tuple[Replay, list[str]]] = {}
    for name, replay in replays.items():
        bySource.setdefault(id(replay), (replay, []))[1].append(name)
    lines = []
    for replay, names in bySource.values():
        count = len(replay.index)
        skipped = ", ".join(f"{n} {why}" for why, n in sorted(replay.index.skipped.items()))
        unmatched = "goes to the site's backend" if replay.forwardUnmatched else "gets 404"
        lines.append(
            f"replay is on: {'the site' if len(names) == 1 else 'the sites'} {', '.join(names)} answered from "
            f"{os.path.abspath(replay.path)} ({count} recorded answer{'' if count == 1 else 's'}"
            f"{'; skipped: ' + skipped if skipped else ''}); a request with no recorded answer {unmatched}"
        )
    return lines
