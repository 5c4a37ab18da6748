"""
The real processes the browser tests run: the test site and netlog's proxies,
each started from this source tree and ended by its PID.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from tests.support import REPO, netlogArgv, sourceEnv, twistdArgv

#: How long a child may take to say it is ready, or to stop (seconds).
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0


def stop(proc: subprocess.Popen[Any]) -> None:
    """
    End C{proc} by its PID: TERM, then KILL if it lingers.
    """
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(STOP_TIMEOUT)


def start(
    argv: list[str],
    addCleanup: Callable[..., Any],
    logPath: str,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[Any]:
    """
    Start C{argv} from the repository with its output in C{logPath}; it is
    stopped (by PID) at cleanup.
    """
    out = open(logPath, "ab")
    addCleanup(out.close)
    proc = subprocess.Popen(
        argv, cwd=REPO, env=env or sourceEnv(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
    )
    addCleanup(stop, proc)
    return proc


def waitForPort(port: int, proc: subprocess.Popen[Any], logPath: str, timeout: float = START_TIMEOUT) -> None:
    """
    Wait until something accepts on 127.0.0.1:C{port}, failing with the
    child's output if it dies or takes too long.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args!r} exited {proc.returncode}:\n{readTail(logPath)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"nothing listens on {port} after {timeout}s:\n{readTail(logPath)}")


def readTail(path: str, size: int = 4000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", "replace")
    except OSError as e:
        return f"({e})"


@dataclass
class Site:
    http: int
    https: int
    certPEM: bytes
    connLog: str

    def connections(self) -> list[dict[str, Any]]:
        """
        The connections that have ended, with their bytes each way.
        """
        try:
            with open(self.connLog, encoding="utf-8") as f:
                return [json.loads(line) for line in f if line.endswith("\n")]
        except FileNotFoundError:
            return []

    def httpsConnections(self, atLeast: int, timeout: float = START_TIMEOUT) -> list[dict[str, Any]]:
        """
        The HTTPS connections that have ended, once there are C{atLeast} of
        them (the site may write its line just after the proxy wrote its end)
        or C{timeout} seconds have passed.
        """
        deadline = time.monotonic() + timeout
        while True:
            found = [c for c in self.connections() if c["listener"] == "https"]
            if len(found) >= atLeast or time.monotonic() > deadline:
                return found
            time.sleep(0.1)


def startSite(directory: str, addCleanup: Callable[..., Any]) -> Site:
    """
    Start the test site on two free ports; its certificate lands in
    C{directory}.
    """
    certDir = os.path.join(directory, "site-cert")
    connLog = os.path.join(directory, "site-connections.jsonl")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.browser.site_app", "--http", "0", "--https", "0",
         "--cert-dir", certDir, "--conn-log", connLog],
        cwd=REPO,
        env=sourceEnv(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    addCleanup(stop, proc)
    assert proc.stdout is not None
    addCleanup(proc.stdout.close)
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT)
    line = proc.stdout.readline().decode("utf-8", "replace") if ready else ""
    match = re.match(r"ready http=(\d+) https=(\d+)", line)
    if match is None:
        stop(proc)
        raise AssertionError(f"the test site did not start: {line!r} {proc.stdout.read().decode('utf-8', 'replace')}")
    with open(os.path.join(certDir, "cert.pem"), "rb") as f:
        certPEM = f.read()
    return Site(int(match.group(1)), int(match.group(2)), certPEM, connLog)


def runNetlog(args: list[str], timeout: float = 120.0) -> subprocess.CompletedProcess[bytes]:
    """
    Run C{netlog ARGS} from this source tree; fail with its output if it
    fails.
    """
    done = subprocess.run(
        netlogArgv() + args, cwd=REPO, env=sourceEnv(), capture_output=True, timeout=timeout
    )
    if done.returncode != 0:
        raise AssertionError(
            f"netlog {' '.join(args)} exited {done.returncode}:\n"
            + done.stdout.decode("utf-8", "replace")[-2000:]
            + done.stderr.decode("utf-8", "replace")[-4000:]
        )
    return done


__all__ = ["start", "stop", "startSite", "waitForPort", "runNetlog", "twistdArgv", "Site"]


#: How long the log may take to end every exchange after the browser closes.
SETTLE_TIMEOUT = 20.0


def twistdCommand(plugin: str, directory: str, args: list[str]) -> list[str]:
    """
    C{twistd -n PLUGIN ARGS}, in the foreground, no pidfile, its own log in
    C{directory}.
    """
    return twistdArgv() + [
        "-n", "--pidfile=", "-l", os.path.join(directory, plugin + ".twistd.log"), plugin
    ] + args


def openIds(logPath: str) -> set[int]:
    """
    The ids of the log's exchanges that have an open line and no end line.
    """
    opened: set[int] = set()
    try:
        with open(logPath, "rb") as f:
            for raw in f:
                if not raw.endswith(b"\n"):
                    break
                line = json.loads(raw)
                if line["type"] == "open":
                    opened.add(line["id"])
                elif line["type"] == "end":
                    opened.discard(line["id"])
    except FileNotFoundError:
        pass
    return opened


