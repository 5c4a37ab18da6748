"""
The typed configuration a tap's C{Options.config()} builds once its options
are checked: what the wiring and the engine's builders read.
"""

from __future__ import annotations

import dataclasses

from twisted.trial.unittest import SynchronousTestCase

from netlog.core.rules import NO_RULES
from netlog.core.segments import Rotation
from netlog.net.options import DEFAULT_LISTEN
from netlog.tap.standin import Options


def standinConfig(*argv: str) -> Options:
    """
    The stand-in's options, parsed from C{argv}.
    """
    options = Options()
    options.parseOptions(list(argv))
    return options


class ConfigTests(SynchronousTestCase):
    def test_defaults(self) -> None:
        """
        With no options, the config holds the documented defaults: the
        forward port on loopback 3128, CONNECT to 80 and 443, no API,
        supervised with a standby, no rotation.
        """
        config = standinConfig("--no-log").config()
        self.assertEqual((config.listen, config.listenIsDefault), ((DEFAULT_LISTEN,), True))
        self.assertEqual(config.plugin.connectPorts, frozenset({80, 443}))
        self.assertEqual(
            (config.plugin.destinations.connectTimeout, config.plugin.destinations.idleTimeout,
             config.plugin.headerTimeout),
            (10.0, 300.0, 30.0),
        )
        self.assertEqual((config.api, config.apiAddress), (None, None))
        self.assertEqual((config.supervised, config.standby, config.workers), (True, True, 1))
        self.assertEqual((config.log, config.rules, config.rotation), (None, NO_RULES, Rotation()))

    def test_given(self) -> None:
        """
        What the options say is in the config, normalised as C{postOptions}
        left it: the API's description made loopback, its address, the
        sessions, the rotation.
        """
        config = standinConfig(
            "--no-log", "--api", "tcp:0", "--api-host", "netlog.test", "--listen", "tcp:0:interface=127.0.0.1",
            "--resolve", "a.test=127.0.0.1", "--resolve-only", "--connect-ports", "443,8443",
            "--rotate-size", "1MiB", "--grace", "2", "--no-supervise",
        ).config()
        assert config.api is not None
        self.assertEqual(config.api.description, "tcp:0:interface=127.0.0.1")
        self.assertEqual(config.api.hosts, frozenset({"netlog.test"}))
        self.assertTrue(config.api.tokenFileIsDefault)
        self.assertEqual(config.apiAddress, ("127.0.0.1", 0))
        self.assertEqual(config.listen, ("tcp:0:interface=127.0.0.1",))
        self.assertEqual(dict(config.plugin.destinations.resolve), {"a.test": "127.0.0.1"})
        self.assertTrue(config.plugin.destinations.resolveOnly)
        self.assertEqual(config.plugin.connectPorts, frozenset({443, 8443}))
        self.assertEqual(config.rotation.size, 1024 * 1024)
        self.assertEqual((config.grace, config.supervised), (2.0, False))

    def test_frozen(self) -> None:
        """
        The config can't be changed once built: a value learnt later (the
        API's bound port) makes a new one.
        """
        config = standinConfig("--no-log").config()
        with self.assertRaises(dataclasses.FrozenInstanceError):
            config.log = "/tmp/other.jsonl"  # type: ignore[misc]
        moved = dataclasses.replace(config, apiAddress=("127.0.0.1", 8081))
        self.assertEqual((config.apiAddress, moved.apiAddress), (None, ("127.0.0.1", 8081)))

    def test_workerParsesTheSame(self) -> None:
        """
        A supervised worker parses the config's C{argv} with its
        C{optionsClass} again, and gets the same config.
        """
        from twisted.python.reflect import namedAny

        config = standinConfig("--api", "tcp:8081", "--session", "one=0", "--log", "/tmp/netlog-x.jsonl",
                               "--allow", "10.0.0.0/8", "--workers", "2").config()
        again = namedAny(config.optionsClass)()
        again.parseOptions(list(config.argv))
        self.assertEqual(again.config(), config)
