"""
The test site the browser suite drives: a small shop on loopback, over HTTP and
HTTPS, with one page for each thing a grader reads out of C{network.har}.

It shares no code with netlog's proxies on purpose: it is the backend the
proxies stand in front of, and a bug the two shared would hide itself.

Run it as a process::

    python -m tests.browser.site_app --http 7770 --https 7771 [--cert-dir DIR]

It prints one line, C{ready http=PORT https=PORT}, once both listen.

Pages (each one a person opens; every page says C{<link rel=icon href=data:,>}
so Chromium asks for no favicon):

    /                 the front page: links, the logo, a search form (GET)
    /login            a form; its POST is answered 302 to /account with a
                      cookie (Expires, HttpOnly, Path)
    /account          reads that cookie, sets another (Expires, HttpOnly, Path)
    /cart             a button whose script POSTs JSON to /api/cart
    /api/cart         gzipped JSON, sent chunked
    /upload           a multipart form with a file; its POST says what came
    /logo.png         an image
    /latin1           an ISO-8859-1 page that sets a cookie
    /big.txt          text/plain over 1 MB
    /news             HTML sent with Content-Encoding: br
    /chat             a page that talks to /ws: text, binary, one fragmented
                      message back, then a clean close
    /echo             a page that sends /ws a short text, a 100 kB text and
                      some bytes, one at a time, checks each echo, then closes
    /ws               a WebSocket echo (frames handled by wsproto)
    /wsz              the same, agreeing to permessage-deflate
    /messages         a page that sends /wsz a short text, bytes, the request
                      for a fragmented answer and a 1.2 MB text, one at a
                      time, then closes with 1000 "done"
    /search?q=...     echoes the decoded query
    /cross-site?to=URL  a page that POSTs to each URL as another site's page
                      can (no-cors fetch: text, form and JSON bodies)
"""

from __future__ import annotations

import argparse
import datetime
import email.parser
import email.policy
import gzip
import html
import ipaddress
import json
import os
import struct
import sys
import zlib
from typing import Any

import brotli
from twisted.internet import reactor as _reactor
from twisted.internet import ssl
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.protocols import policies, tls
from twisted.python.failure import Failure
from twisted.web import resource, server
from twisted.web.server import NOT_DONE_YET, Request
from wsproto import ConnectionType
from wsproto.connection import Connection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Ping,
    TextMessage,
)
from wsproto.extensions import PerMessageDeflate
from wsproto.handshake import H11Handshake
from wsproto.utilities import RemoteProtocolError

_log = Logger()

#: The names the self-signed certificate is good for.
CERT_NAMES = ("shop.test", "localhost", "127.0.0.1")

#: What the login's cookie says; C{%7C} is C{|} URL-encoded (graders decode it).
SESSION_COOKIE = "session=alice%7C42; Expires=Wed, 21 Oct 2037 07:28:00 GMT; HttpOnly; Path=/"
#: What the account page sets.
ACCOUNT_COOKIE = "last_seen=account; Expires=Thu, 01 Jan 2037 00:00:00 GMT; HttpOnly; Path=/account"
#: What the Latin-1 page sets.
LANG_COOKIE = "lang=fr-FR; Path=/"

#: The JSON the cart answers with (besides echoing the order).
CART_NOTE = "café au lait, 2 × €3"
#: The Latin-1 page's words (every one outside ASCII, inside Latin-1).
LATIN1_WORDS = "Crème brûlée, £5, ½ price, naïve façade, ¿qué?"
#: How big /big.txt is: over netlog's 1 MB answer limit.
BIG_SIZE = 1_200_000
#: The text of the message /ws sends back in fragments, and its pieces.
FRAGMENTS = ("part one|", "part two|", "part three")
#: What the page sends to ask for the fragmented message.
FRAGMENT_REQUEST = "fragments please"
#: The short text /echo sends.
ECHO_TEXT = "hello over a plain tunnel"
#: How long /echo's large text message is: many frames' worth of TCP segments.
ECHO_BIG_SIZE = 100_000
#: The bytes /echo sends as a binary message.
ECHO_BYTES = (0, 1, 2, 254, 255)
#: The short text /messages sends (over /wsz, permessage-deflate agreed).
MESSAGES_TEXT = "hello deflate"
#: How long /messages's large text message is: over netlog's 1 MB per message.
MESSAGES_BIG_SIZE = 1_200_000


