"""
The private parts of C{h2} and Twisted that netlog uses are where netlog
expects them. Both packages are pinned from above in setup.cfg; these tests
are what to run before moving a pin, and each failure names the private
thing that moved, the netlog code that uses it and the pin to revisit.

The private names used:

  - C{h2.connection.H2Connection._begin_new_stream(stream_id, allowed_ids)},
    overridden, and C{h2.stream.H2Stream._initialize_content_length(headers)},
    replaced on each new stream (L{netlog.proxy.h2._State}: a request whose
    DATA disagrees with its C{content-length} is malformed on its stream
    alone);
  - C{FileDescriptor._tempDataLen} and C{FileDescriptor._writeDisconnected}
    of C{twisted.internet.abstract}, with the undocumented C{dataBuffer} and
    C{TLS} of a TCP connection (L{netlog.net.send.nothingBuffered}: read with
    a default, so a rename would make every write wait for the reactor,
    silently);
  - C{twisted.logger.LogPublisher._observers} and the undocumented
    C{twisted.internet.process.reapProcessHandlers}
    (L{netlog.supervise.fork}: a forked worker forgets its parent's log
    observers and children; L{netlog.net.chatter}: twistd's observers are
    put behind a filter of the ports' own lines).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

import h2
import h2.connection
import h2.stream
import twisted
from h2.config import H2Configuration
from twisted.internet import defer, process, protocol, reactor, tcp
from twisted.logger import LogPublisher
from twisted.trial import unittest

from netlog.net.send import nothingBuffered
from netlog.proxy.h2 import _State

H2_PIN = "h2>=4.1,<4.5"
TWISTED_PIN = "twisted[tls]>=24.7,<27"


def moved(name: str, user: str, package: str, version: str, pin: str) -> str:
    """
    The message of a failure: what moved, who uses it, which pin to revisit.
    """
    return (f"{name} has moved in {package} {version}: netlog's {user} relies on it. "
            f"Revisit {user} and the pin {pin!r} in setup.cfg before allowing this version.")


def parameters(function: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(function).parameters)


class H2PrivatesTests(unittest.SynchronousTestCase):
    def test_beginNewStream(self) -> None:
        """
        C{H2Connection._begin_new_stream} exists and takes C{stream_id} and
        C{allowed_ids}, as netlog's override calls it.
        """
        name = "h2.connection.H2Connection._begin_new_stream(stream_id, allowed_ids)"
        why = moved(name, "netlog/proxy/h2.py (_State)", "h2", h2.__version__, H2_PIN)
        method = getattr(h2.connection.H2Connection, "_begin_new_stream", None)
        self.assertIsNotNone(method, why)
        self.assertEqual(parameters(method), ["self", "stream_id", "allowed_ids"], why)  # type: ignore[arg-type]

    def test_initializeContentLength(self) -> None:
        """
        C{H2Stream._initialize_content_length} exists and takes the
        request's C{headers}, as netlog's replacement does.
        """
        name = "h2.stream.H2Stream._initialize_content_length(headers)"
        why = moved(name, "netlog/proxy/h2.py (_State, _noLength)", "h2", h2.__version__, H2_PIN)
        method = getattr(h2.stream.H2Stream, "_initialize_content_length", None)
        self.assertIsNotNone(method, why)
        self.assertEqual(parameters(method), ["self", "headers"], why)  # type: ignore[arg-type]

    def test_lengthLeftToNetlog(self) -> None:
        """
        Through netlog's C{_State}, a request whose DATA is shorter than its
        C{content-length} is taken by C{h2} without an error (netlog counts
        the DATA itself): the override still reaches every new stream.
        """
        client = h2.connection.H2Connection(H2Configuration(client_side=True))
        client.initiate_connection()
        client.send_headers(1, [(":method", "POST"), (":scheme", "https"), (":authority", "shop.test"),
                                (":path", "/form"), ("content-length", "5")])
        client.send_data(1, b"abc", end_stream=True)
        server = _State(H2Configuration(client_side=False))
        server.initiate_connection()
        why = moved("the content-length check h2 makes per stream", "netlog/proxy/h2.py (_State)", "h2",
                    h2.__version__, H2_PIN)
        try:
            events = server.receive_data(client.data_to_send())
        except h2.exceptions.ProtocolError as e:
            self.fail(f"{why} ({e!r})")
        self.assertIn("StreamEnded", [type(event).__name__ for event in events], why)


class TwistedPrivatesTests(unittest.TestCase):
    @defer.inlineCallbacks
    def test_tcpBuffers(self) -> Any:
        """
        A connected TCP transport has C{_tempDataLen}, C{_writeDisconnected},
        C{dataBuffer} and C{TLS}, with the values of an idle connection, and
        L{nothingBuffered} says so.
        """
        port = reactor.listenTCP(0, protocol.Factory.forProtocol(protocol.Protocol), interface="127.0.0.1")
        self.addCleanup(port.stopListening)
        client = yield protocol.ClientCreator(reactor, protocol.Protocol).connectTCP(
            "127.0.0.1", port.getHost().port
        )
        transport = client.transport
        self.addCleanup(transport.abortConnection)
        self.assertIsInstance(transport, tcp.Client)
        for name, idle in [("_tempDataLen", 0), ("_writeDisconnected", False), ("dataBuffer", b""), ("TLS", False)]:
            why = moved(f"twisted.internet.tcp.Connection.{name}", "netlog/net/send.py (nothingBuffered)",
                        "Twisted", twisted.__version__, TWISTED_PIN)
            self.assertTrue(hasattr(transport, name), why)
            self.assertEqual(getattr(transport, name), idle, why)
        self.assertTrue(nothingBuffered(transport), "nothingBuffered no longer sees an idle TCP connection")
        transport.write(b"x" * 10)
        self.assertEqual(transport._tempDataLen, 10, moved(
            "twisted.internet.abstract.FileDescriptor._tempDataLen (what write buffers)",
            "netlog/net/send.py (nothingBuffered)", "Twisted", twisted.__version__, TWISTED_PIN))
        self.assertFalse(nothingBuffered(transport))

    def test_logObservers(self) -> None:
        """
        A L{LogPublisher} keeps its observers in C{_observers}.
        """
        why = moved("twisted.logger.LogPublisher._observers",
                    "netlog/supervise/fork.py (_forgetParent) and netlog/net/chatter.py (quietPortChatter)",
                    "Twisted", twisted.__version__, TWISTED_PIN)

        def observer(event: Any) -> None:
            pass

        publisher = LogPublisher(observer)
        self.assertEqual(getattr(publisher, "_observers", None), [observer], why)

    def test_reapProcessHandlers(self) -> None:
        """
        C{twisted.internet.process.reapProcessHandlers} is the dict of the
        children Twisted reaps.
        """
        why = moved("twisted.internet.process.reapProcessHandlers", "netlog/supervise/fork.py (_forgetParent)",
                    "Twisted", twisted.__version__, TWISTED_PIN)
        self.assertIsInstance(getattr(process, "reapProcessHandlers", None), dict, why)
