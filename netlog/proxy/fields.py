"""
The fields an exchange relays each way: what goes up of the request's, what
comes down of the answer's (hop-by-hop fields dropped, the rules' changes
made, backend names rewritten by the mode).
"""

from __future__ import annotations

from netlog.core.http1 import HeadFields, RequestHead, ResponseHead
from netlog.core.rules import Decision
from netlog.proxy.mode import IMode, Route

#: The answer's fields whose values may name a backend (the mode rewrites
#: them for a route to a configured upstream).
REWRITTEN = frozenset({b"location", b"content-location", b"set-cookie"})


def requestChanges(head: RequestHead, fields: HeadFields,
                   rules: Decision) -> tuple[frozenset[bytes] | set[bytes], list[tuple[bytes, bytes]]]:
    """
    The request's fields that don't go up, and those added: an upgrade
    keeps its C{Upgrade} and says C{Connection: Upgrade}.
    """
    drop = fields.relayDrop
    extra: list[tuple[bytes, bytes]] = []
    if head.upgrade:
        drop = drop - {b"upgrade"}
        extra.append((b"Connection", b"Upgrade"))
    if rules.dropUp:
        drop = drop | rules.dropUp
        extra.extend(rules.setUp)
    return drop, extra


def answerFields(head: ResponseHead, fields: HeadFields, upgraded: bool, route: Route, mode: IMode,
                 rules: Decision) -> list[tuple[bytes, bytes]]:
    """
    The answer's fields as relayed, in one pass: the hop-by-hop ones
    dropped, what names a configured upstream rewritten by the mode, the
    rules' changes made.
    """
    drop = fields.relayDrop - {b"upgrade"} if upgraded else fields.relayDrop
    if route.site is not None:
        headers = [(name, mode.rewrite(route, lower, value) if lower in REWRITTEN else value)
                   for (name, value), lower in zip(head.headers, fields.lowered) if lower not in drop]
    else:
        headers = [field for field, lower in zip(head.headers, fields.lowered) if lower not in drop]
    if rules.dropDown:
        headers = [f for f in headers if f[0].lower() not in rules.dropDown]
        headers.extend(rules.setDown)
    return headers
