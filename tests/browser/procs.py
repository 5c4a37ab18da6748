"""
The real processes the browser tests run: the test site and netlog's proxies,
each started from this source tree and ended by its PID.
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

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


def startSite(directory: str, addCleanup: Callable[..., Any]) -> Site:
    """
    Start the test site on two free ports; its certificate lands in
    C{directory}.
    """
    certDir = os.path.join(directory, "site-cert")
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.browser.site_app", "--http", "0", "--https", "0", "--cert-dir", certDir],
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
    return Site(int(match.group(1)), int(match.group(2)), certPEM)


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
