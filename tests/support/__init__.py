"""
What the tests share: where the repository is, how to start real netlog
processes from the source tree, free loopback ports.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Any, Callable

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sourceEnv(extra: dict[str, str] | None = None) -> dict[str, str]:
    """
    The environment for a child process that must run this source tree's
    netlog (not an installed copy): the repository first on C{PYTHONPATH}.
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    if extra:
        env.update(extra)
    return env


def twistdArgv() -> list[str]:
    """
    The command that starts C{twistd} with this interpreter.
    """
    return [sys.executable, "-c", "from twisted.scripts.twistd import run; run()"]


def netlogArgv() -> list[str]:
    """
    The command that runs C{netlog} (the CLI) with this interpreter.
    """
    return [sys.executable, "-m", "netlog.cli"]


def freePort(host: str = "127.0.0.1") -> int:
    """
    A TCP port on loopback that nothing listens on right now.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def stopProcess(process: subprocess.Popen[bytes], wait: float = 30.0) -> None:
    """
    Stop C{process} (one a test started): C{TERM}, then C{KILL} after
    C{wait} seconds; close its output pipe.
    """
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(wait)
    if process.stdout is not None:
        process.stdout.close()


def startTwistd(cleanup: Callable[..., Any], folder: str, args: list[str], ports: list[int],
                wait: float = 30.0) -> subprocess.Popen[bytes]:
    """
    Start C{twistd -n} with C{args} (the plugin and its options) in
    C{folder} (its log in C{twistd.log} there), stopped at the test's
    C{cleanup}; return once each of C{ports} on loopback takes connections.

    @raise AssertionError: (with twistd's log) it stopped, or took longer
        than C{wait} seconds.
    """
    logPath = os.path.join(folder, "twistd.log")
    argv = twistdArgv() + ["-n", "--pidfile=", "--logfile", logPath] + args
    process = subprocess.Popen(argv, env=sourceEnv(), cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    cleanup(stopProcess, process, wait)
    deadline = time.monotonic() + wait
    for port in ports:
        waitForPort(process, port, deadline,
                    lambda: open(logPath).read() if os.path.exists(logPath) else "no twistd log")
    return process


def waitForPort(process: subprocess.Popen[bytes], port: int, deadline: float, why: Callable[[], str]) -> None:
    """
    Return once C{port} on loopback takes connections.

    @raise AssertionError: (with C{why()}) C{process}, which should listen
        there, stopped, or the clock passed C{deadline} (C{time.monotonic}).
    """
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(why())
            time.sleep(0.05)
