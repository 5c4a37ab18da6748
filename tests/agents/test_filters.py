"""
The filter language (L{netlog.core.filters}) over exchanges read from log
records (L{netlog.core.finding.RecordFacts}): every field, every operator,
and every mistake refused in one line that says where.
"""

from __future__ import annotations

import json

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.filters import MAX_FILTER, MAX_TERMS, BadFilter, parseFilter
from netlog.core.finding import RecordFacts
from tests.agents.records import ended, gzipped, opened

_JSON = [("Content-Type", "application/json")]
_HTML = [("Content-Type", "text/html; charset=utf-8")]

#: A small log's exchanges, by name.
EXCHANGES = {
    "home": RecordFacts(opened(1, url="http://shop.test/", headers=[("Accept", "text/html")]),
                        ended(2, 1, 200, _HTML, b"<h1>Welcome</h1>")),
    "login": RecordFacts(
        opened(3, "POST", "http://shop.test/login", [("Content-Type", "application/x-www-form-urlencoded")]),
        ended(4, 3, 302, [("Set-Cookie", "sid=abc"), ("Location", "/")], b"",
              requestBody=b"user=ann&password=hunter2")),
    "order": RecordFacts(
        opened(5, "POST", "http://api.shop.test/api/order?x=1",
               [("Content-Type", "application/json"), ("Authorization", "Bearer t0k")]),
        ended(6, 5, 201, _JSON + [("Content-Encoding", "gzip")], gzipped(b'{"order": 42}'),
              requestBody=json.dumps({"item": "tea", "quantity": 2}).encode())),
    "missing": RecordFacts(opened(7, url="http://shop.test/favicon.ico"), ended(8, 7, 404, _HTML, b"no")),
    "broken": RecordFacts(opened(9, url="http://shop.test/api/boom"), ended(10, 9, 503, _JSON, b"{}")),
    "refused": RecordFacts(opened(11, url="http://evil.test/x"),
                           ended(12, 11, 403, _HTML, b"", _refused={"reason": "not a site", "status": 403})),
    "failed": RecordFacts(opened(13, url="http://gone.test/"),
                          ended(14, 13, None, _failed={"reason": "connection refused"})),
    "socket": RecordFacts(opened(15, url="ws://shop.test/live"),
                          ended(16, 15, 101, [("Upgrade", "websocket")],
                                _websocket={"messages_up": 1, "messages_down": 1})),
    "tunnel": RecordFacts(opened(17, "CONNECT", "https://live.test:443/", kind="tunnel"),
                          ended(18, 17, None, closed_by="client")),
}


