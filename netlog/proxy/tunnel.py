"""
A blind tunnel: a CONNECT the mode doesn't open, relayed byte for byte and
kept as one entry (the host and port, bytes each way, times, how it ended).
"""

from __future__ import annotations

from typing import Any

from netlog.core.rules import PASS, Decision
from twisted.logger import Logger
from twisted.python.failure import Failure

from netlog.core.http1 import RequestHead
from netlog.core.records import TUNNEL, UNREACHED_TEXT, endRecord
from netlog.net.connect import describeFailure, failureMarks
from netlog.net.relay import CLIENT, PROXY, TUNNEL_ANSWER, Relay, RelayResult, RelayServerProtocol, tunnelAnswerFields
from netlog.net.send import noDelay, sendNow
from netlog.proxy.contracts import IBrowserSide, IEngine
from netlog.proxy.mode import DestinationRefused, Route, remapRoute

_log = Logger()

#: Why the browser's connection is paused while its tunnel connects.
CONNECTING = "connecting"

#: Bytes a browser may send into a tunnel before it is connected; reading
#: stops past them until it is.
MAX_EARLY_BYTES = 64 * 1024

#: Reads a tunnel relays in Python before the kernel takes the rest over
#: (splice, L{netlog.net.splice}). Moving costs about 25 µs (two pipes, made
#: and closed: moving at once made a burst of one-exchange tunnels 4% dearer)
#: and saves a few µs a small read at most, a third of the CPU on a bulk
#: transfer; so a tunnel that carries one small exchange (a TLS handshake
#: and a GET: 5 or 6 reads) is left in Python, and one that carries more
#: moves (see benchmarks/README.md).
KERNEL_AFTER_READS = 16


class Tunnel:
    """
    A CONNECT the mode relays blind (a live host's): resolved and judged by
    the destination rules, connected, answered C{200}, then bytes each way,
    kept as one entry.
    """

    def __init__(self, proxy: IEngine, browser: IBrowserSide, head: RequestHead, url: str,
                 at: float, rules: Decision = PASS) -> None:
        """
        @param rules: what the rules do to it: a remap, the bandwidth
            (L{netlog.core.rules}).
        """
        self.proxy = proxy
        self.browser = browser
        self.head = head
        self.url = url
        self.started = at
        self.host = head.host or ""
        self.port = head.port or 443
        self.rules = rules
        self.address: str | None = None
        self.connectedAt: float | None = None
        self.id = 0
        self.relay: Relay | None = None
        self._early: list[bytes] = []
        self._earlySize = 0
        #: The entry is written (or the tunnel is given up): nothing more to log.
        self.ended = False

    def start(self) -> None:
        # The browser's connection is read on while we connect (so that a
        # browser that leaves is noticed); what it sends early is kept, up to
        # MAX_EARLY_BYTES before reading stops.
        self.browser.rawPeer = self
        route = Route("tcp", self.host, self.port, "", self.host)
        if self.rules.remap is not None:
            route = remapRoute(route, self.rules.remap)
            self.port = route.port
        d = self.proxy.resolveFor(route)
        d.addCallback(self._resolved, route)
        d.addCallbacks(self._connected, self._failed)
        d.addErrback(lambda f: _log.failure("the live tunnel to {host} failed", f, host=self.host))

    def _resolved(self, address: str | None, route: Route) -> Any:
        self.address = address
        return self.proxy.connectRaw(route, address, RelayServerProtocol)

    def _openFields(self) -> dict[str, Any]:
        return self.proxy.openFields(self.browser, TUNNEL, self.started, self.head, self.url, self.host, self.port,
                                     self.address, rules=self.rules.entries)

    def _connected(self, protocol: RelayServerProtocol) -> None:
        browser = self.browser
        self.connectedAt = self.proxy.reactor.seconds()
        if browser.gone:
            protocol.transport.loseConnection()  # type: ignore[union-attr,misc]
            return
        if self.ended:
            protocol.transport.loseConnection()  # type: ignore[union-attr,misc]
            return
        noDelay(protocol.transport)
        pending = b"".join(self._early) + browser.enterRaw(self)
        self._early = []
        relay = Relay(self.proxy.reactor, browser.transport, browser.gate, self._ended, self._opened,
                      idleTimeout=self.proxy.idleTimeout, kernelAfter=KERNEL_AFTER_READS,
                      shapeUp=self.rules.bandwidth.up, shapeDown=self.rules.bandwidth.down)
        self.relay = relay
        protocol.relay = relay
        relay.start(protocol.transport, pending)
        # After the open line (relay.start wrote it), and ahead of anything
        # the server sends.
        sendNow(browser.transport, TUNNEL_ANSWER)
        browser.gate.release(CONNECTING)

    def _opened(self) -> None:
        self.id = self.proxy.writer.open(self._openFields())

    def _ended(self, result: RelayResult) -> None:
        self.ended = True
        # As the stand-in writes it: the CONNECT's answer, and the request
        # counted as sent when the tunnel connected.
        self.proxy.writer.end(self.id, endRecord(
            result.ended, self.connectedAt, self.connectedAt, result.firstByte, up=result.up, down=result.down,
            response=tunnelAnswerFields(), closedBy=result.closedBy, failed=result.failure,
        ))

    def _failed(self, failure: Failure) -> None:
        if self.ended:
            return
        self.ended = True
        browser = self.browser
        browser.rawPeer = None
        browser.gate.release(CONNECTING)
        if failure.check(DestinationRefused):
            browser.refuse(self.head, self.url, self.started, 403, str(failure.value),
                            server=(self.host, self.port), kind=TUNNEL)
            return
        reason, status = describeFailure(failure, self.host, self.port)
        response, size = browser.answer(status, UNREACHED_TEXT.format(reason))
        self.proxy.writer.refuse(self._openFields(), endRecord(
            self.proxy.reactor.seconds(), up=len(self.head.raw), down=size, response=response,
            closedBy=PROXY, failed=reason, failedStatus=status, marks=failureMarks(failure),
        ))
        browser.close()

    def browserRaw(self, data: bytes) -> None:
        if self.relay is not None:
            self.relay.fromClient(data)
        else:
            self._early.append(data)
            self._earlySize += len(data)
            if self._earlySize > MAX_EARLY_BYTES:
                self.browser.gate.hold(CONNECTING)

    def browserLost(self, reason: Failure) -> None:
        relay = self.relay
        if relay is None:
            if not self.ended:
                # Gone while we resolved or connected: the entry says so.
                self.ended = True
                self.proxy.writer.refuse(self._openFields(), endRecord(
                    self.proxy.reactor.seconds(), self.connectedAt, up=0, down=0, closedBy=CLIENT,
                    failed="the browser closed the connection before the tunnel was connected",
                ))
            return
        if relay.result is None:
            relay.clientLost(reason)
        else:
            relay.otherLost()

    def abort(self) -> None:
        if self.relay is not None:
            self.relay.abort("the proxy stopped")
