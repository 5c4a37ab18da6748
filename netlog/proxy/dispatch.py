"""
One place a parsed request goes from any protocol toward the browser
(HTTP/1.1, a stream of HTTP/2): the rules, then the route, then a refusal
or the route its exchange starts on. A new protocol calls L{dispatch} and
starts an L{netlog.proxy.exchange.Exchange} on what it gives.
"""

from __future__ import annotations

from dataclasses import dataclass

from netlog.core.rules import Decision
from netlog.proxy.contracts import IEngine
from netlog.proxy.local import LocalAnswers
from netlog.proxy.mode import Answered, Refusal, Route


@dataclass(frozen=True)
class Turned:
    """
    The request is turned down by netlog itself: C{status}, why, and the
    rules' entries when a rule did it.
    """

    status: int
    reason: str
    entries: tuple[dict[str, str], ...] = ()


def dispatch(proxy: IEngine, scheme: str, host: str, port: int, url: str, method: bytes,
             decrypted: bool) -> tuple[Route, Decision] | Turned:
    """
    Where a request for C{url} goes: its route and what the rules do to it,
    or why it is turned down. A request an answer rule matches is routed to
    that rule's local answer (an L{Answered} route): nothing is resolved or
    connected for it.

    @param decrypted: it came inside a tunnel the mode opened, or on the
        HTTPS route.
    """
    rules = proxy.rules.request(host, port, url, method.decode("latin-1"))
    if rules.blocked:
        return Turned(rules.status, rules.why, rules.entries)
    routed = proxy.mode.route(scheme, host, port, decrypted)
    if isinstance(routed, Refusal):
        return Turned(routed.status, routed.reason)
    if rules.answer is not None:
        routed = Answered(routed.scheme, routed.host, routed.port, routed.origin, routed.publicHost, routed.site,
                          routed.signIn, routed.named, decrypted=routed.decrypted,
                          answers=LocalAnswers(rules.answer))
    return routed, rules
