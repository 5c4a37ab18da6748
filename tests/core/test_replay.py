"""
Replay's matching rules, as tables: a recording (a netlog log made with the
proxy's own record builders, or a HAR) indexed, then requests matched to
it. Each rule has a case that only it gets right.
"""

from __future__ import annotations

import base64
import json
from typing import Any, Hashable
from urllib.parse import parse_qsl, urlsplit

from hypothesis import given, settings
from hypothesis import strategies as st

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.har import LineIndex, exchangeLines
from netlog.core.replay import (
    DEFAULT_PORTS,
    END_HEAD_SIZE,
    MatchRules,
    Recorded,
    RecordedAnswer,
    RecordedMessage,
    ReplayIndex,
    SKIP_BODY_NOT_KEPT,
    SKIP_FAILED,
    SKIP_REFUSED,
    SKIP_UNANSWERED,
    answerFromHar,
    answerFromLog,
    bodyKey,
    answerEvents,
    handshake,
    messageFrames,
    recordedFromHar,
    recordedFromLog,
    recordedResponse,
    refreshed,
    replayMarks,
    requestKey,
    webSocketPlan,
)
from tests.proxy.recordings import Exchange, lines


class Recording:
    """
    A netlog log of C{exchanges}, indexed with C{rules}; L{ask} answers a
    request with the recorded body it matched (or L{None}).
    """

    def __init__(self, exchanges: list[Exchange], rules: MatchRules = MatchRules()) -> None:
        self.data = lines(exchanges)
        self.rules = rules
        self.index = ReplayIndex()
        lineIndex = LineIndex()
        lineIndex.addLines(0, self.data)
        recordedFromLog(exchangeLines(lineIndex), self.readAt, rules, self.index)

    def readAt(self, offset: int, length: int) -> bytes:
        return self.data[offset:offset + length]

    def answerOf(self, recorded: Recorded) -> RecordedAnswer:
        o, ol, e, el, notes = recorded.where
        return answerFromLog(self.readAt(o, ol), self.readAt(e, el), [self.readAt(a, n) for a, n in notes])

    def ask(self, method: str, url: str, body: bytes = b"", contentType: str | None = None) -> bytes | None:
        matched = self.index.match(requestKey(method, url, self.rules), bodyKey(body, contentType, self.rules),
                                   self.answerOf)
        return matched[1].body if matched is not None else None


