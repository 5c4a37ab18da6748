"""
The record builder both proxies write their lines with: its fields, its key
order, and netlog's own answers.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.http1 import RequestHead, RequestReader, ResponseReader
from netlog.core.records import (
    END_KEYS,
    OPEN_KEYS,
    REFUSED_TEXT,
    connectUrl,
    endRecord,
    headerPairs,
    hostPort,
    openRecord,
    originForm,
    ownAnswer,
    requestRecord,
    unreadRequestRecord,
)


def head(raw: bytes, forwardProxy: bool = True, scheme: str = "http") -> RequestHead:
    event = RequestReader(forwardProxy=forwardProxy, scheme=scheme).feed(raw)[0]
    assert isinstance(event, RequestHead), event
    return event


class AddressTests(SynchronousTestCase):
    def test_hostPort(self) -> None:
        """
        An authority always names its port; an IPv6 address is bracketed
        once, whether it came with brackets or not.
        """
        self.assertEqual(hostPort("shop.test", 443), "shop.test:443")
        self.assertEqual(hostPort("::1", 80), "[::1]:80")
        self.assertEqual(hostPort("[::1]", 80), "[::1]:80")

    def test_connectUrl(self) -> None:
        """
        A CONNECT is named C{https://host:port/}, the default port written
        too, as both proxies log it.
        """
        self.assertEqual(connectUrl("live.test", 443), "https://live.test:443/")
        self.assertEqual(connectUrl("2001:db8::1", 8443), "https://[2001:db8::1]:8443/")

    def test_originForm(self) -> None:
        """
        An absolute-form target goes upstream as its path and query; an
        origin-form one as it is.
        """
        for target, expected in [
            (b"http://a.test", b"/"),
            (b"http://a.test/", b"/"),
            (b"http://a.test?q=1", b"/?q=1"),
            (b"http://a.test:8080/p/q?x=y", b"/p/q?x=y"),
            (b"/already", b"/already"),
        ]:
            self.assertEqual(originForm(target), expected, target)


class RecordTests(SynchronousTestCase):
    def test_openKeyOrder(self) -> None:
        """
        An open record's keys come in L{OPEN_KEYS} order (the HAR builder
        finds C{started} early in the line by it), an IPv6 host without its
        brackets.
        """
        request = requestRecord(head(b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\n\r\n"), "http://a.test/")
        record = openRecord("site", "exchange", 1.5, "127.0.0.1:5", "c1", request, "[::1]", 80, "::1")
        self.assertEqual(tuple(record), OPEN_KEYS)
        self.assertEqual(record["server"], {"host": "::1", "port": 80, "address": "::1"})

    def test_endKeyOrder(self) -> None:
        """
        An end record's keys come in L{END_KEYS} order whichever are present;
        C{times.end} is when it ended; fields that don't apply are absent.
        """
        full = endRecord(
            9.0, 1.0, 2.0, 3.0, up=10, down=20, requestBody={"size": 1}, response={"status": 101},
            interim=[100], closedBy="client", websocket={"messages_up": 1}, unparsed=True,
            refused=("bad", 400), failed="cut", failedStatus=502,
            marks={"_replayed": 7, "_replayedCut": True, "_replayedServer": {"address": "::1", "port": 80},
                   "_unmatched": True, "_forwarded": True, "_upstreamProxy": {"proxy": "p.test:3128", "status": 407}},
        )
        self.assertEqual(tuple(full), END_KEYS)
        self.assertEqual(full["times"], {"connected": 1.0, "sent": 2.0, "first_byte": 3.0, "end": 9.0})
        self.assertEqual(full["_failed"], {"reason": "cut", "status": 502})
        self.assertEqual(full["_refused"], {"reason": "bad", "status": 400})
        bare = endRecord(9.0, up=0, down=0, failed="cut")
        self.assertEqual(list(bare), ["ended", "times", "bytes", "_failed"])
        self.assertEqual(bare["_failed"], {"reason": "cut"})

    def test_request(self) -> None:
        """
        The request is kept as sent: method, URL, version, headers in order
        as Latin-1 strings, the head's size; sign-in values are removed,
        cookies never.
        """
        raw = (b"POST http://a.test/x HTTP/1.1\r\nHost: a.test\r\nAuthorization: secret\r\n"
               b"Cookie: s=1\r\nX-Name: caf\xe9\r\nContent-Length: 0\r\n\r\n")
        record = requestRecord(head(raw), "http://a.test/x", frozenset({"authorization", "cookie"}))
        self.assertEqual(record, {
            "method": "POST",
            "url": "http://a.test/x",
            "version": "HTTP/1.1",
            "headers": [["Host", "a.test"], ["Authorization", "<removed>"], ["Cookie", "s=1"],
                        ["X-Name", "caf\xe9"], ["Content-Length", "0"]],
            "headers_size": len(raw),
        })

    def test_webSocketUrl(self) -> None:
        """
        A WebSocket's request is named as the browser addressed it: C{ws://}
        for plain HTTP, C{wss://} once decrypted; another upgrade keeps its
        URL.
        """
        upgrade = (b"GET /chat HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
                   b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n")
        plain = head(upgrade, forwardProxy=False)
        self.assertEqual(requestRecord(plain, "http://a.test/chat")["url"], "ws://a.test/chat")
        self.assertEqual(requestRecord(plain, "https://a.test/chat")["url"], "wss://a.test/chat")
        other = head(b"GET /x HTTP/1.1\r\nHost: a.test\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n",
                     forwardProxy=False)
        self.assertEqual(requestRecord(other, "http://a.test/x")["url"], "http://a.test/x")

    def test_unreadRequest(self) -> None:
        """
        A request that could not be read is kept with what could be read of
        it: L{None} for each part that couldn't, never an empty string.
        """
        record = unreadRequestRecord({"method": None, "url": None, "version": None}, 7)
        self.assertEqual(record, {"method": None, "url": None, "version": None, "headers": [],
                                  "headers_size": 7})

    def test_headerPairs(self) -> None:
        """
        Header pairs decode every byte as Latin-1.
        """
        self.assertEqual(headerPairs([(b"A", b"\xff\x00")]), [["A", "\xff\x00"]])


class OwnAnswerTests(SynchronousTestCase):
    def test_answer(self) -> None:
        """
        netlog's own answer is a whole HTTP/1.1 message a reader takes; its
        record says what the browser got, byte counts included.
        """
        data, record = ownAnswer(403, REFUSED_TEXT.format("x.test is not a site"))
        reader = ResponseReader()
        reader.expectResponseTo(b"GET")
        events = reader.feed(data)
        self.assertEqual(events[0].status, 403)  # type: ignore[union-attr]
        body = b"netlog refused this request: x.test is not a site.\n"
        self.assertTrue(data.endswith(b"\r\n\r\n" + body))
        self.assertEqual(record["status"], 403)
        self.assertEqual(record["reason"], "Forbidden")
        self.assertEqual(record["headers"], [["Content-Type", "text/plain; charset=utf-8"],
                                             ["Content-Length", str(len(body))], ["Connection", "close"]])
        self.assertEqual(record["headers_size"] + record["body"]["size"], len(data))
        json.dumps(record)

    def test_keepOpen(self) -> None:
        """
        An answer that leaves the connection open (the HTTP route's redirect)
        says no C{Connection: close}, and carries the fields it is given.
        """
        data, record = ownAnswer(308, "", [(b"Location", b"https://a.test/")], close=False, body={"size": 0})
        self.assertNotIn(b"Connection", data)
        self.assertIn(["Location", "https://a.test/"], record["headers"])
        self.assertEqual(record["body"], {"size": 0})
