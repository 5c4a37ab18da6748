"""
A golden session: a hand-written log of what a browser does on a site (a page
load, a sign-in form answered by a redirect, a JSON save answered with gzipped
JSON, a multipart upload, an image, a script, a WebSocket, a tunnel, a
failure, two refusals and a request still open), exported, checked field by
field, validated by the HAR schema and read by WebArena-Verified's own loader.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json

from twisted.trial.unittest import SynchronousTestCase

from tests.har.support import T0, Log, export, validate, wavLoad

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
NAV_HEADERS = [
    ("Host", "shop.test"),
    ("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.8"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-User", "?1"),
]
BOUNDARY = "----WebKitFormBoundaryx8Yq"


def sessionLog() -> Log:
    log = Log()
    # 1. a page load: query, cookies, a sign-in header removed, a Latin-1 page
    #    that sets cookies
    page = log.open(
        url="https://shop.test/search?q=caf%C3%A9+cr%C3%A8me&page=2&empty=",
        headers=NAV_HEADERS + [("Cookie", "session=abc%3D%3D; theme=dark"), ("X-Site-Token", "<removed>")],
        started=T0,
        server={"host": "shop.test", "port": 443, "address": "127.0.0.1"},
    )
    # 2. the sign-in form, answered 302 to a relative Location; its end comes
    #    after the next request's open line
    form = "user=alice%40example.test&password=s3cr%C3%A9t&remember=on"
    signIn = log.open(
        method="POST",
        url="https://shop.test/login",
        headers=[
            ("Host", "shop.test"),
            ("Content-Type", "application/x-www-form-urlencoded"),
            ("Referer", "https://shop.test/search?q=caf%C3%A9+cr%C3%A8me&page=2&empty="),
            ("Origin", "https://shop.test"),
        ],
        started=T0 + 2,
    )
    log.end(
        page,
        headers=[
            ("Content-Type", "text/html; charset=ISO-8859-1"),
            ("Set-Cookie", "seen=1; Path=/; Max-Age=3600"),
            ("Set-Cookie", "pref=caf%C3%A9; Domain=shop.test; Expires=Wed, 21 Oct 2026 07:28:00 GMT; Secure; HttpOnly"),
        ],
        body="<html><p>Café crème à 3 €uros</p></html>".replace("€", "E").encode("latin-1"),
        times={"connected": T0 + 0.05, "sent": T0 + 0.1, "first_byte": T0 + 0.5, "end": T0 + 0.75},
        ended=T0 + 0.75,
    )
    # 3. a JSON save, answered with gzipped JSON
    save = log.open(
        method="POST",
        url="https://shop.test/api/items",
        headers=[("Host", "shop.test"), ("Content-Type", "application/json"), ("Referer", "https://shop.test/account")],
        started=T0 + 4,
    )
    log.end(
        signIn,
        status=302,
        reason="Found",
        headers=[("Location", "/account?welcome=1"), ("Set-Cookie", "session=new%20value; Path=/; HttpOnly")],
        requestBody=form.encode(),
        ended=T0 + 3,
        times={"connected": None, "sent": T0 + 2.1, "first_byte": T0 + 2.4, "end": T0 + 3},
    )
    # 4. the page the redirect leads to: it started before the save, but its
    #    open line comes after the save's (its connection took longer)
    account = log.open(url="https://shop.test/account?welcome=1", headers=NAV_HEADERS[:2], started=T0 + 3.1)
    log.end(account, headers=[("Content-Type", "text/html")], body=b"<h1>Welcome</h1>", ended=T0 + 3.5)
    item = {"name": "Crème brûlée", "qty": 2, "tags": ["dessert"]}
    answer = {"id": 7, "name": "Crème brûlée", "saved": True}
    log.end(
        save,
        status=201,
        reason="Created",
        headers=[("Content-Type", "application/json"), ("Content-Encoding", "gzip")],
        body=gzip.compress(json.dumps(answer, ensure_ascii=False).encode()),
        requestBody=json.dumps(item, ensure_ascii=False).encode(),
        ended=T0 + 5,
    )
    # 5. a multipart upload: a text field and a binary file
    multipart = (
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="title"\r\n\r\n'
        "Ma photo été\r\n"
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="photo"; filename="cat.png"\r\n'
        "Content-Type: image/png\r\n\r\n"
    ).encode() + PNG + f"\r\n--{BOUNDARY}--\r\n".encode()
    upload = log.open(
        method="POST",
        url="https://shop.test/upload",
        headers=[("Host", "shop.test"), ("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")],
        started=T0 + 6,
    )
    log.end(upload, headers=[("Content-Type", "text/plain; charset=utf-8")], body=b"ok", requestBody=multipart, ended=T0 + 7)
    # 6. an image: size and sha256 only
    image = log.open(url="https://shop.test/img/cat.png", started=T0 + 8)
    log.end(
        image,
        headers=[("Content-Type", "image/png"), ("Content-Length", str(len(PNG)))],
        responseBody={"size": len(PNG), "sha256": hashlib.sha256(PNG).hexdigest()},
        ended=T0 + 8.5,
    )
    # 7. a script (WebArena-Verified leaves it out of evaluation)
    script = log.open(url="https://shop.test/app.js", started=T0 + 9)
    log.end(script, headers=[("Content-Type", "application/javascript")], body=b"console.log('hi')", ended=T0 + 9.2)
    # 8. a WebSocket
    ws = log.open(
        url="wss://shop.test/live",
        headers=[("Host", "shop.test"), ("Upgrade", "websocket"), ("Connection", "Upgrade")],
        started=T0 + 10,
    )
    # 9. a live host's tunnel, open across the rest
    tunnel = log.open(
        method="CONNECT",
        url="https://live.test:443/",
        headers=[("Host", "live.test:443")],
        kind="tunnel",
        started=T0 + 11,
        server={"host": "live.test", "port": 443, "address": "2001:db8::1"},
        connection="c9",
    )
    # 10. a host that doesn't resolve
    failed = log.open(url="http://nowhere.test/x", started=T0 + 12, server={"host": "nowhere.test", "port": 80, "address": None})
    log.fail(failed, "nowhere.test does not resolve", ended=T0 + 12.3)
    # 11. refusals: a CONNECT to a bare host, a plain request to one
    for method, url in (("CONNECT", "blocked.test"), ("GET", "blocked.test")):
        refused = log.open(
            method=method,
            url=url,
            started=T0 + 13,
            server={"host": "blocked.test", "port": 443 if method == "CONNECT" else 80, "address": None},
        )
        log.refuse(refused, "blocked.test is not a site", ended=T0 + 13)
    log.end(
        ws,
        status=101,
        reason="Switching Protocols",
        headers=[("Upgrade", "websocket"), ("Connection", "Upgrade")],
        ended=T0 + 20,
        closed_by="client",
        _websocket={"messages_up": 3, "messages_down": 5, "bytes_up": 120, "bytes_down": 400},
    )
    log.end(tunnel, status=None, ended=T0 + 30, bytes={"up": 5120, "down": 81920}, closed_by="server",
            times={"connected": T0 + 11.02, "sent": None, "first_byte": None, "end": T0 + 30})
    # 12. a request still open when the export runs
    log.open(url="https://shop.test/slow", headers=NAV_HEADERS, started=T0 + 40)
    return log


@functools.lru_cache(maxsize=1)
def _exported() -> tuple:
    return export(sessionLog().bytes())


class SessionTests(SynchronousTestCase):
    """
    The golden session, exported.
    """

    def setUp(self) -> None:
        # trial has no setUpClass: export once per process, share the result
        self.har, self.raw, self.result = _exported()
        self.entries = self.har["log"]["entries"]

    def entry(self, url: str, method: str = "GET") -> dict:
        matches = [e for e in self.entries if e["request"]["url"] == url and e["request"]["method"] == method]
        self.assertEqual(len(matches), 1, url)
        return matches[0]

    def test_schema(self) -> None:
        """
        The HAR, failed, refused and open entries included, passes the HAR
        1.2 schema, and is UTF-8 JSON with no BOM.
        """
        self.assertEqual(validate(self.raw), [])
        self.assertFalse(self.raw.startswith(b"\xef\xbb\xbf"))
        self.assertIn("Crème".encode("utf-8"), self.raw)

    def test_logLevel(self) -> None:
        """
        The log names netlog and its version, and counts no unreadable line.
        """
        import netlog

        log = self.har["log"]
        self.assertEqual(log["version"], "1.2")
        self.assertEqual(log["creator"], {"name": "netlog", "version": netlog.__version__})
        self.assertEqual(log["_unreadable"], 0)
        self.assertEqual(self.result.entries, 13)

    def test_order(self) -> None:
        """
        Entries come in the order the exchanges started (their started), not
        the order of their open lines nor the order they ended; so
        startedDateTime never goes backwards.
        """
        self.assertEqual(
            [(e["request"]["method"], e["request"]["url"]) for e in self.entries],
            [
                ("GET", "https://shop.test/search?q=caf%C3%A9+cr%C3%A8me&page=2&empty="),
                ("POST", "https://shop.test/login"),
                ("GET", "https://shop.test/account?welcome=1"),
                ("POST", "https://shop.test/api/items"),
                ("POST", "https://shop.test/upload"),
                ("GET", "https://shop.test/img/cat.png"),
                ("GET", "https://shop.test/app.js"),
                ("GET", "wss://shop.test/live"),
                ("CONNECT", "https://live.test:443/"),
                ("GET", "http://nowhere.test/x"),
                ("CONNECT", "https://blocked.test:443/"),
                ("GET", "http://blocked.test/"),
                ("GET", "https://shop.test/slow"),
            ],
        )
        started = [e["startedDateTime"] for e in self.entries]
        self.assertEqual(started[:4], ["2026-01-01T00:00:00.000Z", "2026-01-01T00:00:02.000Z", "2026-01-01T00:00:03.100Z", "2026-01-01T00:00:04.000Z"])
        self.assertEqual(started, sorted(started))

    def test_pageRequest(self) -> None:
        """
        The request: headers in order as {name, value}, cookies from Cookie
        as sent, queryString with decoded values, sizes.
        """
        request = self.entries[0]["request"]
        self.assertEqual(request["httpVersion"], "HTTP/1.1")
        self.assertEqual(request["headers"][0], {"name": "Host", "value": "shop.test"})
        self.assertEqual(request["headers"][-1], {"name": "X-Site-Token", "value": "<removed>"})
        self.assertEqual(request["cookies"], [{"name": "session", "value": "abc%3D%3D"}, {"name": "theme", "value": "dark"}])
        self.assertEqual(
            request["queryString"],
            [{"name": "q", "value": "café crème"}, {"name": "page", "value": "2"}, {"name": "empty", "value": ""}],
        )
        self.assertEqual(request["headersSize"], 100)
        self.assertEqual(request["bodySize"], 0)
        self.assertNotIn("postData", request)

    def test_pageResponse(self) -> None:
        """
        A Latin-1 page reads right; every Set-Cookie becomes a cookie, values
        as sent, Max-Age an absolute expiry from the answer's time, Expires
        in ISO 8601, flags kept.
        """
        response = self.entries[0]["response"]
        self.assertEqual(response["status"], 200)
        self.assertEqual(response["statusText"], "OK")
        self.assertEqual(response["content"]["text"], "<html><p>Café crème à 3 Euros</p></html>")
        self.assertEqual(response["content"]["mimeType"], "text/html; charset=ISO-8859-1")
        self.assertEqual(response["content"]["size"], len(response["content"]["text"]))
        self.assertEqual(
            response["cookies"],
            [
                {"name": "seen", "value": "1", "path": "/", "expires": "2026-01-01T01:00:00.500Z", "httpOnly": False, "secure": False},
                {
                    "name": "pref",
                    "value": "caf%C3%A9",
                    "domain": "shop.test",
                    "expires": "2026-10-21T07:28:00.000Z",
                    "secure": True,
                    "httpOnly": True,
                },
            ],
        )
        self.assertEqual(response["redirectURL"], "")

    def test_timings(self) -> None:
        """
        Timings in milliseconds from the log's times (connect from
        times.connected), -1 where they don't apply, and time their sum;
        serverIPAddress bare, connection an id.
        """
        entry = self.entries[0]
        self.assertEqual(
            entry["timings"],
            {"blocked": -1, "dns": -1, "connect": 50, "send": 50, "wait": 400, "receive": 250, "ssl": -1},
        )
        self.assertEqual(entry["time"], 750)
        self.assertEqual(entry["serverIPAddress"], "127.0.0.1")
        self.assertEqual(entry["connection"], "c1")
        signIn = self.entries[1]
        self.assertEqual(signIn["timings"]["connect"], -1)
        self.assertEqual(signIn["time"], sum(v for v in signIn["timings"].values() if v > 0))

    def test_form(self) -> None:
        """
        A form's postData: the full Content-Type, the text as sent, params
        decoded; the redirect resolved against the request's URL.
        """
        entry = self.entries[1]
        post = entry["request"]["postData"]
        self.assertEqual(post["mimeType"], "application/x-www-form-urlencoded")
        self.assertEqual(post["text"], "user=alice%40example.test&password=s3cr%C3%A9t&remember=on")
        self.assertEqual(
            post["params"],
            [{"name": "user", "value": "alice@example.test"}, {"name": "password", "value": "s3crét"}, {"name": "remember", "value": "on"}],
        )
        self.assertEqual(entry["request"]["bodySize"], len(post["text"]))
        self.assertEqual(entry["response"]["status"], 302)
        self.assertEqual(entry["response"]["redirectURL"], "https://shop.test/account?welcome=1")

    def test_json(self) -> None:
        """
        A JSON body is text; a gzipped JSON answer is decoded, its size the
        decoded size and compression what gzip saved.
        """
        entry = self.entries[3]
        self.assertEqual(json.loads(entry["request"]["postData"]["text"]), {"name": "Crème brûlée", "qty": 2, "tags": ["dessert"]})
        content = entry["response"]["content"]
        self.assertEqual(json.loads(content["text"]), {"id": 7, "name": "Crème brûlée", "saved": True})
        self.assertEqual(content["size"], len(content["text"].encode()))
        self.assertEqual(content["compression"], content["size"] - entry["response"]["bodySize"])
        self.assertNotIn("encoding", content)

    def test_multipart(self) -> None:
        """
        A multipart upload: the boundary in mimeType, params with name,
        value, fileName and contentType; the text readable and the exact
        bytes in _base64, since a PNG isn't text.
        """
        post = self.entries[4]["request"]["postData"]
        self.assertEqual(post["mimeType"], f"multipart/form-data; boundary={BOUNDARY}")
        self.assertEqual(post["params"][0], {"name": "title", "value": "Ma photo été"})
        self.assertEqual(post["params"][1], {"name": "photo", "fileName": "cat.png", "contentType": "image/png"})
        self.assertIn('name="title"\r\n\r\nMa photo été\r\n', post["text"])
        import base64

        self.assertTrue(base64.b64decode(post["_base64"]).endswith(PNG + f"\r\n--{BOUNDARY}--\r\n".encode()))

    def test_binary(self) -> None:
        """
        A binary answer keeps its size and _sha256, and no text.
        """
        content = self.entries[5]["response"]["content"]
        self.assertEqual(content, {"size": len(PNG), "mimeType": "image/png", "_sha256": hashlib.sha256(PNG).hexdigest()})

    def test_websocket(self) -> None:
        """
        The WebSocket's 101 entry carries _websocket: messages and bytes each
        way, and who closed it.
        """
        entry = self.entries[7]
        self.assertEqual(entry["response"]["status"], 101)
        self.assertEqual(
            entry["_websocket"],
            {"messages_up": 3, "messages_down": 5, "bytes_up": 120, "bytes_down": 400, "closed_by": "client"},
        )

    def test_tunnel(self) -> None:
        """
        A tunnel: CONNECT to https://host:port/, _tunnel with bytes each way,
        a bare IPv6 serverIPAddress, its connect time.
        """
        entry = self.entries[8]
        self.assertEqual(entry["_tunnel"], {"host": "live.test", "port": 443, "bytes_up": 5120, "bytes_down": 81920, "closed_by": "server"})
        self.assertEqual(entry["response"]["status"], 200)
        self.assertEqual(entry["serverIPAddress"], "2001:db8::1")
        self.assertEqual(entry["connection"], "c9")
        self.assertEqual(entry["timings"]["connect"], 20)
        self.assertEqual(entry["time"], 19000)

    def test_noAnswer(self) -> None:
        """
        Failed, refused and open entries keep a response with status -1 and
        are marked with the reason (netlog's own 502 and 403, which the log
        keeps as the answer the browser got, go in _failed and _refused); a
        refused bare host becomes a URL; an address never connected to is
        left out.
        """
        failed, refusedConnect, refusedGet, still = self.entries[9:13]
        for entry in (failed, refusedConnect, refusedGet, still):
            self.assertEqual(entry["response"]["status"], -1)
            self.assertEqual(entry["response"]["content"], {"size": 0, "mimeType": "x-unknown"})
        for entry in (failed, refusedConnect, refusedGet, still):
            self.assertEqual((entry["response"]["headers"], entry["response"]["cookies"]), ([], []))
        self.assertEqual(failed["_failed"], {"reason": "nowhere.test does not resolve", "status": 502})
        self.assertNotIn("serverIPAddress", failed)
        self.assertEqual(refusedConnect["_refused"], {"reason": "blocked.test is not a site", "status": 403})
        self.assertEqual(refusedConnect["request"]["url"], "https://blocked.test:443/")
        self.assertEqual(refusedGet["request"]["url"], "http://blocked.test/")
        self.assertTrue(still["_open"])
        self.assertEqual(still["time"], 0)
        for entry in self.entries[:9]:
            self.assertNotIn("_open", entry)
            self.assertNotIn("_failed", entry)

    def test_webarenaVerified(self) -> None:
        """
        WebArena-Verified 1.2.3's own loader reads the HAR: each request's
        method, URL, form, JSON and multipart fields, referer, status,
        response cookies and decoded JSON, and the page loads as
        navigations; assets are left out of evaluation.
        """
        seen = wavLoad(self.raw)
        self.assertEqual(seen["version"], "1.2.3")
        self.assertFalse(seen["is_playwright"])
        events = seen["events"]
        self.assertEqual(len(events), len(self.entries))
        page, signIn, account, save, upload, image, script = events[:7]
        self.assertTrue(page["is_navigation"])
        self.assertEqual(page["status"], 200)
        self.assertEqual(page["response_cookies"], {"seen": "1", "pref": "café"})
        self.assertEqual(signIn["method"], "POST")
        self.assertEqual(signIn["post_data"], {"user": "alice@example.test", "password": "s3crét", "remember": "on"})
        self.assertEqual(signIn["referer"], "https://shop.test/search?q=caf%C3%A9+cr%C3%A8me&page=2&empty=")
        self.assertEqual(signIn["status"], 302)
        self.assertTrue(signIn["is_redirect"])
        self.assertEqual(signIn["redirect_url"], "https://shop.test/account?welcome=1")
        self.assertEqual(signIn["response_cookies"], {"session": "new value"})
        self.assertEqual(save["post_data"], {"name": "Crème brûlée", "qty": 2, "tags": ["dessert"]})
        self.assertEqual(save["response_content"], {"id": 7, "name": "Crème brûlée", "saved": True})
        self.assertEqual(save["referer"], "https://shop.test/account")
        self.assertTrue(account["is_navigation"])
        self.assertEqual(account["url"], "https://shop.test/account?welcome=1")
        self.assertEqual(upload["post_data"]["title"], "Ma photo été")
        self.assertIn("photo", upload["post_data"])
        self.assertFalse(signIn["is_navigation"])
        self.assertFalse(image["is_evaluation"])
        self.assertFalse(script["is_evaluation"])
        navigations = [e["url"] for e in events if e["is_navigation"]]
        self.assertEqual(
            navigations,
            [
                "https://shop.test/search?q=caf%C3%A9+cr%C3%A8me&page=2&empty=",
                "https://shop.test/account?welcome=1",
                "https://shop.test/slow",
            ],
        )
        self.assertEqual([e["status"] for e in events[9:]], [-1, -1, -1, -1])
