"""
Record, then replay, with real C{twistd netlog-proxy} processes: a proxy
keeping every body records the test site's pages through decrypted
CONNECTs; two proxies replaying that log (one supervised with the site's
C{replay = "PATH"}, one C{--no-supervise} with C{--replay}) answer the same
steps with the same bytes, connect to the site's backend not once, and
their HARs are the recording's but for timings and the replay marks
(L{LEFT_OUT}).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import time
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser.procs import Proxy, runNetlog, startSite, startSiteProxy, stop, waitForEnds, writeSites
from tests.site.support import connectTunnel, readHead, readResponse, request

#: The steps browsed: method, path, extra headers, body.
BOUNDARY = "----netlogReplayBoundary"
UPLOAD = (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nholiday\r\n"
          f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.bin\"\r\n"
          f"Content-Type: application/octet-stream\r\n\r\n").encode() + bytes(range(256)) + \
    f"\r\n--{BOUNDARY}--\r\n".encode()
STEPS: list[tuple[str, str, list[tuple[str, str]], bytes]] = [
    ("GET", "/", [], b""),
    ("POST", "/login", [("Content-Type", "application/x-www-form-urlencoded")], b"username=alice&password=pw"),
    ("GET", "/account", [("Cookie", "session=alice%7C42")], b""),
    ("POST", "/api/cart", [("Content-Type", "application/json")], b'{"item":"mug","qty":2}'),
    ("POST", "/api/cart", [("Content-Type", "application/json")], b'{"item":"cup","qty":3}'),
    ("GET", "/logo.png", [], b""),
    ("POST", "/upload", [("Content-Type", f"multipart/form-data; boundary={BOUNDARY}")], UPLOAD),
    ("GET", "/big.txt", [], b""),
    ("GET", "/news", [("Accept-Encoding", "br")], b""),
    ("GET", "/search?q=shoes&page=2", [], b""),
]
#: The only fields a replayed HAR entry may differ in from the recorded one
#: (docs/replay.rst, "The log and the HAR of a replay run"):
#: - its timings, which are about when, not what (the replay answers at once);
#: - the replay's own marks, which the recording hasn't: C{_replayed} (the
#:   recorded line) and C{_replayedCut} (the recorded body was cut, and so is
#:   the one the browser got; the entry keeps the recorded size and headers).
#: Everything else is compared: C{serverIPAddress} is the recording's; the
#: C{connection} is the replay's own (the browser's real connection), equal
#: here because the replay takes the same steps over one connection, as the
#: recording did.
LEFT_OUT = ("startedDateTime", "time", "timings", "_replayed", "_replayedCut")


def browse(proxy: Proxy) -> list[tuple[int, dict[str, str], bytes]]:
    """
    Take every step through C{proxy}'s forward port, in one decrypted
    CONNECT to shop.test.
    """
    assert proxy.state is not None
    context = ssl.create_default_context(cafile=os.path.join(proxy.state, "ca.pem"))
    context.set_alpn_protocols(["http/1.1"])
    sock = connectTunnel(proxy.port, "shop.test:443", context)
    sock.settimeout(30)
    out = []
    try:
        for method, path, headers, body in STEPS:
            extra = list(headers) + ([("Content-Length", str(len(body)))] if body else [])
            status, fields, got, _ = request(sock, method, path, [("Host", "shop.test"), *extra], body)
            out.append((status, fields, got))
    finally:
        sock.close()
    return out


def keptBodies(logPath: str) -> list[bytes]:
    """
    Each exchange's answer body as its end line keeps it, in order.
    """
    with open(logPath, "rb") as f:
        lines = [json.loads(line) for line in f]
    return [base64.b64decode(line["response"]["body"].get("data", "")) for line in lines if line["type"] == "end"]


def har(directory: str, logPath: str) -> dict[str, Any]:
    out = os.path.join(directory, os.path.basename(logPath) + ".har")
    runNetlog(["har", logPath, "-o", out])
    with open(out, encoding="utf-8") as f:
        return json.load(f)  # type: ignore[no-any-return]


def comparable(entry: dict[str, Any]) -> dict[str, Any]:
    """
    A HAR entry without what a replay may change (L{LEFT_OUT}).
    """
    return {k: v for k, v in entry.items() if k not in LEFT_OUT}


@pytest.mark.slow
class RecordReplayTests(SynchronousTestCase):
    def test_recordThenReplay(self) -> None:
        """
        The replays answer every step with the recorded status and a body
        whose sha256 is the recorded one, the site's backend accepts no
        connection from them, and their HARs equal the recording's but for
        timings and C{_replayed} (and C{_replayedCut} on the body the
        recording cut at its 1 MB limit): the server address, the cut
        body's size and headers among the rest.
        """
        top = os.path.abspath(self.mktemp())
        os.makedirs(top)
        site = startSite(top, self.addCleanup)
        recordDir = os.path.join(top, "record")
        os.makedirs(recordDir)
        recorder = startSiteProxy(recordDir, site, self.addCleanup, httpsRoute=False,
                                  extra=("--keep-bodies", "all"))
        recorded = browse(recorder)
        waitForEnds(recorder.log)
        stop(recorder.proc)
        self.assertEqual([s for s, _, _ in recorded], [200, 302, 200, 200, 200, 200, 200, 200, 200, 200])
        kept = keptBodies(recorder.log)
        self.assertEqual(len(kept), len(STEPS))
        # Every connection the recorder made to the backend has ended.
        before = len(site.connections())
        self.assertGreater(before, 0)

        replays = []
        for name, extra in (("supervised", ()), ("single", ("--no-supervise", "--replay", recorder.log))):
            directory = os.path.join(top, name)
            os.makedirs(directory)
            sitesPath = writeSites(directory, site)
            if name == "supervised":
                with open(sitesPath, "a", encoding="utf-8") as f:
                    f.write(f"replay = {json.dumps(os.path.relpath(recorder.log, directory))}\n")
            proxy = startSiteProxy(directory, site, self.addCleanup, httpsRoute=False, sitesPath=sitesPath,
                                   extra=("--keep-bodies", "all", *extra))
            answers = browse(proxy)
            waitForEnds(proxy.log)
            stop(proxy.proc)
            for (method, path, _, _), (status, _, body), (wasStatus, _, wasBody), keptBody in zip(
                    STEPS, answers, recorded, kept):
                self.assertEqual(status, wasStatus, (name, method, path))
                self.assertEqual(hashlib.sha256(body).hexdigest(), hashlib.sha256(keptBody).hexdigest(),
                                 (name, method, path))
                if path != "/big.txt":
                    self.assertEqual(body, wasBody, (name, method, path))
            replays.append((directory, proxy))

        self.assertEqual(len(site.connections()), before, "the replays connected to the backend")

        recordedHar = har(recordDir, recorder.log)
        recordedEntries = recordedHar["log"]["entries"]
        for directory, proxy in replays:
            entries = har(directory, proxy.log)["log"]["entries"]
            self.assertEqual(len(entries), len(recordedEntries))
            with open(recorder.log, "rb") as f:
                ids = [json.loads(line)["id"] for line in f if b'"type":"open"' in line]
            self.assertEqual([e.get("_replayed") for e in entries], ids)
            self.assertEqual([bool(e.get("_replayedCut")) for e in entries],
                             [path == "/big.txt" for _, path, _, _ in STEPS])
            for step, before_, after in zip(STEPS, recordedEntries, entries):
                # The big text was cut at the recording's limit: both entries
                # say so, with its recorded size.
                self.assertEqual(before_["response"]["content"].get("_truncated", False), step[1] == "/big.txt")
                self.assertEqual(before_.get("serverIPAddress"), "127.0.0.1")
                self.assertEqual(comparable(after), comparable(before_), step[:2])


class StartTests(SynchronousTestCase):
    def test_unreadableRecording(self) -> None:
        """
        A recording that can't be read (missing, neither a log nor a HAR,
        a HAR without entries, a log with nothing to replay) stops the
        proxy at start with exit status 1 and one line saying why.
        """
        import subprocess

        from tests.support import sourceEnv, twistdArgv

        top = os.path.abspath(self.mktemp())
        os.makedirs(top)
        sites = os.path.join(top, "sites.toml")
        with open(sites, "w") as f:
            f.write('[[site]]\nname = "shop"\norigins = ["https://shop.test"]\nbackend = "http://127.0.0.1:9"\n')
        files = {"text.jsonl": b"not a recording\n", "empty.har": b'{"log": {}}',
                 "cut.jsonl": b'{"n":1,"type":"open","id":1'}
        for name, data in files.items():
            with open(os.path.join(top, name), "wb") as f:
                f.write(data)
        for name, why in (("missing.har", "can't open the recording"),
                          ("text.jsonl", "is neither a netlog log nor a HAR"),
                          ("empty.har", "is not a HAR with log.entries"),
                          ("cut.jsonl", "has no answer to replay")):
            done = subprocess.run(
                twistdArgv() + ["-n", "--pidfile=", "netlog-proxy", "--sites", sites, "--state",
                                os.path.join(top, "state"), "--log", os.path.join(top, "log.jsonl"),
                                "--replay", os.path.join(top, name)],
                env=sourceEnv(), capture_output=True, timeout=60)
            self.assertEqual(done.returncode, 1, name)
            out = (done.stdout + done.stderr).decode().strip()
            self.assertEqual(len(out.splitlines()), 1, out)
            self.assertIn(why, out)
            self.assertNotIn("Traceback", out)


#: How long a client waits for C{100 Continue} before it sends its body
#: anyway (seconds: curl's): the replay's must come well before.
CLIENT_CONTINUE_WAIT = 1.0
#: How long the test's client waits for anything (seconds).
ANSWER_WAIT = 10.0


@pytest.mark.slow
class ExpectContinueTests(SynchronousTestCase):
    def test_continueAtOnce(self) -> None:
        """
        A replayed request that says C{Expect: 100-continue} gets C{100
        Continue} before it sends its body (no client waits out its own
        timeout), then the recorded answer for the body it sends; a request
        that doesn't say it gets no C{100}. Nothing reaches the backend.
        """
        from tests.proxy.recordings import Exchange, writeLog

        top = os.path.abspath(self.mktemp())
        os.makedirs(top)
        site = startSite(top, self.addCleanup)
        recording = writeLog(os.path.join(top, "record.jsonl"), [
            Exchange("POST", "http://shop.test/upload", body=b"stored", requestBody=b"a=1",
                     requestType="application/x-www-form-urlencoded"),
            Exchange("POST", "http://shop.test/upload", body=b"stored again", requestBody=b"a=2",
                     requestType="application/x-www-form-urlencoded"),
        ])
        sitesPath = writeSites(top, site, origins=("http://shop.test",))
        proxy = startSiteProxy(top, site, self.addCleanup, httpsRoute=False, sitesPath=sitesPath,
                               extra=("--replay", recording))
        head = ("POST http://shop.test/upload HTTP/1.1\r\nHost: shop.test\r\n"
                "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 3\r\n")
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=ANSWER_WAIT) as sock:
            sent = time.monotonic()
            sock.sendall((head + "Expect: 100-continue\r\n\r\n").encode())
            self.assertEqual(readHead(sock), b"HTTP/1.1 100 Continue\r\n\r\n")
            self.assertLess(time.monotonic() - sent, CLIENT_CONTINUE_WAIT)
            sock.sendall(b"a=1")
            status, _, body, raw = readResponse(sock, "POST")
            self.assertEqual((status, body), (200, b"stored"))
            self.assertNotIn(b" 100 ", raw)
            # Without the field: the answer, and no 100 before it.
            sock.sendall((head + "\r\n").encode() + b"a=2")
            status, _, body, raw = readResponse(sock, "POST")
            self.assertEqual((status, body), (200, b"stored again"))
            self.assertTrue(raw.startswith(b"HTTP/1.1 200 "), raw[:40])
        waitForEnds(proxy.log)
        stop(proxy.proc)
        with open(proxy.log, "rb") as f:
            ends = [json.loads(line) for line in f if b'"type":"end"' in line]
        self.assertEqual([(end.get("_replayed"), end.get("interim")) for end in ends], [(1, [100]), (3, None)])
        self.assertEqual(site.connections(), [])
