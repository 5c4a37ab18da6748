"""
A proxy started in a folder where another twistd still runs (the README's
stand-in left running, then its site proxy): netlog says what is in the way
in one line (the port the other holds, else the pidfile and how to do
without it), where twistd alone said "Another twistd server is running".
"""

from __future__ import annotations

import os
import shlex
import subprocess

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser.foreground import startForeground, waitServing
from tests.standin.support import tempDirectory
from tests.support import freePort, sourceEnv, twistdArgv

#: Seconds the first proxy has to serve, and the second to refuse.
WAIT = 60.0


@pytest.mark.slow
class OtherTwistdTests(SynchronousTestCase):
    def test_secondProxyInTheSameFolder(self) -> None:
        """
        With a stand-in running from this folder (its C{twistd.pid} here),
        a second C{twistd -n netlog-standin} on the same port is told the
        port is in use; on another port, that the pidfile names a running
        twistd, with C{--pidfile=} as the way round; each exits 1 having
        started nothing. Given C{--pidfile=}, the second starts.
        """
        folder = tempDirectory(self)
        port = freePort()
        argv = [*twistdArgv(), "-n"]
        first = shlex.join([*argv, "netlog-standin", "--listen", f"tcp:{port}:interface=127.0.0.1",
                          "--log", "first.jsonl", "--resolve-only"])
        out = os.path.join(folder, "first.out")
        process = startForeground(first, folder, sourceEnv(), out, None, self.addCleanup, WAIT)
        waitServing(process, out, WAIT)
        with open(os.path.join(folder, "twistd.pid")) as f:
            self.assertEqual(int(f.read()), process.pid)

        def second(*args: str) -> tuple[int, str]:
            done = subprocess.run([*argv, "netlog-standin", "--log", "second.jsonl", "--resolve-only", *args],
                                  cwd=folder, env=sourceEnv(), capture_output=True, timeout=WAIT,
                                  stdin=subprocess.DEVNULL)
            return done.returncode, (done.stdout + done.stderr).decode()

        status, said = second("--listen", f"tcp:{port}:interface=127.0.0.1")
        self.assertEqual((status, said), (1, f"twistd netlog-standin: --listen tcp:{port}:interface=127.0.0.1: "
                                              f"port {port} on 127.0.0.1 is in use already (by another program, "
                                              f"or given twice); stop that or choose another port\n"))
        other = freePort()
        status, said = second("--listen", f"tcp:{other}:interface=127.0.0.1")
        self.assertEqual((status, said), (1, f"twistd netlog-standin: {folder}/twistd.pid says another twistd "
                                              f"started in this folder is running (process {process.pid}); stop "
                                              f"it, or give twistd --pidfile= (no pidfile) or another --pidfile\n"))
        self.assertFalse(os.path.exists(os.path.join(folder, "second.jsonl")))
        self.assertNotIn("Another twistd server", said)

        secondOut = os.path.join(folder, "second.out")
        command = shlex.join([*argv, "--pidfile=", "netlog-standin", "--listen", f"tcp:{other}:interface=127.0.0.1",
                            "--log", "second.jsonl", "--resolve-only"])
        waitServing(startForeground(command, folder, sourceEnv(), secondOut, None, self.addCleanup, WAIT),
                    secondOut, WAIT)
