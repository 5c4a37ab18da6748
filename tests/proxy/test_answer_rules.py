"""
Answer rules (C{answer} in C{docs/rules.rst}): netlog answers a request
itself, through the same exchange, record and HAR as any answer, and
connects to nothing. Checked in memory (the document, the match, the
source's events through an exchange) and over a real C{twistd
netlog-proxy} (HTTP/1.1 and HTTP/2, the forward port and the HTTPS route,
a session's rules and the main listener's).
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import threading
import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.rules import BadRules, LocalAnswer, compileRules
from netlog.proxy.local import LocalAnswers
from netlog.state import stateFileReader
from netlog.proxy.mode import Answered
from tests.client.test_cli import session as shell
from tests.proxy.playbook import POST_FORM, ROUTE, Play
from tests.session.test_sessions import caller
from tests.site.h2client import H2Client
from tests.site.support import readHead
from tests.site.test_rules import _read
from tests.supervise.running import Twistd

FLAGS = {"match": "shop.test/api/flags", "status": 200, "headers": {"Content-Type": "application/json"},
         "body": '{"beta": true}'}
WAIT = 30.0


class DocumentTests(SynchronousTestCase):
    def test_matched(self) -> None:
        """
        A request an answer rule matches gets that rule, named in its
        C{_rules} entry, and isn't remapped; others don't.
        """
        rules = compileRules({"answer": [FLAGS], "remap": {"shop.test": "127.0.0.1:9"}})
        decision = rules.request("shop.test", 443, "https://shop.test/api/flags?x=1", "GET")
        assert decision.answer is not None
        self.assertEqual((decision.answer.status, decision.answer.body), (200, b'{"beta": true}'))
        self.assertEqual(decision.entries, ({"rule": "answer[0]", "action": "answered 200"},))
        self.assertIsNone(decision.remap)
        self.assertIsNone(rules.request("shop.test", 443, "https://shop.test/api/other", "GET").answer)

    def test_method(self) -> None:
        """
        An answer rule with a method answers that method only.
        """
        rules = compileRules({"answer": [{**FLAGS, "method": "post"}]})
        self.assertIsNone(rules.request("shop.test", 443, "https://shop.test/api/flags", "GET").answer)
        self.assertIsNotNone(rules.request("shop.test", 443, "https://shop.test/api/flags", "POST").answer)

    def test_base64(self) -> None:
        """
        C{body_base64} gives bytes that aren't text.
        """
        rules = compileRules({"answer": [{"match": "shop.test/logo", "body_base64": "iVBORw=="}]})
        decision = rules.request("shop.test", 80, "http://shop.test/logo")
        assert decision.answer is not None
        self.assertEqual(decision.answer.body, b"\x89PNG")

    def test_blockWins(self) -> None:
        """
        A blocked request is blocked, whatever answer rule matches it too.
        """
        rules = compileRules({"answer": [FLAGS], "block": ["shop.test/api/*"]})
        decision = rules.request("shop.test", 443, "https://shop.test/api/flags")
        self.assertTrue(decision.blocked)
        self.assertIsNone(decision.answer)

    def test_wrong(self) -> None:
        """
        A wrong answer rule is one line naming where and why.
        """
        for document, said in [
            ({"answer": [{"status": 200}]}, "answer[0]: an answer rule needs match"),
            ({"answer": [{**FLAGS, "status": 99}]}, "answer[0].status: an HTTP status, an integer from 200 to 599"),
            ({"answer": [{**FLAGS, "body_base64": "x"}]}, "answer[0]: one of body, body_base64 or body_file, not body and body_base64"),
            ({"answer": [{"match": "a.test", "body_base64": "!!"}]}, "answer[0].body_base64: base64 text"),
            ({"answer": [{**FLAGS, "headers": {"Content-Length": "3"}}]}, "Content-Length frames the message"),
            ({"answer": [{**FLAGS, "colour": 1}]}, 'answer[0]: unknown key "colour"'),
            ({"answer": {}}, "answer: a list of answer rules"),
        ]:
            e = self.assertRaises(BadRules, compileRules, document)
            self.assertIn(said, str(e))


def answered(rule: LocalAnswer) -> Answered:
    """
    The playbook's route, answered by C{rule}.
    """
    return Answered(ROUTE.scheme, ROUTE.host, ROUTE.port, ROUTE.origin, ROUTE.publicHost,
                    answers=LocalAnswers(rule))


class SourceTests(SynchronousTestCase):
    def test_answered(self) -> None:
        """
        A local answer goes through the exchange as any answer: its head
        and body to the browser, its end line marked C{_answeredBy}, and
        nothing asked of the engine's connections.
        """
        rule = compileRules({"answer": [FLAGS]}).answers[0]
        play = Play(route=answered(rule))
        play.exchange.start()
        play.sendRequest()
        play.clock.advance(0)
        self.assertEqual(play.engine.asked, [])
        self.assertEqual(play.browser.named("data"), [("data", b'{"beta": true}')])
        end = play.end()
        self.assertEqual((end["_answeredBy"], end["_answerRule"]), ("rule", 0))
        self.assertEqual(end["response"]["status"], 200)
        self.assertIn(["Content-Length", "14"], end["response"]["headers"])

    def test_bodyKept(self) -> None:
        """
        A request with a body is read whole before it is answered, and
        its body kept.
        """
        rule = compileRules({"answer": [{"match": "shop.test/form", "status": 201}]}).answers[0]
        play = Play(POST_FORM, route=answered(rule))
        play.exchange.start()
        play.clock.advance(0)
        self.assertEqual(play.writer.types(), ["open"])
        play.sendRequest()
        play.clock.advance(0)
        self.assertEqual(play.end()["response"]["status"], 201)
        self.assertEqual(play.end()["request_body"]["size"], 7)


class _Listener:
    """
    A backend's listening socket that counts the connections it accepts.
    """

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()


def _tls(sock: socket.socket, caFile: str, alpn: list[str]) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=caFile)
    context.set_alpn_protocols(alpn)
    return context.wrap_socket(sock, server_hostname="shop.test")


def _http1(sock: ssl.SSLSocket) -> tuple[int, bytes]:
    sock.sendall(b"GET /api/flags HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
    status, _, body = _read(sock)
    return status, body


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    sock.sendall(b"CONNECT shop.test:443 HTTP/1.1\r\nHost: shop.test:443\r\n\r\n")
    assert readHead(sock).startswith(b"HTTP/1.1 200")
    return sock


@pytest.mark.slow
class StateFileTests(SynchronousTestCase):
    """
    How a body file is read from the state folder (real files).
    """

    def setUp(self) -> None:
        self.state = os.path.abspath(self.mktemp())
        os.makedirs(os.path.join(self.state, "api"))
        with open(os.path.join(self.state, "api", "flags.json"), "wb") as f:
            f.write(b'{"beta": true}')
        self.read = stateFileReader(self.state)

    def test_read(self) -> None:
        """
        A file under the folder is read, to the limit and one byte more.
        """
        self.assertEqual(self.read("api/flags.json", 100), b'{"beta": true}')
        self.assertEqual(self.read("api/flags.json", 3), b'{"be')

    def test_linkOut(self) -> None:
        """
        A link that leads out of the folder is refused, one that stays in
        is followed.
        """
        outside = os.path.abspath(self.mktemp())
        with open(outside, "wb") as f:
            f.write(b"secret")
        os.symlink(outside, os.path.join(self.state, "out"))
        os.symlink("api/flags.json", os.path.join(self.state, "in"))
        self.assertRaises(ValueError, self.read, "out", 100)
        self.assertEqual(self.read("in", 100), b'{"beta": true}')

    def test_notAFile(self) -> None:
        """
        A missing file, a folder and a FIFO are refused (the FIFO without
        waiting for a writer).
        """
        os.mkfifo(os.path.join(self.state, "fifo"))
        for path in ["missing.json", "api", "fifo"]:
            self.assertRaises(OSError, self.read, path, 100)


class EndToEndTests(SynchronousTestCase):
    """
    A real site proxy whose backend's listener must accept nothing.
    """

    #: In one process: the rules are compiled where the API sets them.
    supervision: tuple[str, ...] = ("--no-supervise",)

    def setUp(self) -> None:
        self.backend = _Listener()
        self.addCleanup(self.backend.close)
        self.folder = os.path.abspath(self.mktemp())
        os.makedirs(self.folder)
        sites = os.path.join(self.folder, "sites.toml")
        with open(sites, "w") as f:
            f.write(f'[[site]]\nname = "shop"\norigins = ["https://shop.test"]\n'
                    f'backend = "http://127.0.0.1:{self.backend.port}"\n')
        self.twistd = Twistd(self.folder, "netlog-proxy", [
            "--sites", sites, "--listen", "tcp:0:interface=127.0.0.1", "--log", os.path.join(self.folder, "n.jsonl"),
            "--https-route", "tcp:0:interface=127.0.0.1", "--state", self.folder, "--api", "tcp:0",
            "--resolve-only", "--resolve", "shop.test=127.0.0.1", *self.supervision,
        ])
        self.addCleanup(self.twistd.stop)
        self.base = f"http://127.0.0.1:{self.twistd.apiPort()}"
        self.tokenFile = os.path.join(self.folder, "api-token")
        self.call = caller(self.tokenFile)
        self.caFile = os.path.join(self.folder, "ca.pem")

    def fetchAll(self, forward: int, route: int | None) -> list[tuple[int, bytes]]:
        """
        C{/api/flags} over HTTP/1.1 and HTTP/2, through the forward port
        C{forward} and (when given) the HTTPS route.
        """
        got = []
        with _tls(_connect(forward), self.caFile, ["http/1.1"]) as tls:
            got.append(_http1(tls))
        client = H2Client.throughTunnel(forward, "shop.test:443", self.caFile)
        self.addCleanup(client.close)
        self.assertEqual(client.alpn, "h2")
        [answer] = client.wait(client.get("/api/flags", "shop.test"))
        got.append((answer.status, bytes(answer.data)))
        if route is not None:
            raw = socket.create_connection(("127.0.0.1", route), timeout=WAIT)
            with _tls(raw, self.caFile, ["http/1.1"]) as tls:
                got.append(_http1(tls))
            client = H2Client.toRoute(route, "shop.test", self.caFile)
            self.addCleanup(client.close)
            [answer] = client.wait(client.get("/api/flags", "shop.test"))
            got.append((answer.status, bytes(answer.data)))
        return got

    def test_sessionAndMain(self) -> None:
        """
        A session whose rules answer C{https://shop.test/api/flags} gets
        the rule's body over HTTP/1.1 and HTTP/2 through its forward port;
        the main listener, its rules set by the client, through the forward
        port and the HTTPS route. The backend's listener accepts nothing;
        every HAR entry carries C{_answeredBy} and the rule's index.
        """
        status, made = self.call("POST", self.base + "/sessions", {"name": "a"})
        self.assertEqual(status, 201, made)
        rulesFile = os.path.join(self.folder, "a.json")
        with open(rulesFile, "w") as f:
            json.dump({"answer": [FLAGS]}, f)
        done = shell("rules", "a", rulesFile, "--api", self.base, "--token-file", self.tokenFile)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout), {"rules": {"answer": [FLAGS]}})
        self.assertEqual(self.fetchAll(made["port"], None), [(200, b'{"beta": true}')] * 2)

        from netlog.client import Netlog

        Netlog(self.base, token_file=self.tokenFile).set_rules({"answer": [{**FLAGS, "body": "main"}]})
        self.assertEqual(self.fetchAll(self.twistd.listenerPort("forward"), self.twistd.listenerPort("https-route")),
                         [(200, b"main")] * 4)
        self.assertEqual(self.backend.accepted, 0)

        status, har = self.call("GET", self.base + "/sessions/a/network.har")
        entries = [e for e in har["log"]["entries"] if e["request"]["url"].endswith("/api/flags")]
        self.assertEqual(len(entries), 2)
        self.assertEqual(sorted(e["request"]["httpVersion"] for e in entries), ["HTTP/1.1", "HTTP/2.0"])
        for entry in entries:
            self.assertEqual((entry["_answeredBy"], entry["_answerRule"]), ("rule", 0))
            self.assertEqual(entry["response"]["content"]["text"], '{"beta": true}')
            self.assertEqual(entry["_rules"], [{"rule": "answer[0]", "action": "answered 200"}])

    def test_bodyFile(self) -> None:
        """
        An answer rule's C{body_file} (under the state folder), given by
        C{netlog session rules} for a session and by the client for the
        main listener, is the answer's body over HTTP/1.1 and HTTP/2; it is
        read when the rules are set (a later change of the file changes
        nothing), the backend accepts nothing, and a file that isn't there
        is refused with one line naming the rule.
        """
        flags = os.path.join(self.folder, "flags.json")
        with open(flags, "w") as f:
            f.write('{"from": "file"}')
        rule = {"match": "shop.test/api/flags", "headers": {"Content-Type": "application/json"},
                "body_file": "flags.json"}
        status, made = self.call("POST", self.base + "/sessions", {"name": "a"})
        self.assertEqual(status, 201, made)
        rulesFile = os.path.join(self.folder, "a.toml")
        with open(rulesFile, "w") as f:
            f.write('[[answer]]\nmatch = "shop.test/api/flags"\nbody_file = "flags.json"\n')
        done = shell("rules", "a", rulesFile, "--api", self.base, "--token-file", self.tokenFile)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(json.loads(done.stdout),
                         {"rules": {"answer": [{"match": "shop.test/api/flags", "body_file": "flags.json"}]}})

        from netlog.client import Netlog

        Netlog(self.base, token_file=self.tokenFile).set_rules({"answer": [rule]})
        with open(flags, "w") as f:
            f.write("changed after the rules were set")
        self.assertEqual(self.fetchAll(made["port"], None), [(200, b'{"from": "file"}')] * 2)
        self.assertEqual(self.fetchAll(self.twistd.listenerPort("forward"), self.twistd.listenerPort("https-route")),
                         [(200, b'{"from": "file"}')] * 4)
        self.assertEqual(self.backend.accepted, 0)

        status, refused = self.call("PUT", self.base + "/rules", {"answer": [{**rule, "body_file": "gone.json"}]})
        self.assertEqual(status, 400)
        self.assertEqual(refused["error"], "answer[0].body_file: 'gone.json' can't be read in the state folder: "
                                           "No such file or directory")
        status, escaped = self.call("PUT", self.base + "/rules", {"answer": [{**rule, "body_file": "../x"}]})
        self.assertEqual(status, 400)
        self.assertIn("answer[0].body_file: a path under the state folder", escaped["error"])


class SupervisedEndToEndTests(EndToEndTests):
    """
    The same under a supervisor: each worker compiles the rules it is
    handed (at its start, and over the control channel) and reads their
    body files from the state folder itself.
    """

    supervision = ()
