"""
One rule at a time: content codings, charsets, cut and bomb bodies, cookies,
URLs, timings, the stand-in's size-only bodies, unparsed answers and the lines
the export can't use. Every HAR made here passes the HAR schema.
"""

from __future__ import annotations

import base64
import codecs
import gzip
import hashlib
import json
import zlib

import brotli
import zstandard
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.decoding import REQUEST_LIMIT, RESPONSE_LIMIT
from tests.har.support import T0, Log, export, validate

#: 316 bytes of br that inflate to 200,000,000 zero bytes.
BR_BOMB = base64.b64decode(
    """
y///P/gnAOKxQCD3/o///3/wTwDEYRGA7v0f////4J8AiMMCAN37P/7//8E/ARCHBQC693/8//+D
fwIgDgsAdO//+P//B/8EQBwWAOje//H//w/+CYA4LADQvf/j//8f/BMAcVgAoHv/x///P/gnAOKw
AED3/o///3/wTwDEYQGA7v0f////4J8AiMMCAN37P/7//8E/ARCHBQC693/8//+DfwIgDgsAdO//
+P//B/8EQBwWAOje//H//w/+CYA4LADQvf/j//8f/BMAcVgAoHv/x///P/gnAOKwAED3/o///3/w
TwDEYQGA7v0f////4J8AiMMCAN37P/7//8E/ARCHBQC693/8//+DfwIgDgsAdO//+P//B/8EQBwW
AOje//H//w/+CYA4LADQvf/L/+A1/BMAcVgAoJu7Bg==
"""
)

TEXT = "Grüße, 日本, ünïcödé " * 50


def rawDeflate(data: bytes) -> bytes:
    c = zlib.compressobj(wbits=-15)
    return c.compress(data) + c.flush()


CODINGS = {
    "gzip": gzip.compress,
    "x-gzip": gzip.compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
    "zstd": lambda d: zstandard.ZstdCompressor().compress(d),
}


class HarTestCase(SynchronousTestCase):
    """
    Export a log, check the HAR passes the schema, hand back its entries.
    """

    def exportLog(self, log: Log) -> tuple[list[dict], dict]:
        har, raw, _ = export(log.bytes())
        self.assertEqual(validate(raw), [])
        return har["log"]["entries"], har["log"]

    def answer(self, headers: list[tuple[str, str]], body: bytes | None = None, **kw) -> dict:
        log = Log()
        n = log.open()
        log.end(n, headers=headers, body=body, **kw)
        entries, _ = self.exportLog(log)
        return entries[0]["response"]


