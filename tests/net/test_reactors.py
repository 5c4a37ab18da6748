"""
netlog's reactor (L{netlog.net.reactors.ProxyReactor}): Twisted's own tests
of a reactor's descriptors and TCP, run on it; an error in a dispatch; the
reactor twistd and a worker run netlog on.
"""

from __future__ import annotations

import os
import socket
import unittest
from typing import Any, Callable

from twisted.internet.test import test_fdset, test_tcp
from twisted.internet.test.reactormixins import ReactorBuilder
from twisted.logger import LogEvent, globalLogPublisher
from twisted.trial.unittest import SynchronousTestCase

from netlog.net.reactors import install
from tests.standin.support import tempDirectory
from tests.support import freePort, startTwistd

#: Twisted's test builders that make a test class for each reactor named
#: in their C{_reactors}: here, ours alone.
_BUILDERS = {
    "Descriptors": test_fdset.ReactorFDSetTestsBuilder,
    "TCPClient": test_tcp.TCP4ClientTestsBuilder,
    "TCPConnection": test_tcp.TCPConnectionTestsBuilder,
    "TCPTransport": test_tcp.TCPTransportTestsBuilder,
    "AbortConnection": test_tcp.AbortConnectionTests,
}

#: Twisted's tests of what netlog's reactor leaves out on purpose (see
#: L{netlog.net.reactors}): the legacy log context around each dispatch.
_LEFT_OUT = {
    "test_logPrefix": "netlog's reactor sets no legacy log context (system) around a dispatch, on purpose",
    # Twisted skips it for its own epoll reactor, by the class's name.
    "test_lostFileDescriptor": "epoll drops a closed descriptor without an event: a lost one can't be seen",
}


def _leftOut(why: str) -> Callable[[Any], None]:
    def test(self: Any) -> None:
        raise unittest.SkipTest(why)
    return test


for _name, _builder in _BUILDERS.items():
    _ours = type(f"ProxyReactor{_name}", (_builder,), {"_reactors": ["netlog.net.reactors.ProxyReactor"]})
    for _case in _ours.makeTestCaseClasses().values():
        for _test, _why in _LEFT_OUT.items():
            if hasattr(_case, _test):
                setattr(_case, _test, _leftOut(_why))
        globals()[_case.__name__] = _case


class _Reader:
    """
    One end of a socket pair, read by the reactor: C{doRead} calls C{read};
    C{connectionLost} calls C{lost}.
    """

    def __init__(self, sock: socket.socket, read: Callable[[], None], lost: Callable[[Any], None],
                 prefix: str) -> None:
        self.sock = sock
        self.read = read
        self.lost = lost
        self.prefix = prefix

    def fileno(self) -> int:
        return self.sock.fileno()

    def logPrefix(self) -> str:
        return self.prefix

    def doRead(self) -> None:
        self.sock.recv(100)
        self.read()

    def connectionLost(self, reason: Any) -> None:
        self.lost(reason)


class DispatchErrorTestsBuilder(ReactorBuilder):
    """
    Made into a test class on netlog's reactor alone, built (and its waker
    closed after) by Twisted's own builder.
    """

    _reactors = ["netlog.net.reactors.ProxyReactor"]

    def test_errorsLoggedAndNextHandled(self) -> None:
        """
        A descriptor whose C{doRead} raises is logged and lost as Twisted's
        reactor does it (C{Unhandled Error}, then its C{connectionLost} with
        the error); when that raises too, the error is logged with the
        descriptor's prefix as the system, and the reactor goes on: another
        descriptor ready in the same poll is read.
        """
        pairs = [socket.socketpair() for _ in range(2)]
        for a, b in pairs:
            self.addCleanup(a.close)
            self.addCleanup(b.close)
        # built after: its readers are taken off it before their sockets close
        reactor = self.buildReactor()
        happened: list[str] = []

        def brokenRead() -> None:
            happened.append("read broken")
            raise ValueError("a bug in a protocol")

        def brokenLost(reason: Any) -> None:
            happened.append(f"lost broken: {reason.type.__name__}")
            raise RuntimeError("a bug in its connectionLost")

        first = _Reader(pairs[0][0], brokenRead, brokenLost, "BrokenProtocol,1,127.0.0.1")
        second = _Reader(pairs[1][0], lambda: happened.append("read second"), happened.append, "Other,2")
        for reader in (first, second):
            reactor.addReader(reader)
        for _, b in pairs:
            b.send(b"x")
        events: list[LogEvent] = []
        globalLogPublisher.addObserver(events.append)
        self.addCleanup(globalLogPublisher.removeObserver, events.append)
        reactor.doPoll(1.0)
        self.assertEqual(sorted(happened), ["lost broken: ValueError", "read broken", "read second"])
        errors = [(e["system"], e["failure"].type) for e in events if e.get("isError")]
        self.assertEqual(errors, [("-", ValueError), ("BrokenProtocol,1,127.0.0.1", RuntimeError)])
        self.assertEqual([r for r in reactor.getReaders() if isinstance(r, _Reader)], [second])
        self.flushLoggedErrors(ValueError, RuntimeError)


globals().update(DispatchErrorTestsBuilder.makeTestCaseClasses())

class InstalledTests(SynchronousTestCase):
    def test_installLeavesAnInstalledReactor(self) -> None:
        """
        With a reactor installed (the test runner's), L{install} leaves it.
        """
        from twisted.internet import reactor as before

        install()
        from twisted.internet import reactor as after

        self.assertIs(after, before)

    def test_twistd(self) -> None:
        """
        C{twistd netlog-standin} runs on netlog's reactor; C{--reactor}
        chooses another (Twisted's poll reactor here).
        """
        for given, expected in (([], "netlog.net.reactors.ProxyReactor"),
                                (["--reactor", "poll"], "twisted.internet.pollreactor.PollReactor")):
            folder = tempDirectory(self)
            port = freePort()
            process = startTwistd(self.addCleanup, folder, [*given, "netlog-standin", "--no-supervise",
                                  "--listen", f"tcp:{port}:interface=127.0.0.1", "--resolve-only"], [port])
            with open(os.path.join(folder, "twistd.log")) as f:
                self.assertIn(f"reactor class: {expected}.", f.read())
            process.terminate()
            process.wait(30)
