"""
L{netlog.net.options.withBacklog}: listeners that name no backlog get
netlog's, and every other description is left as it was.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from netlog.net.options import LISTEN_BACKLOG, withBacklog


class WithBacklogTests(SynchronousTestCase):
    def test_table(self) -> None:
        """
        TCP, TCP6 and UNIX descriptions without C{backlog=} get it; ones that
        name it, other endpoint types, and a description ending in an escape
        are kept as given.
        """
        b = f":backlog={LISTEN_BACKLOG}"
        cases = {
            "tcp:3128:interface=127.0.0.1": "tcp:3128:interface=127.0.0.1" + b,
            "TCP:0": "TCP:0" + b,
            "tcp6:3128:interface=\\:\\:1": "tcp6:3128:interface=\\:\\:1" + b,
            "unix:/run/netlog.sock": "unix:/run/netlog.sock" + b,
            "tcp:0:backlog=5": "tcp:0:backlog=5",
            "tcp:0:Backlog=5:interface=127.0.0.1": "tcp:0:Backlog=5:interface=127.0.0.1",
            "ssl:443:privateKey=k.pem": "ssl:443:privateKey=k.pem",
            "systemd:domain=INET:index=0": "systemd:domain=INET:index=0",
            "3128": "3128",
            "tcp:0:interface=a\\": "tcp:0:interface=a\\",
        }
        for given, expected in cases.items():
            self.assertEqual(withBacklog(given), expected, given)

    def test_parsesAsTheEndpoint(self) -> None:
        """
        What it gives is a description Twisted reads, with the backlog asked.
        """
        from twisted.internet import reactor
        from twisted.internet.endpoints import serverFromString

        endpoint = serverFromString(reactor, withBacklog("tcp:0:interface=127.0.0.1"))
        self.assertEqual(endpoint._backlog, LISTEN_BACKLOG)  # type: ignore[attr-defined]
        self.assertEqual(endpoint._interface, "127.0.0.1")  # type: ignore[attr-defined]
