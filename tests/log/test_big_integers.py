"""
Integers of any size read back whole through every reader of the log:
C{netlog read}, C{netlog har}, the API's C{/network} over a real
C{twistd netlog-standin}. (The replay index reads lines with the same
L{netlog.core.logline.parseJSON} that tests/core/test_logline.py checks.)
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from typing import Any

from twisted.trial import unittest

from netlog.core.logline import END, OPEN, encodeLine
from tests.core.test_logline import EDGE_INTEGERS, exactly
from tests.standin.support import Standin, inThread, tempDirectory
from tests.support import freePort, netlogArgv, sourceEnv

#: Seconds a command or a request may take.
WAIT = 60.0


def tunnelLines(first: int) -> list[bytes]:
    """
    A tunnel per edge integer, its bytes up and down that integer, and a
    field of netlog's own holding all of them, from line C{first} on.
    """
    lines = []
    n = first
    for value in EDGE_INTEGERS:
        lines.append(encodeLine(n, OPEN, n, 1, 1764672000.0, {
            "proxy": "standin", "kind": "tunnel",
            "request": {"method": "CONNECT", "url": "https://far.test:443/"},
            "edges": EDGE_INTEGERS,
        }))
        lines.append(encodeLine(n + 1, END, n, 1, 1764672001.0, {
            "bytes": {"up": value, "down": value}, "closed_by": "client",
        }))
        n += 2
    return lines


class EveryReaderTests(unittest.TestCase):
    def setUp(self) -> None:
        self.directory = tempDirectory(self)
        self.log = os.path.join(self.directory, "standin.jsonl")
        with open(self.log, "wb") as f:
            f.writelines(tunnelLines(1))

    def netlog(self, *args: str) -> bytes:
        done = subprocess.run(netlogArgv() + list(args), capture_output=True, env=sourceEnv(),
                              timeout=WAIT, cwd=self.directory)
        self.assertEqual(done.returncode, 0, done.stderr)
        return done.stdout

    def checkLines(self, lines: list[dict[str, Any]]) -> None:
        ends = [line for line in lines if line["type"] == "end" and "bytes" in line]
        self.assertEqual([exactly(end["bytes"]["up"]) for end in ends],
                         [exactly(value) for value in EDGE_INTEGERS])
        for line in lines:
            if line["type"] == "open" and "edges" in line:
                self.assertEqual(exactly(line["edges"]), exactly(EDGE_INTEGERS))

    def test_read(self) -> None:
        """
        C{netlog read --json} prints each integer as the log holds it.
        """
        envelope = json.loads(self.netlog("read", self.log, "--after", "0", "--json"))
        self.checkLines([json.loads(line) if isinstance(line, str) else line
                         for line in envelope["lines"]])

    def test_har(self) -> None:
        """
        C{netlog har} writes a tunnel's byte counts as the integers they
        are.
        """
        self.netlog("har", self.log, "-o", "out.har")
        with open(os.path.join(self.directory, "out.har"), "rb") as f:
            har = json.load(f)
        counts = [entry["_tunnel"]["bytes_up"] for entry in har["log"]["entries"]]
        self.assertEqual([exactly(c) for c in counts], [exactly(v) for v in EDGE_INTEGERS])

    def test_api(self) -> Any:
        """
        The API's C{/network} of a running stand-in, numbering on after the
        lines it found, answers them with every integer whole, and so does
        its C{/exchange} (the live view's detail pane), which parses them.
        """
        apiPort = freePort()
        standin = Standin(self, self.directory, ["--api", f"tcp:{apiPort}", "--state", self.directory],
                          alsoListening=[apiPort])
        d = standin.start()

        def fetch(_: None) -> Any:
            def get() -> bytes:
                with urllib.request.urlopen(f"http://127.0.0.1:{apiPort}/network?after=0",
                                            timeout=WAIT) as answer:
                    return answer.read()  # type: ignore[no-any-return]
            return inThread(get)

        def check(body: bytes) -> Any:
            envelope = json.loads(body)
            self.checkLines([json.loads(line) if isinstance(line, str) else line
                             for line in envelope["lines"]])
            return inThread(details)

        def details() -> None:
            # The live view's detail pane: found by number and parsed.
            for i, value in enumerate(EDGE_INTEGERS):
                with urllib.request.urlopen(f"http://127.0.0.1:{apiPort}/exchange?id={2 * i + 1}",
                                            timeout=WAIT) as answer:
                    detail = json.loads(answer.read())
                self.assertEqual(exactly(detail["end"]["bytes"]["up"]), exactly(value))
                self.assertEqual(exactly(detail["entry"]["_tunnel"]["bytes_down"]), exactly(value))
                self.assertEqual(exactly(detail["open"]["edges"]), exactly(EDGE_INTEGERS))

        d.addCallback(fetch)
        d.addCallback(check)
        return d
