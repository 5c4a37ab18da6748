"""
The browser's side of the engine: one protocol for every listener, whatever
the mode.

On the forward port it reads absolute-form requests and CONNECTs, asking the
mode where each goes: a CONNECT it opens is read on (a TLS handshake first is
decrypted with the mode's certificate, anything else read as plain HTTP); a
CONNECT it relays blind becomes a L{netlog.proxy.tunnel.Tunnel}; a refusal is
answered and logged. On the HTTPS route (TLS already undone by the listener)
it serves the mode's origins by C{Host}; on the HTTP route it answers C{308}
to the HTTPS origin the mode names.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Sequence

from OpenSSL import SSL
from twisted.internet import error
from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IHandshakeListener
from twisted.internet.protocol import Factory, Protocol
from twisted.logger import Logger
from twisted.python.failure import Failure
from zope.interface import implementer

from netlog.core.http1 import (
    Body,
    EndOfMessage,
    Event,
    Incomplete,
    Refused,
    RequestHead,
    RequestReader,
    ResponseHead,
    HeadFields,
    keepAlive,
    readRefusedRequest,
    serializeHead,
)
from netlog.core.logline import REASON_STOPPED
from netlog.core.records import (
    DEFAULT_PORTS,
    EXCHANGE,
    REFUSED_TEXT,
    TUNNEL,
    UNREACHED_TEXT,
    connectUrl,
    endRecord,
    hostPort,
    openRecord,
    ownAnswer,
    unreadRequestRecord,
    urlAuthority,
)
from netlog.net.gate import Gate
from netlog.net.idle import IdleTimer
from netlog.net.relay import CLIENT, PROXY, TUNNEL_ANSWER, tunnelAnswerFields
from netlog.net.send import noDelay, sendNow
from netlog.proxy.contracts import IBrowserStream, IEngine, IRawPeer
from netlog.proxy.dispatch import Turned, dispatch
from netlog.proxy.exchange import Exchange, latin1
from netlog.proxy.h2 import H2Connection
from netlog.core.rules import Decision
from netlog.proxy.mode import BLIND, DECRYPT, OPEN, Refusal, Route
from netlog.proxy.tunnel import CONNECTING, Tunnel

_log = Logger()

FORWARD = "forward"
HTTPS_ROUTE = "https-route"
HTTP_ROUTE = "http-route"
DECRYPTED = "decrypted"
#: A site's CONNECT, answered, whose first byte has not come yet: it tells
#: whether the tunnel carries TLS (L{DECRYPTED}) or plain HTTP
#: (L{PLAIN_TUNNEL}).
TUNNEL_OPENING = "tunnel-opening"
#: A site's CONNECT that carries plain HTTP: browsers open C{ws://}
#: WebSockets through a proxy this way.
PLAIN_TUNNEL = "plain-tunnel"
#: The first byte of a TLS handshake record.
TLS_HANDSHAKE = 0x16

#: Seconds a browser connection may sit idle between requests (or the idle
#: timeout, when shorter).
BROWSER_IDLE_TIMEOUT = 120.0
#: The status a browser gets when its request head isn't whole in time.
REQUEST_TIMEOUT = 408
#: The status of a request the engine can't carry (an C{https://} URL to a
#: live host in plain HTTP, which must come through CONNECT).
BAD_REQUEST = 400

# Why the browser's connection is not being read (and L{CONNECTING}).
BUSY = "busy"
#: ... while a decrypted live host's certificate is minted.
MINTING = "minting"


@implementer(IHandshakeListener, IBrowserStream)
class BrowserConnection(Protocol):
    """
    One connection from the browser, on any of the listeners; over HTTP/1.1,
    the browser's side of each exchange on it in turn (L{IBrowserStream}:
    the answer's events framed as HTTP/1.1 bytes).

    @ivar state: what this connection reads: L{FORWARD}, L{HTTPS_ROUTE},
        L{HTTP_ROUTE}; once a CONNECT the mode opens is answered
        L{TUNNEL_OPENING}, then L{DECRYPTED} or L{PLAIN_TUNNEL} by the
        browser's first byte in it.
    """

    __slots__ = (
        "_batch",
        "_handshake",
        "_lastActive",
        "_partialStart",
        "client",
        "closeAfter",
        "closing",
        "connectionId",
        "dechunk",
        "discarding",
        "exchange",
        "gate",
        "gone",
        "h2",
        "headStarted",
        "idleTimer",
        "proxy",
        "queue",
        "rawPeer",
        "reactor",
        "reader",
        "state",
        "tunnelAuthority",
        "tunnelTarget",
        "tunnelTLS",
    )

    transport: Any
    version = b"HTTP/1.1"

    def __init__(self, proxy: IEngine, state: str) -> None:
        self.proxy = proxy
        self.reactor = proxy.reactor
        self.state = state
        self.queue: deque[tuple[Event, float]] = deque()
        self.exchange: Exchange | None = None
        self.rawPeer: Any = None
        self.closing = False
        self.gone = False
        self.discarding = False
        #: The host and port a site's CONNECT named.
        self.tunnelTarget: tuple[str, int] | None = None
        self.tunnelAuthority = ""
        #: The TLS server side made ready for the tunnel before its C{200}
        #: (a decrypted live host's, minted first), if any.
        self.tunnelTLS: Any = None
        #: The connection's one timer (see L{_deadline}).
        self.idleTimer = IdleTimer(self.reactor, self._deadline, self._idleTimeout)
        self._partialStart = 0.0
        self._lastActive = 0.0
        #: When the request head being read began (L{None} between heads or
        #: while an exchange runs): it must be whole within the header timeout.
        self.headStarted: float | None = None
        #: A site's CONNECT (or a decrypted live host's) whose TLS handshake
        #: hasn't finished: its head, URL, start, server and whether it is a
        #: live host's, for the entry written if it fails.
        self._handshake: tuple[RequestHead, str, float, tuple[str, int], bool] | None = None
        #: The exchange's connection is closed once it ends (the request
        #: said so, or the answer is framed by the close).
        self.closeAfter = False
        #: The answer comes chunked and the browser speaks HTTP/1.0, which
        #: has no chunks: it gets the body's bytes, ended by the close.
        self.dechunk = False
        #: What is gathered for one write (see L{gather}), or L{None}.
        self._batch: list[bytes] | None = None
        #: The connection's HTTP/2 side, once its TLS handshake chose C{h2}.
        self.h2: H2Connection | None = None

    # -- connection ---------------------------------------------------------------

    def connectionMade(self) -> None:
        noDelay(self.transport)
        self.gate = Gate(self.transport)
        self.connectionId = self.proxy.nextConnectionId()
        peer = self.transport.getPeer()
        self.client = hostPort(getattr(peer, "host", "?"), getattr(peer, "port", 0))
        own = self.transport.getHost()
        if hasattr(own, "port"):
            self.proxy.policy.addListener(own.host, own.port)
        self.reader = RequestReader(
            forwardProxy=self.state == FORWARD, scheme="https" if self.state == HTTPS_ROUTE else "http"
        )
        self.proxy.connections.add(self)
        self._lastActive = self.reactor.seconds()
        self.idleTimer.arm()

    def dataReceived(self, data: bytes) -> None:
        if self.h2 is not None:
            self.h2.dataReceived(data)
            return
        if self.rawPeer is not None:
            self._lastActive = self.reactor.seconds()
            self.rawPeer.browserRaw(data)
            return
        if self.closing:
            return
        if self.state == TUNNEL_OPENING:
            self._tunnelBegins(data)
            return
        now = self.reactor.seconds()
        self._lastActive = now
        idle = self.reader.idle
        if self.headStarted is None and self.exchange is None and idle and not self.queue:
            self.headStarted = now
            self.idleTimer.arm()
        # An exchange starts with its request's first byte: the first head
        # read from this data started when the reader last had nothing.
        self._take(self.reader.feed(data), now if idle else self._partialStart, now)
        self.pump()

    def _take(self, events: list[Event], startedAt: float, now: float) -> None:
        """
        Queue what the reader read, each event with when it started.
        """
        for event in events:
            if isinstance(event, RequestHead):
                self.queue.append((event, startedAt))
                startedAt = now
            else:
                self.queue.append((event, now))
        self._partialStart = startedAt

    def connectionLost(self, reason: Failure = error.ConnectionDone()) -> None:  # type: ignore[assignment]
        self.gone = True
        self.idleTimer.stop()
        self.proxy.connections.discard(self)
        if self.h2 is not None:
            self.h2.connectionLost(reason)
            return
        if self._handshake is not None:
            self._handshakeFailed(
                "the browser closed the tunnel before sending anything into it"
                if self.state == TUNNEL_OPENING else _handshakeLoss(reason)
            )
        if self.rawPeer is not None:
            self.rawPeer.browserLost(reason)
        elif self.exchange is not None:
            self.exchange.browserLost(reason)

    def touch(self, now: float) -> None:
        """
        Something passed on this connection at C{now} (the server's side
        counts too): the idle timeout starts again.
        """
        self._lastActive = now

    def wakeBy(self, when: float) -> None:
        """
        Have the connection's one timer fire by C{when} (an exchange whose
        answer's head came and whose body hasn't ended: its head line is due).
        """
        self.idleTimer.arm(when)

    def _deadline(self) -> float | None:
        """
        When this connection's timer should act: a head begun must be whole
        within the header timeout; an exchange (or a raw relay of one) may be
        silent for the idle timeout; a connection between requests for
        L{BROWSER_IDLE_TIMEOUT} (or the idle timeout, when shorter). A blind
        tunnel keeps its own timer (its relay's).
        """
        if isinstance(self.rawPeer, Tunnel) or self.h2 is not None:
            return None
        if self.exchange is None and self.rawPeer is None and self.headStarted is not None:
            return self.headStarted + self.proxy.headerTimeout
        exchange = self.exchange
        if exchange is not None and exchange.headDue is not None:
            return min(exchange.headDue, self._lastActive + self.proxy.idleTimeout)
        if exchange is not None or self.rawPeer is not None:
            return self._lastActive + self.proxy.idleTimeout
        return self._lastActive + min(BROWSER_IDLE_TIMEOUT, self.proxy.idleTimeout)

    def _idleTimeout(self) -> None:
        if self.gone or self.closing:
            return
        deadline = self._deadline()
        if deadline is None:
            return
        now = self.reactor.seconds()
        exchange = self.exchange
        if exchange is not None and exchange.headDue is not None and now >= exchange.headDue:
            # An answer still streaming a second after its head: its head
            # line now (the timer then goes back to the idle timeout).
            exchange.logHead()
            self.idleTimer.arm()
            return
        if now < deadline:
            self.idleTimer.arm()
            return
        peer = self.exchange if self.exchange is not None else self.rawPeer
        if peer is not None:
            peer.timedOut(
                f"the server sent nothing for {self.proxy.idleTimeout:g} seconds (see --idle-timeout)"
            )
        elif self.headStarted is not None:
            self._headTimedOut(now)
        else:
            if self._handshake is not None:
                self._handshakeFailed(
                    f"the browser sent nothing into the tunnel within {BROWSER_IDLE_TIMEOUT:g} seconds"
                    if self.state == TUNNEL_OPENING else
                    f"the browser did not finish the TLS handshake within {BROWSER_IDLE_TIMEOUT:g} seconds"
                )
            self.transport.loseConnection()

    def _headTimedOut(self, now: float) -> None:
        """
        The browser began a request head and didn't finish it in time: C{408},
        logged C{_refused} with what of the request line could be read.
        """
        reason = (f"the request head did not arrive whole within "
                  f"{self.proxy.headerTimeout:g} seconds (see --header-timeout)")
        buffered = self.reader.leftover()
        at = self.headStarted if self.headStarted is not None else now
        self.headStarted = None
        self._refuseUnread(buffered, at, REQUEST_TIMEOUT, reason)

    def close(self) -> None:
        if self.h2 is not None:
            self.closing = True
            self.h2.close()
            return
        if self._handshake is not None:
            # Only the proxy stopping closes a connection in its handshake.
            self._handshakeFailed(REASON_STOPPED)
        self.idleTimer.cancel()
        self.closing = True
        self.queue.clear()
        self.transport.loseConnection()

    # -- reading requests -----------------------------------------------------------

    def pump(self) -> None:
        while self.queue and not self.closing and self.rawPeer is None:
            event, at = self.queue[0]
            exchange = self.exchange
            if exchange is not None:
                if exchange.requestDone:
                    self.gate.hold(BUSY)
                    return
                if not exchange.ready:
                    if len(self.queue) > 1 or not isinstance(event, EndOfMessage):
                        # More than the request's end waits: stop reading
                        # until it can go up. (Reading on past a lone end
                        # lets a browser that leaves meanwhile be noticed.)
                        self.gate.hold(CONNECTING)
                    return
                self.queue.popleft()
                exchange.fromBrowser(event)
                continue
            self.queue.popleft()
            if self.discarding:
                if isinstance(event, EndOfMessage):
                    self.discarding = False
                if isinstance(event, (Body, EndOfMessage)):
                    continue
            if isinstance(event, RequestHead):
                self.headStarted = None
                self._request(event, at)
            elif isinstance(event, Refused):
                self._malformed(event, at)
            elif isinstance(event, Incomplete):
                self.close()
        if self.exchange is None and not self.queue and self.rawPeer is None and not self.closing:
            if self.gate.reasons:
                self.gate.release(BUSY, CONNECTING)
            if self.reader.paused:
                # An Upgrade the server declined: read on.
                now = self.reactor.seconds()
                self._take(self.reader.resume(), now, now)
                if self.queue:
                    self.pump()

    def exchangeReady(self, exchange: IRawPeer) -> None:
        if exchange is self.exchange:
            if self.gate.reasons:
                self.gate.release(CONNECTING)
            self.pump()

    def exchangeDone(self, exchange: IRawPeer, cut: bool) -> None:
        if exchange is not self.exchange:
            return
        if self.rawPeer is exchange:
            return
        self.exchange = None
        if cut or self.closeAfter or self.gone:
            self.close()
            return
        if self.gate.reasons:
            self.gate.release(BUSY, CONNECTING)
        self._lastActive = self.reactor.seconds()
        self.pump()
        if self.exchange is None and not self.closing and not self.reader.idle and self.headStarted is None:
            # Part of the next head came while this exchange ran.
            self.headStarted = self._lastActive
        self.idleTimer.arm()

    def discardRestOfRequest(self, exchange: IRawPeer) -> None:
        self.discarding = True

    def enterRaw(self, peer: Any) -> bytes:
        """
        Hand the rest of this connection to C{peer} (a WebSocket, an answer
        that isn't HTTP, a tunnel); return the bytes already read and not yet
        relayed.
        """
        self.rawPeer = peer
        self.gate.release(BUSY, CONNECTING)
        pending = []
        for event, _ in self.queue:
            raw = getattr(event, "raw", b"")
            if raw:
                pending.append(raw)
        self.queue.clear()
        pending.append(self.reader.leftover())
        return b"".join(pending)

    # -- routing ----------------------------------------------------------------------

    def _request(self, head: RequestHead, at: float) -> None:
        if self.state == HTTP_ROUTE:
            self._redirect(head, at)
            return
        if self.state == FORWARD and head.isConnect:
            self._connect(head, at)
            return
        if self.state == FORWARD:
            host, port = head.host or "", head.port or 80
            url = head.url or ""
            scheme = url.split("://", 1)[0].lower()
        else:
            # Inside a CONNECT the mode opened (decrypted, or plain HTTP), or
            # on the HTTPS route: the request is for the origin its Host
            # names.
            scheme = "http" if self.state == PLAIN_TUNNEL else "https"
            inTunnel = self.tunnelTarget is not None
            hostAuthority = self._hostField(head) or (self.tunnelAuthority if inTunnel else head.host or "")
            url = head.url or f"{scheme}://{hostAuthority}{latin1(head.target)}"
            host = head.host or (self.tunnelTarget[0] if self.tunnelTarget is not None else "")
            port = head.port or DEFAULT_PORTS[scheme]
        malformed = self._malformedBody()
        if malformed is not None:
            self.refuse(head, url, at, malformed.status, malformed.reason, server=(host, port))
            return
        if not host:
            self.refuse(head, url, at, 403, "a request with no Host names no origin", server=(host, port))
            return
        dispatched = dispatch(self.proxy, scheme, host, port, url, head.method, self.state != FORWARD)
        if isinstance(dispatched, Turned):
            self.refuse(head, url, at, dispatched.status, dispatched.reason, server=(host, port),
                        rules=dispatched.entries)
            return
        routed, rules = dispatched
        if routed.site is None and routed.scheme != "http" and not routed.decrypted:
            self.refuse(head, url, at, BAD_REQUEST,
                         f"an {scheme}:// URL must be requested through CONNECT, not as plain HTTP",
                         server=(host, port))
            return
        self._startExchange(head, url, routed, at, rules)

    @staticmethod
    def _hostField(head: RequestHead) -> str | None:
        for name, value in head.headers:
            if name.lower() == b"host":
                return latin1(value)
        return None

    def _malformedBody(self) -> Refused | None:
        """
        What the reader refused in the rest of the request just read (a bad
        chunk that came with its head), if it did: such a request is turned
        down before anything of it goes upstream.
        """
        for event, _ in self.queue:
            if isinstance(event, Refused):
                return event
            if isinstance(event, (RequestHead, EndOfMessage)):
                return None
        return None

    def _startExchange(self, head: RequestHead, url: str, route: Route, at: float, rules: Decision) -> None:
        exchange = Exchange(self.proxy, self, head, url, route, at, rules)
        self.exchange = exchange
        self.closeAfter = not exchange.fields.keepAlive
        self.dechunk = False
        # (The timer, set for the head, looks again when it fires: the
        # exchange's idle deadline is later.)
        exchange.start()

    # -- the answer, framed as HTTP/1.1 (IBrowserStream) ------------------------------------

    def answerInterim(self, head: ResponseHead) -> int:
        self._send(head.raw)
        return len(head.raw)

    def answerHead(self, head: ResponseHead, fields: HeadFields, headers: list[tuple[bytes, bytes]],
                   upgraded: bool) -> tuple[list[tuple[bytes, bytes]], bytes, int]:
        exchange = self.exchange
        assert exchange is not None
        request = exchange.head
        if request.version == b"HTTP/1.0" and not head.eofFramed and fields.has(b"transfer-encoding"):
            # (The reader frames a response with Transfer-Encoding either by
            # its chunks or, when chunked isn't last, by the close.)
            self.dechunk = True
            self.closeAfter = True
            headers = [field for field in headers if field[0].lower() != b"transfer-encoding"]
        if head.eofFramed:
            self.closeAfter = True
        extra: list[tuple[bytes, bytes]] = []
        if upgraded:
            extra.append((b"Connection", b"Upgrade"))
        elif self.closeAfter:
            extra.append((b"Connection", b"close"))
        elif request.version == b"HTTP/1.0":
            extra.append((b"Connection", b"keep-alive"))
        data = serializeHead(b"HTTP/1.1 %d %s" % (head.status, head.reason), headers, extra=extra)
        self._send(data)
        return headers + extra, head.reason, len(data)

    def answerData(self, data: bytes, raw: bytes) -> int:
        out = data if self.dechunk else raw
        self._send(out)
        return len(out)

    def answerEnd(self, end: EndOfMessage) -> int:
        if not end.raw or self.dechunk:
            return 0
        self._send(end.raw)
        return len(end.raw)

    def cutAnswer(self, raw: bytes) -> int | None:
        """
        The server left in the middle of the answer with C{raw} (its
        framing) read and not relayed: relayed as it came (its framing then
        tells the browser the answer is cut, and the connection closes),
        unless the answer is dechunked, where only an abort says it.
        """
        if self.dechunk:
            return None
        self._send(raw)
        self.closeAfter = True
        return len(raw)

    def _send(self, data: bytes) -> None:
        if self._batch is not None:
            self._batch.append(data)
        else:
            sendNow(self.transport, data)

    def gather(self) -> None:
        self._batch = []

    def flush(self) -> None:
        batch, self._batch = self._batch, None
        if batch:
            sendNow(self.transport, batch[0] if len(batch) == 1 else b"".join(batch))

    def abort(self) -> None:
        self.transport.abortConnection()

    def finishRaw(self) -> None:
        self.transport.loseConnection()

    def attachAnswerProducer(self, producer: Any) -> None:
        self.transport.registerProducer(producer, True)

    def detachAnswerProducer(self) -> None:
        try:
            self.transport.unregisterProducer()
        except Exception:
            pass

    # -- answers netlog gives itself ------------------------------------------------------

    def answer(self, status: int, text: str, headers: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
                close: bool = True) -> tuple[dict[str, Any], int]:
        """
        Write an answer of netlog's own; return its C{response} record and
        its size.
        """
        capture = self.proxy.mode.responseCapture(b"text/plain", self.proxy.logging)
        capture.feed(text.encode("utf-8"))
        answer, response = ownAnswer(status, text, headers, close, body=capture.record())
        if not self.gone:
            self.transport.write(answer)
        return response, len(answer)

    def _bodyFollows(self) -> bool:
        """
        Whether the request just read has a body still to come (its end is
        not the next event).
        """
        return not (self.queue and isinstance(self.queue[0][0], EndOfMessage))

    def refuse(self, head: RequestHead, url: str, at: float, status: int, reason: str,
                server: tuple[str, int], kind: str = EXCHANGE, rules: Sequence[dict[str, str]] = ()) -> None:
        response, size = self.answer(status, REFUSED_TEXT.format(reason))
        self.proxy.writer.refuse(
            self.proxy.openFields(self, kind, at, head, url, server[0], server[1], rules=rules),
            endRecord(self.reactor.seconds(), up=len(head.raw), down=size, response=response,
                      refused=(reason, status)),
        )
        self.close()

    def _refuseUnread(self, buffered: bytes, at: float, status: int, reason: str) -> None:
        """
        Turn down a request that could not be read whole (malformed, or its
        head not whole in time), logged with what of its request line and
        host could be read (see L{readRefusedRequest}).
        """
        self.headStarted = None
        scheme = "http" if self.state in (FORWARD, HTTP_ROUTE, PLAIN_TUNNEL) else "https"
        seen = readRefusedRequest(buffered, scheme, self.tunnelAuthority)
        response, size = self.answer(status, REFUSED_TEXT.format(reason))
        self.proxy.writer.refuse(
            openRecord(self.proxy.mode.name, seen["kind"], at, self.client, self.connectionId,
                       unreadRequestRecord(seen, len(buffered)), seen["host"], seen["port"]),
            endRecord(self.reactor.seconds(), up=len(buffered), down=size, response=response,
                      refused=(reason, status)),
        )
        self.close()

    def _malformed(self, event: Refused, at: float) -> None:
        self._refuseUnread(event.raw, at, event.status, event.reason)

    def _redirect(self, head: RequestHead, at: float) -> None:
        host = head.host or ""
        hostAuthority = self._hostField(head) or host
        url = f"http://{hostAuthority}{latin1(head.target)}"
        redirect = self.proxy.mode.redirect(host, head.port or 80) if host else None
        if redirect is None:
            self.refuse(head, url, at, 403, f"{host or 'a request with no Host'} is not a site",
                         server=(host, head.port or 80))
            return
        origin, signIn = redirect
        target = head.target if head.target.startswith(b"/") else b"/"
        location = origin.encode("latin-1") + target
        close = self._bodyFollows() or self.exchange is not None or not keepAlive(head.version, head.headers)
        response, size = self.answer(308, "", [(b"Location", location)], close=close)
        self.proxy.writer.refuse(
            self.proxy.openFields(self, EXCHANGE, at, head, url, host, head.port or 80, signIn=signIn),
            endRecord(self.reactor.seconds(), up=len(head.raw), down=size, response=response),
        )
        if close:
            self.close()
        elif self.queue:
            self.queue.popleft()

    # -- CONNECT --------------------------------------------------------------------------

    def _connect(self, head: RequestHead, at: float) -> None:
        if self.queue and isinstance(self.queue[0][0], EndOfMessage):
            self.queue.popleft()
        host, port = head.host or "", head.port or 443
        url = connectUrl(host, port)
        rules = self.proxy.rules.connect(host, port)
        if rules.blocked:
            self.refuse(head, url, at, rules.status, rules.why, server=(host, port), kind=TUNNEL, rules=rules.entries)
            return
        decision = self.proxy.mode.connect(host, port)
        if isinstance(decision, Refusal):
            self.refuse(head, url, at, decision.status, decision.reason, server=(host, port), kind=TUNNEL)
        elif decision in (OPEN, DECRYPT):
            self._handshake = (head, url, at, (host, port), decision == DECRYPT)
            if decision == DECRYPT:
                self._whenMinted(host, port)
            else:
                self._openSiteTunnel(host, port)
        else:
            assert decision == BLIND, decision
            Tunnel(self.proxy, self, head, url, at, rules).start()

    def _whenMinted(self, host: str, port: int) -> None:
        """
        Open a decrypted live host's tunnel once its certificate is ready:
        at once when it is cached, else after the C{200} waits for the mint
        (the browser sends its handshake only after it), with this
        connection not read meanwhile and every other connection served.
        """
        ready = self.proxy.mode.serverTLS(host)
        if not isinstance(ready, Deferred):
            self.tunnelTLS = ready
            self._openSiteTunnel(host, port)
            return
        # (What the browser sent past the CONNECT before its 200 is dropped,
        # as _openSiteTunnel drops it.)
        self.queue.clear()
        self.gate.hold(MINTING)

        def minted(tls: Any) -> None:
            self.gate.release(MINTING)
            if self.gone or self.closing:
                return
            self.tunnelTLS = tls
            self._openSiteTunnel(host, port)

        def unminted(failure: Failure) -> None:
            self.gate.release(MINTING)
            pending, self._handshake = self._handshake, None
            if pending is None or self.gone:
                return
            head, url, at, _, live = pending
            reason = f"no certificate could be minted for {host}: {failure.getErrorMessage()}"
            response, size = self.answer(502, UNREACHED_TEXT.format(reason))
            self.proxy.writer.refuse(
                self.proxy.openFields(self, TUNNEL, at, head, url, host, port, liveDecrypted=live),
                endRecord(self.reactor.seconds(), up=len(head.raw), down=size, response=response, closedBy=PROXY,
                          failed=reason, failedStatus=502),
            )
            self.close()

        ready.addCallbacks(minted, unminted)
        ready.addErrback(lambda f: _log.failure("opening the tunnel to {host}", f, host=host))

    def _openSiteTunnel(self, host: str, port: int) -> None:
        """
        Answer a CONNECT the mode opens; the browser's first byte in the
        tunnel says what it carries (see L{_tunnelBegins}).
        """
        self.transport.write(TUNNEL_ANSWER)
        leftover = self.reader.leftover()
        self.queue.clear()
        self.state = TUNNEL_OPENING
        self.tunnelTarget = (host, port)
        if leftover:
            # Bytes sent before our 200 arrived.
            self._tunnelBegins(leftover)

    def _tunnelBegins(self, data: bytes) -> None:
        """
        The browser's first bytes in a site's tunnel: a TLS handshake is
        decrypted with a certificate minted for the host; anything else is
        read as plain HTTP to the host's C{http://} origin (a C{ws://}
        WebSocket, as browsers open one through a proxy).
        """
        assert self.tunnelTarget is not None
        host, port = self.tunnelTarget
        if data[0] == TLS_HANDSHAKE:
            self.state = DECRYPTED
            self.tunnelAuthority = urlAuthority(host, port, "https")
            self.reader = RequestReader(forwardProxy=False, scheme="https")
            tls, self.tunnelTLS = self.tunnelTLS, None
            self.transport.startTLS(tls if tls is not None else self.proxy.mode.serverTLS(host))
            tls = getattr(self.transport, "protocol", None)
            if tls is not None and tls is not self:
                tls.dataReceived(data)
            return
        # No handshake to wait for: each request is an entry of its own.
        self._handshake = None
        self.state = PLAIN_TUNNEL
        self.tunnelAuthority = urlAuthority(host, port, "http")
        self.reader = RequestReader(forwardProxy=False, scheme="http")
        self.dataReceived(data)

    # -- the TLS handshake of a decrypted CONNECT ----------------------------------------

    def handshakeCompleted(self) -> None:
        """
        The browser accepted netlog's certificate: from here on each request
        is an entry of its own, read as HTTP/2 when ALPN chose C{h2}.
        """
        self._handshake = None
        if _negotiated(self.transport) == b"h2":
            self.idleTimer.cancel()
            self.h2 = H2Connection(self, self.proxy, BROWSER_IDLE_TIMEOUT)
            self.h2.start()

    def _handshakeFailed(self, reason: str) -> None:
        """
        A site's CONNECT whose TLS handshake never finished (most often a
        browser that doesn't trust netlog's CA): an entry for the tunnel,
        ended C{_failed} with C{reason}, so the log says why no request came.
        """
        pending, self._handshake = self._handshake, None
        if pending is None:
            return
        head, url, at, server, live = pending
        self.proxy.writer.refuse(
            self.proxy.openFields(self, TUNNEL, at, head, url, server[0], server[1], liveDecrypted=live),
            endRecord(self.reactor.seconds(), up=len(head.raw), down=len(TUNNEL_ANSWER),
                      response=tunnelAnswerFields(), closedBy=CLIENT, failed=reason),
        )


def _negotiated(transport: Any) -> bytes | None:
    """
    The protocol ALPN chose on C{transport} (a TLS listener's, or a
    connection that started TLS), if any.
    """
    for candidate in (transport, getattr(transport, "protocol", None)):
        chosen = getattr(candidate, "negotiatedProtocol", None)
        if chosen is not None:
            return chosen  # type: ignore[no-any-return]
    return None


#: What an alert from a browser that doesn't trust the certificate says
#: (OpenSSL's and BoringSSL's names).
_DISTRUST = ("unknown ca", "bad certificate", "certificate unknown", "unsupported certificate")


def _handshakeLoss(reason: Failure) -> str:
    """
    Why a decrypted CONNECT's TLS handshake ended before it finished, as its
    entry's C{_failed} says it.
    """
    if reason.check(SSL.Error):
        args = reason.value.args if reason.value is not None else ()
        errors = args[0] if args and isinstance(args[0], list) else []
        detail = "; ".join(str(e[-1]) for e in errors if isinstance(e, tuple) and e) or str(reason.value)
        text = f"the TLS handshake with the browser failed ({detail})"
        if any(word in detail.lower() for word in _DISTRUST):
            text += ": the browser doesn't trust netlog's CA (see netlog ca --state DIR)"
        return text
    # The TLS layer reports a close before its own end as lost, reset or
    # not: both are the browser leaving.
    return "the browser closed the connection during the TLS handshake"


class BrowserFactory(Factory):
    """
    Builds L{BrowserConnection}s for one listener.

    @ivar state: what its connections read first (L{FORWARD},
        L{HTTPS_ROUTE} or L{HTTP_ROUTE}).
    """

    #: No "Starting factory" lines: the supervisor says where it listens.
    noisy = False

    def __init__(self, proxy: IEngine, state: str) -> None:
        self.proxy = proxy
        self.state = state

    def buildProtocol(self, addr: Any) -> BrowserConnection:
        protocol = BrowserConnection(self.proxy, self.state)
        protocol.factory = self
        return protocol
