"""
Twisted's own lines about listening ports, kept out of what netlog logs.

A Twisted port says C{BrowserFactory starting on 3128} as it starts
listening and C{(TCP Port 3128 Closed)} as it stops, whatever its factory's
C{noisy} says (L{twisted.internet.tcp.Port.startListening} logs it
unconditionally). netlog says itself, once, which listener is bound where
(C{forward listener tcp:3128:... bound on ...}), so these lines only
repeat it in words a user doesn't know (which factory?). They are dropped
from twistd's log and from the workers' lines, and nothing else is.
"""

from __future__ import annotations

import re
from typing import Any

from twisted.application.service import Service
from twisted.logger import FilteringLogObserver, ILogObserver, PredicateResult, globalLogPublisher

#: What a port says as it starts and stops listening, whole.
#: (A factory's prefix is its class's name, or a web site's
#: C{Site (ClassName)}.)
_PORT_LINE = re.compile(r"\A(?:[\w.]+(?: \([\w.]+\))? starting on \S+|\((?:TCP|UNIX|SSL) Port \S+ Closed\))\Z")


def isPortChatter(event: dict[str, Any]) -> bool:
    """
    Whether C{event} is a port's start or stop line: a legacy C{log.msg} of
    exactly that shape (never an event of netlog's own, which has a format).
    """
    if event.get("log_namespace") != "log_legacy" or event.get("isError"):
        return False
    message = event.get("message")
    if not isinstance(message, tuple) or len(message) != 1 or not isinstance(message[0], str):
        return False
    return _PORT_LINE.match(message[0]) is not None


def _predicate(event: dict[str, Any]) -> PredicateResult:
    return PredicateResult.no if isPortChatter(event) else PredicateResult.maybe


def withoutPortChatter(observer: ILogObserver) -> ILogObserver:
    """
    C{observer}, given every event but the ports' start and stop lines.
    """
    filtered: ILogObserver = FilteringLogObserver(observer, [_predicate])  # type: ignore[list-item]
    filtered.netlogQuiet = True  # type: ignore[attr-defined]
    return filtered


def quietPortChatter() -> None:
    """
    Put every observer of this process's log (twistd's, by now) behind
    L{withoutPortChatter}; again is harmless.

    The observers are read from L{twisted.logger.LogPublisher}'s private
    C{_observers} (pinned in setup.cfg, checked by tests/test_privates.py):
    the publisher has no public list of them, and twistd adds its own before
    any service starts.
    """
    for observer in list(getattr(globalLogPublisher, "_observers", [])):
        if getattr(observer, "netlogQuiet", False):
            continue
        globalLogPublisher.removeObserver(observer)
        globalLogPublisher.addObserver(withoutPortChatter(observer))


class QuietPorts(Service):
    """
    Calls L{quietPortChatter} in twistd's privileged step: a proxy's top
    service's first child, so that it runs before any port listens.
    """

    def privilegedStartService(self) -> None:
        quietPortChatter()
        Service.privilegedStartService(self)
