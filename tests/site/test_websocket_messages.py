"""
WebSocket messages through the site proxy, as real sockets carry them
(wsproto on both ends, permessage-deflate agreed): one message line per
message, in order, before the message goes on; the HAR's
C{_webSocketMessages} as Chrome DevTools writes them.
"""

from __future__ import annotations

import base64
import functools
import resource
import zlib
import socket
import ssl
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
    Request,
    TextMessage,
)
from wsproto.extensions import PerMessageDeflate

from netlog.core.har import entriesFromLines
from netlog.core.wsmessages import MAX_INFLATED, MESSAGE_CAP
from tests.har.support import export, validate, wavLoad
from tests.site.support import RunningProxy, connectTunnel, openSocket
from tests.site.test_websocket import EchoServer

#: What the browser side sends, in order (a fragmented one in two parts).
BIG = ("0123456789abcdef" * (MESSAGE_CAP // 16 + 4096))
SENT: list[Any] = [
    TextMessage(data="hello"),
    BytesMessage(data=bytes(range(256))),
    TextMessage(data="frag", message_finished=False),
    TextMessage(data="mented", message_finished=True),
    TextMessage(data=BIG),
]
#: The messages those make, as the server gets (and echoes) them.
WHOLE: list[str | bytes] = ["hello", bytes(range(256)), "fragmented", BIG]


class DeflateEcho(EchoServer):
    """
    The echo backend, agreeing to permessage-deflate.
    """

    def extensions(self) -> list[Any]:
        return [PerMessageDeflate()]


def talk(sock: socket.socket | ssl.SSLSocket, host: str, target: str) -> dict[str, Any]:
    """
    Open a WebSocket offering permessage-deflate, send L{SENT}, read the
    echoes, close with 1000 "done".
    """
    ws = WSConnection(ConnectionType.CLIENT)
    sock.sendall(ws.send(Request(host=host, target=target, extensions=[PerMessageDeflate()])))
    got: list[Any] = []
    parts: list[Any] = []
    extensions: list[Any] = []
    while len(got) < len(WHOLE):
        data = sock.recv(65536)
        if not data:
            break
        ws.receive_data(data)
        for event in ws.events():
            if isinstance(event, AcceptConnection):
                extensions = event.extensions
                for message in SENT:
                    sock.sendall(ws.send(message))
            elif isinstance(event, Message):
                parts.append(event.data)
                if event.message_finished:
                    got.append(parts[0][:0].join(parts))
                    parts.clear()
    sock.sendall(ws.send(CloseConnection(code=1000, reason="done")))
    for _ in range(1000):
        if not sock.recv(65536):
            break
    sock.close()
    return {"got": got, "deflate": [e.name for e in extensions]}


class MessageLineTests(TestCase):
    timeout = 60

    def backend(self) -> RunningProxy:
        from twisted.internet import reactor

        listening = reactor.listenTCP(0, Factory.forProtocol(DeflateEcho), interface="127.0.0.1")
        self.addCleanup(listening.stopListening)
        port = listening.getHost().port
        return RunningProxy(self, f"""
[[site]]
name = "chat"
origins = ["https://chat.test", "http://chat.test"]
backend = "http://127.0.0.1:{port}"
""")

    @defer.inlineCallbacks
    def check(self, running: RunningProxy, result: dict[str, Any], url: str) -> Any:
        self.assertEqual(result["deflate"], ["permessage-deflate"])
        self.assertEqual(result["got"], WHOLE)
        yield running.waitForEnds(1)
        lines = running.lines()
        [opened] = [line for line in lines if line["type"] == "open"]
        self.assertEqual(opened["request"]["url"], url)
        kinds = [line["type"] for line in lines]
        # open, the 101's head, the messages (each echoed), the end
        self.assertEqual(kinds[:2], ["open", "head"])
        self.assertEqual(kinds[-1], "end")
        self.assertEqual([line["n"] for line in lines], list(range(1, len(lines) + 1)))
        self.assertEqual(lines[1]["response"]["status"], 101)
        messages = [line for line in lines if line["type"] == "message"]
        self.assertEqual(len(messages), 2 * len(WHOLE))
        up = [m for m in messages if m["direction"] == "up"]
        down = [m for m in messages if m["direction"] == "down"]
        for side in (up, down):
            self.assertEqual([m["opcode"] for m in side], [1, 2, 1, 1])
            self.assertEqual(side[0]["data"], "hello")
            self.assertEqual(base64.b64decode(side[1]["data"]), bytes(range(256)))
            self.assertEqual(side[1]["encoding"], "base64")
            self.assertEqual(side[2]["data"], "fragmented")
            self.assertEqual(side[3]["size"], len(BIG))
            self.assertEqual(side[3]["data"], BIG[:MESSAGE_CAP])
            self.assertIs(side[3]["_truncated"], True)
            # compressed on the wire, logged inflated
            self.assertLess(side[3]["compressed"], len(BIG) // 10)
        end = lines[-1]
        self.assertEqual(end["_websocket"]["close_up"], {"code": 1000, "reason": "done"})
        self.assertEqual(end["_websocket"]["close_down"]["code"], 1000)
        self.assertEqual((end["_websocket"]["messages_up"], end["_websocket"]["messages_down"]), (4, 4))

        with open(running.logPath, "rb") as f:  # type: ignore[arg-type]
            entries, unreadable = entriesFromLines(f.readlines())
        self.assertEqual(unreadable, 0)
        [entry] = entries
        self.assertEqual(entry["request"]["url"], url)
        har = entry["_webSocketMessages"]
        self.assertEqual(len(har), 2 * len(WHOLE))
        # In the log's order (the two directions interleave as they came).
        self.assertEqual([m["time"] for m in har], sorted(m["time"] for m in har))
        self.assertTrue(all(isinstance(m["time"], float) for m in har))
        binary = base64.b64encode(bytes(range(256))).decode()
        for kind in ("send", "receive"):
            side = [m for m in har if m["type"] == kind]
            self.assertEqual([m["opcode"] for m in side], [1, 2, 1, 1])
            self.assertEqual([m["data"] for m in side], ["hello", binary, "fragmented", BIG[:MESSAGE_CAP]])
            self.assertIs(side[3]["_truncated"], True)
        self.assertEqual(entry["_websocket"]["close_up"], {"code": 1000, "reason": "done"})
        # The streaming export gives the same, and both consumers take it.
        with open(running.logPath, "rb") as f:  # type: ignore[arg-type]
            har, raw, _ = export(f.read())
        self.assertEqual(har["log"]["entries"][0]["_webSocketMessages"], entry["_webSocketMessages"])
        self.assertEqual(validate(raw), [])
        wavLoad(raw)

    @defer.inlineCallbacks
    def test_wss(self) -> Any:
        """
        Over a decrypted CONNECT (wss://), with permessage-deflate: every
        message is one line, inflated, text as text and binary as base64,
        a message past 1 MB cut and marked; the close codes are on the end
        line; the HAR carries them in Chrome's shape.
        """
        running = self.backend()

        def client() -> dict[str, Any]:
            sock = connectTunnel(running.ports["forward"], "chat.test:443", running.sslContext())
            return talk(sock, "chat.test", "/socket")

        result = yield threads.deferToThread(client)
        yield self.check(running, result, "wss://chat.test/socket")

    @defer.inlineCallbacks
    def test_plainWs(self) -> Any:
        """
        The same over plain ws:// through the forward port.
        """
        running = self.backend()

        def client() -> dict[str, Any]:
            sock = openSocket(running.ports["forward"])
            return talk(sock, "chat.test", "http://chat.test/socket")

        result = yield threads.deferToThread(client)
        yield self.check(running, result, "ws://chat.test/socket")

    @defer.inlineCallbacks
    def test_openEntry(self) -> Any:
        """
        A HAR made while the WebSocket is still open has the 101's status
        and headers, and the messages so far.
        """
        running = self.backend()

        def client() -> Any:
            sock = connectTunnel(running.ports["forward"], "chat.test:443", running.sslContext())
            ws = WSConnection(ConnectionType.CLIENT)
            sock.sendall(ws.send(Request(host="chat.test", target="/socket")))
            for _ in range(100):
                ws.receive_data(sock.recv(65536))
                if any(isinstance(e, AcceptConnection) for e in ws.events()):
                    break
            sock.sendall(ws.send(TextMessage(data="still here")))
            for _ in range(100):
                ws.receive_data(sock.recv(65536))
                if any(isinstance(e, TextMessage) for e in ws.events()):
                    break
            return sock

        sock = yield threads.deferToThread(client)
        self.addCleanup(sock.close)
        with open(running.logPath, "rb") as f:  # type: ignore[arg-type]
            entries, unreadable = entriesFromLines(f.readlines())
        [entry] = entries
        self.assertIs(entry["_open"], True)
        self.assertEqual(entry["response"]["status"], 101)
        self.assertIn("upgrade", [h["name"].lower() for h in entry["response"]["headers"]])
        self.assertEqual([(m["type"], m["data"]) for m in entry["_webSocketMessages"]],
                         [("send", "still here"), ("receive", "still here")])



class BombServer(Protocol):
    """
    A hostile backend: agrees to permessage-deflate, then sends one small
    compressed frame that would inflate to 4 GB, then a plain message.
    """

    def connectionMade(self) -> None:
        self.ws = WSConnection(ConnectionType.SERVER)

    def dataReceived(self, data: bytes) -> None:
        self.ws.receive_data(data)
        for event in self.ws.events():
            if isinstance(event, Request):
                self.transport.write(self.ws.send(AcceptConnection(extensions=[PerMessageDeflate()])))
                self.transport.write(bombFrame())
                self.transport.write(b"\x81\x05after")
            elif isinstance(event, CloseConnection):
                self.transport.write(self.ws.send(event.response()))
                self.transport.loseConnection()


#: How much the bomb inflates to, and in blocks of how much.
BOMB_SIZE = 4 * 1024 ** 3
BOMB_BLOCK = 64 * 1024 ** 2


@functools.lru_cache(maxsize=1)
def bombFrame() -> bytes:
    """
    One binary frame, RSV1 set: a deflate stream of 4 GB of zeros (a
    compressed block of 64 MB repeated), about 4 MB on the wire.
    """
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = compressor.compress(bytes(BOMB_BLOCK)) + compressor.flush(zlib.Z_SYNC_FLUSH)
    payload = block * (BOMB_SIZE // BOMB_BLOCK)
    return bytes([0xC2, 127]) + len(payload).to_bytes(8, "big") + payload


class DeflateBombTests(TestCase):
    timeout = 60

    @defer.inlineCallbacks
    def test_bomb(self) -> Any:
        """
        A small compressed message that would inflate to 4 GB passes to the
        browser as it came, while the proxy's memory stays within its caps:
        its line keeps 1 MB, says it inflated to the 64 MB bound and is
        truncated; the next message is read as usual.
        """
        from twisted.internet import reactor

        listening = reactor.listenTCP(0, Factory.forProtocol(BombServer), interface="127.0.0.1")
        self.addCleanup(listening.stopListening)
        running = RunningProxy(self, f"""
[[site]]
name = "bomb"
origins = ["http://bomb.test"]
backend = "http://127.0.0.1:{listening.getHost().port}"
""")
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

        def client() -> int:
            sock = openSocket(running.ports["forward"])
            ws = WSConnection(ConnectionType.CLIENT)
            sock.sendall(ws.send(Request(host="bomb.test", target="http://bomb.test/",
                                         extensions=[PerMessageDeflate()])))
            received = 0
            expected = len(bombFrame()) + 7
            for _ in range(100_000):
                data = sock.recv(1 << 20)
                if not data:
                    break
                received += len(data)
                if received >= expected + 100:
                    break
            # The client doesn't inflate: it closes the connection.
            sock.close()
            return received

        received = yield threads.deferToThread(client)
        self.assertGreater(received, len(bombFrame()))
        yield running.waitForEnds(1)
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
        messages = [line for line in running.lines() if line["type"] == "message"]
        self.assertEqual(len(messages), 2, [dict(m, data=None) for m in messages])
        bomb, after = messages
        self.assertEqual((bomb["direction"], bomb["opcode"], bomb["size"], bomb["_truncated"]),
                         ("down", 2, MAX_INFLATED, True))
        self.assertEqual(base64.b64decode(bomb["data"]), bytes(MESSAGE_CAP))
        # The proxy goes on reading the direction: the next (uncompressed)
        # message is a line of its own.
        self.assertEqual((after["data"], after["size"]), ("after", 5))
        # The client's and the server's copies of the frame live in this
        # process too (the test's ~4 MB frames); the proxy adds its caps.
        self.assertLess(grown, 64 * 1024 ** 2)