class CodingTests(HarTestCase):
    """
    Answers are decoded from their content codings.
    """

    def test_everyCoding(self) -> None:
        """
        gzip, x-gzip, deflate (zlib-wrapped and raw), br, zstd and a stack of
        two are undone; size is the decoded size, compression what it saved.
        """
        cases = [(name, encode(TEXT.encode())) for name, encode in CODINGS.items()]
        cases.append(("deflate", rawDeflate(TEXT.encode())))
        cases.append(("gzip, br", brotli.compress(gzip.compress(TEXT.encode()))))
        cases.append(("identity", TEXT.encode()))
        log = Log()
        for name, body in cases:
            n = log.open()
            log.end(n, headers=[("Content-Type", "text/plain; charset=utf-8"), ("Content-Encoding", name)], body=body)
        entries, _ = self.exportLog(log)
        for (name, body), entry in zip(cases, entries):
            content = entry["response"]["content"]
            self.assertEqual(content["text"], TEXT, name)
            self.assertEqual(content["size"], len(TEXT.encode()), name)
            self.assertEqual(entry["response"]["bodySize"], len(body), name)
            if name != "identity":
                self.assertEqual(content["compression"], len(TEXT.encode()) - len(body), name)
            self.assertNotIn("_truncated", content)
            self.assertNotIn("encoding", content)

    def test_undecodable(self) -> None:
        """
        A coding that can't be undone (unknown, or corrupt data) leaves the
        body base64, marked _undecoded with the coding and why.
        """
        for coding, body in (("compress", b"\x1f\x9d\x90abc"), ("gzip", b"not gzip at all"), ("br", b"\xff\xff\xff\xff")):
            content = self.answer([("Content-Type", "text/html"), ("Content-Encoding", coding)], body)["content"]
            self.assertEqual(content["encoding"], "base64")
            self.assertEqual(base64.b64decode(content["text"]), body)
            self.assertEqual(content["_undecoded"]["coding"], coding)
            self.assertIsInstance(content["_undecoded"]["reason"], str)

    def test_bomb(self) -> None:
        """
        A 316-byte br answer that would inflate to 200 MB is decoded only to
        the 1 MB limit and marked _truncated.
        """
        content = self.answer([("Content-Type", "text/plain"), ("Content-Encoding", "br")], BR_BOMB)["content"]
        self.assertEqual(len(content["text"]), RESPONSE_LIMIT)
        self.assertTrue(content["_truncated"])

    def test_requestBomb(self) -> None:
        """
        A request body is decoded up to its own limit, 10 MB.
        """
        log = Log()
        n = log.open(method="POST", headers=[("Content-Type", "text/plain"), ("Content-Encoding", "br")])
        log.end(n, requestBody=BR_BOMB)
        entries, _ = self.exportLog(log)
        post = entries[0]["request"]["postData"]
        self.assertEqual(len(post["text"]), REQUEST_LIMIT)
        self.assertTrue(post["_truncated"])

    def test_cutCapture(self) -> None:
        """
        A body the proxy kept only the start of (_truncated in the log) is
        decoded as far as it goes, and marked _truncated.
        """
        whole = ("line %d é\n" % i for i in range(20000))
        text = "".join(whole).encode()
        compressed = gzip.compress(text)
        keep = compressed[: len(compressed) // 2]
        log = Log()
        n = log.open()
        log.end(
            n,
            headers=[("Content-Type", "text/plain; charset=utf-8"), ("Content-Encoding", "gzip")],
            responseBody={"size": len(compressed), "data": base64.b64encode(keep).decode(), "_truncated": True},
        )
        entries, _ = self.exportLog(log)
        content = entries[0]["response"]["content"]
        self.assertTrue(content["_truncated"])
        self.assertTrue(text.decode().startswith(content["text"]))
        self.assertGreater(len(content["text"]), 1000)
        self.assertEqual(entries[0]["response"]["bodySize"], len(compressed))


class CharsetTests(HarTestCase):
    """
    Text is read in its charset: declared, sniffed, or the type's default.
    """

    def test_charsets(self) -> None:
        """
        Every charset reads right, and the text is never base64.
        """
        cases = [
            ("text/html; charset=utf-8", "Grüße 日本".encode("utf-8"), "Grüße 日本"),
            ("text/html; charset=ISO-8859-1", "Café crème".encode("latin-1"), "Café crème"),
            ('text/html; charset="latin1"', "naïve".encode("latin-1"), "naïve"),
            ("text/plain; charset=windows-1252", b"\x80 \x93quoted\x94", "€ “quoted”"),
            ("text/plain; charset=iso-8859-1", b"\x80\x81", "€\x81"),
            ("text/plain; charset=iso-8859-15", "€uro".encode("iso-8859-15"), "€uro"),
            ("text/plain; charset=shift_jis", "日本語".encode("shift_jis"), "日本語"),
            ("text/html", b'<meta charset="iso-8859-1"><p>\xe9t\xe9</p>', '<meta charset="iso-8859-1"><p>été</p>'),
            (
                "text/html",
                b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">\xcf\xf0\xe8',
                '<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">При',
            ),
            ("application/xml", b'<?xml version="1.0" encoding="ISO-8859-1"?><a>\xe9</a>', '<?xml version="1.0" encoding="ISO-8859-1"?><a>é</a>'),
            ("application/json", '{"a": "é"}'.encode("utf-8"), '{"a": "é"}'),
            ("application/vnd.api+json", '{"a": "ü"}'.encode("utf-8"), '{"a": "ü"}'),
            ("text/html", "page é".encode("utf-8"), "page é"),
            ("text/html", b"page \xe9t\xe9", "page été"),
            ("text/plain", codecs.BOM_UTF8 + "bom é".encode(), "bom é"),
            ("text/plain", codecs.BOM_UTF16_LE + "wide é".encode("utf-16-le"), "wide é"),
            ("text/plain; charset=no-such-charset", "é".encode(), "é"),
            (None, b"no type at all", "no type at all"),
        ]
        log = Log()
        for contentType, body, _ in cases:
            n = log.open()
            log.end(n, headers=[("Content-Type", contentType)] if contentType else [], body=body)
        entries, _ = self.exportLog(log)
        for (contentType, body, expected), entry in zip(cases, entries):
            content = entry["response"]["content"]
            self.assertEqual(content["text"], expected, contentType)
            self.assertEqual(content["mimeType"], contentType or "x-unknown")
            self.assertNotIn("encoding", content)
            self.assertNotIn("_base64", content, contentType)

    def test_lossy(self) -> None:
        """
        Text that isn't valid in its declared charset stays readable (U+FFFD
        for the bad bytes) and its exact bytes are kept in _base64.
        """
        body = b"ok \xff\xfe bad"
        content = self.answer([("Content-Type", "text/plain; charset=utf-8")], body)["content"]
        self.assertEqual(content["text"], "ok \ufffd\ufffd bad")
        self.assertEqual(base64.b64decode(content["_base64"]), body)

    def test_cutInsideCharacter(self) -> None:
        """
        A body cut inside a multi-byte character loses only that character,
        and is not lossy.
        """
        body = ("é" * 10).encode()[:-1]
        log = Log()
        n = log.open()
        log.end(
            n,
            headers=[("Content-Type", "text/plain; charset=utf-8")],
            responseBody={"size": 100, "data": base64.b64encode(body).decode(), "_truncated": True},
        )
        entries, _ = self.exportLog(log)
        content = entries[0]["response"]["content"]
        self.assertEqual(content["text"], "é" * 9)
        self.assertTrue(content["_truncated"])
        self.assertNotIn("_base64", content)

    def test_binaryKeptAsData(self) -> None:
        """
        A binary type whose bytes are in the log still gets no text: its size
        and _sha256.
        """
        body = bytes(range(256))
        content = self.answer([("Content-Type", "application/octet-stream")], body)["content"]
        self.assertEqual(content, {"size": 256, "mimeType": "application/octet-stream", "_sha256": hashlib.sha256(body).hexdigest()})

    def test_requestBinary(self) -> None:
        """
        A request body that isn't text keeps readable text and the exact bytes
        in postData._base64.
        """
        body = b"\x00\x01binary\xff"
        log = Log()
        n = log.open(method="PUT", headers=[("Content-Type", "application/octet-stream")])
        log.end(n, requestBody=body)
        entries, _ = self.exportLog(log)
        post = entries[0]["request"]["postData"]
        self.assertEqual(post["mimeType"], "application/octet-stream")
        self.assertIn("binary", post["text"])
        self.assertEqual(base64.b64decode(post["_base64"]), body)


class CookieTests(HarTestCase):
    """
    Cookies both ways.
    """

    def test_setCookie(self) -> None:
        """
        Every Set-Cookie: values as sent, Max-Age from the answer's first
        byte (winning over Expires), Max-Age=0 the epoch, an unparseable
        Expires left out, a header with no '=' skipped.
        """
        response = self.answer(
            [
                ("Set-Cookie", "a=x=y; Max-Age=10; Expires=Wed, 21 Oct 2026 07:28:00 GMT"),
                ("Set-Cookie", "b=; Max-Age=0"),
                ("Set-Cookie", "c=\"quoted\"; Expires=garbage; SameSite=Lax"),
                ("Set-Cookie", "nonsense"),
                ("Set-Cookie", "d=1; expires=Thu, 01-Jan-2099 00:00:00 GMT; secure; httponly; path=/x; domain=.shop.test"),
            ]
        )
        self.assertEqual(
            response["cookies"],
            [
                {"name": "a", "value": "x=y", "expires": "2026-01-01T00:00:10.500Z", "httpOnly": False, "secure": False},
                {"name": "b", "value": "", "expires": "1970-01-01T00:00:00.000Z", "httpOnly": False, "secure": False},
                {"name": "c", "value": '"quoted"', "_sameSite": "Lax", "httpOnly": False, "secure": False},
                {
                    "name": "d",
                    "value": "1",
                    "expires": "2099-01-01T00:00:00.000Z",
                    "secure": True,
                    "httpOnly": True,
                    "path": "/x",
                    "domain": ".shop.test",
                },
            ],
        )


class UrlTests(HarTestCase):
    """
    URLs, query strings and redirects.
    """

    def test_queryString(self) -> None:
        """
        queryString holds decoded names and values, repeats and blanks kept.
        """
        log = Log()
        log.open(url="https://shop.test/p?a=1&a=2&b=%E2%82%AC+x&c&d=&e%20f=g%2Bh#frag")
        entries, _ = self.exportLog(log)
        self.assertEqual(
            entries[0]["request"]["queryString"],
            [
                {"name": "a", "value": "1"},
                {"name": "a", "value": "2"},
                {"name": "b", "value": "€ x"},
                {"name": "c", "value": ""},
                {"name": "d", "value": ""},
                {"name": "e f", "value": "g+h"},
            ],
        )

    def test_redirects(self) -> None:
        """
        redirectURL is absolute, resolved against the request's URL.
        """
        cases = [
            ("https://shop.test/a/b?x=1", "../c", "https://shop.test/c"),
            ("https://shop.test/a/b", "?page=2", "https://shop.test/a/b?page=2"),
            ("http://shop.test/", "//other.test/x", "http://other.test/x"),
            ("http://shop.test/", "https://shop.test/", "https://shop.test/"),
        ]
        log = Log()
        for url, location, _ in cases:
            n = log.open(url=url)
            log.end(n, status=301, headers=[("Location", location)])
        entries, _ = self.exportLog(log)
        self.assertEqual([e["response"]["redirectURL"] for e in entries], [c[2] for c in cases])

    def test_refusedBareHosts(self) -> None:
        """
        A refused bare host becomes https://host:443/ for a CONNECT (its own
        port when given), else http://host/.
        """
        cases = [
            ("CONNECT", "blocked.test", "https://blocked.test:443/"),
            ("CONNECT", "blocked.test:8443", "https://blocked.test:8443/"),
            ("GET", "blocked.test", "http://blocked.test/"),
            ("GET", "blocked.test:8080", "http://blocked.test:8080/"),
            ("POST", "https://blocked.test/x", "https://blocked.test/x"),
        ]
        log = Log()
        for method, url, _ in cases:
            n = log.open(method=method, url=url, server={"host": "blocked.test", "port": 443, "address": None})
            log.refuse(n, "not a site")
        entries, _ = self.exportLog(log)
        self.assertEqual([e["request"]["url"] for e in entries], [c[2] for c in cases])
        for entry in entries:
            self.assertEqual(entry["_refused"], {"reason": "not a site", "status": 403})
            self.assertEqual(entry["response"]["status"], -1)


#: The response of an entry that got no answer, whole (as Playwright writes it).
NO_ANSWER = {
    "status": -1,
    "statusText": "",
    "httpVersion": "",
    "cookies": [],
    "headers": [],
    "content": {"size": 0, "mimeType": "x-unknown"},
    "redirectURL": "",
    "headersSize": -1,
    "bodySize": -1,
}


class NoAnswerTests(HarTestCase):
    """
    Netlog's own answer to a refusal or failure is the answer the browser
    got, logged as the end line's response; in the HAR the entry got no
    answer.
    """

    def test_refused(self) -> None:
        """
        A refusal (a request or a CONNECT, whatever status netlog answered)
        has the no-answer response with status -1, and netlog's status in
        _refused; nothing of netlog's page shows.
        """
        log = Log()
        cases = [
            ("GET", "http://blocked.test/", "exchange", 403),
            ("POST", "http://live.test/upload", "exchange", 400),
            ("CONNECT", "https://live.test:25/", "tunnel", 403),
        ]
        for method, url, kind, status in cases:
            n = log.open(method=method, url=url, kind=kind, server={"host": "x.test", "port": 443, "address": None})
            log.refuse(n, "not allowed", status=status)
        entries, _ = self.exportLog(log)
        for entry, (_, _, _, status) in zip(entries, cases):
            self.assertEqual(entry["response"], NO_ANSWER)
            self.assertEqual(entry["_refused"], {"reason": "not allowed", "status": status})
            self.assertNotIn("_failed", entry)
        self.assertEqual(entries[2]["request"]["url"], "https://live.test:25/")
        self.assertIn("_tunnel", entries[2])

    def test_failedNetlogAnswered(self) -> None:
        """
        A failure netlog answered itself (its _failed has the status: a 502
        or a 504) has the no-answer response, and the status in _failed.
        """
        log = Log()
        for status in (502, 504):
            n = log.open(url=f"https://shop.test/{status}")
            log.fail(n, "the server took too long" if status == 504 else "the connection was refused", status=status)
        n = log.open(method="CONNECT", url="https://live.test:443/", kind="tunnel")
        log.fail(n, "live.test does not resolve", closed_by="proxy")
        entries, _ = self.exportLog(log)
        self.assertEqual([e["response"] for e in entries], [NO_ANSWER] * 3)
        self.assertEqual(
            [e["_failed"] for e in entries],
            [
                {"reason": "the connection was refused", "status": 502},
                {"reason": "the server took too long", "status": 504},
                {"reason": "live.test does not resolve", "status": 502},
            ],
        )

    def test_failedWithoutAnswer(self) -> None:
        """
        A failure whose line has a status but no response at all still gets
        status -1 and the status in _failed; one with neither (a proxy that
        restarted) gets status -1 and the reason alone.
        """
        log = Log()
        a = log.open()
        log.end(a, status=None, _failed={"reason": "the browser went away", "status": 502})
        b = log.open()
        log.end(b, status=None, _failed={"reason": "the proxy restarted"})
        entries, _ = self.exportLog(log)
        self.assertEqual([e["response"] for e in entries], [NO_ANSWER] * 2)
        self.assertEqual(entries[0]["_failed"], {"reason": "the browser went away", "status": 502})
        self.assertEqual(entries[1]["_failed"], {"reason": "the proxy restarted"})

    def test_failedAfterTheAnswerBegan(self) -> None:
        """
        A failure after the server's answer began (its _failed has no
        status) keeps that answer: status, headers and what of the body came.
        """
        log = Log()
        n = log.open()
        log.end(
            n,
            status=200,
            headers=[("Content-Type", "text/plain"), ("Content-Length", "100")],
            body=b"the first part",
            _failed={"reason": "the server reset the connection"},
        )
        entries, _ = self.exportLog(log)
        response = entries[0]["response"]
        self.assertEqual((response["status"], response["statusText"]), (200, "OK"))
        self.assertEqual(response["content"]["text"], "the first part")
        self.assertEqual(entries[0]["_failed"], {"reason": "the server reset the connection"})

    def test_oddMarks(self) -> None:
        """
        A _failed status that isn't an int is -1; a _refused that isn't an
        object still counts as a refusal.
        """
        log = Log()
        a = log.open()
        log.netlogAnswer(a, 502, {"_failed": {"reason": "x", "status": "502"}})
        b = log.open()
        log.netlogAnswer(b, 403, {"_refused": {"reason": "y"}})
        log.lines[-1] = log.lines[-1].replace(b'"_refused":{"reason":"y"}', b'"_refused":"y"')
        entries, _ = self.exportLog(log)
        self.assertEqual([e["response"] for e in entries], [NO_ANSWER] * 2)
        self.assertEqual(entries[0]["_failed"], {"reason": "x", "status": -1})
        self.assertEqual(entries[1]["_refused"], {"reason": "y", "status": -1})


class TimingTests(HarTestCase):
    """
    Timings and times.
    """

    def test_timings(self) -> None:
        """
        Each phase runs from the last time that happened; a phase that never
        happened is 0 (send, wait, receive) or -1; time is their sum.
        """
        log = Log()
        a = log.open(started=T0)
        log.end(a, times={"connected": T0 + 0.010, "sent": T0 + 0.012, "first_byte": T0 + 0.112, "end": T0 + 0.2})
        b = log.open(started=T0)
        log.fail(b, "connection refused", times={"connected": None, "sent": None, "first_byte": None, "end": T0 + 0.003})
        c = log.open(started=T0 + 5)
        log.end(c, times={"connected": None, "sent": T0 + 5.5, "first_byte": T0 + 5.25, "end": T0 + 6})
        entries, _ = self.exportLog(log)
        self.assertEqual(entries[0]["timings"], {"blocked": -1, "dns": -1, "connect": 10, "send": 2, "wait": 100, "receive": 88, "ssl": -1})
        self.assertEqual(entries[0]["time"], 200)
        self.assertEqual(entries[1]["timings"], {"blocked": -1, "dns": -1, "connect": -1, "send": 0, "wait": 0, "receive": 3, "ssl": -1})
        self.assertEqual(entries[1]["_failed"], {"reason": "connection refused", "status": 502})
        # a first byte before the request had gone up whole (an early answer)
        self.assertEqual(entries[2]["timings"]["send"], 500)
        self.assertEqual(entries[2]["timings"]["wait"], 0)
        self.assertEqual(entries[2]["timings"]["receive"], 500)
        self.assertEqual(entries[2]["startedDateTime"], "2026-01-01T00:00:05.000Z")


class StandinTests(HarTestCase):
    """
    The stand-in keeps sizes only, and tunnels.
    """

    def test_sizeOnly(self) -> None:
        """
        A body kept as its size only: bodySize and content.size, no text; a
        request body's postData has its type and no text.
        """
        log = Log()
        n = log.open(method="POST", url="http://live.test/form", headers=[("Content-Type", "application/x-www-form-urlencoded")], proxy="standin")
        log.end(n, headers=[("Content-Type", "text/html")], responseBody={"size": 5000}, request_body={"size": 42})
        entries, _ = self.exportLog(log)
        request, response = entries[0]["request"], entries[0]["response"]
        self.assertEqual(request["bodySize"], 42)
        self.assertEqual(request["postData"], {"mimeType": "application/x-www-form-urlencoded"})
        self.assertEqual(response["bodySize"], 5000)
        self.assertEqual(response["content"], {"size": 5000, "mimeType": "text/html"})

    def test_openTunnel(self) -> None:
        """
        A tunnel still open is marked _open, its bytes not known yet.
        """
        log = Log()
        log.open(method="CONNECT", url="https://live.test:8443/", kind="tunnel", server={"host": "live.test", "port": 8443, "address": "10.0.0.1"})
        entries, _ = self.exportLog(log)
        self.assertTrue(entries[0]["_open"])
        self.assertEqual(entries[0]["_tunnel"], {"host": "live.test", "port": 8443, "bytes_up": None, "bytes_down": None})
        self.assertEqual(entries[0]["response"]["status"], -1)

    def test_unparsed(self) -> None:
        """
        An answer that couldn't be read as HTTP: status -1 and _unparsed
        with what passed.
        """
        log = Log()
        n = log.open(url="http://live.test/")
        log.end(n, status=None, _unparsed=True, bytes={"up": 80, "down": 1234})
        entries, _ = self.exportLog(log)
        self.assertEqual(entries[0]["response"]["status"], -1)
        self.assertEqual(entries[0]["_unparsed"], {"bytes_up": 80, "bytes_down": 1234})

    def test_interim(self) -> None:
        """
        A 100 Continue that passed is listed in response._interim.
        """
        response = self.answer([("Content-Type", "text/plain")], b"done", interim=[100])
        self.assertEqual(response["_interim"], [100])
        self.assertEqual(response["status"], 200)


class UnreadableTests(HarTestCase):
    """
    Lines the export can't use are counted, never fatal.
    """

    def test_unreadable(self) -> None:
        """
        A line that isn't JSON, a cut line, an end with no open, a second end
        and a last line with no newline are counted in _unreadable; every
        usable exchange still gets its entry, and a cut end line followed by
        a restarted proxy's end gives the restart's reason.
        """
        log = Log()
        a = log.open(url="https://shop.test/a")
        log.end(a)
        log.raw(b"this is not json\n")
        b = log.open(url="https://shop.test/b")
        cutEnd = log.next
        from netlog.core.logline import encodeLine

        whole = encodeLine(cutEnd, "end", b, 1, T0, {"ended": T0, "response": {"status": 200}})
        log.raw(whole[: len(whole) // 2] + b"\n")
        log.end(b, status=None, _failed={"reason": "the proxy restarted"})
        log.raw(encodeLine(log.next, "end", 999, 1, T0, {"ended": T0}))
        log.end(a)
        log.raw(b"[1, 2]\n")
        log.raw(b'{"n": 0, "type": "open"}\n')
        c = log.open(url="https://shop.test/c")
        log.raw(b'{"n":%d,"type":"end","id":%d,"open_from":1,"time":1' % (log.next, c))
        entries, logObject = self.exportLog(log)
        self.assertEqual([e["request"]["url"] for e in entries], ["https://shop.test/a", "https://shop.test/b", "https://shop.test/c"])
        self.assertEqual(entries[1]["_failed"], {"reason": "the proxy restarted"})
        self.assertTrue(entries[2]["_open"])
        # not JSON, the cut end, the end with no open, the second end of a,
        # [1, 2], n 0, the last line with no newline
        self.assertEqual(logObject["_unreadable"], 7)

    def test_foreignOrder(self) -> None:
        """
        Lines whose fields come in another order than netlog's are still
        read (by parsing them whole).
        """
        log = Log()
        log.raw(json.dumps({"type": "open", "id": 1, "n": 1, "kind": "exchange", "started": T0, "request": {"method": "GET", "url": "https://x.test/", "headers": []}}).encode() + b"\n")
        log.raw(json.dumps({"id": 1, "type": "end", "n": 2, "response": {"status": 204, "headers": []}}).encode() + b"\n")
        entries, logObject = self.exportLog(log)
        self.assertEqual(entries[0]["response"]["status"], 204)
        self.assertEqual(logObject["_unreadable"], 0)

    def test_wrongTypes(self) -> None:
        """
        An open line whose fields have the wrong types still gives an entry
        that passes the schema.
        """
        log = Log()
        log.raw(json.dumps({"n": 1, "type": "open", "id": 1, "request": {"method": 5, "url": ["x"], "headers": "h", "headers_size": "big"}, "server": "nowhere", "started": "soon"}).encode() + b"\n")
        log.raw(json.dumps({"n": 2, "type": "end", "id": 1, "times": [], "response": {"status": "ok", "headers": [["a"]], "body": {"size": "x", "data": 7}}, "request_body": "x"}).encode() + b"\n")
        entries, logObject = self.exportLog(log)
        self.assertEqual(len(entries), 1)

    def test_empty(self) -> None:
        """
        An empty log exports a HAR with no entries that passes the schema.
        """
        entries, logObject = self.exportLog(Log())
        self.assertEqual(entries, [])
        self.assertEqual(logObject["_unreadable"], 0)


class UntypedTests(HarTestCase):
    """
    An answer with no Content-Type.
    """

    def test_untyped(self) -> None:
        """
        With no type named, a body that reads as UTF-8 is text; one that
        doesn't is bytes: size and _sha256.
        """
        self.assertEqual(self.answer([], "héllo".encode())["content"]["text"], "héllo")
        body = b"\x89PNG\r\n\x1a\n\xff\x00"
        content = self.answer([], body)["content"]
        self.assertEqual(content, {"size": len(body), "mimeType": "x-unknown", "_sha256": hashlib.sha256(body).hexdigest()})


class RulesTests(HarTestCase):
    def test_rules(self) -> None:
        """
        An entry a rule acted on carries its open line's C{_rules}, each
        entry as C{rule} and C{action} strings; an entry no rule acted on
        has none, and a C{_rules} that isn't a list is left out.
        """
        log = Log()
        blocked = log.open(url="http://tracker.test/", _rules=[{"rule": "block[1]", "action": "blocked"}])
        log.refuse(blocked, "block[1] blocks it")
        changed = log.open(_rules=[{"rule": "headers[0]", "action": "set X-Auto-Login"}, {"rule": 3}, "odd"])
        log.end(changed)
        plain = log.open()
        log.end(plain)
        odd = log.open(_rules="block[0]")
        log.end(odd)
        entries, _ = self.exportLog(log)
        self.assertEqual([e.get("_rules") for e in entries], [
            [{"rule": "block[1]", "action": "blocked"}],
            [{"rule": "headers[0]", "action": "set X-Auto-Login"}, {"rule": "3", "action": ""}],
            None,
            None,
        ])


class ReplayTests(HarTestCase):
    """
    A replay run's entries (C{docs/replay.rst}): the marks carried, and the
    recorded server's address as C{serverIPAddress}.
    """

    def test_recordedServer(self) -> None:
        """
        A replayed entry, whose open line names no address (nothing was
        connected to), has the address its end line's C{_replayedServer}
        names, the recording's; an address of the open line's own wins; a
        C{_replayedServer} that isn't an address gives none.
        """
        log = Log()
        replayed = {"host": "shop.test", "port": 443, "address": None}
        n = log.open(server=replayed)
        log.end(n, _replayed=3, _replayedServer={"address": "10.0.0.7", "port": 7770})
        n = log.open(server={"host": "shop.test", "port": 443, "address": "127.0.0.1"})
        log.end(n, _replayed=5, _replayedServer={"address": "10.0.0.7", "port": 7770})
        n = log.open(server=replayed)
        log.end(n, _replayed=7, _replayedServer={"address": "not an address", "port": None})
        n = log.open(server=replayed)
        log.end(n, _unmatched=True)
        entries, _ = self.exportLog(log)
        self.assertEqual([e.get("serverIPAddress") for e in entries], ["10.0.0.7", "127.0.0.1", None, None])
        self.assertEqual([e.get("_replayed") for e in entries], [3, 5, 7, None])
        self.assertNotIn("_replayedServer", entries[0])
        self.assertTrue(entries[3]["_unmatched"])
