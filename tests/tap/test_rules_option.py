"""
C{--rules FILE} on both plugins: the main listener's rules, TOML or JSON,
refused with one line when wrong.
"""

from __future__ import annotations

import os

from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

from netlog.tap.proxy import Options as ProxyOptions
from netlog.tap.standin import Options as StandinOptions


class RulesOptionTests(SynchronousTestCase):
    def write(self, name: str, text: str) -> str:
        folder = os.path.abspath(self.mktemp())
        os.makedirs(folder)
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_tomlAndJson(self) -> None:
        """
        A C{.toml} (or any name) file is read as TOML, a C{.json} one as
        JSON, on either plugin.
        """
        toml = self.write("rules.toml", 'block = ["tracker.test"]\n')
        json = self.write("rules.json", '{"block": ["ads.test"]}')
        for options in (ProxyOptions, StandinOptions):
            config = options()
            config.opt_rules(toml)
            self.assertTrue(config["rules"].request("tracker.test", 80, "http://tracker.test/").blocked)
            config.opt_rules(json)
            self.assertEqual(config["rules"].document, {"block": ["ads.test"]})

    def test_bad(self) -> None:
        """
        A wrong document, a file that isn't TOML or one that can't be read
        is a usage error of one line that names the file and the key.
        """
        cases = [
            (self.write("rules.toml", 'block = ["a b"]\n'),
             '--rules {}: block[0]: a pattern is host[:port][/path], got "a b"'),
            (self.write("rules.toml", "latency_ms = \n"), "--rules {}: rules: not TOML: "),
            ("/nonexistent/rules.toml", "--rules {}: can't be read: No such file or directory"),
        ]
        for path, message in cases:
            with self.assertRaises(usage.UsageError) as raised:
                ProxyOptions().opt_rules(path)
            self.assertTrue(str(raised.exception).startswith(message.format(path)), str(raised.exception))
            self.assertNotIn("\n", str(raised.exception))
