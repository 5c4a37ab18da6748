"""
C{/exchanges} over a real supervised C{twistd netlog-standin}: the API runs
in the supervisor and the log is written by a worker, so a wait is woken
by the kernel's word that another process wrote the file.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import Netlog
from tests.client.support import get, startOrigin, startStandin
from tests.standin.support import tempDirectory

#: Seconds within which a wait must answer once its exchange has ended.
PROMPT = 0.1


def getJSON(url: str, timeout: float = 90.0) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.slow
class ExchangesApiTests(SynchronousTestCase):

    def setUp(self) -> None:
        folder = tempDirectory(self)
        self.originPort, self.release = startOrigin(self.addCleanup)
        self.twistd, self.api = startStandin(folder, self.addCleanup,
                                             ["--resolve", "origin.test=127.0.0.1", "--state", folder])
        self.client = Netlog(self.api, token_file=f"{folder}/api-token")
        self.session = self.client.create_session("find")
        self.addCleanup(self.session.delete)
        self.base = f"{self.api}/sessions/find/exchanges"

    def url(self, path: str) -> str:
        return f"http://origin.test:{self.originPort}{path}"

    def query(self, base: str | None = None, **params: Any) -> tuple[int, Any]:
        return getJSON((base or self.base) + "?" + urllib.parse.urlencode(params))

    def test_find(self) -> None:
        """
        A filter picks exactly the matching exchanges of the session, in the
        order they ended, with their summaries; the cursor asks on from there;
        the main log has none of the session's.
        """
        for path in ("/a", "/order?id=1", "/b", "/order?id=2"):
            self.assertEqual(get(self.session.proxy, self.url(path)), 200)
        status, found = self.query(filter="url:/order")
        self.assertEqual(status, 200, found)
        self.assertEqual([e["url"] for e in found["exchanges"]],
                         [self.url("/order?id=1"), self.url("/order?id=2")])
        first = found["exchanges"][0]
        self.assertEqual((first["method"], first["status"]), ("GET", 200))
        self.assertEqual(first["id"], first["open_line"])
        self.assertGreater(first["end_line"], first["open_line"])
        self.assertFalse(found["more"])
        status, page = self.query(filter="url:/order", limit=1)
        self.assertEqual((len(page["exchanges"]), page["more"]), (1, True))
        status, rest = self.query(filter="url:/order", after=page["next"])
        self.assertEqual([e["url"] for e in rest["exchanges"]], [self.url("/order?id=2")])
        status, main = self.query(self.api + "/exchanges", filter="url:/order")
        self.assertEqual((status, main["exchanges"]), (200, []))

    def test_one(self) -> None:
        """
        GET .../exchanges/ID answers the exchange whole: its heads, and a 404
        for an id that is not an exchange.
        """
        self.assertEqual(get(self.session.proxy, self.url("/one")), 200)
        status, found = self.query(filter="url:/one")
        [summary] = found["exchanges"]
        status, whole = getJSON(f"{self.base}/{summary['id']}")
        self.assertEqual(status, 200, whole)
        self.assertEqual(whole["request"]["method"], "GET")
        self.assertEqual(whole["request"]["url"], self.url("/one"))
        self.assertEqual(whole["response"]["status"], 200)
        status, missing = getJSON(f"{self.base}/{summary['end_line']}")
        self.assertEqual(status, 404, missing)
        self.assertIn("no exchange", missing["reason"])

    def test_badFilter(self) -> None:
        """A filter with a mistake is a 400 that says where and why, in one line."""
        status, answer = self.query(filter="method:GET stauts:200")
        self.assertEqual(status, 400)
        self.assertEqual(answer["parameter"], "filter")
        self.assertEqual(answer["reason"], "at 12: unknown field 'stauts' (fields: method, url, host, status, "
                                           "type, reqheader, resheader, body, reqbody, resbody, is)")
        status, answer = self.query(wait=61)
        self.assertEqual((status, answer["parameter"]), (400, "wait"))

    def test_waitPrompt(self) -> None:
        """
        A wait answers as soon as a matching exchange ends (within 100 ms of
        its end line's time), not when one that doesn't match does; the
        cursor it hands back makes the next wait wait for the next one.
        """
        status, before = self.query(filter="")
        answers: list[tuple[float, Any]] = []

        def wait() -> None:
            answers.append((0.0, self.query(filter="url:/hold-order", wait=30, after=before["next"])))
            answers[-1] = (time.time(), answers[-1][1])

        waiter = threading.Thread(target=wait)
        waiter.start()
        time.sleep(0.5)
        self.assertEqual(get(self.session.proxy, self.url("/other")), 200)
        time.sleep(0.3)
        self.assertTrue(waiter.is_alive(), "the wait answered for an exchange that doesn't match")
        holder = threading.Thread(target=get, args=(self.session.proxy, self.url("/hold-order")))
        holder.start()
        time.sleep(0.5)
        self.assertTrue(waiter.is_alive(), "the wait answered while its exchange was still open")
        self.release.set()
        holder.join(20)
        waiter.join(20)
        answeredAt, (status, found) = answers[0]
        self.assertEqual(status, 200, found)
        [summary] = found["exchanges"]
        self.assertEqual(summary["url"], self.url("/hold-order"))
        late = answeredAt - summary["ended"]
        self.assertLess(late, PROMPT, f"the wait answered {late * 1000:.0f} ms after the exchange ended")
        began = time.monotonic()
        status, empty = self.query(filter="url:/hold-order", wait=1, after=found["next"])
        took = time.monotonic() - began
        self.assertEqual((status, empty["exchanges"]), (200, []))
        self.assertGreaterEqual(took, 1.0)
        self.assertLess(took, 2.0)

    def test_waitMany(self) -> None:
        """Many waits at once on one log each answer with the one exchange they wait for."""
        results: dict[int, Any] = {}

        def wait(i: int) -> None:
            results[i] = self.query(filter=f"url:~/w{i}$", wait=30)[1]

        threads = [threading.Thread(target=wait, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        for i in range(20):
            self.assertEqual(get(self.session.proxy, self.url(f"/w{i}")), 200)
        for t in threads:
            t.join(30)
        for i in range(20):
            self.assertEqual([e["url"] for e in results[i]["exchanges"]], [self.url(f"/w{i}")])
