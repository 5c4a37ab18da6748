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
from tests.support.h2origin import H2OriginProcess
from tests.support.liveorigin import PAGE, Origin, makeCA, makeLeaf
from tests.supervise.running import Twistd, waitFor


class LiveWorld:
    """
    The origins and the C{sites.toml} of a test: C{good.test} (a good
    certificate from the private CA), C{blind.test} (the same origin, a live
    host not in C{decrypt}), C{wrong.test} (a certificate for
    C{other.test}), C{expired.test} (expired) and C{unknown.test} (signed by
    a CA no one trusts). With an L{H2OriginProcess}, C{backend.test} (its
    certificate's name) and C{misnamed.test} (a name it isn't for) are
    served by it, its CA trusted too.
    """

    def __init__(self, case: SynchronousTestCase, folder: str, more: str = "",
                 h2: H2OriginProcess | None = None) -> None:
        """
        @param more: more lines of the C{[live]} table.
        """
        ca = makeCA("live test CA")
        stranger = makeCA("a CA no one trusts")
        self.caPath = os.path.join(folder, "live-ca.pem")
        trusted = ca[1].public_bytes(serialization.Encoding.PEM)
        self.origins = {
            "good.test": Origin(folder, "good", *makeLeaf(ca, ["good.test", "blind.test"])),
            "wrong.test": Origin(folder, "wrong", *makeLeaf(ca, ["other.test"])),
            "expired.test": Origin(folder, "expired", *makeLeaf(ca, ["expired.test"], expired=True)),
            "unknown.test": Origin(folder, "unknown", *makeLeaf(stranger, ["unknown.test"])),
        }
        self.origins["blind.test"] = self.origins["good.test"]
        for origin in set(self.origins.values()):
            case.addCleanup(origin.stop)
        self.ports = {host: origin.port for host, origin in self.origins.items()}
        decrypt = ["good.test", "wrong.test", "expired.test", "unknown.test"]
        if h2 is not None:
            with open(os.path.join(h2.caFolder, "ca.pem"), "rb") as f:
                trusted += f.read()
            for host in ("backend.test", "misnamed.test"):
                self.ports[host] = h2.port
                decrypt.append(host)
        with open(self.caPath, "wb") as f:
            f.write(trusted)
        self.sites = os.path.join(folder, "sites.toml")
        with open(self.sites, "w") as f:
            f.write(f'[live]\nhosts = ["blind.test"]\ndecrypt = {json.dumps(decrypt)}\n'
                    f'ca_file = "live-ca.pem"\nconnect_ports = {sorted(set(self.ports.values()))}\n{more}')

    def authority(self, host: str) -> str:
        return f"{host}:{self.ports[host]}"

    def resolveArgs(self) -> list[str]:
        args = []
        for host in sorted(self.ports):
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
    #: Whether the world has live hosts served by an L{H2OriginProcess}
    #: (C{self.h2origin}).
    h2 = False

    def setUp(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="netlog-live-")
        self.addCleanup(shutil.rmtree, self.folder, True)
        self.h2origin = H2OriginProcess(self.addCleanup, self.folder) if self.h2 else None
        self.world = LiveWorld(self, self.folder, self.live, self.h2origin)
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

    def get(self, host: str, method: str = "GET", body: bytes = b"", path: str = "/page?q=1") -> tuple[int, bytes]:
        authority = self.world.authority(host)
        sock = connectTunnel(self.port, authority, self.netlogContext(), serverName=host)
        with sock:
            headers = [("Host", authority), ("Connection", "close")]
            if body:
                headers.append(("Content-Type", "application/x-www-form-urlencoded"))
                headers.append(("Content-Length", str(len(body))))
            status, _, answer, _ = request(sock, method, path, headers, body)
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
class H2LiveHostTests(LiveProxyCase):
    """
    Live hosts whose server speaks HTTP/2 when netlog's ALPN offers it
    (L{tests.support.h2origin}).
    """

    h2 = True

    def test_http2AndWrongName(self) -> None:
        """
        An HTTP/1.1 client's request to a decrypted live host whose server
        picks C{h2} reaches it over HTTP/2, and the log and the HAR say so
        (C{server_version}, C{_serverHttpVersion}). The same server reached
        by a name its certificate isn't for gets the client a 502 whose
        C{_failed} names the wrong host: the verification fails inside the
        handshake, before ALPN's choice is known, and the server sees no
        connection past its handshake and no request.
        """
        self.assertEqual(self.get("backend.test", path="/hello"), (200, b"hello over h2"))
        status, body = self.get("misnamed.test", path="/hello")
        self.assertEqual(status, 502, body)
        assert self.h2origin is not None
        origin = self.h2origin.status()
        self.assertEqual(origin["connections"], ["h2"])
        self.assertEqual(origin["requests"], [["HTTP/2", "/hello"]])
        (opened, end), (wrongOpened, wrongEnd) = self.waitForEntries(2)
        self.assertEqual((opened["server"]["host"], opened["_liveDecrypted"], opened["request"]["version"]),
                         ("backend.test", True, "HTTP/1.1"))
        self.assertEqual((end["response"]["status"], end["response"]["version"], end["response"]["server_version"]),
                         (200, "HTTP/1.1", "HTTP/2"))
        self.assertEqual((wrongOpened["server"]["host"], wrongOpened["_liveDecrypted"]), ("misnamed.test", True))
        self.assertEqual(wrongEnd["_failed"]["status"], 502)
        self.assertEqual(wrongEnd["_failed"]["reason"],
                         f"TLS with {self.world.authority('misnamed.test')} failed: certificate verify failed: "
                         f"wrong host (the certificate is not for misnamed.test; it names backend.test)")
        entry, wrong = self.har()["log"]["entries"]
        self.assertEqual((entry["response"]["httpVersion"], entry["response"]["_serverHttpVersion"]),
                         ("HTTP/1.1", "HTTP/2.0"))
        self.assertEqual(entry["response"]["content"]["text"], "hello over h2")
        self.assertIn("wrong host", wrong["_failed"]["reason"])
        self.assertNotIn("_serverHttpVersion", wrong["response"])


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
