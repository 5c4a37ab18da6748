"""
The rules document: checked whole with one-line errors, and what it does to
each request and CONNECT (L{netlog.core.rules}).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.rules import (
    MAX_ANSWER_BODY,
    MAX_ENTRIES,
    NO_RULES,
    PASS,
    BadRules,
    compileRules,
    parsePattern,
    parseRulesText,
)

ISSUE_EXAMPLE = {
    "headers": [{"match": "shop.test", "set": {"X-Auto-Login": "admin"}, "remove": ["Referer"],
                 "answer_set": {}, "answer_remove": []}],
    "block": ["tracker.test", "*.ads.test", "shop.test/admin/*"],
    "block_status": 403,
    "allow": ["shop.test", "*.shop.test:8443", "tracker.test", "x.ads.test"],
    "remap": {"shop.test": "127.0.0.1:8080"},
    "latency_ms": 200,
    "bandwidth": {"down": 102400, "up": 51200},
}


#: The cases of L{RulesTests.test_patterns}: pattern, host, port, path, matches.
PATTERNS_CASES: list[tuple[Any, ...]] = [
    ("shop.test", "shop.test", 443, "/", True),
    ("shop.test", "SHOP.test.", 80, "/any/path", True),
    ("shop.test", "www.shop.test", 443, "/", False),
    ("shop.test", "shop.testx", 443, "/", False),
    ("*.shop.test", "www.shop.test", 443, "/", True),
    ("*.shop.test", "a.b.shop.test", 443, "/", True),
    ("*.shop.test", "shop.test", 443, "/", False),
    ("*.shop.test", "evilshop.test", 443, "/", False),
    ("api.*.test", "api.eu.west.test", 443, "/", True),
    ("api.*.test", "api.test", 443, "/", False),
    ("*", "localhost", 1, "/", True),
    ("shop.test:8443", "shop.test", 8443, "/", True),
    ("shop.test:8443", "shop.test", 443, "/", False),
    ("shop.test/admin/*", "shop.test", 443, "/admin/users", True),
    ("shop.test/admin/*", "shop.test", 443, "/admin/", True),
    ("shop.test/admin/*", "shop.test", 443, "/admin", False),
    ("shop.test/admin", "shop.test", 443, "/admin", True),
    ("shop.test/admin", "shop.test", 443, "/admin/x", False),
    ("shop.test:80/a*", "shop.test", 80, "/abc", True),
    ("shop.test:80/a*", "shop.test", 81, "/abc", False),
    ("[::1]:8080", "::1", 8080, "/", True),
    ("[::1]", "[::1]", 9, "/", True),
    ("127.0.0.1", "127.0.0.1", 9, "/", True),
]


_labels = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_hosts = st.lists(_labels, min_size=1, max_size=4).map(".".join)


#: The cases of L{RulesTests.test_block}: url, blocked, rule.
BLOCK_CASES: list[tuple[Any, ...]] = [
    ("http://tracker.test/pixel", True, "block[0]"),
    ("http://x.ads.test/", True, "block[1]"),
    ("https://shop.test/admin/users?x=1", True, "block[2]"),
    ("https://shop.test/", False, None),
    ("https://shop.test/administrator", False, None),
    ("http://unlisted.test/", False, None),
]


#: The cases of L{RulesTests.test_connect}: host, port, blocked, rule.
CONNECT_CASES: list[tuple[Any, ...]] = [
    ("tracker.test", 443, True, "block[0]"),
    ("shop.test", 443, False, None),  # block[1] has a path: judged inside
    ("listed.test", 443, False, None),
    ("unlisted.test", 443, True, "allow"),
    ("api.test", 443, False, None),  # allow with a path opens the tunnel
]


#: The cases of L{RulesTests.test_badDocuments}: document, error.
BADDOCUMENTS_CASES: list[tuple[Any, ...]] = [
    ([], 'rules: a rules document is an object such as {"block": ["tracker.test"]}, got []'),
    ({"blocks": []}, 'rules: unknown key "blocks" (it takes headers, block, block_status, allow, remap, '
                     'latency_ms, bandwidth, answer)'),
    ({"block": "tracker.test"}, 'block: a list of patterns such as ["tracker.test", "*.ads.test"], '
                                'got "tracker.test"'),
    ({"block": ["a.test", "b.test", "a b"]}, 'block[2]: a pattern is host[:port][/path], got "a b"'),
    ({"block": ["a.test", 7]}, "block[1]: a pattern is host[:port][/path] (a string), got 7"),
    ({"block": ["http://a.test"]}, 'block[0]: a pattern is host[:port][/path], got "http://a.test"'),
    ({"block": ["sh*p.test"]}, 'block[0]: a pattern is host[:port][/path] (* stands for whole labels), '
                               'got "sh*p.test"'),
    ({"block": ["a.test:0"]}, 'block[0]: a port is 1 to 65535, got "a.test:0"'),
    ({"block": ["a.test:x"]}, 'block[0]: a port is 1 to 65535, got "a.test:x"'),
    ({"block": [":80"]}, 'block[0]: a pattern is host[:port][/path], got ":80" (no host)'),
    ({"block": ["a.test/*/x"]}, 'block[0]: a pattern is host[:port][/path] (a path may end in * and has no '
                                'query), got "a.test/*/x"'),
    ({"block": ["::1"]}, 'block[0]: a pattern is host[:port][/path], got "::1" (put an IPv6 address in [])'),
    ({"allow": ["ok.test", "[::1"]}, 'allow[1]: a pattern is host[:port][/path], got "[::1" (an IPv6 address '
                                     'in [] is not closed)'),
    ({"block_status": 200}, "block_status: an HTTP status, an integer from 400 to 599, got 200"),
    ({"block_status": True}, "block_status: an HTTP status, an integer from 400 to 599, got true"),
    ({"latency_ms": -1}, "latency_ms: milliseconds, an integer from 0 to 60000, got -1"),
    ({"latency_ms": 1.5}, "latency_ms: milliseconds, an integer from 0 to 60000, got 1.5"),
    ({"bandwidth": 100}, 'bandwidth: an object such as {"down": 102400, "up": 51200}, got 100'),
    ({"bandwidth": {"sideways": 1}}, 'bandwidth: unknown key "sideways" (it takes down and up)'),
    ({"bandwidth": {"down": 10}}, "bandwidth.down: bytes a second, an integer from 1024 to 10737418240, got 10"),
    ({"remap": []}, 'remap: an object of hosts and addresses such as {"shop.test": "127.0.0.1:8080"}, got []'),
    ({"remap": {"*.shop.test": "127.0.0.1"}}, "remap[*.shop.test]: remap's keys are host names, with no *, "
                                               "port or path"),
    ({"remap": {"shop.test": "backend.test:80"}}, 'remap[shop.test]: an address[:port] such as 127.0.0.1:8080 '
                                                  '(an IP address, so that no name is looked up), got '
                                                  '"backend.test:80"'),
    ({"remap": {"shop.test": "127.0.0.1:99999"}}, 'remap[shop.test]: a port is 1 to 65535, got "127.0.0.1:99999"'),
    ({"headers": {}}, "headers: a list of header rules, got {}"),
    ({"headers": ["x"]}, 'headers[0]: a header rule is an object such as {"match": "shop.test", "set": {...}}, '
                         'got "x"'),
    ({"headers": [{"set": {}}]}, "headers[0]: a header rule needs match, the pattern of the requests it changes"),
    ({"headers": [{"match": "a.test", "sets": {}}]}, 'headers[0]: unknown key "sets" (a header rule takes match, '
                                                     'set, remove, answer_set, answer_remove)'),
    ({"headers": [{"match": "a.test", "set": {"X-A": "1\r\nEvil: 1"}}]},
     'headers[0].set.X-A: a header\'s value is a string on one line, got "1\\r\\nEvil: 1"'),
    ({"headers": [{"match": "a.test", "set": {"Bad Name": "1"}}]},
     'headers[0].set.Bad Name: a header\'s name is a token (letters, digits, -), got "Bad Name"'),
    ({"headers": [{"match": "a.test", "remove": ["Content-Length"]}]},
     "headers[0].remove[0]: Content-Length frames the message or the connection; rules can't change it"),
    ({"headers": [{"match": "a.test", "answer_remove": "Server"}]},
     'headers[0].answer_remove: a list of header names, got "Server"'),
    ({"headers": [{"match": "a b"}]}, 'headers[0].match: a pattern is host[:port][/path], got "a b"'),
    ({"block": ["a.test"] * (MAX_ENTRIES + 1)}, f"block: at most {MAX_ENTRIES} patterns, got {MAX_ENTRIES + 1}"),
]


#: The cases of L{RulesTests.test_allow}: host, port, url, blocked.
ALLOW_CASES: list[tuple[Any, ...]] = [
    ("shop.test", 443, "https://shop.test/", False),
    ("www.shop.test", 8443, "https://www.shop.test:8443/", False),
    ("www.shop.test", 443, "https://www.shop.test/", True),
    ("other.test", 443, "https://other.test/", True),
    ("api.test", 80, "http://api.test/v1/x", False),
    ("api.test", 80, "http://api.test/v2/x", True),
]


class RulesTests(SynchronousTestCase):
    def test_patterns(self) -> None:
        """
        C{*} stands for one or more whole labels, a path ending in C{*} is a
        prefix, no path is every path and no port every port; hosts compare
        without case or a trailing dot.
        """
        for pattern, host, port, path, matches in PATTERNS_CASES:
            p = parsePattern(pattern, "block[0]")
            found = p.matchesHost(host.lower().rstrip(".").strip("[]"), port) and p.matchesPath(path)
            self.assertIs(found, matches, (pattern, host, port, path))

    def test_badDocuments(self) -> None:
        """
        A wrong document is refused whole with one line: the key, where, why.
        """
        for document, error in BADDOCUMENTS_CASES:
            with self.assertRaises(BadRules) as raised:
                compileRules(document)
            self.assertEqual(str(raised.exception), error)

    def test_issueExampleCompiles(self) -> None:
        """
        The issue's own example is a good document, kept as given.
        """
        rules = compileRules(ISSUE_EXAMPLE)
        assert rules.document == ISSUE_EXAMPLE
        assert not rules.empty

    def test_noRules(self) -> None:
        """
        An empty document does nothing, to anything.
        """
        assert NO_RULES.empty
        assert NO_RULES.request("shop.test", 443, "https://shop.test/") is PASS
        assert NO_RULES.connect("shop.test", 443) is PASS

    def test_block(self) -> None:
        """
        A request a block pattern names is blocked, with C{block_status}, and
        the entry names the pattern.
        """
        for url, blocked, rule in BLOCK_CASES:
            rules = compileRules({"block": ["tracker.test", "*.ads.test", "shop.test/admin/*"], "block_status": 451})
            host = url.split("://")[1].split("/")[0]
            decision = rules.request(host, 80, url)
            assert decision.blocked is blocked
            if blocked:
                assert decision.status == 451
                assert decision.entries == ({"rule": rule, "action": "blocked"},)
            else:
                assert decision is PASS

    def test_allow(self) -> None:
        """
        With C{allow}, only what it names goes through; the rest is blocked by
        C{allow}.
        """
        for host, port, url, blocked in ALLOW_CASES:
            rules = compileRules({"allow": ["shop.test", "*.shop.test:8443", "api.test/v1/*"]})
            decision = rules.request(host, port, url)
            assert decision.blocked is blocked
            if blocked:
                assert decision.entries == ({"rule": "allow", "action": "blocked"},)

    def test_emptyAllowBlocksAll(self) -> None:
        """
        An empty C{allow} lets nothing through.
        """
        rules = compileRules({"allow": []})
        assert rules.request("shop.test", 443, "https://shop.test/").blocked
        assert rules.connect("shop.test", 443).blocked

    def test_blockBeforeAllow(self) -> None:
        """
        A block pattern wins over an allow pattern for the same request.
        """
        rules = compileRules({"allow": ["shop.test"], "block": ["shop.test/admin*"]})
        assert rules.request("shop.test", 443, "https://shop.test/admin").entries == (
            {"rule": "block[0]", "action": "blocked"},)
        assert not rules.request("shop.test", 443, "https://shop.test/").blocked

    def test_connect(self) -> None:
        """
        A CONNECT is judged by host and port: a block pattern with a path
        doesn't refuse it, an allow pattern with a path lets it open.
        """
        for host, port, blocked, rule in CONNECT_CASES:
            rules = compileRules({"block": ["tracker.test", "shop.test/admin/*"],
                                  "allow": ["listed.test", "shop.test", "tracker.test", "api.test/v1/*"]})
            decision = rules.connect(host, port)
            assert decision.blocked is blocked
            if rule is not None:
                assert decision.entries == ({"rule": rule, "action": "blocked"},)

    def test_headers(self) -> None:
        """
        Header rules that match change the request and the answer, in their
        order (a later set wins; a set after a remove puts the field back), and
        each change is an entry.
        """
        rules = compileRules({"headers": [
            {"match": "shop.test", "set": {"X-Auto-Login": "admin"}, "remove": ["Referer"]},
            {"match": "other.test", "set": {"X-Other": "1"}},
            {"match": "*.test/api/*", "set": {"x-auto-login": "robot"}, "answer_set": {"X-Seen": "yes"},
             "answer_remove": ["Server"]},
        ]})
        decision = rules.request("shop.test", 443, "https://shop.test/api/v1")
        assert decision.setUp == ((b"x-auto-login", b"robot"),)
        assert decision.dropUp == {b"x-auto-login", b"referer"}
        assert decision.setDown == ((b"X-Seen", b"yes"),)
        assert decision.dropDown == {b"x-seen", b"server"}
        assert decision.entries == (
            {"rule": "headers[0]", "action": "remove Referer"},
            {"rule": "headers[0]", "action": "set X-Auto-Login"},
            {"rule": "headers[2]", "action": "set x-auto-login"},
            {"rule": "headers[2]", "action": "answer remove Server"},
            {"rule": "headers[2]", "action": "answer set X-Seen"},
        )
        plain = rules.request("shop.test", 443, "https://shop.test/")
        assert plain.setUp == ((b"X-Auto-Login", b"admin"),)
        assert plain.dropDown == frozenset()

    def test_remap(self) -> None:
        """
        A remapped host gets its address (and port) for requests and
        CONNECTs; other hosts don't.
        """
        rules = compileRules({"remap": {"shop.test": "127.0.0.1:8080", "v6.test": "[::1]"}})
        decision = rules.request("SHOP.test", 443, "https://shop.test/")
        assert decision.remap == ("127.0.0.1", 8080)
        assert decision.entries == ({"rule": "remap[shop.test]", "action": "remapped to 127.0.0.1:8080"},)
        assert rules.connect("v6.test", 443).remap == ("::1", None)
        assert rules.connect("v6.test", 443).entries == ({"rule": "remap[v6.test]", "action": "remapped to [::1]"},)
        assert rules.request("www.shop.test", 443, "https://www.shop.test/") is PASS

    def test_latencyAndBandwidth(self) -> None:
        """
        Latency and bandwidth act on every request, and say so; a tunnel gets
        the bandwidth only (latency acts on the requests in it, when read).
        """
        rules = compileRules({"latency_ms": 200, "bandwidth": {"down": 102400}})
        decision = rules.request("any.test", 80, "http://any.test/")
        self.assertAlmostEqual(decision.latency, 0.2)
        assert decision.bandwidth.down == 102400 and decision.bandwidth.up is None
        assert decision.entries == ({"rule": "latency_ms", "action": "delayed 200 ms"},
                                    {"rule": "bandwidth.down", "action": "shaped to 102400 bytes a second"})
        tunnel = rules.connect("any.test", 443)
        assert (tunnel.latency, tunnel.bandwidth.down) == (0, 102400)
        assert tunnel.entries == ({"rule": "bandwidth.down", "action": "shaped to 102400 bytes a second"},)
        assert compileRules({"latency_ms": 200}).connect("any.test", 443) is PASS
        remapped = compileRules({"bandwidth": {"up": 2048}, "remap": {"r.test": "127.0.0.1"}}).connect("r.test", 443)
        assert remapped.bandwidth.up == 2048
        assert [e["rule"] for e in remapped.entries] == ["remap[r.test]", "bandwidth.up"]

    def test_toml(self) -> None:
        """
        A C{--rules} file may be TOML; a file that isn't is one line.
        """
        rules = parseRulesText(
            'block = ["tracker.test"]\nlatency_ms = 5\n[remap]\n"shop.test" = "127.0.0.1:8080"\n'
            '[[headers]]\nmatch = "shop.test"\nset = { "X-A" = "1" }\n', toml=True)
        assert rules.request("tracker.test", 80, "http://tracker.test/").blocked
        assert rules.request("shop.test", 80, "http://shop.test/").setUp == ((b"X-A", b"1"),)
        with self.assertRaises(BadRules) as raised:
            parseRulesText("block = [", toml=True)
        assert str(raised.exception).startswith("rules: not TOML: ")
        with self.assertRaises(BadRules) as raised:
            parseRulesText("{", toml=False)
        assert str(raised.exception).startswith("rules: not JSON: ")

    def test_manyHostsCached(self) -> None:
        """
        Past the cache's bound, answers stay right.
        """
        rules = compileRules({"block": ["*.bad.test"]})
        for i in range(5000):
            assert rules.request(f"h{i}.bad.test", 80, "http://x/").blocked
            assert not rules.request(f"h{i}.good.test", 80, "http://x/").blocked


class BodyFileTests(SynchronousTestCase):
    """
    An answer rule's C{body_file}: read through the reader it is given,
    once, when the rules are compiled.
    """

    def reader(self, files: dict[str, bytes]) -> Any:
        self.asked: list[tuple[str, int]] = []

        def read(path: str, limit: int) -> bytes:
            self.asked.append((path, limit))
            if path == "outside/link":
                raise ValueError(path)
            if path not in files:
                raise FileNotFoundError(2, "No such file or directory")
            return files[path][:limit + 1]

        return read

    def test_read(self) -> None:
        """
        The file's bytes are the body, read once when the rules are set,
        not per request.
        """
        read = self.reader({"flags.json": b'{"beta": true}', "api/logo.png": b"\x89PNG"})
        rules = compileRules({"answer": [{"match": "shop.test/api/flags", "body_file": "flags.json"},
                                         {"match": "shop.test/logo", "body_file": "api/logo.png"}]}, read)
        for _ in range(3):
            decision = rules.request("shop.test", 443, "https://shop.test/api/flags")
            assert decision.answer is not None
            self.assertEqual(decision.answer.body, b'{"beta": true}')
        decision = rules.request("shop.test", 443, "https://shop.test/logo")
        assert decision.answer is not None
        self.assertEqual(decision.answer.body, b"\x89PNG")
        self.assertEqual(self.asked, [("flags.json", MAX_ANSWER_BODY), ("api/logo.png", MAX_ANSWER_BODY)])

    def test_documentKeepsTheName(self) -> None:
        """
        The rules document, as the API gives it back, names the file, not
        its bytes.
        """
        document = {"answer": [{"match": "shop.test/api/flags", "body_file": "flags.json"}]}
        rules = compileRules(document, self.reader({"flags.json": b"{}"}))
        self.assertEqual(rules.document, document)

    def test_refused(self) -> None:
        """
        A path that isn't under the state folder, a file that is missing or
        too big, two bodies, or no state folder at all: one line naming the
        rule.
        """
        read = self.reader({"big.bin": b"x" * (MAX_ANSWER_BODY + 1)})
        for rule, said, reader in [
            ({"body_file": "/etc/passwd"}, "answer[0].body_file: a path under the state folder", read),
            ({"body_file": "../secret"}, "answer[0].body_file: a path under the state folder", read),
            ({"body_file": "a//b"}, "answer[0].body_file: a path under the state folder", read),
            ({"body_file": ""}, "answer[0].body_file: a path under the state folder", read),
            ({"body_file": 3}, "answer[0].body_file: a path under the state folder", read),
            ({"body_file": "outside/link"}, "answer[0].body_file: 'outside/link' leads out of the state folder",
             read),
            ({"body_file": "flags.json"},
             "answer[0].body_file: 'flags.json' can't be read in the state folder: No such file or directory", read),
            ({"body_file": "big.bin"}, f"answer[0]: a body of at most {MAX_ANSWER_BODY} bytes", read),
            ({"body_file": "flags.json", "body": "{}"}, "answer[0]: one of body, body_base64 or body_file, "
                                                        "not body and body_file", read),
            ({"body_file": "flags.json"}, "answer[0].body_file: no state folder to read 'flags.json' from", None),
        ]:
            document = {"answer": [{"match": "shop.test/api/flags", **rule}]}
            e = self.assertRaises(BadRules, compileRules, document, reader)
            self.assertIn(said, str(e))
            self.assertNotIn("\n", str(e))


class PropertyTests(SynchronousTestCase):
    @given(_hosts, _hosts, st.integers(1, 65535))
    def test_wildcardIsOneOrMoreLabels(self, prefix: str, suffix: str, port: int) -> None:
        """
        C{*.suffix} matches every host that ends in C{.suffix} after at least
        one label, at any port, and never C{suffix} itself.
        """
        rules = compileRules({"block": [f"*.{suffix}"]})
        assert rules.request(f"{prefix}.{suffix}", port, "http://x/").blocked
        assert not rules.request(suffix, port, "http://x/").blocked
        assert rules.connect(f"{prefix}.{suffix}", port).blocked

    @given(_hosts, st.integers(1, 65535), st.from_regex(r"/[a-z/]{0,10}", fullmatch=True),
           st.from_regex(r"[a-z/]{0,5}", fullmatch=True))
    def test_pathPrefix(self, host: str, port: int, path: str, more: str) -> None:
        """
        A path ending in C{*} matches every path that begins with it, an exact
        path only itself, with any query.
        """
        prefix = compileRules({"block": [f"{host}:{port}{path}*"]})
        exact = compileRules({"block": [f"{host}:{port}{path}"]})
        url = f"http://{host}:{port}{path}{more}?q=1"
        assert prefix.request(host, port, url).blocked
        assert exact.request(host, port, url).blocked is (more == "")
        assert not prefix.request(host, port % 65535 + 1, url).blocked
