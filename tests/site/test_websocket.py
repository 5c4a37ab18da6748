"""
WebSockets through the site proxy: a real exchange (wsproto on both ends)
over a decrypted CONNECT, counted from the frames as they pass.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, threads
from twisted.internet.protocol import Factory, Protocol
from twisted.trial.unittest import TestCase
from wsproto import ConnectionType, WSConnection
from wsproto.events import (
    AcceptConnection,
    BytesMessage,
    CloseConnection,
    Message,
    Ping,
    Request,
    TextMessage,
)

from tests.site.support import RunningProxy, connectTunnel


class EchoServer(Protocol):
    """
    A WebSocket backend that echoes each whole message once, answers pings,
    and closes when asked.
    """

    def extensions(self) -> list[Any]:
        """
        What it agrees to of what the browser offers (none), made afresh
        for each connection (an extension keeps its connection's state).
        """
        return []

    def connectionMade(self) -> None:
        self.ws = WSConnection(ConnectionType.SERVER)
        self.parts: list[Any] = []

    def dataReceived(self, data: bytes) -> None:
        self.ws.receive_data(data)
        out = b""
        for event in self.ws.events():
            if isinstance(event, Request):
                out += self.ws.send(AcceptConnection(extensions=self.extensions()))
            elif isinstance(event, Message):
                self.parts.append(event.data)
                if event.message_finished:
                    whole = self.parts[0][:0].join(self.parts)
                    self.parts = []
                    kind = TextMessage if isinstance(whole, str) else BytesMessage
                    out += self.ws.send(kind(data=whole))
            elif isinstance(event, Ping):
                out += self.ws.send(event.response())
            elif isinstance(event, CloseConnection):
                out += self.ws.send(event.response())
                self.transport.write(out)
                self.transport.loseConnection()
                return
        if out:
            self.transport.write(out)


class WebSocketTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_counts(self) -> Any:
        """
        After the 101, messages and bytes are counted both ways: a fragmented
        message counts once, ping, pong and close are not messages; the entry
        ends when the connection closes.
        """
        from twisted.internet import reactor

        listening = reactor.listenTCP(0, Factory.forProtocol(EchoServer), interface="127.0.0.1")
        self.addCleanup(listening.stopListening)
        port = listening.getHost().port
        running = RunningProxy(self, f"""
[[site]]
name = "chat"
origins = ["https://chat.test"]
backend = "http://127.0.0.1:{port}"
""")

        def client() -> dict[str, Any]:
            sock = connectTunnel(running.ports["forward"], "chat.test:443", running.sslContext())
            ws = WSConnection(ConnectionType.CLIENT)
            sock.sendall(ws.send(Request(host="chat.test", target="/socket")))
            sent = 0
            received = 0
            got: list[Any] = []
            parts: list[Any] = []
            accepted = False
            out = [
                TextMessage(data="hello"),
                TextMessage(data="frag", message_finished=False),
                TextMessage(data="ment", message_finished=True),
                Ping(payload=b"p"),
                BytesMessage(data=b"\x00" * 70000),
            ]
            while len(got) < 3:
                data = sock.recv(65536)
                if not data:
                    break
                received += len(data)
                ws.receive_data(data)
                for event in ws.events():
                    if isinstance(event, AcceptConnection):
                        accepted = True
                        for message in out:
                            chunk = ws.send(message)
                            sent += len(chunk)
                            sock.sendall(chunk)
                    elif isinstance(event, Message):
                        parts.append(event.data)
                        if event.message_finished:
                            got.append(parts[0][:0].join(parts))
                            parts.clear()
            close = ws.send(CloseConnection(code=1000))
            sock.sendall(close)
            sent += len(close)
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                received += len(data)
            sock.close()
            return {"accepted": accepted, "got": got, "sent": sent, "received": received}

        result = yield threads.deferToThread(client)
        self.assertTrue(result["accepted"])
        self.assertEqual(result["got"][:2], ["hello", "fragment"])
        self.assertEqual(len(result["got"][2]), 70000)
        [(opened, ended)] = yield running.waitForEnds(1)
        self.assertEqual(opened["request"]["url"], "wss://chat.test/socket")
        self.assertEqual(ended["response"]["status"], 101)
        ws = ended["_websocket"]
        self.assertEqual(ws["messages_up"], 3)
        self.assertEqual(ws["messages_down"], 3)
        self.assertEqual(ws["bytes_up"], result["sent"])
        self.assertEqual(ws["bytes_down"], result["received"] - ended["response"]["headers_size"])
        self.assertIn(ended["closed_by"], ("client", "server"))
