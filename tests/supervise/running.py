"""
Real C{twistd} processes for the supervisor's tests and the chaos script:
start one, wait (bounded) for what its log says, talk to it, stop it by PID.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from typing import Any, Callable

from tests.support import sourceEnv, twistdArgv
from tests.supervise.dummy import PLUGIN_PATH

#: How long to wait for something a process should do soon, in seconds.
WAIT = 20.0


def pluginEnv() -> dict[str, str]:
    """
    The source tree's environment, with C{netlog-dummy} findable by twistd.
    """
    env = sourceEnv()
    env["PYTHONPATH"] = PLUGIN_PATH + os.pathsep + env["PYTHONPATH"]
    return env


def waitFor(check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """
    Poll C{check} until it returns something true; fail after C{timeout}.
    """
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def canRun(uid: int, gid: int, path: str, read: list[str] = ()) -> bool:  # type: ignore[assignment]
    """
    Whether user C{uid} can execute C{path} and read the folders C{read}.
    """
    pid = os.fork()
    if pid == 0:
        ok = False
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            ok = os.access(path, os.X_OK) and all(os.access(p, os.R_OK | os.X_OK) for p in read)
        finally:
            os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def interpreterFor(uid: int, gid: int) -> tuple[str, dict[str, str]] | None:
    """
    A Python that user C{uid} can run with this tree's packages, and the
    environment for it: this one, or the system's of the same version with
    this one's C{site-packages} on its path (a virtualenv under C{/root}
    can't be run by C{nobody}). None if there is none.
    """
    import site
    import sys

    env = pluginEnv()
    packages = [p for p in site.getsitepackages() if os.path.isdir(p)]
    if canRun(uid, gid, sys.executable, packages):
        return sys.executable, env
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (f"/usr/bin/{version}", f"/usr/local/bin/{version}"):
        if os.path.exists(candidate) and canRun(uid, gid, candidate, packages):
            env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], *packages])
            return candidate, env
    return None


class Twistd:
    """
    One C{twistd -n PLUGIN ...} process, logging to C{folder/twistd.log}.
    """

    def __init__(
        self,
        folder: str,
        plugin: str,
        args: list[str],
        twistdArgs: list[str] = (),  # type: ignore[assignment]
        interpreter: tuple[str, dict[str, str]] | None = None,
        openFiles: tuple[int, int] | None = None,
    ) -> None:
        """
        @param openFiles: the soft and hard limits on open files to start it
            with (C{ulimit -n}), if not this process's.
        """
        self.folder = folder
        self.twistdLog = os.path.join(folder, "twistd.log")
        self.output = open(os.path.join(folder, "twistd.out"), "wb")
        argv = twistdArgv() + ["-n", "--pidfile=", "--logfile", self.twistdLog, *twistdArgs, plugin, *args]
        env = pluginEnv()
        if interpreter is not None:
            argv[0], env = interpreter
        # In its own session, as a terminal would start it: a signal to its
        # process group (Ctrl-C) reaches it and its workers, not the tests.
        def limit() -> None:
            if openFiles is not None:
                import resource

                resource.setrlimit(resource.RLIMIT_NOFILE, openFiles)

        self.process = subprocess.Popen(
            argv, env=env, stdout=self.output, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True,
            preexec_fn=limit if openFiles is not None else None,
        )

    def text(self) -> str:
        """
        Its log so far, the parts twistd rotated away (C{twistd.log.N})
        included.
        """
        rotated = sorted(
            (int(name.rsplit(".", 1)[1]), name)
            for name in os.listdir(self.folder)
            if re.fullmatch(r"twistd\.log\.\d+", name)
        )
        parts = []
        for path in [os.path.join(self.folder, name) for _, name in reversed(rotated)] + [self.twistdLog]:
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    parts.append(f.read())
            except FileNotFoundError:
                continue
        return "".join(parts)

    def listenerPort(self, role: str) -> int:
        """
        The port a listener bound (wait for it): tests listen on port 0 and
        read it here, so that no two test runs race for a port.
        """
        pattern = rf"{re.escape(role)} listener \S+ bound on IPv4Address\(type='TCP', host='[^']*', port=(\d+)\)"
        found = waitFor(
            lambda: re.search(pattern, self.text()) or self.process.poll() is not None,
            f"the {role} listener to bind",
        )
        if found is True:
            raise AssertionError(f"twistd ended with {self.process.returncode}:\n{self.text()}")
        return int(found.group(1))

    def apiPort(self) -> int:
        """
        The port the API bound (wait for it).
        """
        pattern = r"the API serves on http://[^/]*:(\d+)/ \(its token"
        found = waitFor(
            lambda: re.search(pattern, self.text()) or self.process.poll() is not None,
            "the API to bind",
        )
        if found is True:
            raise AssertionError(f"twistd ended with {self.process.returncode}:\n{self.text()}")
        return int(found.group(1))

    def standingByCount(self) -> int:
        return len(re.findall(r"worker \d+ standing by,", self.text()))

    def workers(self) -> list[int]:
        """
        The PIDs of the workers it started, in order.
        """
        return [int(pid) for pid in re.findall(r"started worker (\d+)", self.text())]

    def servingPids(self, slot: int | None = None) -> list[int]:
        """
        The PIDs of the workers that said they serve (again), in order;
        with C{slot}, that worker slot's only (with more than one slot, the
        supervisor ends those lines with C{in slot N}).
        """
        pattern = r"worker (\d+) serving" + (rf"\b.* in slot {slot}$" if slot is not None else "")
        return [int(pid) for pid in re.findall(pattern, self.text(), re.MULTILINE)]

    def servingCount(self, slot: int | None = None) -> int:
        return len(self.servingPids(slot))

    def waitServing(self, count: int = 1, slot: int | None = None) -> int:
        """
        Wait until C{count} workers (of C{slot}, if given) have said they
        serve; the last one's PID.
        """
        where = f" in slot {slot}" if slot is not None else ""
        waitFor(lambda: self.servingCount(slot) >= count or self.process.poll() is not None,
                f"worker #{count}{where} serving")
        if self.process.poll() is not None:
            raise AssertionError(f"twistd ended with {self.process.returncode}:\n{self.text()}")
        return self.servingPids(slot)[count - 1]

    def wait(self, timeout: float = WAIT) -> int:
        return self.process.wait(timeout)

    def stop(self) -> None:
        """
        End it (TERM, then KILL) and any worker still alive, by PID.
        """
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(WAIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(WAIT)
        for pid in self.workers():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.output.close()


def killServing(twistd: Twistd, count: int, slot: int | None = None) -> list[int]:
    """
    Kill the serving worker (of C{slot}, if given) with SIGKILL as soon as
    it serves, C{count} times; their PIDs.
    """
    killed = []
    for i in range(count):
        pid = twistd.waitServing(i + 1, slot)
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)
        waitFor(lambda: not alive(pid), "the worker's death")
    return killed


class WorkerSlots:
    """
    What a supervisor's test counts with one worker slot (the default) or
    more (C{--workers N}). Faults are made in slot 0, the one that serves
    the main listeners; with more than one slot the supervisor's lines about
    a slot's workers end C{in slot N}, and the other slots' workers must be
    left alone.
    """

    def __init__(self, workers: int) -> None:
        self.workers = workers
        #: the slot the faults are made in, as the lines name it (none with one)
        self.slot = 0 if workers > 1 else None
        #: what the supervisor's lines about that slot's workers say of it
        self.where = " in slot 0" if workers > 1 else ""
        #: the options that start the proxy with these slots
        self.options = ["--workers", str(workers)] if workers > 1 else []

    def waitServing(self, twistd: Twistd) -> list[int]:
        """
        Wait until every slot's first worker serves; their PIDs, slot 0's
        first.
        """
        return [twistd.waitServing(1, slot if self.workers > 1 else None) for slot in range(self.workers)]

    def others(self, twistd: Twistd) -> dict[int, int]:
        """
        The serving worker of each slot but slot 0 (none with one slot),
        once it serves.
        """
        return {slot: twistd.waitServing(1, slot) for slot in range(1, self.workers)}

    def checkUntouched(self, testCase: Any, twistd: Twistd, others: dict[int, int]) -> None:
        """
        The other slots' workers (from L{others}) still serve, the only ones
        their slots have had.
        """
        for slot, pid in others.items():
            testCase.assertTrue(alive(pid), f"slot {slot}'s worker {pid} died")
            testCase.assertEqual(twistd.servingPids(slot), [pid])


def alive(pid: int) -> bool:
    """
    Whether a process is still running (a zombie is not).
    """
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def uidOf(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[2])  # effective
    raise AssertionError(f"no Uid line for {pid}")


def ask(port: int, line: bytes, timeout: float = WAIT) -> bytes:
    """
    Send one line to the dummy proxy and return its whole answer.
    """
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(line + b"\n")
        chunks = []
        while chunk := s.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks)


def getJSON(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=WAIT) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def readLog(path: str) -> list[dict[str, Any]]:
    """
    Every line of a log, parsed; fails on a line that is not whole JSON.
    """
    with open(path, "rb") as f:
        data = f.read()
    assert data.endswith(b"\n") or not data, "the log ends with a cut line"
    return [json.loads(line) for line in data.splitlines()]


def checkLog(testCase: Any, records: list[dict[str, Any]]) -> None:
    """
    The log's invariants: numbers from 1 without gap or repeat, every open
    ended exactly once, every end naming an earlier open.
    """
    testCase.assertEqual([r["n"] for r in records], list(range(1, len(records) + 1)))
    opened = {r["id"] for r in records if r["type"] == "open"}
    ends = [r["id"] for r in records if r["type"] == "end"]
    testCase.assertEqual(sorted(ends), sorted(opened))
    testCase.assertEqual(len(ends), len(set(ends)))


__all__ = [
    "Twistd", "WorkerSlots", "alive", "ask", "checkLog", "getJSON", "interpreterFor", "killServing", "readLog", "uidOf",
    "waitFor",
]
