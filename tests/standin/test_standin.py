"""
The stand-in end to end: a real C{twistd netlog-standin} process, a loopback
origin, clients over real sockets, and the log it writes.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
from typing import Any

import pytest
from twisted.internet import defer
from twisted.trial import unittest

from tests.standin.support import (
    GZIP_JSON,
    Standin,
    connectTunnel,
    inThread,
    listenOrigin,
    makeCertificate,
    rawExchange,
    tempDirectory,
    tlsClientContext,
)
from tests.support import freePort


def _get(proxyPort: int, url: str, **kw: Any) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", proxyPort, timeout=10)
    try:
        conn.request(kw.get("method", "GET"), url, body=kw.get("body"), headers=kw.get("headers", {}))
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


@pytest.mark.slow
class PlainHTTPTests(unittest.TestCase):
    """
    Plain-HTTP requests in absolute form, as C{curl -x http://proxy http://...}
    sends them.
    """

    timeout = 60

    @defer.inlineCallbacks
    def setUp(self) -> Any:
        self.origin, self.originPort = listenOrigin(self)
        self.standin = Standin(self, tempDirectory(self), ["--resolve", "origin.test=127.0.0.1"])
        yield self.standin.start()
        self.base = f"http://origin.test:{self.originPort}"

    @defer.inlineCallbacks
    def test_get(self) -> Any:
        """
        A GET goes to the origin and back, and is one entry: its open line
        with the request as sent, its end line with the status and sizes.
        """
        status, headers, body = yield inThread(_get, self.standin.port, self.base + "/hello")
        self.assertEqual((status, body), (200, b"hello"))
        self.assertEqual(headers.get("X-Origin"), "yes")
        entries = yield self.standin.waitEnded(1)
        [(opened, ended)] = entries.values()
        self.assertEqual(opened["proxy"], "standin")
        self.assertEqual(opened["kind"], "exchange")
        self.assertEqual(opened["request"]["method"], "GET")
        self.assertEqual(opened["request"]["url"], self.base + "/hello")
        self.assertEqual(opened["request"]["version"], "HTTP/1.1")
        self.assertIn(["Host", f"origin.test:{self.originPort}"], opened["request"]["headers"])
        self.assertEqual(opened["server"], {"host": "origin.test", "port": self.originPort,
                                            "address": "127.0.0.1"})
        self.assertTrue(opened["connection"].startswith("c"))
        self.assertTrue(opened["client"].startswith("127.0.0.1:"))
        self.assertEqual(ended["response"]["status"], 200)
        self.assertEqual(ended["response"]["reason"], "OK")
        self.assertEqual(ended["response"]["body"], {"size": 5})
        self.assertNotIn("request_body", ended)
        self.assertGreater(ended["bytes"]["up"], 0)
        self.assertGreater(ended["bytes"]["down"], 5)
        times = ended["times"]
        self.assertTrue(opened["started"] <= times["connected"] <= times["sent"]
                        <= times["first_byte"] <= times["end"])

    @defer.inlineCallbacks
    def test_keepAliveBothSides(self) -> Any:
        """
        Several requests on one browser connection are one entry each, share
        the connection id, and reuse one upstream connection.
        """
        def three() -> list[tuple[int, bytes]]:
            conn = http.client.HTTPConnection("127.0.0.1", self.standin.port, timeout=10)
            out = []
            for path in ("/hello", "/chunked", "/hello"):
                conn.request("GET", self.base + path)
                r = conn.getresponse()
                out.append((r.status, r.read()))
            conn.close()
            return out

        results = yield inThread(three)
        self.assertEqual(results, [(200, b"hello"), (200, b"one-two-three"), (200, b"hello")])
        entries = yield self.standin.waitEnded(3)
        self.assertEqual(len({o["connection"] for o, _ in entries.values()}), 1)
        self.assertEqual([e["response"]["body"]["size"] for _, e in entries.values()], [5, 13, 5])
        self.assertEqual(self.origin.connections, 1)
        reused = [e["times"]["connected"] for _, e in entries.values()]
        self.assertIsNotNone(reused[0])

    @defer.inlineCallbacks
    def test_hopByHop(self) -> Any:
        """
        C{Proxy-Connection}, C{Connection} and the fields C{Connection} names
        never reach the origin; the log keeps the request as the browser sent
        it.
        """
        status, _, body = yield inThread(
            _get, self.standin.port, self.base + "/echo-head",
            headers={"Proxy-Connection": "keep-alive", "Connection": "X-Secret, keep-alive",
                     "X-Secret": "1", "X-Kept": "2", "Keep-Alive": "300"},
        )
        self.assertEqual(status, 200)
        names = {n.lower() for n, _ in json.loads(body)}
        self.assertNotIn("proxy-connection", names)
        self.assertNotIn("x-secret", names)
        self.assertNotIn("keep-alive", names)
        self.assertIn("x-kept", names)
        entries = yield self.standin.waitEnded(1)
        [(opened, _)] = entries.values()
        self.assertIn(["X-Secret", "1"], opened["request"]["headers"])

    @defer.inlineCallbacks
    def test_postBody(self) -> Any:
        """
        A request body goes up whole and its size is logged.
        """
        status, _, body = yield inThread(
            _get, self.standin.port, self.base + "/upload", method="POST", body=b"x" * 12345
        )
        self.assertEqual((status, body), (200, b"12345"))
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["request_body"], {"size": 12345})

    @defer.inlineCallbacks
    def test_chunkedUpload(self) -> Any:
        """
        A chunked request body is relayed chunked; its decoded size is logged.
        """
        raw = (
            f"POST {self.base}/upload HTTP/1.1\r\nHost: origin.test:{self.originPort}\r\n"
            "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
        ).encode()
        answer = yield inThread(rawExchange, self.standin.port, raw)
        self.assertTrue(answer.startswith(b"HTTP/1.1 200 "), answer)
        self.assertTrue(answer.endswith(b"\r\n\r\n11"), answer)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["request_body"], {"size": 11})

    @defer.inlineCallbacks
    def test_closeFramed(self) -> Any:
        """
        An answer framed by the origin closing is relayed whole and the
        browser's connection is closed after it.
        """
        raw = f"GET {self.base}/close HTTP/1.1\r\nHost: origin.test:{self.originPort}\r\n\r\n".encode()
        answer = yield inThread(rawExchange, self.standin.port, raw)
        self.assertTrue(answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer)
        self.assertIn(b"Connection: close\r\n", answer)
        self.assertTrue(answer.endswith(b"\r\n\r\nuntil close"))
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["response"]["body"]["size"], len(b"until close"))
        self.assertNotIn("_failed", ended)

    @defer.inlineCallbacks
    def test_gzipKeptAsItCame(self) -> Any:
        """
        A content-coded answer is relayed as it came (the coding kept).
        """
        status, headers, body = yield inThread(_get, self.standin.port, self.base + "/gzip-json")
        self.assertEqual((status, headers["Content-Encoding"]), (200, "gzip"))
        self.assertEqual(body, GZIP_JSON)

    @defer.inlineCallbacks
    def test_upgradeRelayed(self) -> Any:
        """
        An C{Upgrade} the origin accepts with C{101} is an exchange whose
        answer is that C{101}; the bytes after it pass both ways and are
        counted, and the entry says who closed.
        """
        def upgrade() -> bytes:
            with socket.create_connection(("127.0.0.1", self.standin.port), timeout=10) as s:
                s.sendall(
                    f"GET {self.base}/ws HTTP/1.1\r\nHost: origin.test:{self.originPort}\r\n"
                    "Upgrade: echo\r\nConnection: Upgrade\r\n\r\n".encode()
                )
                head = b""
                while b"\r\n\r\n" not in head:
                    head += s.recv(1)
                s.sendall(b"ping-pong")
                echoed = b""
                while len(echoed) < 9:
                    echoed += s.recv(100)
                return head + echoed

        answer = yield inThread(upgrade)
        self.assertTrue(answer.startswith(b"HTTP/1.1 101 "), answer)
        self.assertIn(b"Upgrade: echo\r\n", answer)
        self.assertTrue(answer.endswith(b"ping-pong"))
        entries = yield self.standin.waitEnded(1)
        [(opened, ended)] = entries.values()
        self.assertEqual(opened["kind"], "exchange")
        self.assertEqual(ended["response"]["status"], 101)
        self.assertNotIn("_websocket", ended, "an upgrade to another protocol is not a WebSocket")
        self.assertEqual(ended["closed_by"], "client")
        self.assertGreaterEqual(ended["bytes"]["up"], 9)
        self.assertGreaterEqual(ended["bytes"]["down"], 9)

    @defer.inlineCallbacks
    def test_doesNotResolve(self) -> Any:
        """
        A host that doesn't resolve gets a 502 saying so, and a C{_failed}
        entry.
        """
        status, _, body = yield inThread(_get, self.standin.port, "http://nowhere.test/")
        self.assertEqual(status, 502)
        self.assertIn(b"nowhere.test doesn't resolve", body)
        entries = yield self.standin.waitEnded(1)
        [(opened, ended)] = entries.values()
        self.assertEqual(ended["_failed"]["reason"], "nowhere.test doesn't resolve")
        self.assertEqual(ended["_failed"]["status"], 502)
        self.assertEqual(ended["response"]["status"], 502)
        self.assertIsNone(opened["server"]["address"])

    @defer.inlineCallbacks
    def test_connectionRefused(self) -> Any:
        """
        An origin that refuses the connection is a 502 and a C{_failed} entry.
        """
        closed = freePort()
        status, _, body = yield inThread(_get, self.standin.port, f"http://origin.test:{closed}/")
        self.assertEqual(status, 502)
        self.assertIn(b"refused", body)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertIn("refused the connection", ended["_failed"]["reason"])
        self.assertEqual(ended["_failed"]["status"], 502)
        self.assertEqual(ended["response"]["status"], 502)

    @defer.inlineCallbacks
    def test_serverReset(self) -> Any:
        """
        An origin that resets the connection before answering is a 502 and a
        C{_failed} entry.
        """
        status, _, body = yield inThread(_get, self.standin.port, self.base + "/reset")
        self.assertEqual(status, 502)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertIn("before answering", ended["_failed"]["reason"])
        self.assertEqual(ended["_failed"]["status"], 502)
        self.assertEqual(ended["response"]["status"], 502)

    @defer.inlineCallbacks
    def test_unparsableAnswerRelayed(self) -> Any:
        """
        An answer that isn't HTTP is relayed as it came and marked
        C{_unparsed}.
        """
        raw = f"GET {self.base}/garbage HTTP/1.1\r\nHost: origin.test:{self.originPort}\r\n\r\n".encode()
        answer = yield inThread(rawExchange, self.standin.port, raw)
        self.assertEqual(answer, b"SSH-2.0-not-http\r\nmore bytes")
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertTrue(ended["_unparsed"])
        self.assertEqual(ended["bytes"]["down"], len(answer))

    @defer.inlineCallbacks
    def test_cutAnswerRelayedWhole(self) -> Any:
        """
        An answer cut short inside its trailer section reaches the browser
        with every byte the origin sent (the last chunk and the trailer begun
        too), and the entry says it was cut.
        """
        raw = f"GET {self.base}/cut-in-trailers HTTP/1.1\r\nHost: origin.test:{self.originPort}\r\n\r\n".encode()
        answer = yield inThread(rawExchange, self.standin.port, raw)
        self.assertTrue(answer.startswith(b"HTTP/1.1 200 OK\r\n"), answer)
        self.assertTrue(answer.endswith(b"\r\n\r\n5\r\nhello\r\n0\r\nX-Trailer: a"), answer)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertIn("closed the connection in the middle of the answer", ended["_failed"]["reason"])
        # The answer the browser got was the server's: no status of netlog's.
        self.assertNotIn("status", ended["_failed"])
        self.assertEqual(ended["bytes"]["down"], len(answer))
        self.assertEqual(ended["response"]["body"]["size"], 5)

    @defer.inlineCallbacks
    def test_pipelinedHeadAndHTTP10(self) -> Any:
        """
        Requests pipelined in one write are answered in order, each its own
        entry: a HEAD (no body follows its head), a GET, then an HTTP/1.0
        request after which the connection closes.
        """
        o = f"origin.test:{self.originPort}"
        raw = (
            f"HEAD http://{o}/hello HTTP/1.1\r\nHost: {o}\r\n\r\n"
            f"GET http://{o}/hello HTTP/1.1\r\nHost: {o}\r\n\r\n"
            f"GET http://{o}/chunked HTTP/1.0\r\nHost: {o}\r\n\r\n"
        ).encode()
        answer = yield inThread(rawExchange, self.standin.port, raw)
        self.assertEqual(answer.count(b"HTTP/1.1 200 "), 3, answer)
        first, second, third = answer.split(b"HTTP/1.1 200 ")[1:]
        self.assertTrue(first.endswith(b"\r\n\r\n"))
        self.assertTrue(second.endswith(b"\r\n\r\nhello"))
        self.assertIn(b"Connection: close", third)
        entries = yield self.standin.waitEnded(3)
        self.assertEqual([o["request"]["method"] for o, _ in entries.values()], ["HEAD", "GET", "GET"])
        self.assertEqual([e["response"]["body"]["size"] for _, e in entries.values()], [0, 5, 13])

    @defer.inlineCallbacks
    def test_silentServerTimesOut(self) -> Any:
        """
        An origin that never answers gets a 504 after the idle timeout, and
        a C{_failed} entry saying so.
        """
        fast = Standin(self, tempDirectory(self), ["--resolve", "origin.test=127.0.0.1",
                                                   "--idle-timeout", "1"])
        yield fast.start()
        status, _, body = yield inThread(_get, fast.port, self.base + "/silent")
        self.assertEqual(status, 504)
        self.assertIn(b"sent nothing for 1 seconds", body)
        entries = yield fast.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertIn("--idle-timeout", ended["_failed"]["reason"])
        self.assertEqual(ended["_failed"]["status"], 504)
        self.assertEqual(ended["response"]["status"], 504)

    @defer.inlineCallbacks
    def test_loopbackLiteralRefused(self) -> Any:
        """
        A loopback address not named by C{--resolve} is refused with 403.
        """
        status, _, body = yield inThread(
            _get, self.standin.port, f"http://127.0.0.1:{self.originPort}/hello"
        )
        self.assertEqual(status, 403)
        self.assertIn(b"loopback", body)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["_refused"]["status"], 403)
        self.assertEqual(self.origin.requests, [])

    @defer.inlineCallbacks
    def test_ownListenerRefused(self) -> Any:
        """
        The proxy never connects to its own listener, even by a name given
        with C{--resolve}.
        """
        status, _, _ = yield inThread(
            _get, self.standin.port, f"http://origin.test:{self.standin.port}/"
        )
        self.assertEqual(status, 403)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertIn("own listener", ended["_refused"]["reason"])

    @defer.inlineCallbacks
    def test_httpsURLRefused(self) -> Any:
        """
        An C{https://} URL sent as plain HTTP is refused: it must go through
        CONNECT.
        """
        status, _, _ = yield inThread(_get, self.standin.port, "https://origin.test/")
        self.assertEqual(status, 400)


@pytest.mark.slow
class TunnelTests(unittest.TestCase):
    """
    CONNECT tunnels, as C{curl -x http://proxy https://...} opens them.
    """

    timeout = 60

    @defer.inlineCallbacks
    def setUp(self) -> Any:
        self.directory = tempDirectory(self)
        self.cert, key = makeCertificate("tls.test", self.directory)
        self.origin, self.originPort = listenOrigin(self, tls=(self.cert, key))
        self.plainOrigin, self.plainPort = listenOrigin(self)
        self.standin = Standin(self, self.directory, [
            "--resolve", "tls.test=127.0.0.1",
            "--connect-ports", f"443,{self.originPort}",
        ])
        yield self.standin.start()

    @defer.inlineCallbacks
    def test_tlsThroughConnect(self) -> Any:
        """
        Real TLS goes through a CONNECT tunnel to a loopback TLS origin (the
        client checks the origin's certificate), and the tunnel is one entry:
        host, port, address, bytes each way, times, who closed.
        """
        def fetch() -> tuple[int, bytes]:
            conn = http.client.HTTPSConnection(
                "127.0.0.1", self.standin.port, timeout=10,
                context=tlsClientContext(self.cert),
            )
            conn.set_tunnel("tls.test", self.originPort)
            conn.request("GET", "/hello")
            r = conn.getresponse()
            out = (r.status, r.read())
            conn.request("GET", "/size/100000")
            r = conn.getresponse()
            out = (out[0], out[1] + bytes([len(r.read()) // 100000]))
            conn.close()
            return out

        status, body = yield inThread(fetch)
        self.assertEqual((status, body), (200, b"hello\x01"))
        entries = yield self.standin.waitEnded(1)
        [(opened, ended)] = entries.values()
        self.assertEqual(opened["kind"], "tunnel")
        self.assertEqual(opened["request"]["method"], "CONNECT")
        self.assertEqual(opened["request"]["url"], f"https://tls.test:{self.originPort}/")
        self.assertEqual(opened["server"], {"host": "tls.test", "port": self.originPort,
                                            "address": "127.0.0.1"})
        self.assertEqual(ended["response"]["status"], 200)
        self.assertEqual(ended["closed_by"], "client")
        self.assertGreater(ended["bytes"]["down"], 100000)
        self.assertGreater(ended["bytes"]["up"], 100)
        self.assertNotIn("_failed", ended)

    @defer.inlineCallbacks
    def test_tunnelInTheKernel(self) -> Any:
        """
        A tunnel that carries more than a few exchanges has the rest moved
        by the kernel: while it is open the stand-in holds a pipe each way
        (splice's), and none once it has ended; TLS through it works and
        its entry counts the bytes.
        """
        assert self.standin.process is not None
        pid = self.standin.process.pid

        def pipes() -> int:
            folder = f"/proc/{pid}/fd"
            count = 0
            for name in os.listdir(folder):
                try:
                    count += os.readlink(os.path.join(folder, name)).startswith("pipe:")
                except OSError:
                    pass
            return count

        before: list[int] = []

        def fetch() -> tuple[list[int], int]:
            conn = http.client.HTTPSConnection(
                "127.0.0.1", self.standin.port, timeout=10, context=tlsClientContext(self.cert),
            )
            conn.set_tunnel("tls.test", self.originPort)
            # More exchanges than a tunnel relays in Python, then a large one.
            sizes = []
            for path in ["/hello"] * 12 + ["/size/300000"]:
                conn.request("GET", path)
                sizes.append(len(conn.getresponse().read()))
                if not before:
                    # Counted once the stand-in has answered: it accepts
                    # connections before its reactor runs, and Twisted
                    # makes a pipe of its own (SIGCHLD's) as it starts to.
                    # The tunnel's first few reads are still relayed in
                    # Python (KERNEL_AFTER_READS).
                    before.append(pipes())
            held = pipes()
            conn.close()
            return sizes, held - before[0]

        sizes, during = yield inThread(fetch)
        self.assertEqual(sizes, [5] * 12 + [300000])
        self.assertEqual(during, 4)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertGreater(ended["bytes"]["down"], 300000)
        self.assertEqual(pipes(), before[0])

    @defer.inlineCallbacks
    def test_portNotAllowed(self) -> Any:
        """
        A CONNECT to a port not in C{--connect-ports} gets 403 and a
        C{_refused} entry.
        """
        def go() -> bytes:
            s, head = connectTunnel(self.standin.port, f"tls.test:{self.plainPort}")
            s.close()
            return head

        head = yield inThread(go)
        self.assertTrue(head.startswith(b"HTTP/1.1 403 "), head)
        entries = yield self.standin.waitEnded(1)
        [(opened, ended)] = entries.values()
        self.assertEqual(opened["request"]["url"], f"https://tls.test:{self.plainPort}/")
        self.assertEqual(ended["_refused"]["status"], 403)
        self.assertIn("--connect-ports", ended["_refused"]["reason"])
        self.assertEqual(self.plainOrigin.connections, 0)

    @defer.inlineCallbacks
    def test_tunnelDoesNotResolve(self) -> Any:
        """
        A CONNECT to a name that doesn't resolve gets 502 and a C{_failed}
        entry.
        """
        def go() -> bytes:
            s, head = connectTunnel(self.standin.port, "nowhere.test:443")
            s.close()
            return head

        head = yield inThread(go)
        self.assertTrue(head.startswith(b"HTTP/1.1 502 "), head)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["_failed"]["reason"], "nowhere.test doesn't resolve")
        self.assertEqual(ended["_failed"]["status"], 502)
        self.assertEqual(ended["response"]["status"], 502)

    @defer.inlineCallbacks
    def test_serverClosesTunnel(self) -> Any:
        """
        When the server closes the tunnel, the entry says so.
        """
        def go() -> bytes:
            s, head = connectTunnel(self.standin.port, f"tls.test:{self.originPort}")
            s.sendall(b"this is not TLS\r\n\r\n")
            try:
                while s.recv(1000):
                    pass
            except OSError:
                pass
            s.close()
            return head

        head = yield inThread(go)
        self.assertTrue(head.startswith(b"HTTP/1.1 200 "), head)
        entries = yield self.standin.waitEnded(1)
        [(_, ended)] = entries.values()
        self.assertEqual(ended["closed_by"], "server")


@pytest.mark.slow
class PrivilegeTests(unittest.TestCase):
    """
    twistd's C{--uid}/C{--gid}: the stand-in serves as the unprivileged user
    and logs to a file it opened as root and can't write.
    """

    timeout = 60

    @defer.inlineCallbacks
    def test_dropsPrivileges(self) -> Any:
        """
        Started as root with C{--uid}/C{--gid} of nobody, the proxy runs as
        nobody, serves, and its log is root's, mode 0644.
        """
        import os
        import stat

        if os.geteuid() != 0:
            raise unittest.SkipTest("dropping privileges needs root")
        origin, originPort = listenOrigin(self)
        directory = tempDirectory(self)
        os.chmod(directory, 0o755)
        standin = Standin(self, directory, ["--resolve", "origin.test=127.0.0.1"],
                          twistdOptions=["--uid", "65534", "--gid", "65534"])
        yield standin.start()
        # (Looked at once it has answered: its port accepts from the moment
        # it is bound, as root, before twistd drops to nobody and serves.)
        status, _, body = yield inThread(_get, standin.port, f"http://origin.test:{originPort}/hello")
        self.assertEqual((status, body), (200, b"hello"))
        with open(f"/proc/{standin.process.pid}/status") as f:
            uids = [line.split()[1:] for line in f if line.startswith("Uid:")][0]
        self.assertEqual(set(uids), {"65534"})
        yield standin.waitEnded(1)
        st = os.stat(standin.log)
        self.assertEqual((st.st_uid, stat.S_IMODE(st.st_mode)), (0, 0o644))