class URLTests(SynchronousTestCase):
    def test_table(self) -> None:
        """
        The method, scheme, host, port, path and query (as a multiset)
        decide; the query's order and a port named as the scheme's default
        don't.
        """
        recording = Recording([
            Exchange("GET", "http://shop.test/a?x=1&y=2", body=b"a"),
            Exchange("POST", "http://shop.test/a?x=1&y=2", body=b"post"),
            Exchange("GET", "https://shop.test/a?x=1&y=2", body=b"https"),
            Exchange("GET", "http://shop.test:8080/a?x=1&y=2", body=b"8080"),
            Exchange("GET", "http://shop.test/a?x=1&x=1&y=2", body=b"twice"),
        ])
        table: list[tuple[str, str, bytes | None]] = [
            ("GET", "http://shop.test/a?x=1&y=2", b"a"),
            ("GET", "http://shop.test:80/a?y=2&x=1", b"a"),
            ("GET", "http://SHOP.test/a?x=1&y=2", b"a"),
            ("POST", "http://shop.test/a?x=1&y=2", b"post"),
            ("GET", "https://shop.test:443/a?x=1&y=2", b"https"),
            ("GET", "http://shop.test:8080/a?y=2&x=1", b"8080"),
            ("GET", "http://shop.test/a?x=1&y=2&x=1", b"twice"),
            ("GET", "http://shop.test/b?x=1&y=2", None),
            ("GET", "http://shop.test/a?x=1", None),
            ("PUT", "http://shop.test/a?x=1&y=2", None),
            ("GET", "http://shop.test:81/a?x=1&y=2", None),
        ]
        for method, url, expected in table:
            self.assertEqual(recording.ask(method, url), expected, (method, url))

    def test_linesReadEitherWay(self) -> None:
        """
        An open line whose URL JSON escapes (a quote, a backslash) is
        parsed whole, one whose URL is plain (non-ASCII among it) is read
        by its key order: both match, as does one netlog didn't write in
        its key order.
        """
        recording = Recording([
            Exchange("GET", 'http://shop.test/q?x="1"', body=b"quoted"),
            Exchange("GET", "http://shop.test/a\\b", body=b"backslash"),
            Exchange("GET", "http://shop.test/café?q=crème", body=b"plain"),
        ])
        # The same exchange with its open line's keys in another order.
        reordered = Recording([])
        reordered.data = (b'{"type":"open","n":1,"id":1,"kind":"exchange","request":{"url":"http://shop.test/r",'
                          b'"method":"GET","headers":[]}}\n' + lines([Exchange("GET", "http://x.test/", body=b"r")])
                          .split(b"\n")[1] + b"\n")
        lineIndex = LineIndex()
        lineIndex.addLines(0, reordered.data)
        recordedFromLog(exchangeLines(lineIndex), reordered.readAt, MatchRules(), reordered.index)
        answers = [recording.ask("GET", url) for url in
                   ('http://shop.test/q?x="1"', "http://shop.test/a\\b", "http://shop.test/café?q=crème")]
        self.assertEqual(answers + [reordered.ask("GET", "http://shop.test/r")], [b"quoted", b"backslash", b"plain", b"r"])

    def test_ignoredParam(self) -> None:
        """
        A cache-buster (Playwright #34171: a timestamp parameter that
        changes each run) matches when ignored, and only then.
        """
        recorded = [Exchange("GET", "http://shop.test/feed?t=1700000000&page=2", body=b"feed")]
        strict = Recording(recorded)
        ignoring = Recording(recorded, MatchRules(ignoreParams=frozenset({"t", "_"})))
        self.assertIsNone(strict.ask("GET", "http://shop.test/feed?t=1800000000&page=2"))
        self.assertEqual(ignoring.ask("GET", "http://shop.test/feed?page=2&t=1800000000"), b"feed")
        self.assertEqual(ignoring.ask("GET", "http://shop.test/feed?page=2"), b"feed")
        self.assertIsNone(ignoring.ask("GET", "http://shop.test/feed?t=1&page=3"))


