"""
The WARC of a log, read back with warcio with every digest checked: what
goes in each record, and what is left out and counted.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.logline import encodeLine
from tests.har.support import T0, Log, b64
from tests.warc.support import Record, exportWarc

PAGE = b"<html><img src=/logo.png></html>"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256))


def pairs(records: list[Record]) -> dict[tuple[str, str], Record]:
    return {(r.type, r.fields.get("WARC-Target-URI", "")): r for r in records}


class ExchangeRecordTests(SynchronousTestCase):
    def test_warcinfoFirst(self) -> None:
        """
        The file begins with a warcinfo record naming netlog, the log and
        its line range, and the proxy that wrote it.
        """
        log = Log()
        log.end(log.open(), body=PAGE, headers=[("Content-Type", "text/html")])
        records, _, _ = exportWarc(log.bytes())
        self.assertEqual(records[0].type, "warcinfo")
        info = records[0].payload.decode()
        self.assertIn("software: netlog ", info)
        self.assertIn("netlog-lines: 1-2", info)
        self.assertIn("netlog-proxy: site", info)
        self.assertIn("network.jsonl", info)

    def test_requestAndResponse(self) -> None:
        """
        An exchange is a response record and a request record that names
        it in WARC-Concurrent-To, both with its URL, its start to the
        microsecond and the server's address; the bodies are the log's, the
        transfer coding's field left out (the body is kept without it),
        the content coding's kept.
        """
        log = Log()
        n = log.open(method="POST", url="https://shop.test/login?next=%2F",
                     headers=[("Host", "shop.test"), ("Content-Type", "application/x-www-form-urlencoded")],
                     started=T0 + 0.123456)
        log.end(n, status=302, reason="Found", requestBody=b"user=ann&pw=x",
                headers=[("Location", "https://shop.test/account"), ("Transfer-Encoding", "chunked"),
                         ("Content-Encoding", "gzip")], body=b"\x1f\x8bgzipped")
        records, _, result = exportWarc(log.bytes())
        self.assertEqual([r.type for r in records], ["warcinfo", "response", "request"])
        response, request = records[1], records[2]
        for r in (response, request):
            self.assertEqual(r.fields["WARC-Target-URI"], "https://shop.test/login?next=%2F")
            self.assertEqual(r.fields["WARC-Date"], "2026-01-01T00:00:00.123456Z")
            self.assertEqual(r.fields["WARC-IP-Address"], "127.0.0.1")
        self.assertEqual(request.fields["WARC-Concurrent-To"], response.fields["WARC-Record-ID"])
        self.assertEqual(response.http.statusline, "302 Found")
        self.assertEqual(response.http.headers, [("Location", "https://shop.test/account"),
                                                 ("Content-Encoding", "gzip")])
        self.assertEqual(response.payload, b"\x1f\x8bgzipped")
        self.assertEqual(request.http.protocol, "POST")
        self.assertEqual(request.http.statusline, "/login?next=%2F HTTP/1.1")
        self.assertEqual(request.payload, b"user=ann&pw=x")
        self.assertNotIn("WARC-Truncated", response.fields)
        self.assertEqual((result.exchanges, result.records, dict(result.leftOut)), (1, 3, {}))

    def test_truncated(self) -> None:
        """
        A body the log cut at its limit is marked WARC-Truncated: length and
        holds what was kept; an answer that broke off, disconnect.
        """
        log = Log()
        a = log.open(url="https://shop.test/big.txt")
        log.end(a, headers=[("Content-Type", "text/plain")],
                responseBody={"size": 5000, "data": b64(b"x" * 1000), "_truncated": True})
        b = log.open(url="https://shop.test/cut.txt")
        log.end(b, headers=[("Content-Type", "text/plain")], body=b"half", _failed={"reason": "reset"})
        records = pairs(exportWarc(log.bytes())[0])
        big = records["response", "https://shop.test/big.txt"]
        self.assertEqual(big.fields["WARC-Truncated"], "length")
        self.assertEqual(big.payload, b"x" * 1000)
        self.assertEqual(records["response", "https://shop.test/cut.txt"].fields["WARC-Truncated"], "disconnect")

    def test_bodyNotKept(self) -> None:
        """
        An answer whose body the log didn't keep (--keep-bodies text and an
        image) is left out and counted by why; an empty body is no loss.
        """
        log = Log()
        a = log.open(url="https://shop.test/logo.png")
        log.end(a, headers=[("Content-Type", "image/png")],
                responseBody={"size": len(PNG), "sha256": hashlib.sha256(PNG).hexdigest()})
        b = log.open(url="https://shop.test/empty")
        log.end(b, status=204, reason="No Content", responseBody={"size": 0})
        c = log.open(url="https://shop.test/open")
        records, _, result = exportWarc(log.bytes())
        self.assertEqual([r.fields.get("WARC-Target-URI") for r in records[1:]],
                         ["https://shop.test/empty"] * 2)
        self.assertEqual(dict(result.leftOut),
                         {"body not kept (record with --keep-bodies all)": 1, "still open": 1})
        self.assertEqual(result.summary(), "1 exchanges in 3 records; left out 1 body not kept "
                                           "(record with --keep-bodies all), 1 still open")
        self.assertGreater(c, 0)

    def test_kept(self) -> None:
        """
        An image kept with --keep-bodies all (data and sha256) is archived
        with its bytes.
        """
        log = Log()
        a = log.open(url="https://shop.test/logo.png")
        log.end(a, headers=[("Content-Type", "image/png")],
                responseBody={"size": len(PNG), "data": b64(PNG), "sha256": hashlib.sha256(PNG).hexdigest()})
        response = exportWarc(log.bytes())[0][1]
        self.assertEqual(response.payload, PNG)

    def test_noAnswer(self) -> None:
        """
        A refusal, a failure netlog answered itself and a blind tunnel are
        each a metadata record of warc-fields saying what happened (no
        response record: no server answered, or nothing was read).
        """
        log = Log()
        a = log.open(url="https://elsewhere.test/")
        log.refuse(a, "elsewhere.test is not a site")
        b = log.open(url="https://down.test/")
        log.fail(b, "connection refused")
        c = log.open(method="CONNECT", url="https://live.test:443/", kind="tunnel",
                     server={"host": "live.test", "port": 443, "address": "10.0.0.9"})
        log.end(c, status=None, closed_by="client", bytes={"up": 517, "down": 4000})
        records, _, result = exportWarc(log.bytes())
        self.assertEqual([r.type for r in records[1:]], ["metadata"] * 3)
        refused, failed, tunnel = (r.payload.decode() for r in records[1:])
        self.assertIn("netlog-outcome: refused\r\nrefused: elsewhere.test is not a site\r\nstatus: 403", refused)
        self.assertIn("netlog-outcome: failed\r\nfailed: connection refused\r\nstatus: 502", failed)
        self.assertIn("netlog-outcome: tunnel\r\nhost: live.test\r\nport: 443\r\nbytes-up: 517\r\n"
                      "bytes-down: 4000\r\nclosed-by: client", tunnel)
        self.assertEqual(records[3].fields["WARC-IP-Address"], "10.0.0.9")
        self.assertEqual(records[3].fields["WARC-Target-URI"], "https://live.test:443/")
        self.assertEqual(result.exchanges, 3)

    def test_http2(self) -> None:
        """
        An HTTP/2 exchange is an HTTP/1.1 message with WARC-Protocol: h2:
        Host from :authority, the other pseudo-fields left out, the cookie
        crumbs one field; an answer with no reason gets its status's.
        """
        log = Log()
        n = log.open(url="https://shop.test/a?b=1", headers=[])
        opened = json.loads(log.lines[-1])
        opened["request"].update(version="HTTP/2", headers=[
            [":method", "GET"], [":scheme", "https"], [":authority", "shop.test"], [":path", "/a?b=1"],
            ["cookie", "a=1"], ["accept", "*/*"], ["cookie", "b=2"]])
        fields = {k: v for k, v in opened.items() if k not in ("n", "type", "id", "open_from", "time")}
        log.lines[-1] = encodeLine(n, "open", n, 1, T0, fields)
        log.end(n, reason="", headers=[("content-type", "text/plain")], body=b"ok")
        response, request = exportWarc(log.bytes())[0][1:]
        self.assertEqual(request.fields["WARC-Protocol"], "h2")
        self.assertEqual(response.fields["WARC-Protocol"], "h2")
        self.assertEqual(request.http.headers, [("host", "shop.test"), ("accept", "*/*"), ("cookie", "a=1; b=2")])
        self.assertEqual(response.http.statusline, "200 OK")

    def test_webSocket(self) -> None:
        """
        A WebSocket is its 101 response and request (their heads in the
        payload, as warcio reads a ws: URL's records), and a resource record
        of its messages as JSON lines (the IIPC draft's form), linked to the
        response.
        """
        log = Log()
        n = log.open(url="wss://chat.test/ws", headers=[("Host", "chat.test"), ("Upgrade", "websocket")])
        at = T0 + 0.5

        def message(fields: dict[str, Any]) -> None:
            log.lines.append(encodeLine(log.next, "message", n, 1, at, fields))

        message({"direction": "up", "opcode": 1, "size": 2, "data": "hi"})
        message({"direction": "down", "opcode": 2, "size": 3, "data": "AAEC", "encoding": "base64"})
        log.end(n, status=101, reason="Switching Protocols", headers=[("Upgrade", "websocket")],
                closed_by="client", _websocket={"messages_up": 1, "messages_down": 1, "bytes_up": 2, "bytes_down": 3})
        records = exportWarc(log.bytes())[0]
        self.assertEqual([r.type for r in records[1:]], ["response", "request", "resource"])
        # (warcio, and so pywb, reads a ws: record's head as payload)
        self.assertTrue(records[1].payload.startswith(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket"))
        self.assertTrue(records[2].payload.startswith(b"GET /ws HTTP/1.1\r\nHost: chat.test"))
        resource = records[3]
        self.assertEqual(resource.fields["WARC-Concurrent-To"], records[1].fields["WARC-Record-ID"])
        self.assertEqual(resource.fields["WARC-Resource-Type"], "websocket")
        self.assertEqual(resource.fields["Content-Type"], "application/jsonl")
        self.assertEqual([json.loads(line) for line in resource.payload.splitlines()], [
            {"ts": 0.5, "type": "send", "opcode": 1, "payloadData": "hi"},
            {"ts": 0.5, "type": "receive", "opcode": 2, "payloadData": "AAEC"},
        ])
