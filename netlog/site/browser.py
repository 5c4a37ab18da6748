"""
The browser's side of the site proxy: one protocol for every listener.

On the forward port it reads absolute-form requests and CONNECTs: a site's
CONNECT is decrypted with a minted certificate and read on as requests; a
live host's CONNECT becomes a blind tunnel; anything else is refused. On the
HTTPS route (TLS already undone by the listener) it serves the sites by
C{Host}; on the HTTP route it answers C{308} to the site's HTTPS origin.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from OpenSSL import SSL
from twisted.internet import error
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
    keepAlive,
    readRefusedRequest,
)
from netlog.core.logline import REASON_STOPPED
from netlog.net.connect import describeFailure
from netlog.net.relay import (
    CLIENT,
    TUNNEL_ANSWER,
    Gate,
    Relay,
    RelayResult,
    RelayServerProtocol,
    tunnelAnswerFields,
)
from netlog.net.send import noDelay
from netlog.core.records import (
    EXCHANGE,
    REFUSED_TEXT,
    TUNNEL,
    UNANSWERED_TEXT,
    UNREACHED_TEXT,
    connectUrl,
    endRecord,
    openRecord,
    ownAnswer,
    requestRecord,
    unreadRequestRecord,
)
from netlog.site.config import DEFAULT_PORTS, Site
from netlog.site.exchange import PROXY_NAME, DestinationRefused, Exchange, Route, latin1
from netlog.site.tls import HostTLS

if TYPE_CHECKING:
    from netlog.site.proxy import SiteProxy

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

#: Seconds a browser connection may sit idle between requests.
BROWSER_IDLE_TIMEOUT = 120.0
#: The status a browser gets when its request head isn't whole in time.
REQUEST_TIMEOUT = 408

# Why the browser's connection is not being read.
CONNECTING = "connecting"
BUSY = "busy"



def authority(host: str, port: int, scheme: str) -> str:
    if ":" in host:
        host = f"[{host}]"
    return host if port == DEFAULT_PORTS[scheme] else f"{host}:{port}"


@implementer(IHandshakeListener)
class BrowserConnection(Protocol):
    """
    One connection from the browser, on any of the listeners.

    @ivar mode: L{FORWARD}, L{HTTPS_ROUTE}, L{HTTP_ROUTE}; once a site's
        CONNECT is answered L{TUNNEL_OPENING}, then L{DECRYPTED} or
        L{PLAIN_TUNNEL} by the browser's first byte in it.
    """

    transport: Any

    def __init__(self, proxy: SiteProxy, mode: str) -> None:
        self.proxy = proxy
        self.reactor = proxy.reactor
        self.mode = mode
        self.queue: deque[tuple[Event, float]] = deque()
        self.exchange: Exchange | None = None
        self.rawPeer: Any = None
        self.closing = False
        self.gone = False
        self.discarding = False
        #: The host and port a site's CONNECT named.
        self.tunnelTarget: tuple[str, int] | None = None
        self.tunnelAuthority = ""
        self._idleCall: Any = None
        self._partialStart = 0.0
        self._lastActive = 0.0
        #: When the request head being read began (L{None} between heads or
        #: while an exchange runs): it must be whole within the header timeout.
        self.headStarted: float | None = None
        #: A site's CONNECT whose TLS handshake hasn't finished: its head,
        #: URL, start and server, for the entry written if it fails.
        self._handshake: tuple[RequestHead, str, float, tuple[str, int]] | None = None

    # -- connection ---------------------------------------------------------------

    def connectionMade(self) -> None:
        noDelay(self.transport)
        self.gate = Gate(self.transport)
        self.connectionId = self.proxy.nextConnectionId()
        peer = self.transport.getPeer()
        self.client = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', 0)}"
        own = self.transport.getHost()
        if hasattr(own, "port"):
            self.proxy.policy.addListener(own.host, own.port)
        self.reader = RequestReader(
            forwardProxy=self.mode == FORWARD, scheme="https" if self.mode == HTTPS_ROUTE else "http"
        )
        self.proxy.connections.add(self)
        self._lastActive = self.reactor.seconds()
        self._arm()

    def dataReceived(self, data: bytes) -> None:
        if self.rawPeer is not None:
            self._lastActive = self.reactor.seconds()
            self.rawPeer.browserRaw(data)
            return
        if self.closing:
            return
        if self.mode == TUNNEL_OPENING:
            self._tunnelBegins(data)
            return
        now = self.reactor.seconds()
        self._lastActive = now
        if self.headStarted is None and self.exchange is None and self.reader.idle and not self.queue:
            self.headStarted = now
            self._arm()
        # An exchange starts with its request's first byte: the first head
        # read from this data started when the reader last had nothing.
        startedAt = now if self.reader.idle else self._partialStart
        self._take(self.reader.feed(data), startedAt, now)
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
        self._cancelIdle()
        self.proxy.connections.discard(self)
        if self._handshake is not None:
            self._handshakeFailed(
                "the browser closed the tunnel before sending anything into it"
                if self.mode == TUNNEL_OPENING else _handshakeLoss(reason)
            )
        if self.rawPeer is not None:
            self.rawPeer.browserLost(reason)
        elif self.exchange is not None:
            self.exchange.browserLost(reason)

    def touch(self) -> None:
        """
        Something passed on this connection (the server's side counts too):
        the idle timeout starts again.
        """
        self._lastActive = self.reactor.seconds()

    def _deadline(self) -> float | None:
        """
        When this connection's timer should act: a head begun must be whole
        within the header timeout; an exchange (or a raw relay of one) may be
        silent for the idle timeout; a connection between requests for
        L{BROWSER_IDLE_TIMEOUT}. A live host's tunnel keeps its own timer
        (its L{Relay}'s).
        """
        if isinstance(self.rawPeer, LiveTunnel):
            return None
        if self.exchange is None and self.rawPeer is None and self.headStarted is not None:
            return self.headStarted + self.proxy.headerTimeout
        if self.exchange is not None or self.rawPeer is not None:
            return self._lastActive + self.proxy.idleTimeout
        return self._lastActive + BROWSER_IDLE_TIMEOUT

    def _arm(self) -> None:
        """
        Arm the one timer this connection has, or move it sooner (activity
        only moves C{_lastActive}; the timer looks again when it fires).
        """
        if self.gone:
            return
        deadline = self._deadline()
        if deadline is None:
            return
        delay = max(0.0, deadline - self.reactor.seconds())
        timer = self._idleCall
        if timer is None or not timer.active():
            self._idleCall = self.reactor.callLater(delay, self._idleTimeout)
        elif timer.getTime() > deadline:
            timer.reset(delay)

    def _cancelIdle(self) -> None:
        if self._idleCall is not None and self._idleCall.active():
            self._idleCall.cancel()
        self._idleCall = None

    def _idleTimeout(self) -> None:
        self._idleCall = None
        if self.gone or self.closing:
            return
        deadline = self._deadline()
        if deadline is None:
            return
        now = self.reactor.seconds()
        if now < deadline:
            self._arm()
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
                    if self.mode == TUNNEL_OPENING else
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
        if self._handshake is not None:
            # Only the proxy stopping closes a connection in its handshake.
            self._handshakeFailed(REASON_STOPPED)
        self._cancelIdle()
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
            self.gate.release(BUSY)
            self.gate.release(CONNECTING)
            if self.reader.paused:
                # An Upgrade the server declined: read on.
                now = self.reactor.seconds()
                self._take(self.reader.resume(), now, now)
                if self.queue:
                    self.pump()

    def exchangeReady(self, exchange: Exchange) -> None:
        if exchange is self.exchange:
            self.gate.release(CONNECTING)
            self.pump()

    def exchangeDone(self, exchange: Exchange, close: bool) -> None:
        if exchange is not self.exchange:
            return
        if self.rawPeer is exchange:
            return
        self.exchange = None
        if close or self.gone:
            self.close()
            return
        self.gate.release(BUSY)
        self.gate.release(CONNECTING)
        self._lastActive = self.reactor.seconds()
        self.pump()
        if self.exchange is None and not self.closing and not self.reader.idle and self.headStarted is None:
            # Part of the next head came while this exchange ran.
            self.headStarted = self._lastActive
        self._arm()

    def discardRestOfRequest(self, exchange: Exchange) -> None:
        self.discarding = True

    def enterRaw(self, peer: Any) -> bytes:
        """
        Hand the rest of this connection to C{peer} (a WebSocket, an answer
        that isn't HTTP, a tunnel); return the bytes already read and not yet
        relayed.
        """
        self.rawPeer = peer
        self.gate.release(BUSY)
        self.gate.release(CONNECTING)
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
        config = self.proxy.config
        if self.mode == HTTP_ROUTE:
            self._redirect(head, at)
            return
        if self.mode == FORWARD:
            if head.isConnect:
                self._connect(head, at)
                return
            host, port = head.host or "", head.port or 80
            url = head.url or ""
            scheme = url.split("://", 1)[0]
            site = config.siteAt(scheme, host, port)
            if site is not None:
                route = self._siteRoute(site, scheme, host, port)
            elif config.isLive(host):
                route = Route(None, scheme, host, port, f"{scheme}://{authority(host, port, scheme)}", host)
            else:
                self._refuse(head, url, at, 403,
                             f"{scheme}://{authority(host, port, scheme)} is not a site's origin "
                             f"or an allowed live host", server=(host, port))
                return
            self._startExchange(head, url, route, at)
            return
        # Inside a site's CONNECT (decrypted, or plain HTTP), or on the HTTPS
        # route: the request is for the origin its Host names.
        scheme = "http" if self.mode == PLAIN_TUNNEL else "https"
        inTunnel = self.tunnelTarget is not None
        hostAuthority = self._hostField(head) or (self.tunnelAuthority if inTunnel else head.host or "")
        url = head.url or f"{scheme}://{hostAuthority}{latin1(head.target)}"
        host = head.host or (self.tunnelTarget[0] if self.tunnelTarget is not None else "")
        port = head.port or DEFAULT_PORTS[scheme]
        site = config.siteAt(scheme, host, port) if host else None
        if site is None:
            named = f"{scheme}://{authority(host, port, scheme)}" if host else "a request with no Host"
            self._refuse(head, url, at, 403, f"{named} is not a site's origin", server=(host, port))
            return
        self._startExchange(head, url, self._siteRoute(site, scheme, host, port), at)

    @staticmethod
    def _hostField(head: RequestHead) -> str | None:
        for name, value in head.headers:
            if name.lower() == b"host":
                return latin1(value)
        return None

    def _siteRoute(self, site: Site, scheme: str, host: str, port: int) -> Route:
        return self.proxy.siteRoute(site, scheme, host, port)

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

    def _startExchange(self, head: RequestHead, url: str, route: Route, at: float) -> None:
        malformed = self._malformedBody()
        if malformed is not None:
            self._refuse(head, url, at, malformed.status, malformed.reason, server=(route.host, route.port))
            return
        exchange = Exchange(self.proxy, self, head, url, route, at)
        self.exchange = exchange
        self._lastActive = self.reactor.seconds()
        self._arm()
        exchange.start()

    # -- answers netlog gives itself ------------------------------------------------------

    def _answer(self, status: int, text: str, headers: list[tuple[bytes, bytes]] = (),  # type: ignore[assignment]
                close: bool = True) -> tuple[dict[str, Any], int]:
        """
        Write an answer of netlog's own; return its C{response} record and
        its size.
        """
        capture = self.proxy.responseCapture(b"text/plain")
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

    def _openFields(self, head: RequestHead, url: str, at: float, kind: str,
                    server: tuple[str, int], signIn: frozenset[str] = frozenset()) -> dict[str, Any]:
        return openRecord(PROXY_NAME, kind, at, self.client, self.connectionId, requestRecord(head, url, signIn),
                          server[0], server[1])

    def _refuse(self, head: RequestHead, url: str, at: float, status: int, reason: str,
                server: tuple[str, int], kind: str = EXCHANGE) -> None:
        response, size = self._answer(status, REFUSED_TEXT.format(reason))
        self.proxy.writer.refuse(
            self._openFields(head, url, at, kind, server),
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
        scheme = "http" if self.mode in (FORWARD, HTTP_ROUTE, PLAIN_TUNNEL) else "https"
        seen = readRefusedRequest(buffered, scheme, self.tunnelAuthority)
        response, size = self._answer(status, REFUSED_TEXT.format(reason))
        self.proxy.writer.refuse(
            openRecord(PROXY_NAME, seen["kind"], at, self.client, self.connectionId,
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
        origin = self.proxy.config.redirectFor(host, head.port or 80) if host else None
        site = self.proxy.config.siteAt(origin.scheme, origin.host, origin.port) if origin is not None else None
        if site is None or origin is None:
            self._refuse(head, url, at, 403, f"{host or 'a request with no Host'} is not a site",
                         server=(host, head.port or 80))
            return
        target = head.target if head.target.startswith(b"/") else b"/"
        location = str(origin).encode("latin-1") + target
        close = self._bodyFollows() or self.exchange is not None or not keepAlive(head.version, head.headers)
        response, size = self._answer(308, "", [(b"Location", location)], close=close)
        self.proxy.writer.refuse(
            self._openFields(head, url, at, EXCHANGE, (host, head.port or 80), site.signInHeaders),
            endRecord(self.reactor.seconds(), up=len(head.raw), down=size, response=response),
        )
        if close:
            self.close()
        elif self.queue:
            self.queue.popleft()

    def refuseExchange(self, exchange: Exchange, status: int, reason: str) -> None:
        """
        The destination policy refused where the exchange would go.
        """
        exchange.done = True
        self.exchange = None
        self._refuse(exchange.head, exchange.url, exchange.started, status, reason,
                     server=(exchange.route.host, exchange.route.port))

    def failBeforeAnswer(self, exchange: Exchange, status: int, reason: str) -> None:
        """
        No upstream connection could be made: the browser gets C{status}; the
        entry is written whole, C{_failed}.
        """
        self.exchange = None
        response, size = self._answer(status, UNREACHED_TEXT.format(reason))
        self.proxy.writer.refuse(
            exchange._openFields(),
            endRecord(self.reactor.seconds(), up=len(exchange.head.raw), down=size, response=response,
                      failed=reason, failedStatus=status),
        )
        self.close()

    def failAfterOpen(self, exchange: Exchange, status: int, reason: str, refused: bool = False) -> None:
        """
        The upstream went away before answering (or the request's body turned
        out malformed, C{refused}): the browser gets C{status}, the open entry
        ends C{_failed} (or C{_refused}).
        """
        self.exchange = None
        response, size = self._answer(status, (REFUSED_TEXT if refused else UNANSWERED_TEXT).format(reason))
        exchange.response = response
        exchange.responseBody = None
        exchange.down += size
        if refused:
            fields = exchange.endFields(refused=(reason, status))
        else:
            fields = exchange.endFields(failed=reason, failedStatus=status)
        self.proxy.writer.end(exchange.id, fields)
        self.close()

    # -- CONNECT --------------------------------------------------------------------------

    def _connect(self, head: RequestHead, at: float) -> None:
        if self.queue and isinstance(self.queue[0][0], EndOfMessage):
            self.queue.popleft()
        host, port = head.host or "", head.port or 443
        url = connectUrl(host, port)
        config = self.proxy.config
        if config.tunnelsTo(host, port):
            self._handshake = (head, url, at, (host, port))
            self._openSiteTunnel(host, port)
        elif config.isLive(host):
            if port not in config.liveConnectPorts:
                allowed = ", ".join(str(p) for p in sorted(config.liveConnectPorts))
                self._refuse(head, url, at, 403,
                             f"CONNECT to port {port} of a live host is not allowed (allowed: {allowed}; "
                             f"see [live] connect_ports in sites.toml)",
                             server=(host, port), kind=TUNNEL)
                return
            LiveTunnel(self.proxy, self, head, url, at).start()
        else:
            self._refuse(head, url, at, 403, f"{host} is not a site or an allowed live host",
                         server=(host, port), kind=TUNNEL)

    def _openSiteTunnel(self, host: str, port: int) -> None:
        """
        Answer a site's CONNECT; the browser's first byte in the tunnel says
        what it carries (see L{_tunnelBegins}).
        """
        self.transport.write(TUNNEL_ANSWER)
        leftover = self.reader.leftover()
        self.queue.clear()
        self.mode = TUNNEL_OPENING
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
            self.mode = DECRYPTED
            self.tunnelAuthority = authority(host, port, "https")
            self.reader = RequestReader(forwardProxy=False, scheme="https")
            assert self.proxy.ca is not None
            self.transport.startTLS(HostTLS(self.proxy.ca, host))
            tls = getattr(self.transport, "protocol", None)
            if tls is not None and tls is not self:
                tls.dataReceived(data)
            return
        # No handshake to wait for: each request is an entry of its own.
        self._handshake = None
        self.mode = PLAIN_TUNNEL
        self.tunnelAuthority = authority(host, port, "http")
        self.reader = RequestReader(forwardProxy=False, scheme="http")
        self.dataReceived(data)

    # -- the TLS handshake of a decrypted CONNECT ----------------------------------------

    def handshakeCompleted(self) -> None:
        """
        The browser accepted netlog's certificate: from here on each request
        is an entry of its own.
        """
        self._handshake = None

    def _handshakeFailed(self, reason: str) -> None:
        """
        A site's CONNECT whose TLS handshake never finished (most often a
        browser that doesn't trust netlog's CA): an entry for the tunnel,
        ended C{_failed} with C{reason}, so the log says why no request came.
        """
        pending, self._handshake = self._handshake, None
        if pending is None:
            return
        head, url, at, server = pending
        self.proxy.writer.refuse(
            self._openFields(head, url, at, TUNNEL, server),
            endRecord(self.reactor.seconds(), up=len(head.raw), down=len(TUNNEL_ANSWER),
                      response=tunnelAnswerFields(), closedBy=CLIENT, failed=reason),
        )


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


#: Bytes a browser may send into a tunnel before it is connected; reading
#: stops past them until it is.
MAX_EARLY_BYTES = 64 * 1024


class LiveTunnel:
    """
    A live host's CONNECT: a blind tunnel, kept as a connection entry.
    """

    def __init__(self, proxy: SiteProxy, browser: BrowserConnection, head: RequestHead, url: str,
                 at: float) -> None:
        self.proxy = proxy
        self.browser = browser
        self.head = head
        self.url = url
        self.started = at
        self.host = head.host or ""
        self.port = head.port or 443
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
        route = Route(None, "tcp", self.host, self.port, "", self.host)
        d = self.proxy.resolveFor(route)
        d.addCallback(self._resolved)
        d.addCallbacks(self._connected, self._failed)
        d.addErrback(lambda f: _log.failure("the live tunnel to {host} failed", f, host=self.host))

    def _resolved(self, address: str) -> Any:
        self.address = address
        return self.proxy.connectRaw(address, self.port, RelayServerProtocol)

    def _openFields(self) -> dict[str, Any]:
        browser = self.browser
        return openRecord(PROXY_NAME, TUNNEL, self.started, browser.client, browser.connectionId,
                          requestRecord(self.head, self.url), self.host, self.port, self.address)

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
        # Buffered (not sent at once): it leaves after relay.start has
        # written the tunnel's open line, in this same turn.
        browser.transport.write(TUNNEL_ANSWER)
        pending = b"".join(self._early) + browser.enterRaw(self)
        self._early = []
        relay = Relay(self.proxy.reactor, browser.transport, browser.gate, self._ended, self._opened,
                      idleTimeout=self.proxy.idleTimeout)
        self.relay = relay
        protocol.relay = relay
        relay.start(protocol.transport, pending)
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
            browser._refuse(self.head, self.url, self.started, 403, str(failure.value),
                            server=(self.host, self.port), kind=TUNNEL)
            return
        reason, status = describeFailure(failure, self.host, self.port)
        response, size = browser._answer(status, UNREACHED_TEXT.format(reason))
        self.proxy.writer.refuse(self._openFields(), endRecord(
            self.proxy.reactor.seconds(), up=len(self.head.raw), down=size, response=response,
            failed=reason, failedStatus=status,
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


class BrowserFactory(Factory):
    """
    Builds L{BrowserConnection}s for one listener.
    """

    def __init__(self, proxy: SiteProxy, mode: str) -> None:
        self.proxy = proxy
        self.mode = mode

    def buildProtocol(self, addr: Any) -> BrowserConnection:
        protocol = BrowserConnection(self.proxy, self.mode)
        protocol.factory = self
        return protocol
