"""
What a proxy reads back from a request it refused or couldn't read whole (for
its log entry): L{netlog.core.http1.readRefusedRequest}, and the bytes a
L{Refused} event carries for it.
"""

from __future__ import annotations

from hypothesis import given, strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.http1 import MAX_REQUEST_LINE, Refused, RequestReader, readRefusedRequest


class ReadRefusedRequestTests(SynchronousTestCase):
    def test_table(self) -> None:
        """
        Method, URL, version, host, port and kind, for each form of target,
        as far as the bytes give them.
        """
        table = [
            (b"GET http://shop.test/a?b HTTP/1.1\r\nHost: shop.test\r\nX: \x00",
             "http", "", ("GET", "http://shop.test/a?b", "HTTP/1.1", "shop.test", 80, "exchange")),
            (b"GET https://shop.test:8443/ HTTP/1.1\r\n",
             "http", "", ("GET", "https://shop.test:8443/", "HTTP/1.1", "shop.test", 8443, "exchange")),
            (b"CONNECT live.test:443 HTTP/1.1\r\n\r\n",
             "http", "", ("CONNECT", "https://live.test:443/", "HTTP/1.1", "live.test", 443, "tunnel")),
            (b"CONNECT [::1]:8443 HTTP/1.1\r\n",
             "http", "", ("CONNECT", "https://[::1]:8443/", "HTTP/1.1", "::1", 8443, "tunnel")),
            (b"POST /cart HTTP/1.1\r\nhost:  shop.test:444 \r\n",
             "https", "", ("POST", "https://shop.test:444/cart", "HTTP/1.1", "shop.test", 444, "exchange")),
            (b"GET /a HTTP/1.1\r\n\r\n",
             "https", "shop.test", ("GET", "https://shop.test/a", "HTTP/1.1", "shop.test", 443, "exchange")),
            (b"GET /a HTTP/1.1\r\n", "http", "", ("GET", "/a", "HTTP/1.1", None, None, "exchange")),
            (b"GET http://shop.test:x/ HTTP/1.1\r\n",
             "http", "", ("GET", "http://shop.test:x/", "HTTP/1.1", "shop.test", 80, "exchange")),
            (b"GET", "http", "", ("GET", None, None, None, None, "exchange")),
            (b"", "http", "", (None, None, None, None, None, "exchange")),
        ]
        for raw, scheme, hostAuthority, expected in table:
            seen = readRefusedRequest(raw, scheme, hostAuthority)
            got = tuple(seen[k] for k in ("method", "url", "version", "host", "port", "kind"))
            self.assertEqual(got, expected, raw)

    @given(st.binary(max_size=4 * MAX_REQUEST_LINE), st.sampled_from(["http", "https"]), st.text(max_size=20))
    def test_anyBytes(self, raw: bytes, scheme: str, hostAuthority: str) -> None:
        """
        Any bytes give an answer (never an error), each field text or
        L{None}, none longer than the request line allows.
        """
        seen = readRefusedRequest(raw, scheme, hostAuthority)
        for key in ("method", "version"):
            self.assertTrue(seen[key] is None or len(seen[key]) <= MAX_REQUEST_LINE)
        self.assertIn(seen["kind"], ("exchange", "tunnel"))
        self.assertTrue(seen["port"] is None or isinstance(seen["port"], int))


class RefusedRawTests(SynchronousTestCase):
    def test_refusedHeadCarriesItsBytes(self) -> None:
        """
        A request refused at its head comes with its bytes from its first
        one (after an answered request on the same connection, and however
        the bytes were cut), so the proxy can log its method and URL.
        """
        first = b"GET http://a.test/ok HTTP/1.1\r\nHost: a.test\r\n\r\n"
        bad = b"POST http://a.test/x HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n"
        stream = first + b"\r\n" + bad
        for cut in range(len(stream) + 1):
            reader = RequestReader(forwardProxy=True)
            events = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
            refused = [e for e in events if isinstance(e, Refused)]
            self.assertEqual(len(refused), 1, cut)
            self.assertEqual(refused[0].raw, bad, cut)
            seen = readRefusedRequest(refused[0].raw, "http")
            self.assertEqual((seen["method"], seen["url"], seen["host"], seen["port"]),
                             ("POST", "http://a.test/x", "a.test", 80))
