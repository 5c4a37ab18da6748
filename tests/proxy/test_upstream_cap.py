"""
The cap on connections open at once to one upstream: the pool counts them,
queues the exchanges beyond the cap in the order they came, hands a freed
connection (or its slot) to the one waiting longest, and forgets one that
stops waiting; an exchange waits its turn, and a browser that leaves or a
timeout takes it out of the queue. In memory: real L{UpstreamProtocol}s over
L{StringTransport}s, the exchange over the playbook's fakes.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import error
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from netlog.net.timeouts import MAX_CONNECTIONS_PER_UPSTREAM
from netlog.proxy.mode import Route
from netlog.proxy.service import ProxyService
from netlog.proxy.states import RequestState
from netlog.proxy.upstream import Pool, UpstreamProtocol
from tests.proxy.playbook import ADDRESS, FakeSource, Play, resendable

KEY = ("http", "backend.test", 8080, None)
OTHER = ("http", "other.test", 8080, None)


class Waiter:
    """
    A waiter that notes what it was given.
    """

    def __init__(self, name: str, told: list[tuple[str, Any]]) -> None:
        self.name = name
        self.told = told

    def slotFree(self) -> None:
        self.told.append((self.name, "slot"))

    def handed(self, protocol: UpstreamProtocol) -> None:
        self.told.append((self.name, protocol))


def connection(pool: Pool, key: Any = KEY) -> UpstreamProtocol:
    """
    A connection made on a slot claimed, idle and reusable.
    """
    protocol = UpstreamProtocol(pool.reactor, key)
    protocol.makeConnection(StringTransport())
    pool.opened(protocol)
    return protocol


class PoolCapTests(SynchronousTestCase):

    def setUp(self) -> None:
        self.clock = Clock()
        self.pool = Pool(self.clock)  # type: ignore[arg-type]
        self.told: list[tuple[str, Any]] = []

    def waiters(self, *names: str) -> list[Waiter]:
        return [Waiter(name, self.told) for name in names]

    def test_claimUpToCap(self) -> None:
        """
        Up to the cap, a claim is granted and counted; beyond it the claimer
        waits, and another upstream's count is its own.
        """
        a, b, c = self.waiters("a", "b", "c")
        self.assertEqual([self.pool.claim(KEY, 2, w) for w in (a, b, c)], [True, True, False])
        self.assertEqual((self.pool.openTo(KEY), self.pool.waitingFor(KEY)), (2, 1))
        self.assertTrue(self.pool.claim(OTHER, 2, c))
        self.assertEqual(self.told, [])

    def test_reusableHandedInOrder(self) -> None:
        """
        A connection given back goes to the exchange waiting longest, not
        to the idle list, one at a time in the order they came.
        """
        first, second, third = self.waiters("first", "second", "third")
        self.pool.claim(KEY, 1, first)
        protocol = connection(self.pool)
        self.pool.claim(KEY, 1, second)
        self.pool.claim(KEY, 1, third)
        self.pool.put(protocol)
        self.assertEqual(self.told, [("second", protocol)])
        self.pool.put(protocol)
        self.assertEqual(self.told, [("second", protocol), ("third", protocol)])
        self.pool.put(protocol)
        self.assertIs(self.pool.take(KEY), protocol)
        self.assertEqual((self.pool.openTo(KEY), self.pool.waitingFor(KEY)), (1, 0))

    def test_lostPassesSlot(self) -> None:
        """
        A counted connection lost passes its slot to the next waiter (who
        may connect anew: the count stays); with none waiting, it is freed.
        """
        a, b = self.waiters("a", "b")
        self.pool.claim(KEY, 1, a)
        protocol = connection(self.pool)
        self.pool.claim(KEY, 1, b)
        protocol.connectionLost(Failure(error.ConnectionDone()))
        self.assertEqual(self.told, [("b", "slot")])
        self.assertEqual((self.pool.openTo(KEY), self.pool.waitingFor(KEY)), (1, 0))
        self.pool.released(KEY)
        self.assertEqual(self.pool.openTo(KEY), 0)

    def test_unreusableClosedThenSlot(self) -> None:
        """
        A connection given back that can't be reused is closed, and its
        slot goes to the next waiter once it is lost.
        """
        a, b = self.waiters("a", "b")
        self.pool.claim(KEY, 1, a)
        protocol = connection(self.pool)
        protocol.raw = True
        self.pool.claim(KEY, 1, b)
        self.pool.put(protocol)
        self.assertTrue(protocol.transport.disconnecting)
        self.assertEqual(self.told, [])
        protocol.connectionLost(Failure(error.ConnectionDone()))
        self.assertEqual(self.told, [("b", "slot")])

    def test_cancelled(self) -> None:
        """
        A waiter that stops waiting is out of the queue at once: the next
        connection freed goes to the one after it, and the queue ends empty.
        """
        a, b, c = self.waiters("a", "b", "c")
        self.pool.claim(KEY, 1, a)
        protocol = connection(self.pool)
        self.pool.claim(KEY, 1, b)
        self.pool.claim(KEY, 1, c)
        self.pool.cancel(KEY, b)
        self.pool.cancel(KEY, b)
        self.assertEqual(self.pool.waitingFor(KEY), 1)
        self.pool.put(protocol)
        self.assertEqual(self.told, [("c", protocol)])
        self.assertEqual(self.pool._waiting, {})

    def test_connectFailed(self) -> None:
        """
        A slot whose connection couldn't be made (or was lost before it was
        counted) is freed, or passed on.
        """
        a, b = self.waiters("a", "b")
        self.pool.claim(KEY, 1, a)
        self.pool.claim(KEY, 1, b)
        self.pool.released(KEY)
        self.assertEqual(self.told, [("b", "slot")])
        protocol = UpstreamProtocol(self.pool.reactor, KEY)
        self.pool.opened(protocol)
        self.assertEqual(self.pool.openTo(KEY), 0)

    def test_idleSweptFrees(self) -> None:
        """
        An idle connection closed for its age frees its slot too.
        """
        self.pool.claim(KEY, 1, *self.waiters("a"))
        protocol = connection(self.pool)
        self.pool.put(protocol)
        self.clock.advance(self.pool.idleTimeout)
        self.assertTrue(protocol.transport.disconnecting)
        protocol.connectionLost(Failure(error.ConnectionDone()))
        self.assertEqual(self.pool.openTo(KEY), 0)

    def test_idleKeptUpToCap(self) -> None:
        """
        With a cap above the idle connections kept by default, every
        connection counted is kept idle when given back (the next page
        finds them all, rather than connecting anew beyond the default);
        one more, not counted, is closed.
        """
        cap = self.pool.maxIdle + 10
        protocols = []
        for waiter in self.waiters(*map(str, range(cap))):
            self.assertTrue(self.pool.claim(KEY, cap, waiter))
            protocols.append(connection(self.pool))
        for protocol in protocols:
            self.pool.put(protocol)
        self.assertEqual([p.transport.disconnecting for p in protocols], [False] * cap)
        self.assertEqual(len(self.pool._idle[KEY]), cap)
        extra = UpstreamProtocol(self.pool.reactor, KEY)
        extra.makeConnection(StringTransport())
        self.pool.put(extra)
        self.assertTrue(extra.transport.disconnecting)


class ExchangeWaitsTests(SynchronousTestCase):
    """
    An exchange whose upstream has as many connections open as it may.
    """

    def waiting(self) -> Play:
        play = Play()
        play.engine.room = 0
        play.exchange.start()
        return play

    def test_waits(self) -> None:
        """
        It waits its turn: nothing connected, nothing logged, still
        connecting.
        """
        play = self.waiting()
        self.assertEqual(play.engine.pool.waiting, [play.exchange.hold])
        self.assertEqual(play.engine.asked, [])
        self.assertEqual(play.writer.lines, [])
        self.assertIs(play.exchange.requestState, RequestState.CONNECTING)

    def test_handed(self) -> None:
        """
        Handed a connection another exchange is done with, it sends its
        request on it, logged as reused (no connect time).
        """
        play = self.waiting()
        source = FakeSource()
        source.address = ADDRESS  # type: ignore[attr-defined]
        play.engine.pool.waiting.pop(0).handed(source)
        self.assertEqual([head for head, _, _ in source.heads], [play.head])
        self.assertIs(source.exchange, play.exchange)
        self.assertIsNone(play.exchange.hold.connectedAt)
        self.assertEqual(play.writer.types(), ["open"])

    def test_slotFree(self) -> None:
        """
        Given a slot, it connects anew.
        """
        play = self.waiting()
        play.engine.pool.waiting.pop(0).slotFree()
        source = play.engine.connect()
        self.assertEqual([head for head, _, _ in source.heads], [play.head])

    def test_browserLeaves(self) -> None:
        """
        The browser leaving takes it out of the queue; its entry ends
        failed.
        """
        play = self.waiting()
        play.exchange.browserLost(Failure(error.ConnectionDone()))
        self.assertEqual(play.engine.pool.waiting, [])
        self.assertIn("before the server was connected", play.end()["_failed"]["reason"])

    def test_cancelled(self) -> None:
        """
        An HTTP/2 stream reset while waiting leaves the queue.
        """
        play = self.waiting()
        play.exchange.cancelled()
        self.assertEqual(play.engine.pool.waiting, [])
        self.assertTrue(play.exchange.done)

    def test_timedOut(self) -> None:
        """
        A wait past the idle timeout gets the browser a 504 and leaves the
        queue.
        """
        play = self.waiting()
        play.exchange.timedOut("the server sent nothing for 300 seconds")
        self.assertEqual(play.engine.pool.waiting, [])
        self.assertEqual(play.browser.named("answer")[0][1], 504)

    def test_retryWaits(self) -> None:
        """
        A request sent again after a reused connection closed waits its turn
        like any other.
        """
        play = Play()
        first = play.connected()
        play.sendRequest()
        play.engine.room = 0
        play.exchange.answerFailed(first, Failure(error.ConnectionDone()), again=resendable(play.head))
        self.assertEqual(play.engine.pool.waiting, [play.exchange.hold])
        play.engine.pool.waiting.pop(0).slotFree()
        second = play.engine.connect()
        self.assertEqual([head for head, _, _ in second.heads], [play.head])


class CapOfRouteTests(SynchronousTestCase):

    def test_routeOrEngine(self) -> None:
        """
        A route's own cap (a site's C{backend_connections}) wins over the
        engine's (C{--upstream-connections}), whose default is
        L{MAX_CONNECTIONS_PER_UPSTREAM}.
        """
        engine = ProxyService.__new__(ProxyService)
        engine.pool = Pool(Clock())  # type: ignore[arg-type]
        engine.upstreamConnections = 3
        told: list[tuple[str, Any]] = []
        own = Route("http", "a.test", 80, "http://a.test", "a.test", connections=1)
        plain = Route("http", "b.test", 80, "http://b.test", "b.test")
        self.assertEqual([engine.claim(own, Waiter(str(i), told)) for i in range(2)], [True, False])
        self.assertEqual([engine.claim(plain, Waiter(str(i), told)) for i in range(4)], [True, True, True, False])
        self.assertEqual(ProxyService.__init__.__defaults__[-1], MAX_CONNECTIONS_PER_UPSTREAM)  # type: ignore[index]
