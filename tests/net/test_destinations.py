"""
Where a proxy may go: the resolver's overrides, the destination policy, the
options both proxies share, and how connection failures read.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from hypothesis import given, strategies as st
from twisted.internet import defer, error
from twisted.internet.address import IPv4Address, IPv6Address
from twisted.python import usage
from twisted.python.failure import Failure
from twisted.trial import unittest

from netlog.net.connect import describeFailure
from netlog.net.options import DestinationOptions, buildDestinations
from netlog.net.policy import DestinationPolicy, parseAllowOption
from netlog.net.resolve import DoesNotResolve, Resolver, parseAddress, parseResolveOption


class FakeNameResolver:
    """
    Answers from a table, so no test looks a name up in DNS.
    """

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.asked: list[str] = []

    def resolveHostName(self, receiver: Any, hostName: str, portNumber: int = 0, *a: Any) -> None:
        self.asked.append(hostName)
        receiver.resolutionBegan(None)
        for address in self.table.get(hostName, []):
            kind = IPv6Address if ":" in address else IPv4Address
            receiver.addressResolved(kind("TCP", address, portNumber))
        receiver.resolutionComplete()


class FakeReactor:
    def __init__(self, table: dict[str, list[str]]) -> None:
        self.nameResolver = FakeNameResolver(table)


class ResolverTests(unittest.SynchronousTestCase):
    def resolve(self, resolver: Resolver, host: str) -> Any:
        return self.successResultOf(resolver.resolve(host))

    def test_override(self) -> None:
        """
        A name given with C{--resolve} resolves to its address, whatever its
        case or a trailing dot, and is marked as named.
        """
        reactor = FakeReactor({})
        resolver = Resolver(reactor, {"shop.test": "127.0.0.1"})
        for name in ("shop.test", "SHOP.Test", "shop.test."):
            found = self.resolve(resolver, name)
            self.assertEqual(found.addresses, ("127.0.0.1",))
            self.assertTrue(found.named)
        self.assertEqual(reactor.nameResolver.asked, [])

    def test_resolveOnly(self) -> None:
        """
        With C{--resolve-only}, any other name doesn't resolve and nothing
        is looked up.
        """
        reactor = FakeReactor({"elsewhere.test": ["192.0.2.1"]})
        resolver = Resolver(reactor, {"shop.test": "127.0.0.1"}, resolveOnly=True)
        failure = self.failureResultOf(resolver.resolve("elsewhere.test"), DoesNotResolve)
        self.assertEqual(str(failure.value), "elsewhere.test doesn't resolve")
        self.assertEqual(reactor.nameResolver.asked, [])

    def test_throughTheReactor(self) -> None:
        """
        Other names go to the reactor's resolver; no address is a failure.
        """
        reactor = FakeReactor({"a.test": ["192.0.2.1", "2001:db8::1", "192.0.2.1"]})
        resolver = Resolver(reactor)
        found = self.resolve(resolver, "a.test")
        self.assertEqual(found.addresses, ("192.0.2.1", "2001:db8::1"))
        self.assertFalse(found.named)
        self.failureResultOf(resolver.resolve("b.test"), DoesNotResolve)

    def test_literals(self) -> None:
        """
        Address literals (IPv6 with or without brackets) need no lookup and
        are not "named".
        """
        resolver = Resolver(FakeReactor({}), resolveOnly=True)
        self.assertEqual(self.resolve(resolver, "192.0.2.7").addresses, ("192.0.2.7",))
        self.assertEqual(self.resolve(resolver, "[::1]").addresses, ("::1",))
        self.assertEqual(self.resolve(resolver, "::1").addresses, ("::1",))
        self.assertFalse(self.resolve(resolver, "::1").named)

    def test_parseResolveOption(self) -> None:
        """
        C{--resolve} wants NAME=ADDRESS; anything else says what to fix.
        """
        self.assertEqual(parseResolveOption("Shop.Test=127.0.0.1"), ("shop.test", "127.0.0.1"))
        self.assertEqual(parseResolveOption("v6.test=[::1]"), ("v6.test", "::1"))
        for bad in ("shop.test", "=127.0.0.1", "shop.test=", "shop.test=localhost"):
            self.assertRaises(ValueError, parseResolveOption, bad)

    def test_parseAddress(self) -> None:
        self.assertEqual(parseAddress("[::FFFF:127.0.0.1]"), "::ffff:7f00:1")
        self.assertIsNone(parseAddress("shop.test"))


#: Each way of writing an IPv4 address inside an IPv6 one, built
#: independently of netlog's code.
EMBEDDINGS = {
    "mapped": lambda a: ipaddress.IPv6Address(0xFFFF << 32 | int(a)),
    "compatible": lambda a: ipaddress.IPv6Address(int(a)),
    "translated": lambda a: ipaddress.IPv6Address(0xFFFF << 48 | int(a)),
    "nat64": lambda a: ipaddress.IPv6Address(0x0064FF9B << 96 | int(a)),
    "6to4": lambda a: ipaddress.IPv6Address(0x2002 << 112 | int(a) << 80 | 0x1234),
}


def carried(address: Any) -> Any:
    """
    The IPv4 address an IPv6 address carries (the forms of L{EMBEDDINGS}),
    or None.
    """
    if address.version != 6:
        return None
    value = int(address)
    if value >> 112 == 0x2002:
        return ipaddress.IPv4Address(value >> 80 & 0xFFFFFFFF)
    if value in (0, 1):
        return None
    if value >> 32 in (0, 0xFFFF, 0xFFFF << 16, 0x0064FF9B << 64):
        return ipaddress.IPv4Address(value & 0xFFFFFFFF)
    return None


class PolicyTests(unittest.SynchronousTestCase):
    REFUSED = ["127.0.0.1", "127.8.9.10", "::1", "::ffff:127.0.0.1", "169.254.169.254",
               "fe80::1", "0.0.0.0", "::", "224.0.0.1"]
    ALLOWED = ["192.0.2.1", "10.1.2.3", "2001:db8::5", "93.184.216.34"]

    def test_table(self) -> None:
        """
        Loopback, link-local, unspecified and multicast are refused with a
        reason naming the fix; other addresses may be reached.
        """
        policy = DestinationPolicy()
        for address in self.REFUSED:
            why = policy.check(address, 80)
            self.assertIsNotNone(why, address)
            self.assertIn("--allow", why)
        for address in self.ALLOWED:
            self.assertIsNone(policy.check(address, 80), address)

    def test_allow(self) -> None:
        """
        C{--allow CIDR} lets those addresses through, and no others.
        """
        policy = DestinationPolicy([parseAllowOption("127.0.0.0/8"), parseAllowOption("fe80::/10")])
        self.assertIsNone(policy.check("127.0.0.1", 80))
        self.assertIsNone(policy.check("::ffff:127.0.0.1", 80))
        self.assertIsNone(policy.check("fe80::1", 80))
        self.assertIsNotNone(policy.check("::1", 80))
        self.assertIsNotNone(policy.check("169.254.1.1", 80))

    def test_named(self) -> None:
        """
        A host named by C{--resolve} may reach loopback.
        """
        self.assertIsNone(DestinationPolicy().check("127.0.0.1", 8080, named=True))

    def test_ownListener(self) -> None:
        """
        The proxy's own listeners are refused always, even when named or
        allowed; a wildcard listener covers loopback on its port.
        """
        policy = DestinationPolicy([parseAllowOption("127.0.0.0/8")])
        policy.addListener("127.0.0.1", 3128)
        policy.addListener("0.0.0.0", 8080)
        self.assertIn("own listener", policy.check("127.0.0.1", 3128, named=True))
        self.assertIn("own listener", policy.check("::ffff:127.0.0.1", 3128))
        self.assertIn("own listener", policy.check("127.0.0.1", 8080, named=True))
        self.assertIsNone(policy.check("127.0.0.1", 3129))
        self.assertIsNone(policy.check("192.0.2.1", 3128))

    @given(st.ip_addresses(), st.integers(1, 65535))
    def test_allowedNetworkProperty(self, address: Any, port: int) -> None:
        """
        An address inside an C{--allow} network is never refused unless it
        is a listener of the proxy; outside, it is refused exactly when it
        is loopback, link-local, unspecified or multicast.
        """
        network = ipaddress.ip_network(f"{address}/{address.max_prefixlen}")
        policy = DestinationPolicy([network])
        self.assertIsNone(policy.check(str(address), port))
        plain = carried(address) or address
        special = plain.is_loopback or plain.is_link_local or plain.is_unspecified or plain.is_multicast
        self.assertEqual(DestinationPolicy().check(str(address), port) is not None, special)

    @given(st.ip_addresses(v=4), st.sampled_from(sorted(EMBEDDINGS)), st.booleans())
    def test_embeddedProperty(self, address: Any, form: str, refusePrivate: bool) -> None:
        """
        An IPv6 address carrying an IPv4 address is refused exactly when
        that IPv4 address is, for the same reason, and C{--allow} of the
        IPv4 network lets it through.
        """
        wrapped = str(EMBEDDINGS[form](address))
        policy = DestinationPolicy(refusePrivate=refusePrivate)
        plainWhy = policy.check(str(address), 80)
        why = policy.check(wrapped, 80)
        self.assertEqual(why is None, plainWhy is None, (wrapped, why, plainWhy))
        if why is not None:
            self.assertIn(f"carries {address})", why)
            self.assertIn(plainWhy.split(" is ", 1)[1], why)
            allowing = DestinationPolicy([ipaddress.ip_network(f"{address}/32")], refusePrivate=refusePrivate)
            self.assertIsNone(allowing.check(wrapped, 80))

    def test_embeddedTable(self) -> None:
        """
        The forms an attacker would use to reach the metadata service or
        loopback through an IPv6 literal are refused, naming what they carry.
        """
        for address, carried_ in [
            ("64:ff9b::a9fe:a9fe", "169.254.169.254"),
            ("64:ff9b::7f00:1", "127.0.0.1"),
            ("::a9fe:a9fe", "169.254.169.254"),
            ("::127.0.0.1", "127.0.0.1"),
            ("::ffff:0:7f00:1", "127.0.0.1"),
            ("2002:a9fe:a9fe::", "169.254.169.254"),
            ("2002:7f00:1:1234::5", "127.0.0.1"),
            ("2002:e000:1::", "224.0.0.1"),
        ]:
            why = DestinationPolicy().check(address, 80)
            self.assertIsNotNone(why, address)
            self.assertIn(f"(which carries {carried_})", why)
        for address in ["64:ff9b::5db8:d822", "2002:5db8:d822::1", "::ffff:93.184.216.34", "64:ff9b:1::7f00:1"]:
            self.assertIsNone(DestinationPolicy().check(address, 80), address)
        # :: and ::1 are themselves, not IPv4-compatible 0.0.0.0 and 0.0.0.1.
        self.assertIn(":: is an unspecified", DestinationPolicy().check("::", 80))
        self.assertIn("::1 is a loopback", DestinationPolicy().check("::1", 80))

    def test_private(self) -> None:
        """
        The private ranges are allowed by default and refused with
        C{--refuse-private} (in any IPv6 form that carries them), unless
        C{--allow}ed; the addresses around them are not private.
        """
        private = ["10.0.0.1", "10.255.255.255", "172.16.0.1", "172.31.255.254", "192.168.1.1",
                   "100.64.0.1", "100.127.255.254", "fc00::1", "fd12:3456::1",
                   "::ffff:10.1.2.3", "64:ff9b::c0a8:101", "2002:ac10:1::"]
        public = ["9.255.255.255", "11.0.0.1", "172.15.255.255", "172.32.0.1", "192.169.0.1",
                  "100.63.255.255", "100.128.0.1", "fe00::1", "2001:db8::1"]
        for address in private + public:
            self.assertIsNone(DestinationPolicy().check(address, 80), address)
        strict = DestinationPolicy(refusePrivate=True)
        for address in private:
            why = strict.check(address, 80)
            self.assertIsNotNone(why, address)
            self.assertIn("a private address", why)
        for address in public:
            self.assertIsNone(strict.check(address, 80), address)
        allowing = DestinationPolicy([parseAllowOption("10.0.0.0/8")], refusePrivate=True)
        self.assertIsNone(allowing.check("10.9.9.9", 80))
        self.assertIsNone(allowing.check("64:ff9b::a09:909", 80))
        self.assertIsNotNone(allowing.check("192.168.0.1", 80))
        self.assertIsNone(strict.check("10.0.0.1", 80, named=True))

    def test_parseAllow(self) -> None:
        self.assertEqual(str(parseAllowOption("10.0.0.1/8")), "10.0.0.0/8")
        self.assertRaises(ValueError, parseAllowOption, "ten.net")


class Options(DestinationOptions, usage.Options):
    """
    How another proxy's tap mixes the options in.
    """

    def postOptions(self) -> None:
        self.checkDestinations()


class OptionsTests(unittest.SynchronousTestCase):
    def test_parse(self) -> None:
        """
        The options fill the resolver and the policy.
        """
        config = Options()
        config.parseOptions([
            "--resolve", "a.test=127.0.0.1", "--resolve", "b.test=::1", "--resolve-only",
            "--allow", "10.0.0.0/8", "--connect-timeout", "2.5", "--idle-timeout", "60",
        ])
        self.assertEqual(config["resolve"], {"a.test": "127.0.0.1", "b.test": "::1"})
        self.assertEqual(config["connect-timeout"], 2.5)
        self.assertEqual(config["idle-timeout"], 60.0)
        resolver, policy = buildDestinations(config.destinations(), FakeReactor({}))
        self.assertTrue(resolver.resolveOnly)
        self.assertIsNone(policy.check("10.9.9.9", 80))

    def test_refusePrivate(self) -> None:
        """
        C{--refuse-private} makes the policy refuse the private ranges;
        without it they are allowed.
        """
        for argv, refused in [([], False), (["--refuse-private"], True)]:
            config = Options()
            config.parseOptions(argv)
            _, policy = buildDestinations(config.destinations(), FakeReactor({}))
            self.assertEqual(policy.check("192.168.1.1", 80) is not None, refused)

    def test_defaults(self) -> None:
        config = Options()
        config.parseOptions([])
        self.assertEqual((config["resolve"], config["allow"], config["resolve-only"]), ({}, [], 0))
        self.assertEqual(config["refuse-private"], 0)
        self.assertEqual(config["connect-timeout"], 10.0)
        self.assertEqual(config["idle-timeout"], 300.0)

    def test_bad(self) -> None:
        """
        Bad values are usage errors that say what to fix.
        """
        for argv in (["--resolve", "nope"], ["--allow", "x"], ["--connect-timeout", "-1"],
                     ["--idle-timeout", "soon"], ["--connect-timeout", "nan"]):
            self.assertRaises(usage.UsageError, Options().parseOptions, argv)


class DescribeFailureTests(unittest.SynchronousTestCase):
    def test_table(self) -> None:
        """
        Each way a connection fails reads plainly, with 504 for a timeout
        and 502 otherwise.
        """
        table = [
            (DoesNotResolve("x.test"), "x.test doesn't resolve", 502),
            (error.TimeoutError(), "connecting to x.test:443 timed out", 504),
            (defer.CancelledError(), "connecting to x.test:443 timed out", 504),
            (error.ConnectionRefusedError(), "x.test:443 refused the connection", 502),
            (error.NoRouteError(), "no route to x.test:443", 502),
        ]
        for exception, reason, status in table:
            self.assertEqual(describeFailure(Failure(exception), "x.test", 443), (reason, status))
