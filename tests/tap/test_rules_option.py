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

    def test_bodyFile(self) -> None:
        """
        An answer rule's C{body_file} is read from the state folder, given
        before C{--rules} or after it; a missing one is a usage error of one
        line naming the rule.
        """
        rules = self.write("rules.toml", '[[answer]]\nmatch = "shop.test/api/flags"\nbody_file = "flags.json"\n')
        state = os.path.dirname(self.write("flags.json", '{"beta": true}'))
        log = os.path.join(state, "network.jsonl")
        for argv in (["--rules", rules, "--state", state], ["--state", state, "--rules", rules]):
            config = StandinOptions()
            config.parseOptions([*argv, "--log", log])
            answer = config["rules"].request("shop.test", 443, "https://shop.test/api/flags").answer
            self.assertEqual(answer.body, b'{"beta": true}')
        with self.assertRaises(usage.UsageError) as raised:
            StandinOptions().parseOptions(["--rules", rules, "--state", os.path.dirname(rules), "--log", log])
        self.assertEqual(str(raised.exception), f"--rules {rules}: answer[0].body_file: 'flags.json' can't be read "
                                                "in the state folder: No such file or directory")
