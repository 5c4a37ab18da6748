"""
The two modes the engine runs: each provides L{IMode}, and each decides as
its proxy must (routing, what a CONNECT becomes, what is kept).
"""

from __future__ import annotations


from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

from netlog.core.capture import MAX_RESPONSE_BODY
from netlog.proxy.mode import BLIND, OPEN, IMode, Refusal, Route
from netlog.site.config import parseSites
from netlog.site.mode import SiteMode
from netlog.standin.mode import DEFAULT_CONNECT_PORTS, StandinMode

SITES = """
[[site]]
name = "shop"
origins = ["https://shop.test", "http://localhost:7770"]
backend = "http://127.0.0.1:17770"
sign_in_headers = ["Authorization"]

[[site]]
name = "admin"
origins = ["http://localhost:7780"]
backend = "https://127.0.0.1:17780"

[live]
hosts = ["*.live.test"]
"""


class ProvidesTests(SynchronousTestCase):
    def test_site(self) -> None:
        """
        The site proxy's mode provides L{IMode}.
        """
        self.assertTrue(verifyObject(IMode, SiteMode(parseSites(SITES), "/nonexistent")))

    def test_standin(self) -> None:
        """
        The stand-in's mode provides L{IMode}.
        """
        self.assertTrue(verifyObject(IMode, StandinMode()))


class SiteModeTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.mode = SiteMode(parseSites(SITES), "/nonexistent")

    def test_routeByOrigin(self) -> None:
        """
        A request goes to the site whose origin is its scheme, host and
        port, with that site's sign-in headers; the same route each time.
        """
        route = self.mode.route("http", "localhost", 7770, False)
        assert isinstance(route, Route)
        self.assertEqual((route.scheme, route.host, route.port), ("http", "127.0.0.1", 17770))
        self.assertEqual(route.origin, "http://localhost:7770")
        self.assertEqual(route.signIn, frozenset({"authorization"}))
        self.assertIs(self.mode.route("http", "localhost", 7770, False), route)
        admin = self.mode.route("http", "localhost", 7780, False)
        assert isinstance(admin, Route)
        self.assertEqual((admin.scheme, admin.port), ("https", 17780))

    def test_otherPortRefused(self) -> None:
        """
        Another port of a site's host is no site: refused, saying which
        origin was asked for.
        """
        refusal = self.mode.route("http", "localhost", 9999, False)
        self.assertEqual(refusal, Refusal(403, "http://localhost:9999 is not a site's origin or an allowed live host"))
        inside = self.mode.route("https", "localhost", 7770, True)
        self.assertEqual(inside, Refusal(403, "https://localhost:7770 is not a site's origin"))

    def test_live(self) -> None:
        """
        An allowed live host on the forward port is routed with no site (so
        the destination rules judge its address); inside a site's tunnel it
        is not.
        """
        route = self.mode.route("http", "a.live.test", 80, False)
        assert isinstance(route, Route)
        self.assertIsNone(route.site)
        self.assertIsInstance(self.mode.route("http", "a.live.test", 80, True), Refusal)

    def test_connect(self) -> None:
        """
        A CONNECT to a port a site's origin names is opened (TLS or plain
        HTTP inside); a live host's is blind on its allowed ports; anything
        else is refused.
        """
        self.assertEqual(self.mode.connect("shop.test", 443), OPEN)
        self.assertEqual(self.mode.connect("localhost", 7780), OPEN)
        self.assertIsInstance(self.mode.connect("localhost", 8080), Refusal)
        self.assertEqual(self.mode.connect("a.live.test", 443), BLIND)
        refusal = self.mode.connect("a.live.test", 25)
        assert isinstance(refusal, Refusal)
        self.assertIn("[live] connect_ports", refusal.reason)

    def test_kept(self) -> None:
        """
        The site proxy keeps text answers up to the limit, and request
        bodies, when it logs.
        """
        capture = self.mode.responseCapture(b"text/html", True)
        self.assertTrue(capture.keep)
        self.assertEqual(capture.limit, MAX_RESPONSE_BODY)
        self.assertTrue(self.mode.requestCapture(True).keep)
        self.assertEqual(list(self.mode.privilegedFiles), [])


class StandinModeTests(SynchronousTestCase):
    def test_everyHostIsLive(self) -> None:
        """
        Every request is routed to the host it names, as a live host.
        """
        route = StandinMode().route("http", "x.test", 8080, False)
        self.assertEqual(route, Route("http", "x.test", 8080, "http://x.test:8080", "x.test"))

    def test_connectPorts(self) -> None:
        """
        A CONNECT is blind on the allowed ports (80 and 443 by default, so
        that C{ws://} works) and refused elsewhere, naming the option.
        """
        mode = StandinMode()
        self.assertEqual(DEFAULT_CONNECT_PORTS, frozenset({80, 443}))
        self.assertEqual(mode.connect("x.test", 80), BLIND)
        self.assertEqual(mode.connect("x.test", 443), BLIND)
        self.assertEqual(mode.connect("x.test", 25),
                         Refusal(403, "CONNECT to port 25 is not allowed (allowed: 80, 443; see --connect-ports)"))

    def test_keepsSizesOnly(self) -> None:
        """
        The stand-in keeps only the sizes of bodies, and rewrites nothing.
        """
        mode = StandinMode()
        for capture in (mode.requestCapture(True), mode.responseCapture(b"text/html", True)):
            capture.feed(b"hello")
            self.assertEqual(capture.record(), {"size": 5})
        route = mode.route("http", "x.test", 80, False)
        assert isinstance(route, Route)
        self.assertEqual(mode.rewrite(route, b"location", b"http://127.0.0.1/"), b"http://127.0.0.1/")
        self.assertIsNone(mode.redirect("x.test", 80))
