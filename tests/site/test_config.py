"""
Tests for L{netlog.site.config}: reading C{sites.toml}.
"""

from __future__ import annotations

import os

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.upstreamproxy import UpstreamProxy
from netlog.site.config import ConfigError, loadSites, parseSites
from netlog.site.mode import SiteMode

GOOD = """\
# The sites the browser may reach.
[[site]]
name = "shop"
origins = ["https://shop.test", "http://shop.test", "https://shop.test:8443"]
backend = "http://127.0.0.1:7770"
sign_in_headers = ["Authorization", "X-Session"]

[[site]]
name = "wiki"
origins = ["https://wiki.test"]
backend = "https://wiki-backend.test:8443"
verify = false

[live]
hosts = ["*.example.org", "api.example.com"]
"""


class ParseTests(SynchronousTestCase):
    def test_good(self) -> None:
        """
        A well-formed file gives its sites, origins, backends, sign-in
        headers (lowercased) and live hosts.
        """
        config = parseSites(GOOD)
        self.assertEqual([s.name for s in config.sites], ["shop", "wiki"])
        shop = config.siteAt("https", "SHOP.test", 443)
        assert shop is not None
        self.assertEqual([str(o) for o in shop.origins],
                         ["https://shop.test", "http://shop.test", "https://shop.test:8443"])
        self.assertEqual((shop.backend.scheme, shop.backend.host, shop.backend.port), ("http", "127.0.0.1", 7770))
        self.assertEqual(shop.signInHeaders, frozenset({"authorization", "x-session"}))
        wiki = config.siteAt("https", "wiki.test", 443)
        assert wiki is not None
        self.assertFalse(wiki.backend.verify)
        self.assertTrue(wiki.backend.tls)
        self.assertIsNone(config.siteAt("https", "other.test", 443))
        self.assertEqual(str(shop.httpsOrigin("shop.test")), "https://shop.test")
        self.assertIsNone(shop.connections)

    def test_backendConnections(self) -> None:
        """
        A site's C{backend_connections} is its cap, carried on its routes.
        """
        config = parseSites(GOOD.replace('verify = false', 'verify = false\nbackend_connections = 8'))
        wiki = config.siteAt("https", "wiki.test", 443)
        assert wiki is not None
        self.assertEqual(wiki.connections, 8)
        mode = SiteMode(config, self.mktemp())
        self.assertEqual(mode.siteRoute(wiki, "https", "wiki.test", 443).connections, 8)

    def test_upstreamProxy(self) -> None:
        """
        A site's C{upstream_proxy} is carried on its routes; a site without
        one goes direct.
        """
        config = parseSites(GOOD.replace('verify = false', 'verify = false\nupstream_proxy = "http://127.0.0.1:3129"'))
        wiki = config.siteAt("https", "wiki.test", 443)
        assert wiki is not None
        self.assertEqual(wiki.upstreamProxy, UpstreamProxy("127.0.0.1", 3129))
        mode = SiteMode(config, self.mktemp())
        self.assertEqual(mode.siteRoute(wiki, "https", "wiki.test", 443).upstreamProxy, wiki.upstreamProxy)
        self.assertIsNone(parseSites(GOOD).sites[0].upstreamProxy)

    def test_originsByPort(self) -> None:
        """
        An origin is scheme, host and port: another port or scheme of a
        site's host is not that site, and a CONNECT reaches a site only on a
        port one of its origins names.
        """
        config = parseSites(GOOD)
        shop = config.siteAt("https", "shop.test", 443)
        self.assertIs(config.siteAt("https", "shop.test", 8443), shop)
        self.assertIs(config.siteAt("http", "shop.test", 80), shop)
        self.assertIsNone(config.siteAt("http", "shop.test", 8443))
        self.assertIsNone(config.siteAt("https", "shop.test", 9999))
        self.assertTrue(config.tunnelsTo("shop.test", 8443))
        self.assertTrue(config.tunnelsTo("shop.test", 80))
        self.assertFalse(config.tunnelsTo("shop.test", 9999))

    def test_sitesShareAHost(self) -> None:
        """
        WebArena's six sites, all on C{localhost} on their own ports, are six
        sites, each found by its own origin only.
        """
        ports = {"shopping": 7770, "shopping_admin": 7780, "reddit": 9999, "gitlab": 8023,
                 "wikipedia": 8888, "map": 3000}
        text = "".join(
            f'[[site]]\nname = "{name}"\norigins = ["http://localhost:{port}"]\n'
            f'backend = "http://127.0.0.1:{port + 10000}"\n'
            for name, port in ports.items()
        )
        config = parseSites(text)
        for name, port in ports.items():
            site = config.siteAt("http", "localhost", port)
            assert site is not None
            self.assertEqual((site.name, site.backend.port), (name, port + 10000))
        self.assertIsNone(config.siteAt("http", "localhost", 8080))
        self.assertIsNone(config.siteAt("https", "localhost", 7770))

    def test_liveHosts(self) -> None:
        """
        C{*.example.org} matches its subdomains, not the bare name; exact names
        match only themselves; no live host is allowed by default.
        """
        config = parseSites(GOOD)
        self.assertTrue(config.isLive("a.example.org"))
        self.assertTrue(config.isLive("b.a.example.org"))
        self.assertFalse(config.isLive("example.org"))
        self.assertTrue(config.isLive("api.example.com"))
        self.assertFalse(config.isLive("www.example.com"))
        self.assertFalse(parseSites("").isLive("a.example.org"))

    def test_liveConnectPorts(self) -> None:
        """
        A live host's CONNECT may name port 443 unless C{[live]
        connect_ports} lists others.
        """
        self.assertEqual(parseSites(GOOD).liveConnectPorts, {443})
        self.assertEqual(parseSites("").liveConnectPorts, {443})
        config = parseSites('[live]\nhosts = ["*"]\nconnect_ports = [443, 8443]\n')
        self.assertEqual(config.liveConnectPorts, {443, 8443})

    def test_liveDecrypt(self) -> None:
        """
        C{[live] decrypt} names the live hosts whose CONNECTs are decrypted
        (a host it names is a live host too, a site's host never is);
        C{ca_file} (relative to C{sites.toml}'s folder) and C{verify} are
        the trust their certificates are checked against: the system's
        store and verified, unless they say otherwise.
        """
        config = parseSites('[[site]]\nname = "a"\norigins = ["https://a.example.org"]\n'
                            'backend = "http://127.0.0.1:1"\n[live]\ndecrypt = ["*.example.org", "API.test"]\n')
        self.assertTrue(config.decrypts("b.example.org"))
        self.assertTrue(config.decrypts("api.test."))
        self.assertTrue(config.isLive("b.example.org"))
        self.assertFalse(config.decrypts("a.example.org"))
        self.assertFalse(config.decrypts("example.org"))
        self.assertEqual((config.liveTrust.caFile, config.liveTrust.verify), (None, True))
        self.assertFalse(parseSites('[live]\nhosts = ["*"]\n').decrypts("a.test"))
        self.assertTrue(parseSites('[live]\ndecrypt = ["*"]\n').decrypts("a.test"))
        folder = self.mktemp()
        os.makedirs(folder)
        with open(os.path.join(folder, "trust.pem"), "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
        path = os.path.join(folder, "sites.toml")
        config = parseSites('[live]\ndecrypt = ["*"]\nca_file = "trust.pem"\nverify = false\n', path)
        self.assertEqual(config.liveTrust.caFile, os.path.join(os.path.abspath(folder), "trust.pem"))
        self.assertFalse(config.liveTrust.verify)

    def test_errorsNameTheLine(self) -> None:
        """
        Each mistake fails with the file, the line it is on, and what is
        wrong.
        """
        cases = [
            ("[[site]]\nname = \"a\"\norigins = [\"ftp://a.test\"]\nbackend = \"http://127.0.0.1:1\"\n",
             3, "http:// or https://"),
            ("[[site]]\nname = \"a\"\norigins = [\"https://a.test\"]\nbackend = \"127.0.0.1:1\"\n",
             4, "backend"),
            ("[[site]]\nname = \"a\"\norigins = [\"https://a.test\"]\nbackend = \"http://127.0.0.1:1\"\n"
             "sign_in_headers = [\"Cookie\"]\n", 5, "always keeps cookies"),
            ("[[site]]\nname = \"a\"\norigins = [\"https://a.test\"]\nbackend = \"http://127.0.0.1:1\"\n"
             "colour = 1\n", 5, "unknown key 'colour'"),
            ("[[site]]\nname = \"a\"\norigins = [\"https://a.test\"]\n", 1, "needs backend"),
            ("[[site]]\nname = \"a\"\norigins = [\"https://a.test\"]\nbackend = \"http://127.0.0.1:1\"\n"
             "[[site]]\nname = \"b\"\norigins = [\"https://a.test\"]\nbackend = \"http://127.0.0.1:2\"\n",
             7, "origin https://a.test is already site 'a'"),
            ("[[site]]\nname = \"a\"\norigins = [\"https://a.test\", \"https://A.test:443/\"]\n"
             "backend = \"http://127.0.0.1:1\"\n",
             3, "origin 'https://A.test:443/' is https://a.test, which its origins already name"),
            ("[[site]]\nname = \"a\"\norigins = [\"http://a.test:80\", \"https://a.test:80\",\n"
             "  \"http://a.test\"]\nbackend = \"http://127.0.0.1:1\"\n",
             3, "origin 'http://a.test' is http://a.test, which its origins already name"),
            ("[[site]]\nname = \"a\"\norigins = [\"https://a.test\"]\nbackend = \"http://127.0.0.1:1\"\n"
             "verify = \"yes\"\n", 5, "verify must be true or false"),
            *[("[[site]]\nname = \"a\"\norigins = [\"https://a.test\"]\nbackend = \"http://127.0.0.1:1\"\n"
               f"backend_connections = {value}\n", 5, "backend_connections must be a whole number")
              for value in ("0", "-1", "1.5", "\"8\"", "true")],
            *[("[[site]]\nname = \"a\"\norigins = [\"https://a.test\"]\nbackend = \"http://127.0.0.1:1\"\n"
               f"upstream_proxy = {value}\n", 5, words)
              for value, words in (("\"https://p.test:3128\"", "not supported"), ("\"p.test:3128\"", "wants"),
                                   ("\"http://p.test\"", "with a port"), ("3128", "wants"))],
            ("[live]\nhosts = [\"https://x.test/\"]\n", 2, "no scheme"),
            ("[live]\nhosts = []\nconnect_ports = [0]\n", 3, "port numbers"),
            ("[live]\nhosts = []\nconnect_ports = \"443\"\n", 3, "port numbers"),
            ("[live]\nhosts = []\nconnect_ports = []\n", 3, "port numbers"),
            ("[live]\nhosts = []\nports = [443]\n", 3, "connect_ports"),
            ("[live]\ndecrypt = \"*\"\n", 2, "decrypt must be a list"),
            ("[live]\ndecrypt = [\"https://x.test\"]\n", 2, "no scheme"),
            ("[live]\ndecrypt = [\"*\"]\nverify = \"no\"\n", 3, "verify must be true or false"),
            ("[live]\ndecrypt = [\"*\"]\nca_file = 1\n", 3, "ca_file must be the path"),
            ("[live]\ndecrypt = [\"*\"]\nca_file = \"/nonexistent/ca.pem\"\n", 3, "can't read it"),
            ("[live]\ndecrypt = [\"*\"]\nca_file = \"/dev/null\"\n", 3, "holds no PEM certificate"),
            ("[[site]]\nname = \"a\"\norigins = [\"https://a.test\"\n", 3, "not valid TOML"),
            ("[[site]]\nname = \"a\"\norigins = [\"https://a.test/path\"]\nbackend = \"http://127.0.0.1:1\"\n",
             3, "no path"),
        ]
        for text, line, words in cases:
            with self.assertRaises(ConfigError, msg=text) as caught:
                parseSites(text, "sites.toml")
            message = str(caught.exception)
            self.assertIn(f"line {line}", message, text)
            self.assertIn(words, message, text)
            self.assertTrue(message.startswith("sites.toml"), message)

    def test_loadMissingFile(self) -> None:
        """
        A file that can't be read fails with its path and why.
        """
        path = os.path.join(self.mktemp(), "sites.toml")
        with self.assertRaises(ConfigError) as caught:
            loadSites(path)
        self.assertIn(path, str(caught.exception))

    def test_example(self) -> None:
        """
        The example shipped in C{examples/} reads.
        """
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        config = loadSites(os.path.join(here, "examples", "sites.toml"))
        self.assertTrue(config.sites)