class FilterTests(SynchronousTestCase):
    """
    Each expression picks exactly the exchanges a reader of the docs expects.
    """

    def check(self, expression: str, *names: str) -> None:
        wanted = parseFilter(expression)
        got = sorted(name for name, facts in EXCHANGES.items() if wanted.matches(facts))
        self.assertEqual(got, sorted(names), expression)

    def test_empty(self) -> None:
        """An empty expression (or only spaces) matches every exchange."""
        self.check("", *EXCHANGES)
        self.check("   ", *EXCHANGES)

    def test_method(self) -> None:
        """method: is the request's method, case-insensitively."""
        self.check("method:POST", "login", "order")
        self.check("method:post", "login", "order")
        self.check("method:CONNECT", "tunnel")

    def test_url(self) -> None:
        """url: is a substring of the URL (any case) or a ~regular expression; a bare word is url:."""
        self.check("url:/api/", "order", "broken")
        self.check("url:/API/", "order", "broken")
        self.check("api", "order", "broken")
        self.check(r"url:~/api/o[a-z]+\?x=1$", "order")
        self.check("url:~^ws:", "socket")
        self.check("url:~/API/")
        self.check("http://shop.test/login", "login")

    def test_host(self) -> None:
        """host: is the host exactly; *.NAME is it and every name under it."""
        self.check("host:shop.test", "home", "login", "missing", "broken", "socket")
        self.check("host:SHOP.test", "home", "login", "missing", "broken", "socket")
        self.check("host:*.shop.test", "home", "login", "order", "missing", "broken", "socket")
        self.check("host:live.test", "tunnel")

    def test_status(self) -> None:
        """status: is one status, a class (4xx) or a range; no status matches none of them."""
        self.check("status:404", "missing")
        self.check("status:4xx", "missing", "refused")
        self.check("status:2xx", "home", "order")
        self.check("status:300-403", "login", "refused")
        self.check("status:100-599", *(n for n in EXCHANGES if n not in ("failed", "tunnel")))

    def test_type(self) -> None:
        """type: is a substring of the answer's Content-Type."""
        self.check("type:json", "order", "broken")
        self.check("type:text/html", "home", "missing", "refused")

    def test_headers(self) -> None:
        """reqheader:/resheader: NAME is present (any case); NAME=VALUE is equal, or matches ~re."""
        self.check("reqheader:authorization", "order")
        self.check('reqheader:"Authorization=Bearer t0k"', "order")
        self.check('reqheader:"authorization=bearer T0K"', "order")
        self.check("reqheader:authorization=Bearer", )
        self.check('reqheader:"authorization=~^Bearer "', "order")
        self.check("resheader:set-cookie", "login")
        self.check("resheader:set-cookie=sid=abc", "login")
        self.check("resheader:location=/", "login")

    def test_bodies(self) -> None:
        """body: searches both bodies as text (a gzip answer decoded); reqbody:/resbody: one side."""
        self.check("body:hunter2", "login")
        self.check('body:"\\"quantity\\": 2"', "order")
        self.check('reqbody:"quantity\\": 2"', "order")
        self.check('body:~"quantity":\\s*2\\b', "order")
        self.check('resbody:"\\"order\\": 42"', "order")
        self.check("reqbody:welcome")
        self.check("resbody:welcome", "home")
        self.check("body:42", "order")

    def test_is(self) -> None:
        """is: websocket, failed, refused, tunnel."""
        self.check("is:websocket", "socket")
        self.check("is:failed", "failed")
        self.check("is:refused", "refused")
        self.check("is:tunnel", "tunnel")
        self.check("is:failed or is:refused", "failed", "refused")

    def test_operators(self) -> None:
        """Juxtaposition and `and` both mean and; or binds looser; not and - negate; parentheses group."""
        self.check("method:POST status:201", "order")
        self.check("method:POST and status:201", "order")
        self.check("method:POST AND status:201", "order")
        self.check("method:POST or status:404", "login", "order", "missing")
        self.check("host:shop.test status:4xx or status:5xx", "missing", "broken")
        self.check("host:shop.test (status:4xx or status:5xx)", "missing", "broken")
        self.check("host:gone.test or host:live.test status:404", "failed")
        self.check("-host:shop.test -host:*.shop.test", "refused", "failed", "tunnel")
        self.check("not (status:2xx or status:3xx) -is:failed -is:tunnel",
                   "missing", "broken", "refused", "socket")
        self.check("not not method:POST", "login", "order")
        self.check("(((method:POST)))", "login", "order")

    def test_quoting(self) -> None:
        """A quoted value holds spaces and parentheses; \\ escapes a quote or itself."""
        self.check('resbody:"<h1>Welcome</h1>"', "home")
        self.check('url:"(x"')
        self.check('"api/order"', "order")

    def test_mistakes(self) -> None:
        """Every mistake is one line saying where (1-based) and what."""
        cases = {
            "stauts:200": "at 1: unknown field 'stauts'",
            "status:20x": "at 1: status takes 200, 4xx or 400-499, not '20x'",
            "status:499-400": "at 1: status range '499-400' runs backwards",
            "method:GET (status:200": "at 12: a parenthesis that is never closed",
            "method:GET )": "at 12: unexpected ')'",
            "url:~a(": "at 1: '~a(' is not a regular expression",
            "is:cached": "at 1: is: takes failed, refused, tunnel, websocket, not 'cached'",
            "method:GET or": "at 14: the expression ends where a term was expected",
            'body:"open': "at 6: a quote that is never closed",
            "url:": "at 1: url: needs a value",
            "and method:GET": "at 1: 'and' where a term was expected",
            "reqheader:\"a b=c\"": "at 1: reqheader takes NAME or NAME=VALUE",
            "x" * (MAX_FILTER + 1): f"longer than {MAX_FILTER}",
            " ".join(["get"] * (MAX_TERMS + 1)): f"more than {MAX_TERMS} terms",
        }
        for text, message in cases.items():
            with self.assertRaises(BadFilter, msg=text) as caught:
                parseFilter(text)
            self.assertIn(message, str(caught.exception), text)
            self.assertNotIn("\n", str(caught.exception))

    def test_bodyReadOnlyWhenAsked(self) -> None:
        """A filter with no body term never decodes a body (a search stays cheap)."""
        facts = RecordFacts(EXCHANGES["order"].opened, EXCHANGES["order"].ended)
        parseFilter("method:POST url:order status:2xx type:json reqheader:authorization").matches(facts)
        self.assertNotIn("entry", vars(facts))
        parseFilter("body:tea").matches(facts)
        self.assertIn("entry", vars(facts))

    def test_linesParsedWhenAsked(self) -> None:
        """
        From log lines, a fact is read only when a term asks: a filter on the
        request never parses the end line.
        """
        from tests.agents.records import logBytes

        opening, ending = logBytes([opened(1, "POST", "http://shop.test/x"), ended(2, 1, 201)]).splitlines()
        facts = RecordFacts(opening, ending)
        self.assertTrue(parseFilter("method:POST url:/x").matches(facts))
        self.assertNotIn("ended", vars(facts))
        self.assertTrue(parseFilter("status:201").matches(facts))
        self.assertIn("ended", vars(facts))
