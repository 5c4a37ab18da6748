"""
What the client's tests share: a plain-HTTP origin on loopback (threads, no
reactor), requests through a session's port, and a supervised stand-in with
its API.
"""

from __future__ import annotations

import http.client
import http.server
import os
import threading
from typing import Any, Callable

from netlog.client import Netlog

from tests.supervise.running import Twistd

#: Seconds a request through the proxy may take.
REQUEST_TIMEOUT = 20.0


class _OriginHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    #: Set to let C{/hold} requests answer.
    release: threading.Event

    def do_GET(self) -> None:
        if self.path.startswith("/hold"):
            self.release.wait(REQUEST_TIMEOUT)
        body = f"you asked for {self.path}\n".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def startOrigin(addCleanup: Callable[..., Any]) -> tuple[int, threading.Event]:
    """
    A plain-HTTP origin on loopback that answers every C{GET} with its path
    (C{/hold...} once the event it hands back is set); its port.
    """
    release = threading.Event()
    handler = type("Handler", (_OriginHandler,), {"release": release})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        release.set()
        server.shutdown()
        server.server_close()

    addCleanup(stop)
    return server.server_address[1], release


def get(proxy: str, url: str) -> int:
    """
    One C{GET} of C{url} through the proxy C{http://127.0.0.1:PORT}; its
    status.
    """
    port = int(proxy.rsplit(":", 1)[1])
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    try:
        conn.request("GET", url)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def startStandin(folder: str, addCleanup: Callable[..., Any], extra: list[str],
                 api: str = "tcp:0:interface=127.0.0.1") -> tuple[Twistd, str]:
    """
    A supervised C{twistd netlog-standin} with its API (on a free port
    unless C{api} says), names resolved only by the C{--resolve} in
    C{extra}; it and its API's URL.
    """
    args = ["--listen", "tcp:0:interface=127.0.0.1", "--log", os.path.join(folder, "network.jsonl"),
            "--api", api, "--resolve-only", *extra]
    twistd = Twistd(folder, "netlog-standin", args)
    addCleanup(twistd.stop)
    twistd.waitServing(1)
    return twistd, f"http://127.0.0.1:{twistd.apiPort()}"


class Follower:
    """
    L{Netlog.follow} in a thread: the lines it yielded, until one that
    C{last} says is the last, and what it raised.
    """

    def __init__(self, client: Netlog, last: Callable[[dict[str, Any]], bool], **kwargs: Any) -> None:
        self.seen: list[dict[str, Any]] = []
        self.failed: list[BaseException] = []
        self._client = client
        self._last = last
        self._kwargs = kwargs
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for line in self._client.follow(**self._kwargs):
                self.seen.append(line)
                if self._last(line):
                    return
        except BaseException as e:
            self.failed.append(e)
