"""
Tests for L{netlog.site.rewrite}: Location and Set-Cookie rewrites.
"""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from netlog.site.config import Backend
from netlog.site.rewrite import rewriteLocation, rewriteSetCookie

BACKEND = Backend("http", "127.0.0.1", 7770)
ORIGIN = "https://shop.test"


class LocationTests(SynchronousTestCase):
    def test_table(self) -> None:
        """
        A Location naming the backend (absolute or scheme-relative) names the
        public origin instead; relative and foreign ones are left alone.
        """
        cases = [
            (b"http://127.0.0.1:7770/cart?x=1", b"https://shop.test/cart?x=1"),
            (b"http://127.0.0.1:7770", b"https://shop.test"),
            (b"//127.0.0.1:7770/a", b"https://shop.test/a"),
            (b"HTTP://127.0.0.1:7770/a#f", b"https://shop.test/a#f"),
            (b"/relative", b"/relative"),
            (b"http://127.0.0.1:7771/a", b"http://127.0.0.1:7771/a"),
            (b"https://127.0.0.1:7770/a", b"https://127.0.0.1:7770/a"),
            (b"https://elsewhere.test/", b"https://elsewhere.test/"),
        ]
        for given, expected in cases:
            self.assertEqual(rewriteLocation(given, BACKEND, ORIGIN), expected, given)

    def test_defaultPort(self) -> None:
        """
        A backend on its scheme's default port matches with or without it.
        """
        backend = Backend("http", "backend.test", 80)
        self.assertEqual(rewriteLocation(b"http://backend.test/a", backend, ORIGIN), b"https://shop.test/a")
        self.assertEqual(rewriteLocation(b"http://backend.test:80/a", backend, ORIGIN), b"https://shop.test/a")


class SetCookieTests(SynchronousTestCase):
    def test_table(self) -> None:
        """
        A cookie's Domain naming the backend's host names the public host;
        others are left alone.
        """
        cases = [
            (b"sid=1; Domain=127.0.0.1; Path=/", b"sid=1; Domain=shop.test; Path=/"),
            (b"sid=1; domain=.127.0.0.1", b"sid=1; domain=shop.test"),
            (b"sid=1; Path=/", b"sid=1; Path=/"),
            (b"sid=1; Domain=other.test", b"sid=1; Domain=other.test"),
        ]
        for given, expected in cases:
            self.assertEqual(rewriteSetCookie(given, BACKEND, "shop.test"), expected, given)


class RewriteProperties(SynchronousTestCase):
    def test_pathKept(self) -> None:
        """
        Whatever follows the backend's authority is kept byte for byte, and
        a Location naming another authority is never changed.
        """
        from hypothesis import given, settings
        from hypothesis import strategies as st

        rest = st.binary(max_size=40).map(lambda b: b"/" + b.replace(b"\r", b"").replace(b"\n", b""))
        host = st.from_regex(r"\A[a-z][a-z0-9.-]{0,20}\Z", fullmatch=True)

        @settings(max_examples=100, deadline=None)
        @given(rest, host)
        def check(path: bytes, other: str) -> None:
            self.assertEqual(rewriteLocation(b"http://127.0.0.1:7770" + path, BACKEND, ORIGIN),
                             ORIGIN.encode() + path)
            foreign = b"http://" + other.encode() + path
            if other != "127.0.0.1":
                self.assertEqual(rewriteLocation(foreign, BACKEND, ORIGIN), foreign)

        check()
