"""
A rule's local answer (C{answer} in C{docs/rules.rst}): netlog answers the
request itself with the status, fields and body the rule gives, through the
same exchange, record and HAR as any answer, marked C{_answeredBy:
"rule"} with the rule's C{_answerRule} index. Nothing is resolved and
nothing connected.
"""

from __future__ import annotations

from twisted.internet.interfaces import IReactorTime
from zope.interface import implementer

from netlog.core.http1 import RequestHead
from netlog.core.replay import RecordedAnswer, answerEvents
from netlog.core.rules import LocalAnswer
from netlog.proxy.contracts import IAnswerSink
from netlog.proxy.held import HeldSource
from netlog.proxy.mode import IAnswers


@implementer(IAnswers)
class LocalAnswers:
    """
    What answers the requests one answer rule matches.
    """

    def __init__(self, rule: LocalAnswer) -> None:
        self.rule = rule

    def sourceFor(self, reactor: IReactorTime, head: RequestHead, url: str) -> LocalSource:
        return LocalSource(self.rule, reactor, head, url)


class LocalSource(HeldSource):
    """
    The answer source of one request an answer rule matched.
    """

    def __init__(self, rule: LocalAnswer, reactor: IReactorTime, head: RequestHead, url: str) -> None:
        super().__init__(reactor, head, url)
        self.rule = rule

    def answerRequest(self, exchange: IAnswerSink, body: bytes | None) -> None:
        rule = self.rule
        exchange.answerMarks(self, {"_answeredBy": "rule", "_answerRule": rule.index})
        # Framed by the body's length (the rule's fields frame nothing).
        answer = RecordedAnswer(rule.status, b"", [*rule.headers, (b"Content-Length", b"0")], rule.body, False, 0.0)
        self.handAfter(0.0, answerEvents(answer, self.head.method))
