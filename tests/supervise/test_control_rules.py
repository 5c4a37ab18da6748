"""
Rules over the control channel (L{netlog.supervise.control}): the worker
takes them and says so, and the supervisor's side fires once it has.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.internet.defer import succeed
from twisted.internet.testing import StringTransport
from twisted.trial.unittest import SynchronousTestCase

from netlog.supervise.control import SupervisorSide, WorkerSide


def sent(transport: StringTransport) -> list[dict[str, Any]]:
    return [json.loads(line) for line in transport.value().splitlines()]


class ControlRulesTests(SynchronousTestCase):
    def test_supervisorWaitsForTheWorker(self) -> None:
        """
        New rules are sent as one line, and their Deferred fires when the
        worker answers C{ruled}, in the order sent.
        """
        side = SupervisorSide()
        transport = StringTransport()
        side.makeConnection(transport)
        first = side.setRules("a", {"block": ["x.test"]})
        second = side.setRules(None, {})
        self.assertEqual(sent(transport), [{"op": "rules", "name": "a", "rules": {"block": ["x.test"]}},
                                           {"op": "rules", "name": None, "rules": {}}])
        self.assertNoResult(first)
        side.dataReceived(b'{"op": "ruled", "name": "a"}\n')
        self.successResultOf(first)
        self.assertNoResult(second)
        side.connectionLost(None)
        self.successResultOf(second)
        self.successResultOf(side.setRules("a", {}))

    def test_workerTakesAndAnswers(self) -> None:
        """
        The worker hands the rules on and answers C{ruled}, also when
        taking them failed (the failure is logged).
        """
        taken: list[dict[str, Any]] = []

        def onRules(message: dict[str, Any]) -> None:
            taken.append(message)
            if message["name"] == "bad":
                raise ValueError("no")

        side = WorkerSide(lambda m, a, b: None, lambda m: succeed(None), onRules)
        transport = StringTransport()
        side.makeConnection(transport)
        side.dataReceived(b'{"op": "rules", "name": "a", "rules": {"latency_ms": 5}}\n'
                          b'{"op": "rules", "name": "bad", "rules": {}}\n')
        self.assertEqual([m["name"] for m in taken], ["a", "bad"])
        self.assertEqual(sent(transport), [{"op": "ruled", "name": "a"}, {"op": "ruled", "name": "bad"}])
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 1)
