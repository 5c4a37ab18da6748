"""
C{nghttpx} (Debian's nghttp2-proxy: an HTTP/2 implementation other than the
C{h2} library netlog speaks with) as a TLS server speaking HTTP/2 by ALPN on
loopback, in front of a plain HTTP/1.1 origin; its access log says which
protocol each request came in and on which connection (the client's port).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from typing import Any, Callable

from benchmarks.bench_h2 import nghttpxArgv
from tests.support import stopProcess, waitForPort


class Nghttpx:
    """
    A running C{nghttpx}.

    @ivar port: where it listens (127.0.0.1).
    @ivar accessLog: the path of its access log.
    """

    def __init__(self, port: int, accessLog: str, wait: float) -> None:
        self.port = port
        self.accessLog = accessLog
        self.wait = wait

    def access(self, count: int) -> list[list[str]]:
        """
        Its access log once it has C{count} lines (the probe of its start
        has none), or what it has after the wait: C{[alpn, port, method,
        path, version, status]} each.
        """
        deadline = time.monotonic() + self.wait
        while True:
            lines: list[list[str]] = []
            if os.path.exists(self.accessLog):
                with open(self.accessLog) as f:
                    lines = [line.split() for line in f if line.strip()]
            if len(lines) >= count or time.monotonic() > deadline:
                return lines
            time.sleep(0.05)


def startNghttpx(cleanup: Callable[..., Any], folder: str, certPath: str, keyPath: str, backendPort: int,
                 port: int, wait: float = 30.0) -> Nghttpx:
    """
    Start C{nghttpx} on 127.0.0.1:C{port} with the certificate at
    C{certPath} (its key at C{keyPath}), in front of the plain HTTP/1.1
    origin on 127.0.0.1:C{backendPort}, its logs in C{folder}; stopped at
    the test's C{cleanup}. Returns once it takes connections.

    @raise AssertionError: it is missing, it stopped, or it took longer
        than C{wait} seconds to start.
    """
    nghttpx = shutil.which("nghttpx")
    if nghttpx is None:
        raise AssertionError("nghttpx is missing: apt-get install nghttp2-proxy")
    accessLog = os.path.join(folder, "nghttpx-access.log")
    process = subprocess.Popen(
        nghttpxArgv(nghttpx, folder, port, backendPort, certPath, keyPath,
                    ("--accesslog-file", accessLog, "--accesslog-format", "$alpn $remote_port $request $status")),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cleanup(stopProcess, process, wait)
    waitForPort(process, port, time.monotonic() + wait, lambda: "nghttpx didn't start")
    return Nghttpx(port, accessLog, wait)
