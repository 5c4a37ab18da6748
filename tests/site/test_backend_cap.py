"""
One HTTP/2 connection's 100 streams against a small HTTP/1.1 backend (a
listen backlog of 5, as Python's socketserver has by default): real
C{nghttp -m 100} (Debian's nghttp2-client) at the site proxy's HTTPS route,
over loopback. Every stream completes, and the backend, which counts its
connections, never has more open at once than the cap: the site's
C{backend_connections}, or the engine's default.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from twisted.internet import defer, threads
from twisted.trial.unittest import SkipTest, TestCase

from netlog.net.timeouts import MAX_CONNECTIONS_PER_UPSTREAM
from tests.site.support import RunningProxy

#: A mebibyte answer, as the issue's runs fetched.
SIZE = 1024 * 1024
BODY = b"x" * SIZE
#: Streams on the one connection.
STREAMS = 100
#: Runs of C{nghttp} in a row against one proxy.
RUNS = 3


class CountingServer(ThreadingHTTPServer):
    """
    A small backend: a listen backlog of 5, a thread a connection, and the
    most connections it had open at once.
    """

    request_queue_size = 5
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.lock = threading.Lock()
        self.open = 0
        self.most = 0
        self.connections = 0

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            self.open += 1
            self.connections += 1
            self.most = max(self.most, self.open)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.lock:
            self.open -= 1
        super().shutdown_request(request)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(SIZE))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, format: str, *args: Any) -> None:
        pass


SITES = """
[[site]]
name = "shop"
origins = ["https://shop.test"]
backend = "http://127.0.0.1:{port}"
{extra}
"""


class BackendCapTests(TestCase):
    timeout = 300

    def backend(self) -> CountingServer:
        server = CountingServer()
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(10)

        self.addCleanup(stop)
        return server

    @defer.inlineCallbacks
    def streams(self, extra: str, cap: int) -> Any:
        nghttp = shutil.which("nghttp")
        if nghttp is None:
            raise SkipTest("nghttp is not installed (.ci/setup installs it)")
        server = self.backend()
        proxy = RunningProxy(self, SITES.format(port=server.server_address[1], extra=extra),
                             resolve={"shop.test": "127.0.0.1"})
        route = proxy.ports["https-route"]
        for run in range(1, RUNS + 1):
            result = yield threads.deferToThread(
                subprocess.run, [nghttp, "-n", "-m", str(STREAMS), "-H", ":authority: shop.test",
                                 f"https://127.0.0.1:{route}/big"], capture_output=True, timeout=120)
            self.assertEqual(result.returncode, 0, result.stderr)
            ended = yield proxy.waitForEnds(STREAMS * run, timeout=60)
            self.assertEqual({(e["response"]["status"], e["response"]["body"]["size"]) for _, e in ended},
                             {(200, SIZE)})
        self.assertEqual(len(proxy.ended()), STREAMS * RUNS)
        self.assertLessEqual(server.most, cap)
        # The cap was reached (the test can tell a cap from none), and the
        # connections were reused, not one opened a stream.
        self.assertEqual(server.most, cap)
        self.assertLess(server.connections, STREAMS)
        key = ("http", "127.0.0.1", server.server_address[1], proxy.config.sites[0])
        self.assertEqual(proxy.proxy.pool.waitingFor(key), 0)

    def test_siteCap(self) -> Any:
        """
        A site's C{backend_connections = 4}: never more than 4 open.
        """
        return self.streams("backend_connections = 4", 4)

    def test_defaultCap(self) -> Any:
        """
        With no cap of its own, a site gets the engine's default.
        """
        return self.streams("", MAX_CONNECTIONS_PER_UPSTREAM)
