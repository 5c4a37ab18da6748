"""
Live hosts decrypted on demand (C{[live] decrypt}), over a real C{twistd
netlog-proxy}: local TLS origins whose certificates come from a private CA
made here and named by C{[live] ca_file}, their names given with
C{--resolve}. A decrypted host's requests are kept whole and marked
C{_liveDecrypted} in the log and the HAR; a live host not in C{decrypt}
stays a blind tunnel; a certificate that fails verification (another
host's, expired, from an unknown issuer) gets the browser a 502 whose
C{_failed} says why, and no request reaches that origin.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import tempfile
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from twisted.trial.unittest import SynchronousTestCase

from tests.browser.procs import runNetlog
from tests.har.support import validate
from tests.site.support import connectTunnel, request
from tests.support.liveorigin import PAGE, Origin, makeCA, makeLeaf
from tests.supervise.running import Twistd, waitFor


class LiveWorld:
    """
    The origins and the C{sites.toml} of a test: C{good.test} (a good
    certificate from the private CA), C{blind.test} (the same origin, a live
    host not in C{decrypt}), C{wrong.test} (a certificate for
    C{other.test}), C{expired.test} (expired) and C{unknown.test} (signed by
    a CA no one trusts).
    """

    def __init__(self, case: SynchronousTestCase, folder: str, more: str = "") -> None:
        """
        @param more: more lines of the C{[live]} table.
        """
        ca = makeCA("live test CA")
        stranger = makeCA("a CA no one trusts")
        self.caPath = os.path.join(folder, "live-ca.pem")
        with open(self.caPath, "wb") as f:
            f.write(ca[1].public_bytes(serialization.Encoding.PEM))
        self.origins = {
            "good.test": Origin(folder, "good", *makeLeaf(ca, ["good.test", "blind.test"])),
            "wrong.test": Origin(folder, "wrong", *makeLeaf(ca, ["other.test"])),
            "expired.test": Origin(folder, "expired", *makeLeaf(ca, ["expired.test"], expired=True)),
            "unknown.test": Origin(folder, "unknown", *makeLeaf(stranger, ["unknown.test"])),
        }
        self.origins["blind.test"] = self.origins["good.test"]
        for origin in set(self.origins.values()):
            case.addCleanup(origin.stop)
        self.sites = os.path.join(folder, "sites.toml")
        ports = sorted({o.port for o in self.origins.values()})
        with open(self.sites, "w") as f:
            f.write(f'[live]\nhosts = ["blind.test"]\n'
                    f'decrypt = ["good.test", "wrong.test", "expired.test", "unknown.test"]\n'
                    f'ca_file = "live-ca.pem"\nconnect_ports = {ports}\n{more}')

    def authority(self, host: str) -> str:
        return f"{host}:{self.origins[host].port}"

    def resolveArgs(self) -> list[str]:
        args = []
        for host in sorted(self.origins):
            args += ["--resolve", f"{host}=127.0.0.1"]
        return args + ["--resolve-only"]


def ended(logPath: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """
    The log's exchanges that have ended: (open line, end line).
    """
    opens: dict[int, dict[str, Any]] = {}
    pairs = []
    with open(logPath, "rb") as f:
        for raw in f:
            line = json.loads(raw)
            if line["type"] == "open":
                opens[line["n"]] = line
            elif line["type"] == "end":
                pairs.append((opens.pop(line["id"], None) or {"n": line["id"]}, line))
            if "open_from" in line:
                opens[line["n"]] = line
    return pairs


class LiveProxyCase(SynchronousTestCase):
    """
    A real C{twistd netlog-proxy} in front of a L{LiveWorld}.
    """

    #: Extra options of the proxy: one process here.
    extra: tuple[str, ...] = ("--no-supervise",)
    #: More lines of the C{[live]} table.
    live = ""

    def setUp(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="netlog-live-")
        self.addCleanup(shutil.rmtree, self.folder, True)
        self.world = LiveWorld(self, self.folder, self.live)
        self.state = os.path.join(self.folder, "state")
        self.log = os.path.join(self.folder, "network.jsonl")
        run = os.path.join(self.folder, "run")
        os.makedirs(run)
        self.twistd = Twistd(run, "netlog-proxy", [
            "--sites", self.world.sites, "--state", self.state, "--log", self.log,
            "--listen", "tcp:0:interface=127.0.0.1", *self.world.resolveArgs(), *self.extra,
        ])
        self.addCleanup(self.twistd.stop)
        self.port = self.twistd.listenerPort("forward")

    def netlogContext(self) -> ssl.SSLContext:
        """
        A client that trusts netlog's CA alone (as a browser set up for it).
        """
        return ssl.create_default_context(cafile=os.path.join(self.state, "ca.pem"))

    def get(self, host: str, method: str = "GET", body: bytes = b"") -> tuple[int, bytes]:
        authority = self.world.authority(host)
        sock = connectTunnel(self.port, authority, self.netlogContext(), serverName=host)
        with sock:
            headers = [("Host", authority), ("Connection", "close")]
            if body:
                headers.append(("Content-Type", "application/x-www-form-urlencoded"))
                headers.append(("Content-Length", str(len(body))))
            status, _, answer, _ = request(sock, method, "/page?q=1", headers, body)
        return status, answer

    def waitForEntries(self, count: int) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        return waitFor(lambda: len(ended(self.log)) >= count and ended(self.log), f"{count} ended entries")

    def har(self) -> dict[str, Any]:
        """
        The log exported as HAR (C{netlog har}), which the schema takes.
        """
        out = os.path.join(self.folder, "network.har")
        runNetlog(["har", self.log, "-o", out])
        with open(out, "rb") as f:
            data = f.read()
        self.assertEqual(validate(data), [])
        return json.loads(data)  # type: ignore[no-any-return]


@pytest.mark.slow
class DecryptedLiveHostTests(LiveProxyCase):
    def test_decryptedKeptWhole(self) -> None:
        """
        A CONNECT to a host C{decrypt} names is decrypted with a certificate
        from netlog's CA; the request goes to the live host over TLS
        verified against C{ca_file}; the log keeps the request and the
        answer with their bodies, marked C{_liveDecrypted}, and so does the
        HAR.
        """
        status, body = self.get("good.test", "POST", b"user=alice&q=shoes")
        self.assertEqual((status, body), (200, PAGE))
        self.assertEqual(self.world.origins["good.test"].requests,
                         [("POST /page?q=1 HTTP/1.1", b"user=alice&q=shoes")])
        [(opened, end)] = self.waitForEntries(1)
        self.assertEqual(opened["kind"], "exchange")
        self.assertIs(opened["_liveDecrypted"], True)
        self.assertEqual(opened["request"]["url"], f"https://{self.world.authority('good.test')}/page?q=1")
        self.assertEqual(opened["server"]["address"], "127.0.0.1")
        self.assertEqual(end["response"]["status"], 200)
        self.assertNotIn("_failed", end)
        [entry] = self.har()["log"]["entries"]
        self.assertIs(entry["_liveDecrypted"], True)
        self.assertEqual(entry["request"]["method"], "POST")
        self.assertEqual(entry["request"]["postData"]["text"], "user=alice&q=shoes")
        self.assertEqual(entry["response"]["status"], 200)
        self.assertEqual(entry["response"]["content"]["text"], PAGE.decode())

    def test_curlOverHTTP2(self) -> None:
        """
        curl through the proxy, trusting netlog's CA, speaks HTTP/2 to
        netlog inside a decrypted live host's tunnel (ALPN), and gets the
        page from the HTTP/1.1 origin; the entry says HTTP/2.
        """
        authority = self.world.authority("good.test")
        done = subprocess.run(
            ["curl", "-sS", "--http2", "--proxy", f"http://127.0.0.1:{self.port}",
             "--cacert", os.path.join(self.state, "ca.pem"), f"https://{authority}/page?q=1"],
            capture_output=True, timeout=30)
        self.assertEqual(done.stdout, PAGE, done.stderr)
        [(opened, end)] = self.waitForEntries(1)
        self.assertEqual(opened["request"]["version"], "HTTP/2")
        self.assertIs(opened["_liveDecrypted"], True)
        self.assertEqual(end["response"]["status"], 200)

    def test_notInDecryptStaysBlind(self) -> None:
        """
        A live host C{hosts} allows and C{decrypt} doesn't name keeps its
        blind tunnel: the client sees the origin's own certificate, and the
        log has one tunnel entry, not marked.
        """
        context = ssl.create_default_context(cafile=self.world.caPath)
        authority = self.world.authority("blind.test")
        with connectTunnel(self.port, authority, context, serverName="blind.test") as sock:
            status, _, body, _ = request(sock, "GET", "/", [("Host", authority), ("Connection", "close")])
        self.assertEqual((status, body), (200, PAGE))
        [(opened, end)] = self.waitForEntries(1)
        self.assertEqual(opened["kind"], "tunnel")
        self.assertNotIn("_liveDecrypted", opened)
        self.assertNotIn("_failed", end)

    def test_browserDistrustsNetlog(self) -> None:
        """
        A browser that rejects netlog's certificate for a decrypted live
        host (it trusts only the host's own CA, as a pinning app would)
        leaves a tunnel entry, C{_failed} with the alert it sent and
        C{_liveDecrypted}; nothing reaches the host.
        """
        context = ssl.create_default_context(cafile=self.world.caPath)
        with self.assertRaises(ssl.SSLError):
            connectTunnel(self.port, self.world.authority("good.test"), context, serverName="good.test")
        [(opened, end)] = self.waitForEntries(1)
        self.assertEqual((opened["kind"], opened["_liveDecrypted"]), ("tunnel", True))
        self.assertIn("the browser doesn't trust netlog's CA", end["_failed"]["reason"])
        self.assertEqual(self.world.origins["good.test"].requests, [])

    def test_verificationFailures(self) -> None:
        """
        A certificate for another host, an expired one, and one from an
        issuer C{ca_file} doesn't hold: each gets the browser a 502, the
        entry's C{_failed} says why (with the status), and no request
        reaches the origin.
        """
        cases = {"wrong.test": "wrong host", "expired.test": "has expired", "unknown.test": "unknown issuer"}
        for host in cases:
            status, body = self.get(host)
            self.assertEqual(status, 502, body)
            self.assertEqual(self.world.origins[host].requests, [], host)
        entries = self.waitForEntries(len(cases))
        self.assertEqual(len(entries), len(cases))
        for (opened, end), (host, words) in zip(entries, cases.items()):
            self.assertEqual(opened["server"]["host"], host)
            self.assertIs(opened["_liveDecrypted"], True)
            self.assertEqual(end["_failed"]["status"], 502)
            self.assertIn(words, end["_failed"]["reason"], host)
            self.assertIn("certificate verify failed", end["_failed"]["reason"], host)
        failed = [entry["_failed"]["reason"] for entry in self.har()["log"]["entries"]]
        self.assertEqual([any(w in r for r in failed) for w in cases.values()], [True] * len(cases))


@pytest.mark.slow
class UnverifiedLiveHostTests(LiveProxyCase):
    """
    C{[live] verify = false}: a live host's certificate is not checked.
    """

    live = "verify = false\n"

    def test_relayedUnchecked(self) -> None:
        """
        With C{verify = false}, a certificate for another name, an expired
        one and one from an unknown issuer are all relayed: the page comes
        back and the entry has no C{_failed}.
        """
        for host in ("wrong.test", "expired.test", "unknown.test"):
            self.assertEqual(self.get(host), (200, PAGE), host)
        entries = self.waitForEntries(3)
        self.assertEqual([end.get("_failed") for _, end in entries], [None] * 3)


@pytest.mark.slow
class SupervisedDecryptedLiveHostTests(DecryptedLiveHostTests):
    """
    The same, supervised: the worker holds no CA key, and gets each live
    host's certificate minted on demand through the supervisor.
    """

    extra = ()

    def test_mintedBySupervisor(self) -> None:
        """
        Supervised, a live host's certificate comes from the minter the
        supervisor started (the worker can't mint): the client's handshake
        through the worker succeeds for a host no certificate was minted for
        at start, signed by netlog's CA.
        """
        self.assertEqual(self.get("good.test"), (200, PAGE))
        self.assertRegex(self.twistd.text(), r"started the certificate minter \d+ for the live hosts")