def referenceKey(method: str, url: str, rules: MatchRules) -> Hashable:
    """
    L{requestKey} as L{urlsplit} and L{parse_qsl} read the URL, with no
    short cut: what the short cut must agree with.
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = DEFAULT_PORTS.get(scheme, 0)
    query = tuple(sorted((name, value) for name, value in parse_qsl(parts.query, keep_blank_values=True)
                         if name not in rules.ignoreParams))
    return (method.upper(), {"ws": "http", "wss": "https"}.get(scheme, scheme), (parts.hostname or "").lower(),
            port, parts.path or "/", query)


#: Pieces URLs are made of, the awkward ones among them.
_URL_PIECES = ["http", "HTTPS", "ws", "wss", "x+y", "://", ":", "/", "//", "?", "#", "&", "=", "%20", "%zz",
               "+", "@", "[", "]", "[::1]", "shop.test", "SHOP.Test", "8080", "080", "99999", "a", "t", "é",
               " ", "\t", "\n", "\x01", ";", ".."]


class RequestKeyTests(SynchronousTestCase):
    def test_table(self) -> None:
        """
        URLs the short cut reads itself and URLs it leaves to L{urlsplit}
        get the key L{urlsplit} gives.
        """
        rules = MatchRules(ignoreParams=frozenset({"t"}))
        for url in ["http://shop.test/a?x=1&y=2", "HTTP://Shop.Test:0080/a?y=2&x=1#top", "https://shop.test",
                    "http://shop.test:/", "http://shop.test:99999/", "http://u@shop.test/",
                    "http://[::1]:8080/x", "http://shop.test/a?q=a+b&r=%41&t=1", "http://shop.test/?a&&b=",
                    "http://shop.test/a b", "http://shop.test/\tx", "wss://shop.test/ws", "mailto:a@b",
                    "http://shop.test/é?é=1", "http://shop.test?x=1", "http://shop.test#f?x=1"]:
            self.assertEqual(requestKey("get", url, rules), referenceKey("get", url, rules), url)

    @settings(max_examples=500, deadline=None)
    @given(st.sampled_from(["http", "HTTPS", "ws", "x+y", "", "1a"]), st.sampled_from(["://", ":", ":///", ""]),
           st.lists(st.sampled_from(_URL_PIECES), max_size=14))
    def test_agrees(self, scheme: str, separator: str, pieces: list[str]) -> None:
        """
        Whatever the URL, the key is the one L{urlsplit} gives.
        """
        url = scheme + separator + "".join(pieces)
        rules = MatchRules(ignoreParams=frozenset({"t"}))
        try:
            expected = referenceKey("GET", url, rules)
        except ValueError:
            self.assertRaises(ValueError, requestKey, "GET", url, rules)
            return
        self.assertEqual(requestKey("GET", url, rules), expected, url)


class BodyTests(SynchronousTestCase):
    def test_graphQL(self) -> None:
        """
        Requests with bodies to one URL are told apart by their bodies'
        exact bytes (Playwright #19948: GraphQL calls to one endpoint).
        """
        url = "https://shop.test/graphql"
        recording = Recording([
            Exchange("POST", url, body=b'{"cart":1}', requestBody=b'{"query":"{cart}"}',
                     requestType="application/json"),
            Exchange("POST", url, body=b'{"user":1}', requestBody=b'{"query":"{user}"}',
                     requestType="application/json"),
        ])
        self.assertEqual(recording.ask("POST", url, b'{"query":"{user}"}', "application/json"), b'{"user":1}')
        self.assertEqual(recording.ask("POST", url, b'{"query":"{cart}"}', "application/json"), b'{"cart":1}')
        self.assertIsNone(recording.ask("POST", url, b'{"query": "{cart}"}', "application/json"))
        self.assertIsNone(recording.ask("POST", url))

    def test_ignoredField(self) -> None:
        """
        A JSON field (at any depth) or a form field named to be ignored is
        left out of the comparison; without the rule the bodies differ.
        """
        url = "https://shop.test/api"
        recorded = [
            Exchange("POST", url, body=b"json", requestBody=b'{"q":"x","meta":{"ts":1,"id":7}}',
                     requestType="application/json"),
            Exchange("POST", url + "/form", body=b"form", requestBody=b"q=x&nonce=abc",
                     requestType="application/x-www-form-urlencoded"),
        ]
        strict = Recording(recorded)
        rules = MatchRules(ignoreFields=frozenset({"ts", "nonce"}))
        ignoring = Recording(recorded, rules)
        laterJson = b'{"meta":{"id":7,"ts":99},"q":"x"}'
        laterForm = b"q=x&nonce=zzz"
        self.assertIsNone(strict.ask("POST", url, laterJson, "application/json"))
        self.assertIsNone(strict.ask("POST", url + "/form", laterForm, "application/x-www-form-urlencoded"))
        self.assertEqual(ignoring.ask("POST", url, laterJson, "application/json"), b"json")
        self.assertEqual(ignoring.ask("POST", url + "/form", laterForm, "application/x-www-form-urlencoded"),
                         b"form")
        self.assertIsNone(ignoring.ask("POST", url, b'{"meta":{"id":8,"ts":99},"q":"x"}', "application/json"))


    def test_multipartBoundary(self) -> None:
        """
        A multipart upload matches whatever boundary the browser drew this
        time; its parts still count.
        """
        url = "https://shop.test/upload"

        def upload(boundary: str, data: str) -> tuple[bytes, str]:
            body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n{data}\r\n"
                    f"--{boundary}--\r\n").encode()
            return body, f"multipart/form-data; boundary={boundary}"

        body, contentType = upload("----WebKitFormBoundaryAAAA", "photo")
        recording = Recording([Exchange("POST", url, body=b"ok", requestBody=body, requestType=contentType)])
        self.assertEqual(recording.ask("POST", url, *upload("----WebKitFormBoundaryBBBB", "photo")), b"ok")
        self.assertIsNone(recording.ask("POST", url, *upload("----WebKitFormBoundaryCCCC", "other")))


class RepeatTests(SynchronousTestCase):
    def test_recordedOrder(self) -> None:
        """
        The k-th identical request gets the k-th recorded answer, and the
        last repeats after that (Playwright #32272: every repeat got the
        first).
        """
        url = "http://shop.test/counter"
        recording = Recording([Exchange("GET", url, body=b"%d" % i) for i in (1, 2, 3)])
        self.assertEqual([recording.ask("GET", url) for _ in range(5)], [b"1", b"2", b"3", b"3", b"3"])


class NeverServedTests(SynchronousTestCase):
    def test_failedDuplicate(self) -> None:
        """
        A retried request's failed first try is never served: the request
        gets the retry's answer (Playwright #40682).
        """
        url = "http://shop.test/flaky"
        recording = Recording([
            Exchange("GET", url, failed="127.0.0.1:8080 closed the connection in the middle of the answer"),
            Exchange("GET", url, body=b"retried"),
        ])
        self.assertEqual(recording.ask("GET", url), b"retried")
        self.assertEqual(recording.ask("GET", url), b"retried")
        self.assertEqual(recording.index.skipped, {SKIP_FAILED: 1})

    def test_foundWhenServed(self) -> None:
        """
        Indexing reads only the head of an end line whose request had no
        body, so a failure is found when its answer is first read back:
        the next recorded answer for the request is served in its place,
        or, with none left, nothing (the unmatched answer).
        """
        url = "http://shop.test/flaky"
        recording = Recording([
            Exchange("GET", url, body=b"first"),
            Exchange("GET", url, failed="127.0.0.1:8080 closed the connection in the middle of the answer"),
            Exchange("GET", url, body=b"third"),
            Exchange("GET", "http://shop.test/cut", failed="127.0.0.1:8080 closed the connection in the middle"),
        ])
        self.assertEqual(recording.index.skipped, {})
        self.assertEqual([recording.ask("GET", url) for _ in range(4)], [b"first", b"third", b"third", b"third"])
        self.assertIsNone(recording.ask("GET", "http://shop.test/cut"))
        self.assertIsNone(recording.ask("GET", "http://shop.test/cut"))
        self.assertEqual(recording.index.skipped, {SKIP_FAILED: 2})

    def test_endHeadOnly(self) -> None:
        """
        Of an end line whose request had no body, indexing reads at most
        L{END_HEAD_SIZE} bytes; of one whose request had a body, all of it
        (the body is matched by).
        """
        data = lines([Exchange("GET", "http://shop.test/big", body=b"x" * 10000),
                      Exchange("POST", "http://shop.test/form", body=b"y" * 10000, requestBody=b"a=1",
                               requestType="application/x-www-form-urlencoded")])
        lineIndex = LineIndex()
        lineIndex.addLines(0, data)
        reads: list[int] = []

        def readAt(offset: int, length: int) -> bytes:
            reads.append(length)
            return data[offset:offset + length]

        index = ReplayIndex()
        recordedFromLog(exchangeLines(lineIndex), readAt, MatchRules(), index)
        self.assertEqual(len(index), 2)
        self.assertLessEqual(max(reads[:2]), END_HEAD_SIZE)
        self.assertGreater(max(reads[2:]), 10000)

    def test_refusedAndNotKept(self) -> None:
        """
        A refusal and an answer whose body wasn't kept (a binary recorded
        without C{--keep-bodies all}) are never served.
        """
        data = lines([Exchange("GET", "http://other.test/", refused=True),
                      Exchange("GET", "http://shop.test/logo.png", body=b"x")])
        # The second answer as the log keeps a binary without --keep-bodies all.
        data = data.replace(b'"data":"eA=="', b'"sha256":"2d71"')
        index = ReplayIndex()
        lineIndex = LineIndex()
        lineIndex.addLines(0, data)
        recordedFromLog(exchangeLines(lineIndex), lambda o, n: data[o:o + n], MatchRules(), index)

        def answerOf(recorded: Recorded) -> RecordedAnswer:
            o, ol, e, el, _ = recorded.where
            return answerFromLog(data[o:o + ol], data[e:e + el])

        self.assertFalse(index.firstServable(answerOf))
        self.assertEqual(len(index), 0)
        self.assertEqual(index.skipped, {SKIP_REFUSED: 1, SKIP_BODY_NOT_KEPT: 1})


def harOf(entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {"log": {"version": "1.2", "creator": {"name": "x", "version": "1"}, "entries": entries}}


def harEntry(method: str, url: str, status: int, content: dict[str, Any],
             headers: list[dict[str, str]] | None = None, post: str | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"method": method, "url": url, "headers": []}
    if post is not None:
        request["postData"] = {"mimeType": "application/json", "text": post}
    return {"request": request, "response": {"status": status, "statusText": "OK",
                                             "headers": headers or [], "content": content},
            "timings": {"wait": 12.0}}


class HarTests(SynchronousTestCase):
    def test_textAndBase64(self) -> None:
        """
        A HAR's C{content.text} is the body as text (UTF-8) or, with
        C{encoding: base64}, its base64; the decoded body's
        C{Content-Encoding} is dropped; Playwright's C{status: -1} (no
        answer) is never served.
        """
        har = harOf([
            harEntry("GET", "https://shop.test/", 200, {"size": 6, "mimeType": "text/html", "text": "héllo"},
                     [{"name": "Content-Type", "value": "text/html"}, {"name": "Content-Encoding", "value": "br"}]),
            harEntry("GET", "https://shop.test/logo.png", 200,
                     {"size": 4, "mimeType": "image/png", "text": base64.b64encode(b"\x89PNG").decode(),
                      "encoding": "base64"}),
            harEntry("GET", "https://shop.test/gone", -1, {"size": 0, "mimeType": "x-unknown"}),
            harEntry("POST", "https://shop.test/login", 302, {"size": -1, "mimeType": "text/html"},
                     [{"name": "location", "value": "/account"}]),
            harEntry("GET", "https://shop.test/logo.svg", 200, {"size": 10, "mimeType": "image/svg+xml"}),
            harEntry("GET", "https://shop.test/latin1", 200,
                     {"size": 6, "mimeType": "text/html; charset=ISO-8859-1", "text": "crème"}),
            harEntry("POST", "https://shop.test/api", 200, {"size": 2, "mimeType": "application/json", "text": "{}"},
                     post='{"a":1}'),
        ])
        index = ReplayIndex()
        rules = MatchRules()
        recordedFromHar(json.loads(json.dumps(har)), rules, index)
        self.assertEqual(len(index), 5)

        def answerOf(recorded: Recorded) -> RecordedAnswer:
            return answerFromHar(har["log"]["entries"][recorded.where])

        latin1 = index.match(requestKey("GET", "https://shop.test/latin1", rules), None, answerOf)
        assert latin1 is not None
        self.assertEqual(latin1[1].body, "crème".encode("latin-1"))
        self.assertEqual(index.skipped, {SKIP_UNANSWERED: 1, SKIP_BODY_NOT_KEPT: 1})
        redirect = index.match(requestKey("POST", "https://shop.test/login", rules), None, answerOf)
        assert redirect is not None
        self.assertEqual(onTheWire(redirect[1], b"POST"),
                         b"HTTP/1.1 302 OK\r\nlocation: /account\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
        page = index.match(requestKey("GET", "https://shop.test/", rules), None, answerOf)
        assert page is not None
        answer = page[1]
        self.assertEqual(answer.body, "héllo".encode())
        self.assertEqual(answer.headers, [(b"Content-Type", b"text/html")])
        self.assertEqual(answer.wait, 0.012)
        logo = index.match(requestKey("GET", "https://shop.test/logo.png", rules), None, answerOf)
        assert logo is not None
        self.assertEqual(logo[1].body, b"\x89PNG")
        self.assertIsNone(index.match(requestKey("GET", "https://shop.test/gone", rules), None, answerOf))
        api = index.match(requestKey("POST", "https://shop.test/api", rules), bodyKey(b'{"a":1}', None, rules),
                          answerOf)
        self.assertEqual(api[0].mark if api else None, 6)


    def test_bodyNotKept(self) -> None:
        """
        A POST a HAR has no C{postData} for (Playwright leaves out a
        multipart upload's) matches the same request with any body, when no
        recorded body matches exactly; a GET without one still matches only
        a request without a body.
        """
        har = harOf([
            harEntry("POST", "https://shop.test/upload", 200, {"size": 2, "mimeType": "text/html", "text": "up"}),
            harEntry("POST", "https://shop.test/upload", 200, {"size": 5, "mimeType": "text/html", "text": "exact"},
                     post='{"a":1}'),
            harEntry("GET", "https://shop.test/page", 200, {"size": 1, "mimeType": "text/html", "text": "p"}),
        ])
        index = ReplayIndex()
        rules = MatchRules()
        recordedFromHar(har, rules, index)

        def answerOf(recorded: Recorded) -> RecordedAnswer:
            return answerFromHar(har["log"]["entries"][recorded.where])

        upload = requestKey("POST", "https://shop.test/upload", rules)
        anyBody = index.match(upload, bodyKey(b"--x\r\nfile\r\n--x--", "multipart/form-data; boundary=x", rules),
                              answerOf)
        exact = index.match(upload, bodyKey(b'{"a":1}', "application/json", rules), answerOf)
        self.assertEqual((anyBody[0].mark if anyBody else None, exact[0].mark if exact else None), (0, 1))
        self.assertIsNone(index.match(requestKey("GET", "https://shop.test/page", rules), bodyKey(b"x", None, rules),
                                      answerOf))


def onTheWire(answer: RecordedAnswer, method: bytes) -> bytes:
    """
    The events a recorded answer is handed on as, in the HTTP/1.1 bytes a
    browser's side that relays the framing sends.
    """
    return b"".join(event.raw for event in answerEvents(answer, method))


class FramedTests(SynchronousTestCase):
    def test_framedAgain(self) -> None:
        """
        The recorded fields in order less the hop-by-hop ones; a chunked
        body stays chunked (one chunk), and any other framing (a length the
        recording cut among them) becomes, in its place, the body's length.
        """
        answer = RecordedAnswer(200, b"OK", [(b"Content-Type", b"text/plain"), (b"Transfer-Encoding", b"chunked"),
                                             (b"Connection", b"keep-alive"), (b"Set-Cookie", b"a=1"),
                                             (b"Keep-Alive", b"timeout=5"), (b"Set-Cookie", b"b=2")],
                                b"hello", False, 0.0)
        self.assertEqual(onTheWire(answer, b"GET"),
                         b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n"
                         b"Set-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        gzipped = RecordedAnswer(200, b"OK", [(b"Content-Encoding", b"gzip"), (b"Content-Length", b"4"),
                                              (b"Proxy-Connection", b"close")], b"\x1f\x8b\x08\x00", False, 0.0)
        self.assertEqual(onTheWire(gzipped, b"GET"),
                         b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\n\x1f\x8b\x08\x00")
        cut = RecordedAnswer(200, b"", [(b"content-length", b"3000000")], b"abc", True, 0.0)
        self.assertEqual(onTheWire(cut, b"GET"), b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")

    def test_bodiless(self) -> None:
        """
        A C{HEAD}'s answer and a C{304} keep their recorded length and
        carry no body.
        """
        answer = RecordedAnswer(200, b"OK", [(b"Content-Length", b"42")], b"", False, 0.0)
        self.assertEqual(onTheWire(answer, b"HEAD"), b"HTTP/1.1 200 OK\r\nContent-Length: 42\r\n\r\n")
        answer = RecordedAnswer(304, b"Not Modified", [(b"ETag", b'"x"')], b"", False, 0.0)
        self.assertEqual(onTheWire(answer, b"GET"), b'HTTP/1.1 304 Not Modified\r\nETag: "x"\r\n\r\n')


class AsRecordedTests(SynchronousTestCase):
    def test_cutKeepsRecorded(self) -> None:
        """
        A body the recording cut is sent framed by what was kept, and its
        entry keeps the recorded headers (its C{Content-Length}), head size
        and body size, marked C{_truncated} as the recording's is; the
        marks name the recorded line and server.
        """
        data = lines([Exchange("GET", "http://shop.test/big", body=b"abc", truncated=True),
                      Exchange("GET", "http://shop.test/small", body=b"abc")])
        # The first was answered from 127.0.0.1; the second names no address.
        data = data.replace(b'"address":null', b'"address":"127.0.0.1"', 1)
        recording = Recording([])
        recording.data = data
        lineIndex = LineIndex()
        lineIndex.addLines(0, data)
        recordedFromLog(exchangeLines(lineIndex), recording.readAt, MatchRules(), recording.index)
        big = recording.index.match(requestKey("GET", "http://shop.test/big", MatchRules()), None,
                                    recording.answerOf)
        small = recording.index.match(requestKey("GET", "http://shop.test/small", MatchRules()), None,
                                      recording.answerOf)
        assert big is not None and small is not None
        self.assertEqual(replayMarks(*big), {"_replayed": 1, "_replayedCut": True,
                                             "_replayedServer": {"address": "127.0.0.1", "port": 8080}})
        self.assertEqual(replayMarks(*small), {"_replayed": 3})
        self.assertEqual(onTheWire(big[1], b"GET"),
                         b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nabc")
        # The end line's response as the replay's exchange builds it.
        sent = {"status": 200, "reason": "OK", "version": "HTTP/2", "headers": [["content-type", "text/plain"],
                ["content-length", "3"]], "headers_size": 9, "body": {"size": 3, "data": "YWJj"}}
        self.assertEqual(recordedResponse(sent, big[1]), {
            "status": 200, "reason": "OK", "version": "HTTP/2",
            "headers": [["Content-Type", "text/plain"], ["Content-Length", "103"]], "headers_size": 50,
            "body": {"size": 103, "data": "YWJj", "_truncated": True}})
        self.assertIs(recordedResponse(sent, small[1]), sent)


class RefreshTests(SynchronousTestCase):
    def test_datesMoved(self) -> None:
        """
        C{--replay-refresh}: C{Date} becomes now; C{Expires} and a cookie's
        C{Expires} move by as much (a recorded session cookie hasn't run
        out); other fields and C{Max-Age} stay.
        """
        answer = RecordedAnswer(200, b"OK", [
            (b"Date", b"Mon, 01 Jan 2024 00:00:00 GMT"),
            (b"Expires", b"Mon, 01 Jan 2024 01:00:00 GMT"),
            (b"Set-Cookie", b"sid=1; Expires=Tue, 02 Jan 2024 00:00:00 GMT; Path=/"),
            (b"Set-Cookie", b"a=2; Max-Age=60"),
            (b"X-Other", b"Mon, 01 Jan 2024 00:00:00 GMT"),
        ], b"", False, 0.0)
        now = 1800000000.0  # Fri, 15 Jan 2027 08:00:00 GMT
        self.assertEqual(refreshed(answer, now).headers, [
            (b"Date", b"Fri, 15 Jan 2027 08:00:00 GMT"),
            (b"Expires", b"Fri, 15 Jan 2027 09:00:00 GMT"),
            (b"Set-Cookie", b"sid=1; Expires=Sat, 16 Jan 2027 08:00:00 GMT; Path=/"),
            (b"Set-Cookie", b"a=2; Max-Age=60"),
            (b"X-Other", b"Mon, 01 Jan 2024 00:00:00 GMT"),
        ])
        undated = RecordedAnswer(200, b"OK", [(b"Expires", b"Mon, 01 Jan 2024 01:00:00 GMT")], b"", False, 0.0)
        self.assertEqual(refreshed(undated, now), undated)


class WebSocketTests(SynchronousTestCase):
    def test_plan(self) -> None:
        """
        The server's recorded messages go in order, each batch after the
        browser message that preceded it in the recording; the handshake
        answers the new request's key (RFC 6455's example) and agrees no
        extension.
        """
        messages = [RecordedMessage(False, 1, b"welcome"), RecordedMessage(True, 1, b"hi"),
                    RecordedMessage(False, 1, b"a"), RecordedMessage(False, 2, b"\x00" * 200),
                    RecordedMessage(True, 2, b"x"), RecordedMessage(True, 1, b"bye")]
        self.assertEqual(webSocketPlan(messages), [
            b"\x81\x07welcome", b"\x81\x01a" + b"\x82\x7e\x00\xc8" + b"\x00" * 200, b"", b""])
        answer = RecordedAnswer(101, b"Switching Protocols", [
            (b"Upgrade", b"websocket"), (b"Connection", b"Upgrade"), (b"Sec-WebSocket-Accept", b"old"),
            (b"Sec-WebSocket-Extensions", b"permessage-deflate"), (b"X-Served", b"1")], b"", False, 0.0)
        self.assertEqual(handshake(answer, b"dGhlIHNhbXBsZSBub25jZQ==").raw,
                         b"HTTP/1.1 101 Switching Protocols\r\nX-Served: 1\r\nUpgrade: websocket\r\n"
                         b"Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")

    def test_framesAsRecorded(self) -> None:
        """
        A server message the recording kept the frames of is sent in those
        frames (the first with its opcode, continuations after, FIN on the
        last); one whose frames don't add up to its data (cut or compressed
        when recorded) goes in one frame.
        """
        fragmented = RecordedMessage(False, 1, b"fragmented", (4, 3, 3))
        self.assertEqual(messageFrames(fragmented), b"\x01\x04frag\x00\x03men\x80\x03ted")
        self.assertEqual(webSocketPlan([fragmented]), [b"\x01\x04frag\x00\x03men\x80\x03ted"])
        self.assertEqual(messageFrames(RecordedMessage(False, 2, b"ab")), b"\x82\x02ab")
        notes = [json.dumps({"n": 2, "type": "message", "id": 1, "direction": "down", "opcode": 1, "size": size,
                             "data": data, **extra}).encode()
                 for data, size, extra in (("fragmented", 10, {"frames": [4, 3, 3]}),
                                           ("cut", 100, {"frames": [60, 40], "_truncated": True}),
                                           ("inflated", 8, {"frames": [2, 2], "compressed": 4}))]
        opened = json.dumps({"n": 1, "type": "open", "id": 1, "kind": "exchange", "started": 1.0,
                             "request": {"method": "GET", "url": "wss://shop.test/ws", "headers": []}}).encode()
        ended = json.dumps({"n": 5, "type": "end", "id": 1, "response": {"status": 101, "headers": []},
                            "_websocket": {"messages_up": 0, "messages_down": 3}}).encode()
        answer = answerFromLog(opened, ended, notes)
        self.assertEqual([m.frames for m in answer.messages], [(4, 3, 3), (), ()])

    def test_fromLog(self) -> None:
        """
        A recorded WebSocket (its 101 and message lines) is replayable, its
        messages read back as kept: text as text, binary from base64.
        """
        opened = json.dumps({"n": 1, "type": "open", "id": 1, "kind": "exchange", "started": 1.0,
                             "request": {"method": "GET", "url": "wss://shop.test/ws", "headers": []}})
        notes = [json.dumps({"n": 2, "type": "message", "id": 1, "direction": "up", "opcode": 1, "data": "hé"}),
                 json.dumps({"n": 3, "type": "message", "id": 1, "direction": "down", "opcode": 2,
                             "data": base64.b64encode(b"\x00\xff").decode(), "encoding": "base64"})]
        ended = json.dumps({"n": 4, "type": "end", "id": 1, "response": {"status": 101, "headers": []},
                            "_websocket": {"messages_up": 1, "messages_down": 1}})
        data = "\n".join([opened, *notes, ended]).encode() + b"\n"
        lineIndex = LineIndex()
        lineIndex.addLines(0, data)
        index = ReplayIndex()
        rules = MatchRules()
        recordedFromLog(exchangeLines(lineIndex), lambda o, n: data[o:o + n], rules, index)

        def answerOf(recorded: Recorded) -> RecordedAnswer:
            o, ol, e, el, lines = recorded.where
            return answerFromLog(data[o:o + ol], data[e:e + el], [data[a:a + n] for a, n in lines])

        matched = index.match(requestKey("GET", "https://shop.test/ws", rules), None, answerOf)
        assert matched is not None
        answer = matched[1]
        self.assertEqual(answer.messages, (RecordedMessage(True, 1, "hé".encode()),
                                           RecordedMessage(False, 2, b"\x00\xff")))