def bigText() -> bytes:
    """
    /big.txt's body: numbered lines, so a cut shows where it fell.
    """
    out = bytearray()
    n = 0
    while len(out) < BIG_SIZE:
        out += b"line %06d of the big text answer, plain ASCII\n" % n
        n += 1
    return bytes(out[:BIG_SIZE])


def logoPNG() -> bytes:
    """
    A 16x16 PNG, made by hand (no imaging library needed).
    """
    width = height = 16
    raw = b"".join(
        b"\x00" + b"".join(bytes((x * 16, y * 16, 160)) for x in range(width)) for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def page(title: str, body: str) -> bytes:
    """
    A whole UTF-8 HTML page.
    """
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        '<link rel="icon" href="data:,">'
        f"<title>{html.escape(title)}</title></head><body>"
        f"<h1>{html.escape(title)}</h1>{body}</body></html>"
    ).encode("utf-8")


def htmlAnswer(request: Request, title: str, body: str) -> bytes:
    request.setHeader(b"content-type", b"text/html; charset=utf-8")
    return page(title, body)


def cookies(request: Request) -> dict[str, str]:
    """
    The request's cookies by name (raw values).
    """
    out: dict[str, str] = {}
    for header in request.requestHeaders.getRawHeaders(b"cookie", []):
        for part in header.decode("latin-1").split(";"):
            name, _, value = part.strip().partition("=")
            if name:
                out[name] = value
    return out


