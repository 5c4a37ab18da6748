"""
What the browser tests check in a HAR of the shop scenario, the way our users
grade: through WebArena-Verified 1.2.3's own loader, the HAR schema, and
against Playwright's own HAR of the same session.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from tests.browser import browser, site_app

def expectedExplanations(base: str) -> dict[tuple[str, str], int]:
    """
    The accepted differences a shop session's comparison must meet, each
    with how many times (see L{harcompare.WHY} for why each is right).
    Chromium's own favicon requests are left out: whether it asks for one
    before the next page starts is up to its timing.
    """
    return {
        (f"GET {base}/logo.png", "binary-digest"): 3,
        (f"POST {base}/login", "redirect-body"): 1,
        (f"POST {base}/upload", "multipart-body"): 1,
        (f"GET {base}/big.txt", "truncated-text"): 1,
    }


def webSocketUrl(base: str) -> str:
    """
    The origin C{base} as a WebSocket's URL names it (C{wss://} for
    C{https://}), as the browser addressed it.
    """
    return {"https": "wss", "http": "ws"}[base.split(":", 1)[0]] + base[base.index(":"):]


def wsFrameBytes(payloads: list[int], masked: bool) -> int:
    """
    The bytes on the wire of WebSocket frames with these payload sizes (each
    under 126 bytes): a 2-byte head, and a 4-byte mask from the browser.
    """
    return sum(2 + (4 if masked else 0) + size for size in payloads)


def expectedWebSocket() -> dict[str, int]:
    """
    The chat page's WebSocket, counted as netlog counts it: three messages
    each way (the fragmented one once; close frames are not messages), and
    every frame's bytes, close frames included (the page closes with 1000
    and C{bye}; the site echoes the close).
    """
    text = len("hello netlog".encode())
    binary = 5
    ask = len(site_app.FRAGMENT_REQUEST.encode())
    close = 2 + len(b"bye")
    return {
        "messages_up": 3,
        "messages_down": 3,
        "bytes_up": wsFrameBytes([text, binary, ask, close], masked=True),
        "bytes_down": wsFrameBytes(
            [text, binary] + [len(p.encode()) for p in site_app.FRAGMENTS] + [close], masked=False
        ),
    }


class Graded:
    """
    WebArena-Verified's view of a HAR (what C{tests/har/wav_load.py}
    prints), looked up the way its evaluator does: the last event in file
    order that matches.
    """

    def __init__(self, loaded: dict[str, Any]) -> None:
        self.loaded = loaded
        self.events = loaded["events"]

    def last(self, method: str, url: str) -> dict[str, Any]:
        found = [e for e in self.events if e["method"] == method and e["url"] == url]
        if not found:
            raise AssertionError(
                f"WebArena-Verified sees no {method} {url}; it sees:\n"
                + "\n".join(f"  {e['method']} {e['url']} {e['status']}" for e in self.events)
            )
        return found[-1]


def checkGraded(test: Any, loaded: dict[str, Any], base: str) -> None:
    """
    Assert, on WebArena-Verified's own reading of the HAR, what a grader of
    the shop scenario relies on.
    """
    g = Graded(loaded)
    test.assertEqual(loaded["version"], "1.2.3")

    front = g.last("GET", base + "/")
    test.assertEqual((front["status"], front["is_navigation"]), (200, True), "front page: status, navigation")

    loginPage = g.last("GET", base + "/login")
    test.assertEqual(
        (loginPage["status"], loginPage["is_navigation"], loginPage["referer"]),
        (200, True, base + "/"),
        "GET /login: status, navigation, referer",
    )

    login = g.last("POST", base + "/login")
    test.assertEqual(login["post_data"], {"username": browser.USER, "password": browser.PASSWORD}, "POST /login form")
    test.assertEqual(login["referer"], base + "/login", "POST /login referer")
    test.assertEqual(
        (login["status"], login["is_redirect"], login["redirect_url"]),
        (302, True, base + "/account"),
        "POST /login: status, redirect",
    )
    test.assertEqual(login["response_cookies"], {"session": "alice|42"}, "POST /login cookies (URL-decoded)")
    test.assertFalse(login["is_navigation"], "a POST is not a navigation")

    account = g.last("GET", base + "/account")
    test.assertEqual(
        (account["status"], account["is_navigation"], account["referer"]),
        (200, True, base + "/login"),
        "GET /account after the redirect: status, navigation, referer",
    )
    test.assertEqual(account["response_cookies"], {"last_seen": "account"}, "GET /account cookies")

    cart = g.last("POST", base + "/api/cart")
    test.assertEqual(cart["post_data"], browser.CART_ORDER, "POST /api/cart JSON")
    test.assertEqual(cart["referer"], base + "/cart")
    test.assertEqual(
        cart["response_content"],
        {"ok": True, "item": "mug", "qty": 2, "total": "6.00", "note": site_app.CART_NOTE},
        "POST /api/cart: the gzipped, chunked JSON decoded",
    )
    test.assertFalse(cart["is_navigation"], "a fetch is not a navigation")

    upload = g.last("POST", base + "/upload")
    test.assertEqual(
        upload["post_data"],
        {"title": browser.UPLOAD_TITLE, "file": browser.UPLOAD_BODY.decode("utf-8")},
        "POST /upload multipart fields",
    )
    test.assertEqual((upload["status"], upload["referer"]), (200, base + "/upload"))

    latin1 = g.last("GET", base + "/latin1")
    test.assertEqual(latin1["response_cookies"], {"lang": "fr-FR"}, "GET /latin1 cookies")

    searches = [e for e in g.events if e["url_path"] == "/search"]
    test.assertEqual(len(searches), 1, "one search")
    query = parse_qs(urlsplit(searches[0]["url"]).query)
    test.assertEqual(
        query, {"q": [browser.SEARCH], "cat": ["home & garden"]}, "the search's query read from its URL"
    )
    test.assertTrue(searches[0]["is_navigation"])

    logos = [e for e in g.events if e["url_path"] == "/logo.png"]
    test.assertEqual(len(logos), 3)
    test.assertFalse(any(e["is_evaluation"] for e in logos), "the image is a static asset to the grader")
    test.assertNotIn(base + "/logo.png", loaded["evaluation_urls"])


def checkOurs(test: Any, har: dict[str, Any], base: str) -> None:
    """
    What netlog's own HAR says beyond what WebArena-Verified reads: the
    Latin-1 page read right, the brotli page decoded, the big answer cut at
    the limit and marked, the WebSocket's counts, the search's query decoded.
    """
    entries = har["log"]["entries"]

    def one(method: str, url: str) -> dict[str, Any]:
        found = [e for e in entries if e["request"]["method"] == method and e["request"]["url"] == url]
        test.assertEqual(len(found), 1, f"{method} {url} entries")
        return found[0]

    latin1 = one("GET", base + "/latin1")["response"]["content"]
    test.assertIn(site_app.LATIN1_WORDS, latin1["text"], "the Latin-1 page's text")
    test.assertNotIn("encoding", latin1)

    news = one("GET", base + "/news")["response"]["content"]
    test.assertIn("News item 39", news["text"], "the brotli page decoded")

    big = one("GET", base + "/big.txt")["response"]["content"]
    test.assertTrue(big.get("_truncated"), "the big answer is marked _truncated")
    test.assertGreaterEqual(len(big["text"]), 1_000_000, "the big answer keeps its first 1 MB")
    test.assertLess(len(big["text"]), site_app.BIG_SIZE)

    ws = one("GET", webSocketUrl(base) + "/ws")
    test.assertEqual(ws["response"]["status"], 101)
    counts = {k: ws["_websocket"][k] for k in ("messages_up", "messages_down", "bytes_up", "bytes_down")}
    test.assertEqual(counts, expectedWebSocket(), "the WebSocket's messages and bytes each way")

    search = [e for e in entries if urlsplit(e["request"]["url"]).path == "/search"]
    test.assertEqual(
        sorted((q["name"], q["value"]) for q in search[0]["request"]["queryString"]),
        [("cat", "home & garden"), ("q", browser.SEARCH)],
        "queryString decoded",
    )


def playwrightWebSocket(har: dict[str, Any]) -> dict[str, int]:
    """
    The messages each way in Playwright's HAR of the session's WebSocket.
    """
    (ws,) = [e for e in har["log"]["entries"] if e.get("_resourceType") == "websocket"]
    messages = ws.get("_webSocketMessages", [])
    return {
        "messages_up": sum(1 for m in messages if m["type"] == "send"),
        "messages_down": sum(1 for m in messages if m["type"] == "receive"),
    }


def load(path: str) -> dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        result: dict[str, Any] = json.load(f)
    return result
