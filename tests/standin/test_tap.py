"""
The stand-in's options and wiring: defaults a user can rely on, and checks
that say what to fix.
"""

from __future__ import annotations

import os

from twisted.python import usage
from twisted.trial import unittest

from netlog.log.writer import LogWriter
from netlog.standin.service import DEFAULT_LISTEN, buildProxy, listenerAddress
from netlog.tap.standin import Options


class OptionsTests(unittest.SynchronousTestCase):
    def test_defaults(self) -> None:
        """
        With no options the stand-in serves on 127.0.0.1:3128, allows
        CONNECT to 443 only, logs to the documented default path, and has
        the documented timeouts.
        """
        config = Options()
        config.parseOptions([])
        self.assertEqual(config["listen"], ["tcp:3128:interface=127.0.0.1"])
        self.assertEqual(config["connect-ports"], [80, 443])
        self.assertTrue(config["log"].endswith(os.path.join("netlog", "standin.jsonl")))
        self.assertEqual(
            (config["connect-timeout"], config["idle-timeout"], config["header-timeout"]),
            (10.0, 300.0, 30.0),
        )

    def test_repeatable(self) -> None:
        config = Options()
        config.parseOptions([
            "--listen", "tcp:0:interface=127.0.0.1", "--listen", "tcp6:0:interface=\\:\\:1",
            "--connect-ports", "443,8443", "--log", "/tmp/x.jsonl",
            "--resolve", "a.test=127.0.0.1", "--resolve-only",
        ])
        self.assertEqual(len(config["listen"]), 2)
        self.assertEqual(config["connect-ports"], [443, 8443])
        self.assertEqual(config["log"], "/tmp/x.jsonl")

    def test_bad(self) -> None:
        """
        Bad values are usage errors.
        """
        for argv in (["--connect-ports", "https"], ["--connect-ports", "0"],
                     ["--header-timeout", "0"], ["--resolve", "a.test"]):
            self.assertRaises(usage.UsageError, Options().parseOptions, argv)

    def test_buildProxy(self) -> None:
        """
        The proxy offers its listeners to be bound (it binds none itself),
        and knows its fixed-port listeners as places it must not connect to.
        """
        config = Options()
        config.parseOptions(["--listen", "tcp:3999:interface=127.0.0.1", "--no-log"])
        from twisted.internet.task import Clock

        proxy = buildProxy(config.config(), LogWriter(None), Clock())
        [(role, description, factory)] = proxy.listeners
        self.assertEqual((role, description), ("forward", "tcp:3999:interface=127.0.0.1"))
        self.assertIn("own listener", factory.proxy.policy.check("127.0.0.1", 3999, named=True))

    def test_listenerAddress(self) -> None:
        self.assertEqual(listenerAddress(DEFAULT_LISTEN), ("127.0.0.1", 3128))
        self.assertEqual(listenerAddress("tcp:8080"), ("0.0.0.0", 8080))
        self.assertEqual(listenerAddress("tcp6:port=81:interface=\\:\\:1"), ("::1", 81))
        self.assertIsNone(listenerAddress("unix:/tmp/s"))
