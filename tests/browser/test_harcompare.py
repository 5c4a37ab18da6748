"""
The comparison of netlog's HAR with Playwright's: a difference it can't
explain names the entry and the field; the differences that are right are
accepted with their reason, and only those.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests.browser.harcompare import WHY, Comparison


def entry(method: str, url: str, status: int = 200, text: str = "hello", **extra: Any) -> dict[str, Any]:
    e: dict[str, Any] = {
        "request": {
            "method": method,
            "url": url,
            "headers": [{"name": "Host", "value": "shop.test"}, {"name": "Referer", "value": "https://shop.test/"}],
            "queryString": [],
        },
        "response": {
            "status": status,
            "headers": [{"name": "Content-Type", "value": "text/html"}],
            "cookies": [],
            "redirectURL": "",
            "content": {"mimeType": "text/html", "text": text},
        },
    }
    e.update(extra)
    return e


def session() -> list[dict[str, Any]]:
    return [
        entry("GET", "https://shop.test/"),
        entry("POST", "https://shop.test/api/cart", text='{"ok": true}'),
        entry("GET", "https://shop.test/search?q=a+b"),
    ]


class ComparisonTests(SynchronousTestCase):
    def test_same(self) -> None:
        """
        Two equal sessions: no problem, nothing to explain.
        """
        c = Comparison(session(), session())
        self.assertEqual((c.problems, c.explained), ([], []))

    def test_fieldDiffers(self) -> None:
        """
        Each differing field is reported with the entry's number, its method
        and URL, and the field's name.
        """
        theirs = session()
        theirs[1]["response"]["status"] = 500
        theirs[1]["response"]["content"]["text"] = '{"ok": false}'
        theirs[2]["request"]["headers"][1]["value"] = "https://elsewhere.test/"
        theirs[0]["response"]["cookies"] = [{"name": "a", "value": "1"}]
        c = Comparison(session(), theirs)
        fields = sorted(p.split(") ", 1)[1].split(":", 1)[0] for p in c.problems)
        self.assertEqual(
            fields, ["request.headers", "response.content.text", "response.cookies", "response.status"], c.report()
        )
        self.assertTrue(any(p.startswith("entry 1 (POST https://shop.test/api/cart) response.status") for p in c.problems))
        self.assertTrue(any(p.startswith("entry 2 (GET https://shop.test/search?q=a+b) request.headers") for p in c.problems))

    def test_orderDiffers(self) -> None:
        """
        Requests in another order (or missing) are one problem listing both
        sessions side by side, marking the rows that differ.
        """
        theirs = session()
        theirs[0], theirs[1] = theirs[1], theirs[0]
        c = Comparison(session(), theirs)
        self.assertEqual(len(c.problems), 1)
        self.assertIn("the requests differ", c.problems[0])
        self.assertEqual(c.problems[0].count("!!"), 2)

    def test_accepted(self) -> None:
        """
        A redirect's body, a multipart body, a WebSocket's scheme, a body cut
        at netlog's limit and marked, a binary answer kept as its digest, and
        the browser's own favicon request are accepted, each with its reason.
        """
        png = b"\x89PNG not really"
        ours = [
            entry("POST", "https://shop.test/login", 302, text="<a href=/account>"),
            entry("POST", "https://shop.test/upload"),
            entry("GET", "wss://shop.test/ws", 101, text=""),
            entry("GET", "https://shop.test/big.txt", text="abc", ),
            entry("GET", "https://shop.test/favicon.ico", 404),
            entry("GET", "https://shop.test/logo.png"),
        ]
        ours[1]["request"]["postData"] = {"mimeType": "multipart/form-data; boundary=x", "text": "--x--"}
        ours[3]["response"]["content"]["_truncated"] = True
        ours[5]["response"]["content"] = {"mimeType": "text/html", "_sha256": hashlib.sha256(png).hexdigest()}
        theirs = copy.deepcopy([ours[i] for i in (0, 1, 2, 3, 5)])
        theirs[0]["response"]["content"]["text"] = ""
        del theirs[1]["request"]["postData"]
        theirs[3]["response"]["content"]["text"] = "abcdef"
        theirs[4]["response"]["content"] = {
            "mimeType": "text/html", "encoding": "base64", "text": base64.b64encode(png).decode()}
        c = Comparison(ours, theirs)
        self.assertEqual(c.problems, [], c.report())
        self.assertEqual(
            sorted(e.kind for e in c.explained),
            sorted(["redirect-body", "multipart-body", "truncated-text", "favicon", "binary-digest"]),
        )
        self.assertEqual(set(WHY), {e.kind for e in c.explained})

    def test_notAcceptedWhenWrong(self) -> None:
        """
        The same differences are problems when ours is not right: a cut body
        not marked C{_truncated}, a digest of other bytes.
        """
        png = b"\x89PNG not really"
        ours = [entry("GET", "https://shop.test/big.txt", text="abX"), entry("GET", "https://shop.test/logo.png")]
        ours[1]["response"]["content"] = {"mimeType": "text/html", "_sha256": hashlib.sha256(b"other").hexdigest()}
        theirs = copy.deepcopy(ours)
        theirs[0]["response"]["content"]["text"] = "abcdef"
        theirs[1]["response"]["content"] = {
            "mimeType": "text/html", "encoding": "base64", "text": base64.b64encode(png).decode()}
        c = Comparison(ours, theirs)
        self.assertEqual(len(c.problems), 2, c.report())
        self.assertEqual(c.explained, [])