def waitForEnds(logPath: str, timeout: float = SETTLE_TIMEOUT) -> None:
    """
    Wait until every exchange in the log has ended (the browser has closed, so
    its connections end).
    """
    deadline = time.monotonic() + timeout
    while openIds(logPath):
        if time.monotonic() > deadline:
            raise AssertionError(f"exchanges {sorted(openIds(logPath))} still open after {timeout}s in {logPath}")
        time.sleep(0.1)


@dataclass
class Proxy:
    """
    A running netlog proxy: its forward port, its log, and for the site proxy
    its HTTPS route port, API port and state folder.
    """

    port: int
    log: str
    proc: subprocess.Popen[Any]
    routePort: int | None = None
    apiPort: int | None = None
    state: str | None = None


def writeSites(directory: str, site: Site, origins: Sequence[str] = ("https://shop.test",)) -> str:
    """
    A C{sites.toml} with the test site as C{shop.test} (by default its
    HTTPS origin; or C{origins}) on its HTTP backend.
    """
    path = os.path.join(directory, "sites.toml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(
            "[[site]]\n"
            'name = "shop"\n'
            f"origins = {json.dumps(list(origins))}\n"
            f'backend = "http://127.0.0.1:{site.http}"\n'
        )
    return path


def _given(site: Site | None) -> Site:
    if site is None:
        raise AssertionError("no sites.toml given, and no test site to write one for")
    return site


def startSiteProxy(
    directory: str,
    site: Site | None,
    addCleanup: Callable[..., Any],
    api: bool = False,
    sitesPath: str | None = None,
    httpsRoute: bool = True,
    extra: tuple[str, ...] = (),
) -> Proxy:
    """
    C{twistd netlog-proxy} for the test site: a forward port and (unless
    C{httpsRoute} is false: it needs a site with an C{https://} origin) an
    HTTPS route, names resolved only by C{--resolve}. Its sites are
    C{sitesPath}, or (by default) the ones L{writeSites} writes for
    C{site}; C{extra} options follow.
    """
    from tests.support import freePort

    port = freePort()
    route = freePort() if httpsRoute else None
    state = os.path.join(directory, "state")
    log = os.path.join(directory, "network.jsonl")
    args = [
        "--sites", sitesPath or writeSites(directory, _given(site)),
        "--state", state,
        "--log", log,
        "--listen", f"tcp:{port}:interface=127.0.0.1",
        "--resolve", "shop.test=127.0.0.1",
        "--resolve-only",
    ]
    if route is not None:
        args += ["--https-route", f"tcp:{route}:interface=127.0.0.1"]
    apiPort = None
    if api:
        apiPort = freePort()
        args += ["--api", f"tcp:{apiPort}:interface=127.0.0.1"]
    args += list(extra)
    out = os.path.join(directory, "netlog-proxy.out")
    proc = start(twistdCommand("netlog-proxy", directory, args), addCleanup, out)
    for p in (port, route, apiPort):
        if p is not None:
            waitForPort(p, proc, out)
    return Proxy(port, log, proc, route, apiPort, state)


def startStandin(
    directory: str, connectPorts: list[int], addCleanup: Callable[..., Any]
) -> Proxy:
    """
    C{twistd netlog-standin}: CONNECT allowed to C{connectPorts} only,
    C{shop.test} the only name that resolves.
    """
    from tests.support import freePort

    port = freePort()
    log = os.path.join(directory, "standin.jsonl")
    args = [
        "--log", log,
        "--listen", f"tcp:{port}:interface=127.0.0.1",
        "--connect-ports", ",".join(str(p) for p in connectPorts),
        "--resolve", "shop.test=127.0.0.1",
        "--resolve-only",
    ]
    out = os.path.join(directory, "netlog-standin.out")
    proc = start(twistdCommand("netlog-standin", directory, args), addCleanup, out)
    waitForPort(port, proc, out)
    return Proxy(port, log, proc)


def startStandinWithApi(directory: str, addCleanup: Callable[..., Any]) -> Proxy:
    """
    C{twistd netlog-standin --no-supervise} with its API on a free port and
    its state (the API's token, C{api-token}) in C{directory};
    C{shop.test} the only name that resolves.
    """
    from tests.support import freePort

    port, apiPort = freePort(), freePort()
    log = os.path.join(directory, "standin.jsonl")
    args = [
        "--no-supervise",
        "--log", log,
        "--listen", f"tcp:{port}:interface=127.0.0.1",
        "--api", f"tcp:{apiPort}",
        "--state", directory,
        "--resolve", "shop.test=127.0.0.1",
        "--resolve-only",
    ]
    out = os.path.join(directory, "netlog-standin.out")
    proc = start(twistdCommand("netlog-standin", directory, args), addCleanup, out)
    waitForPort(port, proc, out)
    waitForPort(apiPort, proc, out)
    return Proxy(port, log, proc, apiPort=apiPort, state=directory)


#: How long an API request may take (seconds).
API_TIMEOUT = 60.0


def fetchAPI(proxy: Proxy, path: str) -> bytes:
    """
    C{GET path} from the proxy's loopback API (no proxy from the
    environment in between); fails unless it answers 200.
    """
    import urllib.request

    assert proxy.apiPort is not None, "the proxy was started without --api"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(f"http://127.0.0.1:{proxy.apiPort}{path}", timeout=API_TIMEOUT) as answer:
        if answer.status != 200:
            raise AssertionError(f"GET {path} from the API answered {answer.status}")
        body: bytes = answer.read()
    return body
