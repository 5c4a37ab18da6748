"""
A proxy command from the docs, run as a user runs it in a terminal of its
own: C{bash -c COMMAND} in a session of its own, ended with its workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any, Callable


def startForeground(command: str, folder: str, env: dict[str, str], out: str, err: str | None,
                    addCleanup: Callable[..., Any], wait: float) -> subprocess.Popen[bytes]:
    """
    Run C{command} in C{folder}, its standard output to the file C{out}
    and its standard error to C{err} (or C{out} too); end it, and the
    workers of its group, at cleanup (C{SIGTERM}, then C{SIGKILL} after
    C{wait} seconds).
    """
    with open(out, "wb") as stdout, open(err or os.devnull, "wb") as stderr:
        process = subprocess.Popen(["bash", "-c", command], cwd=folder, env=env, stdout=stdout,
                                   stderr=stderr if err else subprocess.STDOUT, start_new_session=True)

    addCleanup(stopForeground, process, wait)
    return process


def stopForeground(process: subprocess.Popen[bytes], wait: float) -> None:
    """
    End a command L{startForeground} ran, and the workers of its group:
    C{SIGTERM}, then C{SIGKILL} after C{wait} seconds; nothing if it ended.
    """
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(wait)


def readText(path: str) -> str:
    """
    What a process wrote to C{path} so far.
    """
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def waitServing(process: subprocess.Popen[bytes], out: str, wait: float) -> None:
    """
    Wait until the proxy says (in C{out}) that a worker is serving.

    @raise AssertionError: it ended, or didn't within C{wait} seconds.
    """
    deadline = time.monotonic() + wait
    while "worker" not in readText(out) or "serving" not in readText(out):
        assert process.poll() is None, readText(out)
        assert time.monotonic() < deadline, readText(out)
        time.sleep(0.05)
