"""
A WARC as a recording (C{--replay FILE.warc.gz}): one written as warcprox
writes (the wire's bytes: chunks and all), and netlog's own, indexed and
answered by L{netlog.proxy.replay.Replay} with the rules of a log or a HAR.
"""

from __future__ import annotations

import gzip
import io
import os

from twisted.trial.unittest import SynchronousTestCase
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from netlog.core.replay import MatchRules, bodyKey, requestKey
from netlog.proxy.replay import Replay
from netlog.warc.export import writeWarc
from tests.core.test_replay import onTheWire
from tests.har.support import Log, b64
from tests.standin.support import tempDirectory

PAGE = b"<html><title>shop</title></html>"
ZIPPED = gzip.compress(b'{"items": [1, 2, 3]}')


def chunked(body: bytes, size: int = 7) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(body[i:i + size]), body[i:i + size])
                    for i in range(0, len(body), size)) + b"0\r\n\r\n"


def wireWarc(path: str) -> None:
    """
    A WARC as a proxy that records the wire writes it (warcprox): each
    response then the request that names it, bodies as they crossed (a
    chunked, gzipped JSON answer), a POST's form body; a response with no
    request record, a revisit, and a WebSocket's 101.
    """
    with open(path, "wb") as f:
        writer = WARCWriter(f, gzip=True, warc_version="WARC/1.0")

        def pair(method: str, url: str, status: str, headers: list[tuple[str, str]], body: bytes,
                 requestBody: bytes = b"", requestHeaders: list[tuple[str, str]] | None = None) -> None:
            response = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), length=len(body),
                warc_headers_dict={"WARC-IP-Address": "10.1.2.3"},
                http_headers=StatusAndHeaders(status, headers, protocol="HTTP/1.1"))
            writer.write_record(response)
            request = writer.create_warc_record(
                url, "request", payload=io.BytesIO(requestBody), length=len(requestBody),
                warc_headers_dict={"WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID")},
                http_headers=StatusAndHeaders(f"{method} {url.split('/', 3)[3:] and '/' + url.split('/', 3)[3]} "
                                              "HTTP/1.1", requestHeaders or [("Host", "shop.test")],
                                              is_http_request=True))
            writer.write_record(request)

        pair("GET", "https://shop.test/", "200 OK", [("Content-Type", "text/html"),
                                                    ("Content-Length", str(len(PAGE)))], PAGE)
        pair("POST", "https://shop.test/login", "302 Found", [("Location", "/account"), ("Content-Length", "0")],
             b"", b"user=ann&pw=x", [("Host", "shop.test"), ("Content-Type", "application/x-www-form-urlencoded")])
        pair("POST", "https://shop.test/login", "200 OK", [("Content-Length", "5")], b"again",
             b"user=bob&pw=y", [("Host", "shop.test"), ("Content-Type", "application/x-www-form-urlencoded")])
        pair("GET", "https://shop.test/api/items", "200 OK",
             [("Content-Type", "application/json"), ("Content-Encoding", "gzip"), ("Transfer-Encoding", "chunked")],
             chunked(ZIPPED))
        lone = writer.create_warc_record(
            "https://shop.test/logo.png", "response", payload=io.BytesIO(b"PNG"), length=3,
            http_headers=StatusAndHeaders("200 OK", [("Content-Type", "image/png")], protocol="HTTP/1.1"))
        writer.write_record(lone)
        writer.write_record(writer.create_revisit_record(
            "https://shop.test/", "sha1:AAAA", "https://shop.test/", "2026-01-01T00:00:00Z",
            http_headers=StatusAndHeaders("200 OK", [], protocol="HTTP/1.1")))
        pair("GET", "wss://shop.test/chat", "101 Switching Protocols", [("Upgrade", "websocket")], b"")


class WarcRecordingTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = tempDirectory(self)
        self.rules = MatchRules()

    def answer(self, replay: Replay, method: str, url: str, body: bytes = b"",
               contentType: str | None = None) -> tuple[bytes, object]:
        found = replay.index.match(requestKey(method, url, self.rules), bodyKey(body, contentType, self.rules),
                                   replay.answerFor)
        assert found is not None, (method, url)
        return onTheWire(found[1], method.encode()), found[0].mark

    def test_wireRecording(self) -> None:
        """
        Each response is answered for its request's method, URL and body
        (a response with no request as a GET); a chunked answer is served
        with its chunks undone and its gzip kept (in one chunk); a
        revisit and a WebSocket are counted as skipped, not served.
        """
        path = os.path.join(self.folder, "wire.warc.gz")
        wireWarc(path)
        replay = Replay(path, self.rules)
        self.assertEqual(len(replay.index), 5)
        self.assertEqual(replay.index.skipped, {"revisit": 1, "websocket": 1})
        page, mark = self.answer(replay, "GET", "https://shop.test/")
        self.assertEqual(mark, 0)
        self.assertTrue(page.startswith(b"HTTP/1.1 200 OK\r\n"))
        self.assertTrue(page.endswith(b"\r\n\r\n" + PAGE))
        form = "application/x-www-form-urlencoded"
        bob, _ = self.answer(replay, "POST", "https://shop.test/login", b"user=bob&pw=y", form)
        self.assertTrue(bob.endswith(b"\r\n\r\nagain"))
        ann, _ = self.answer(replay, "POST", "https://shop.test/login", b"user=ann&pw=x", form)
        self.assertTrue(ann.startswith(b"HTTP/1.1 302 Found\r\nLocation: /account\r\n"))
        items, _ = self.answer(replay, "GET", "https://shop.test/api/items")
        head, body = items.split(b"\r\n\r\n", 1)
        # (framed again as replay frames a chunked answer: in one chunk)
        self.assertEqual(body, b"%x\r\n%s\r\n0\r\n\r\n" % (len(ZIPPED), ZIPPED))
        self.assertEqual(gzip.decompress(ZIPPED), b'{"items": [1, 2, 3]}')
        self.assertIn(b"Content-Encoding: gzip\r\nTransfer-Encoding: chunked", head)
        logo, _ = self.answer(replay, "GET", "https://shop.test/logo.png")
        self.assertTrue(logo.endswith(b"\r\n\r\n3\r\nPNG\r\n0\r\n\r\n"))  # (no framing recorded: chunked)
        self.assertIsNone(replay.index.match(requestKey("GET", "https://shop.test/nothing", self.rules), None,
                                             replay.answerFor))

    def test_netlogWarc(self) -> None:
        """
        netlog's own WARC replays as its log does: bodies byte for byte,
        the recorded server's address, a body the log cut served as kept
        and marked cut with its whole size; a refusal isn't served.
        """
        log = Log()
        a = log.open(url="https://shop.test/", server={"host": "shop.test", "port": 443, "address": "10.9.8.7"})
        log.end(a, headers=[("Content-Type", "text/html"), ("Content-Length", str(len(PAGE)))], body=PAGE)
        b = log.open(url="https://shop.test/big.txt")
        log.end(b, headers=[("Content-Type", "text/plain"), ("Content-Length", "5000")],
                responseBody={"size": 5000, "data": b64(b"x" * 1000), "_truncated": True})
        c = log.open(url="https://elsewhere.test/")
        log.refuse(c, "not a site")
        logPath = os.path.join(self.folder, "network.jsonl")
        with open(logPath, "wb") as f:
            f.write(log.bytes())
        warc = os.path.join(self.folder, "network.warc.gz")
        with open(warc, "wb") as out:
            writeWarc(logPath, out)
        replay = Replay(warc, self.rules)
        self.assertEqual(len(replay.index), 2)
        found = replay.index.match(requestKey("GET", "https://shop.test/", self.rules), None, replay.answerFor)
        assert found is not None
        self.assertEqual((found[1].body, found[1].address, found[1].cut), (PAGE, "10.9.8.7", False))
        big = replay.index.match(requestKey("GET", "https://shop.test/big.txt", self.rules), None, replay.answerFor)
        assert big is not None
        self.assertEqual((big[1].body, big[1].cut, big[1].size), (b"x" * 1000, True, 5000))