class Front(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        return htmlAnswer(
            request,
            "Netlog test shop",
            '<img id="logo" src="/logo.png" alt="logo" width=16 height=16>'
            "<ul>"
            '<li><a id="to-login" href="/login">Sign in</a></li>'
            '<li><a id="to-cart" href="/cart">Cart</a></li>'
            '<li><a id="to-upload" href="/upload">Upload a file</a></li>'
            '<li><a id="to-latin1" href="/latin1">Latin-1 page</a></li>'
            '<li><a id="to-big" href="/big.txt">Big text</a></li>'
            '<li><a id="to-news" href="/news">News (brotli)</a></li>'
            '<li><a id="to-chat" href="/chat">Chat</a></li>'
            "</ul>"
            '<form id="search" action="/search" method="get">'
            '<input type="hidden" name="cat" value="home &amp; garden">'
            '<input id="q" name="q"><button id="go" type="submit">Search</button></form>',
        )


class Login(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        return htmlAnswer(
            request,
            "Sign in",
            '<form id="login" action="/login" method="post">'
            '<label>User <input id="username" name="username"></label>'
            '<label>Password <input id="password" name="password" type="password"></label>'
            '<button id="submit" type="submit">Sign in</button></form>',
        )

    def render_POST(self, request: Request) -> bytes:
        user = (request.args.get(b"username") or [b""])[0]
        if not user:
            request.setResponseCode(400)
            return htmlAnswer(request, "Sign in failed", "<p>no user name</p>")
        request.setResponseCode(302)
        request.setHeader(b"location", b"/account")
        request.setHeader(b"set-cookie", SESSION_COOKIE.encode("ascii"))
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        return b'<a href="/account">Your account</a>'


class Account(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        session = cookies(request).get("session")
        if session is None:
            request.setResponseCode(403)
            return htmlAnswer(request, "Not signed in", '<a href="/login">Sign in</a>')
        request.setHeader(b"set-cookie", ACCOUNT_COOKIE.encode("ascii"))
        user = session.split("%7C")[0]
        return htmlAnswer(
            request,
            "Your account",
            f'<p id="who">Signed in as {html.escape(user)}</p>'
            '<img src="/logo.png" alt="logo"><a id="home" href="/">Shop</a>',
        )


class Cart(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        return htmlAnswer(
            request,
            "Cart",
            '<button id="add" type="button">Add to cart</button><pre id="result"></pre>'
            "<script>"
            "document.getElementById('add').addEventListener('click', async () => {"
            " const r = await fetch('/api/cart', {method: 'POST',"
            "  headers: {'Content-Type': 'application/json'},"
            "  body: JSON.stringify({item: 'mug', qty: 2, note: 'gift wrap ✓'})});"
            " const j = await r.json();"
            " document.getElementById('result').textContent = 'ok ' + j.total + ' ' + j.note;"
            "});"
            "</script>",
        )


class CartAPI(resource.Resource):
    isLeaf = True

    def render_POST(self, request: Request) -> int | bytes:
        try:
            content: Any = request.content
            order = json.loads(content.read().decode("utf-8"))
            qty = int(order["qty"])
            item = str(order["item"])
        except (ValueError, KeyError, TypeError):
            request.setResponseCode(400)
            request.setHeader(b"content-type", b"application/json")
            return b'{"ok": false}'
        answer = {"ok": True, "item": item, "qty": qty, "total": f"{qty * 3}.00", "note": CART_NOTE}
        body = gzip.compress(json.dumps(answer, ensure_ascii=False).encode("utf-8"))
        request.setHeader(b"content-type", b"application/json; charset=utf-8")
        request.setHeader(b"content-encoding", b"gzip")
        # No Content-Length: twisted.web sends it chunked, in three writes.
        third = len(body) // 3 + 1
        for i in range(0, len(body), third):
            request.write(body[i : i + third])
        request.finish()
        return NOT_DONE_YET


class Upload(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        return htmlAnswer(
            request,
            "Upload",
            '<form id="upload" action="/upload" method="post" enctype="multipart/form-data">'
            '<input id="title" name="title"><input id="file" name="file" type="file">'
            '<button id="send" type="submit">Upload</button></form>',
        )

    def render_POST(self, request: Request) -> bytes:
        contentType = (request.getHeader(b"content-type") or b"").decode("latin-1")
        head = f"Content-Type: {contentType}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1")
        content: Any = request.content
        content.seek(0)
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            head + content.read()
        )
        fields = []
        for part in message.iter_parts() if message.is_multipart() else []:
            name = part.get_param("name", header="content-disposition")
            data: bytes = part.get_payload(decode=True) or b""  # type: ignore[assignment]
            fileName = part.get_filename()
            if fileName is not None:
                fields.append(f"<li>{html.escape(str(name))}: file {html.escape(fileName)}, {len(data)} bytes</li>")
            else:
                fields.append(f"<li>{html.escape(str(name))}: {html.escape(data.decode('utf-8', 'replace'))}</li>")
        return htmlAnswer(request, "Uploaded", f'<ul id="fields">{"".join(fields)}</ul>')


class Logo(resource.Resource):
    isLeaf = True
    png = logoPNG()

    def render_GET(self, request: Request) -> bytes:
        request.setHeader(b"content-type", b"image/png")
        request.setHeader(b"cache-control", b"no-store")
        return self.png


class Latin1(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        request.setHeader(b"content-type", b"text/html; charset=iso-8859-1")
        request.setHeader(b"set-cookie", LANG_COOKIE.encode("ascii"))
        return (
            "<!doctype html><html><head>"
            '<link rel="icon" href="data:,"><title>Latin-1</title></head>'
            f'<body><p id="words">{LATIN1_WORDS}</p></body></html>'
        ).encode("iso-8859-1")


class Big(resource.Resource):
    isLeaf = True
    body = bigText()

    def render_GET(self, request: Request) -> bytes:
        request.setHeader(b"content-type", b"text/plain; charset=utf-8")
        return self.body


class News(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        request.setHeader(b"content-type", b"text/html; charset=utf-8")
        request.setHeader(b"content-encoding", b"br")
        items = "".join(f"<li>News item {i}: brotli keeps this short</li>" for i in range(40))
        return brotli.compress(page("News", f'<ul id="news">{items}</ul>'))


class Search(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        q = (request.args.get(b"q") or [b""])[0].decode("utf-8", "replace")
        cat = (request.args.get(b"cat") or [b""])[0].decode("utf-8", "replace")
        return htmlAnswer(
            request,
            "Search",
            f'<p id="query">{html.escape(q)}</p><p id="cat">{html.escape(cat)}</p>',
        )


CHAT_SCRIPT = f"""
const status = document.getElementById('status');
const log = (s) => {{ status.textContent = s; }};
const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
ws.binaryType = 'arraybuffer';
let sent = 0, received = 0, got = [];
const send = (m) => {{ ws.send(m); sent += 1; }};
ws.onopen = () => send('hello netlog');
ws.onmessage = (e) => {{
  received += 1;
  if (typeof e.data === 'string') got.push(e.data);
  else got.push('bytes:' + Array.from(new Uint8Array(e.data)).join(','));
  if (received === 1) send(new Uint8Array([0, 1, 2, 254, 255]));
  else if (received === 2) send({json.dumps(FRAGMENT_REQUEST)});
  else if (received === 3) ws.close(1000, 'bye');
}};
ws.onclose = (e) => log('closed ' + e.code + ' sent=' + sent + ' received=' + received + ' ' + JSON.stringify(got));
ws.onerror = () => log('error');
"""


ECHO_SCRIPT = f"""
const status = document.getElementById('status');
const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/ws');
ws.binaryType = 'arraybuffer';
const big = '0123456789'.repeat({ECHO_BIG_SIZE} / 10);
const outgoing = [{json.dumps(ECHO_TEXT)}, big, new Uint8Array({json.dumps(list(ECHO_BYTES))})];
const describe = (m) => (typeof m === 'string' ? 'text ' + m.length : 'bytes ' + new Uint8Array(m).join(','));
let sent = 0, received = 0, got = [];
const next = () => {{
  if (sent < outgoing.length) {{ ws.send(outgoing[sent]); sent += 1; }}
  else ws.close(1000, 'done');
}};
ws.onopen = next;
ws.onmessage = (e) => {{
  received += 1;
  const mine = outgoing[received - 1];
  const same = describe(e.data) === describe(mine) && (typeof mine !== 'string' || e.data === mine);
  got.push(describe(e.data) + (same ? ' echoed' : ' differs'));
  next();
}};
ws.onclose = (e) => {{
  status.textContent = 'closed ' + e.code + ' ' + ws.url + ' sent=' + sent + ' received=' + received + ' '
    + JSON.stringify(got);
}};
"""


MESSAGES_SCRIPT = f"""
const status = document.getElementById('status');
const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/wsz');
ws.binaryType = 'arraybuffer';
const big = 'abcdefghij'.repeat({MESSAGES_BIG_SIZE} / 10);
const outgoing = [{json.dumps(MESSAGES_TEXT)}, new Uint8Array({json.dumps(list(ECHO_BYTES))}),
                  {json.dumps(FRAGMENT_REQUEST)}, big];
const got = [];
let sent = 0;
const next = () => {{
  if (sent < outgoing.length) {{ ws.send(outgoing[sent]); sent += 1; }}
  else ws.close(1000, 'done');
}};
ws.onopen = next;
ws.onmessage = (e) => {{
  if (typeof e.data !== 'string') got.push('bytes ' + new Uint8Array(e.data).join(','));
  else got.push(e.data.length > 100 ? 'text ' + e.data.length + (e.data === big ? ' echoed' : ' differs') : e.data);
  next();
}};
ws.onclose = (e) => {{
  status.textContent = 'closed ' + e.code + ' ' + ws.extensions.split(';')[0] + ' ' + JSON.stringify(got);
}};
"""


class Messages(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        return htmlAnswer(request, "Messages", f'<p id="status">connecting</p><script>{MESSAGES_SCRIPT}</script>')


class Echo(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        return htmlAnswer(request, "Echo", f'<p id="status">connecting</p><script>{ECHO_SCRIPT}</script>')


class Chat(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        return htmlAnswer(request, "Chat", f'<p id="status">connecting</p><script>{CHAT_SCRIPT}</script>')


#: What /cross-site does: a page on another site trying to make a session on
#: a loopback API (issue 20), as any page can without asking: each URL given
#: as C{to} gets a no-cors POST with a text body, a form body, and a JSON
#: body whose type no-cors can't send; then the title says C{done}.
CROSS_SITE_SCRIPT = """
const targets = new URLSearchParams(location.search).getAll('to');
(async () => {
  for (const url of targets) {
    const tries = [
      {body: JSON.stringify({name: 'csrf-text'})},
      {body: new URLSearchParams({name: 'csrf-form'})},
      {body: JSON.stringify({name: 'csrf-json'}), headers: {'Content-Type': 'application/json'}},
    ];
    for (const t of tries) {
      await fetch(url, {method: 'POST', mode: 'no-cors', ...t}).catch(() => {});
    }
  }
  document.title = 'done';
})();
"""


class CrossSite(resource.Resource):
    isLeaf = True

    def render_GET(self, request: Request) -> bytes:
        return htmlAnswer(request, "Cross-site", f'<p>trying</p><script>{CROSS_SITE_SCRIPT}</script>')


class EchoWire:
    """
    The WebSocket side of /ws once the handshake is done: wsproto reads the
    frames, and this echoes each whole message; L{FRAGMENT_REQUEST} is answered
    with one message sent as three frames.
    """

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.transport: Any = None
        self._text: list[str] = []
        self._bytes: list[bytes] = []

    def makeConnection(self, transport: Any) -> None:
        self.transport = transport

    def _send(self, event: Any) -> None:
        assert self.transport is not None
        self.transport.write(self.connection.send(event))

    def dataReceived(self, data: bytes) -> None:
        try:
            self.connection.receive_data(data)
            events = list(self.connection.events())
        except RemoteProtocolError as e:
            _log.warn("bad WebSocket data: {e}", e=e)
            assert self.transport is not None
            self.transport.loseConnection()
            return
        for event in events:
            if isinstance(event, TextMessage):
                self._text.append(event.data)
                if event.message_finished:
                    self.textMessage("".join(self._text))
                    self._text = []
            elif isinstance(event, BytesMessage):
                self._bytes.append(bytes(event.data))
                if event.message_finished:
                    self._send(BytesMessage(b"".join(self._bytes)))
                    self._bytes = []
            elif isinstance(event, Ping):
                self._send(event.response())
            elif isinstance(event, CloseConnection):
                self._send(event.response())
                assert self.transport is not None
                self.transport.loseConnection()

    def textMessage(self, text: str) -> None:
        if text == FRAGMENT_REQUEST:
            for i, piece in enumerate(FRAGMENTS):
                self._send(TextMessage(piece, message_finished=i == len(FRAGMENTS) - 1))
        else:
            self._send(TextMessage(text))

    def connectionLost(self, reason: Failure) -> None:
        self.transport = None


class WebSocketEcho(resource.Resource):
    """
    /ws: the handshake by wsproto's H11Handshake, then the connection is taken
    from twisted.web's HTTP channel (as Twisted's own WebSocketResource does,
    without its private helper) and handed to L{EchoWire}.
    """

    isLeaf = True

    def __init__(self, deflate: bool = False) -> None:
        super().__init__()
        #: Agree to permessage-deflate when the browser offers it (/wsz).
        self.deflate = deflate

    def render_GET(self, request: Request) -> int | bytes:
        handshake = H11Handshake(ConnectionType.SERVER)
        headers = [
            (name, value)
            for name, values in request.requestHeaders.getAllRawHeaders()
            for value in values
        ]
        try:
            handshake.initiate_upgrade_connection(headers, request.uri)
        except RemoteProtocolError as e:
            request.setResponseCode(400)
            request.setHeader(b"content-type", b"text/plain")
            return f"not a WebSocket handshake: {e}".encode()
        toSend = handshake.send(AcceptConnection(extensions=[PerMessageDeflate()] if self.deflate else []))
        assert handshake.connection is not None
        wire = EchoWire(handshake.connection)
        channel: Any = request.channel
        transport: Any = channel.transport
        # From here on the connection's bytes are WebSocket frames: the HTTP
        # channel (whose idle timeout is off while a request is unfinished,
        # and this one never finishes) hands them to the echo.
        channel.dataReceived = wire.dataReceived
        channel.connectionLost = wire.connectionLost
        wire.makeConnection(transport)
        transport.write(toSend)
        return NOT_DONE_YET


def buildSite() -> server.Site:
    root = resource.Resource()
    children: list[tuple[bytes, Any]] = [
        (b"", Front()),
        (b"login", Login()),
        (b"account", Account()),
        (b"cart", Cart()),
        (b"upload", Upload()),
        (b"logo.png", Logo()),
        (b"latin1", Latin1()),
        (b"big.txt", Big()),
        (b"news", News()),
        (b"chat", Chat()),
        (b"echo", Echo()),
        (b"ws", WebSocketEcho()),
        (b"wsz", WebSocketEcho(deflate=True)),
        (b"messages", Messages()),
        (b"search", Search()),
        (b"cross-site", CrossSite()),
    ]
    for name, child in children:
        root.putChild(name, child)
    api: Any = resource.Resource()
    api.putChild(b"cart", CartAPI())
    root.putChild(b"api", api)
    site = server.Site(root)
    site.displayTracebacks = False
    return site


class CountingProtocol(policies.ProtocolWrapper):
    """
    Counts the bytes on the wire (TLS records included) each way, so a test
    can match them with the bytes netlog says a tunnel carried.
    """

    bytesIn = 0
    bytesOut = 0

    def dataReceived(self, data: bytes) -> None:
        self.bytesIn += len(data)
        super().dataReceived(data)

    def write(self, data: bytes) -> None:
        self.bytesOut += len(data)
        super().write(data)

    def writeSequence(self, data: Any) -> None:
        data = list(data)
        self.bytesOut += sum(len(d) for d in data)
        super().writeSequence(data)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.factory.connectionCounted(self)
        super().connectionLost(reason)


class CountingFactory(policies.WrappingFactory):
    """
    Wraps a listener's factory; when a connection ends, appends
    C{{"listener": NAME, "in": N, "out": N}} as a line to C{path} (if any).
    """

    protocol = CountingProtocol

    def __init__(self, wrapped: Any, name: str, path: str | None) -> None:
        super().__init__(wrapped)
        self.name = name
        self.path = path

    def connectionCounted(self, proto: CountingProtocol) -> None:
        if self.path is None:
            return
        line = json.dumps({"listener": self.name, "in": proto.bytesIn, "out": proto.bytesOut})
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def makeCertificate(names: tuple[str, ...] = CERT_NAMES) -> tuple[bytes, bytes]:
    """
    A self-signed certificate for C{names}: (key PEM, certificate PEM).
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])])
    alt: list[x509.GeneralName] = []
    for name in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            alt.append(x509.DNSName(name))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    keyPEM = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return keyPEM, cert.public_bytes(serialization.Encoding.PEM)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="site_app", description="netlog's browser test site")
    parser.add_argument("--http", type=int, required=True, help="HTTP port on 127.0.0.1 (0: any)")
    parser.add_argument("--https", type=int, required=True, help="HTTPS port on 127.0.0.1 (0: any)")
    parser.add_argument("--cert-dir", help="write cert.pem and key.pem here")
    parser.add_argument(
        "--conn-log", help="append a JSON line with the bytes each way of every connection that ends"
    )
    args = parser.parse_args(argv)

    keyPEM, certPEM = makeCertificate()
    if args.cert_dir:
        os.makedirs(args.cert_dir, exist_ok=True)
        for name, data in (("key.pem", keyPEM), ("cert.pem", certPEM)):
            with open(os.path.join(args.cert_dir, name), "wb") as f:
                f.write(data)
    options = ssl.PrivateCertificate.loadPEM(keyPEM + certPEM).options()
    site = buildSite()
    reactor: Any = _reactor
    http = reactor.listenTCP(args.http, CountingFactory(site, "http", args.conn_log), interface="127.0.0.1")
    tlsSite = tls.TLSMemoryBIOFactory(options, False, site)  # type: ignore[arg-type]
    https = reactor.listenTCP(args.https, CountingFactory(tlsSite, "https", args.conn_log), interface="127.0.0.1")
    print(f"ready http={http.getHost().port} https={https.getHost().port}", flush=True)
    reactor.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
