"""
Chromium on the live web through the site proxy (supervised, as users run
it), with live hosts decrypted on demand (C{[live] decrypt}): four local TLS
origins stand for the live web, their certificates from a private CA made
here and named by C{[live] ca_file}, their names given to netlog with
C{--resolve} alone, every body kept (C{--keep-bodies all}).

 - C{page.test} (decrypted) serves a page whose script loads a script, an
   image and a C{fetch} from C{cdn.test}, posts a form to itself, and loads
   images from C{blind.test} and C{wrong.test}, then shows what loaded;
 - C{cdn.test} (decrypted) serves the script, the image and the JSON;
 - C{blind.test} is a live host C{decrypt} doesn't name: a blind tunnel,
   Chromium checking the origin's own certificate;
 - C{wrong.test} (decrypted) has a certificate for another name: netlog
   answers the browser 502, and the origin sees no request.

C{page.test} speaks HTTP/1.1 only, so netlog speaks HTTP/1.1 to it;
C{cdn.test} is C{nghttpx} (L{tests.support.nghttpx}, C{.ci/setup} installs
it) in front of a plain HTTP/1.1 origin, and picks h2 from what netlog's
ALPN offers, so netlog speaks HTTP/2 to it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import struct
import tempfile
import zlib
from typing import Any
from urllib.parse import urlsplit

import pytest
from cryptography.hazmat.primitives import serialization
from twisted.trial.unittest import SynchronousTestCase

from tests.browser import browser, procs
from tests.har.support import validate
from tests.support import freePort
from tests.support.liveorigin import Answer, Origin, makeCA, makeLeaf
from tests.support.nghttpx import startNghttpx

#: The decrypted live hosts, the blind one, and the one whose certificate
#: names another host.
PAGE_HOST, CDN_HOST, BLIND_HOST, WRONG_HOST = "page.test", "cdn.test", "blind.test", "wrong.test"

#: What the page's script shows once everything has loaded or failed.
EXPECTED_REPORT = {
    "script": "loaded: the cdn's script ran",
    "logo": "loaded 3x2",
    "api": '200 {"ok": true, "items": ["mug", "tea"]}',
    "form": "200 thanks for q=caf\u00e9",
    "blind": "loaded 1x1",
    "wrong": "failed",
}

#: Why the tunnel entry of a spare connection Chromium opened to a decrypted
#: host and dropped unused says it failed.
SPARE_CLOSED = ("the browser closed the connection during the TLS handshake",
                "the browser closed the tunnel before sending anything into it")


def png(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """
    A PNG of C{width} by C{height} pixels, all C{rgb}.
    """

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def pageHTML(cdn: str, blind: str, wrong: str) -> bytes:
    """
    C{page.test}'s page: its script loads from the origins C{cdn}, C{blind}
    and C{wrong} and shows in C{#report} what each gave.
    """
    return f"""<!doctype html><meta charset="utf-8"><title>live page</title>
<link rel="icon" href="data:,">
<pre id="report"></pre>
<script>
function load(tag, url) {{
  return new Promise(resolve => {{
    const el = document.createElement(tag);
    el.onload = () => resolve(tag === "img" ? "loaded " + el.naturalWidth + "x" + el.naturalHeight
                                            : "loaded: " + window.fromCdn);
    el.onerror = () => resolve("failed");
    el.src = url;
    document.body.appendChild(el);
  }});
}}
async function post(url, body) {{
  try {{
    const answer = await fetch(url, {{method: "POST", body, headers: {{"Content-Type": "text/plain"}}}});
    return answer.status + " " + await answer.text();
  }} catch (e) {{
    return "failed";
  }}
}}
const names = ["script", "logo", "api", "form", "blind", "wrong"];
Promise.all([
  load("script", "{cdn}/app.js"),
  load("img", "{cdn}/logo.png"),
  post("{cdn}/api/items", "order=mug&qty=2"),
  post("/form", "q=caf\u00e9"),
  load("img", "{blind}/blind.png"),
  load("img", "{wrong}/pixel.png"),
]).then(results => {{
  const report = {{}};
  names.forEach((name, i) => report[name] = results[i]);
  document.getElementById("report").textContent = JSON.stringify(report);
}});
</script>
""".encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def harDigest(content: dict[str, Any]) -> str:
    """
    The SHA-256 of the body a HAR C{content} (or C{postData}) stands for:
    of its text, or the C{_sha256} it gives for a type that isn't text.
    """
    if "text" not in content and "_sha256" in content:
        return content["_sha256"]  # type: ignore[no-any-return]
    text = content.get("text", "")
    if content.get("encoding") == "base64":
        return sha256(base64.b64decode(text))
    return sha256(text.encode("utf-8"))


def logDigest(body: dict[str, Any] | None) -> str:
    """
    The SHA-256 of the bytes a log line's C{request_body} or
    C{response.body} kept.
    """
    return sha256(base64.b64decode((body or {}).get("data", "")))


def logLines(path: str) -> list[dict[str, Any]]:
    with open(path, "rb") as f:
        return [json.loads(raw) for raw in f if raw.endswith(b"\n")]


@pytest.mark.slow
class LiveWebTests(SynchronousTestCase):
    """
    Chromium, through the supervised site proxy, on a page of live hosts
    (see the module's docstring).
    """

    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-browser-live-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        ca = makeCA("live web test CA")
        caPath = os.path.join(self.tmp, "live-ca.pem")
        with open(caPath, "wb") as f:
            f.write(ca[1].public_bytes(serialization.Encoding.PEM))
        self.origins: dict[str, Origin] = {}
        for host, names in ((PAGE_HOST, [PAGE_HOST]), (CDN_HOST, [CDN_HOST]), (BLIND_HOST, [BLIND_HOST]),
                            (WRONG_HOST, ["other.test"])):
            origin = Origin(self.tmp, host, *makeLeaf(ca, names), answers={}, plain=host == CDN_HOST)
            self.addCleanup(origin.stop)
            self.origins[host] = origin
        cdn = self.origins[CDN_HOST]
        self.cdnFront = startNghttpx(self.addCleanup, self.tmp, cdn.certPath, cdn.keyPath, cdn.port, freePort())
        self.bases = {host: f"https://{host}:{self.portOf(host)}" for host in self.origins}
        self.pageOrigin = self.bases[PAGE_HOST]
        self.origins[PAGE_HOST].answers = {
            "/": Answer(pageHTML(self.bases[CDN_HOST], self.bases[BLIND_HOST], self.bases[WRONG_HOST])),
            "/form": Answer("thanks for q=caf\u00e9".encode("utf-8"), "text/plain; charset=utf-8"),
        }
        self.origins[CDN_HOST].answers = {
            "/app.js": Answer(b'window.fromCdn = "the cdn\'s script ran";\n', "text/javascript"),
            "/logo.png": Answer(png(3, 2, (200, 30, 60)), "image/png"),
            "/api/items": Answer(b'{"ok": true, "items": ["mug", "tea"]}', "application/json",
                                 headers={"Access-Control-Allow-Origin": self.pageOrigin}),
        }
        self.origins[BLIND_HOST].answers = {"/blind.png": Answer(png(1, 1, (0, 0, 255)), "image/png")}
        self.origins[WRONG_HOST].answers = {"/pixel.png": Answer(png(1, 1, (0, 255, 0)), "image/png")}

        sites = os.path.join(self.tmp, "sites.toml")
        ports = sorted(self.portOf(host) for host in self.origins)
        with open(sites, "w", encoding="utf-8") as f:
            f.write(f"[live]\nhosts = [{json.dumps(BLIND_HOST)}]\n"
                    f"decrypt = {json.dumps([PAGE_HOST, CDN_HOST, WRONG_HOST])}\n"
                    f'ca_file = "live-ca.pem"\nconnect_ports = {ports}\n')
        resolve: list[str] = []
        for host in sorted(self.origins):
            resolve += ["--resolve", f"{host}=127.0.0.1"]
        self.proxy = procs.startSiteProxy(self.tmp, None, self.addCleanup, sitesPath=sites, httpsRoute=False,
                                          extra=("--keep-bodies", "all", *resolve))
        self.spki = procs.runNetlog(["ca", "--state", str(self.proxy.state), "--spki-only"]).stdout.decode().strip()

    def portOf(self, host: str) -> int:
        """
        The port the browser and netlog reach C{host} on: C{cdn.test}'s
        C{nghttpx}, the others' origins.
        """
        return self.cdnFront.port if host == CDN_HOST else self.origins[host].port

    def visit(self) -> tuple[dict[str, Any], dict[str, int]]:
        """
        Open C{page.test} in Chromium, through the proxy, trusting netlog's
        CA and C{blind.test}'s own certificate (it is tunnelled, not
        decrypted) by their SPKI hashes. Returns what the page showed and
        the status of each answer Chromium got, by URL.
        """
        statuses: dict[str, int] = {}

        def body(page: Any) -> dict[str, Any]:
            page.on("response", lambda response: statuses.__setitem__(response.url, response.status))
            page.goto(self.pageOrigin + "/")
            page.wait_for_function("document.getElementById('report').textContent !== ''")
            return json.loads(page.inner_text("#report"))  # type: ignore[no-any-return]

        run = browser.Run(proxy=f"http://127.0.0.1:{self.proxy.port}",
                          spkiHashes=[self.spki, browser.spkiHash(self.origins[BLIND_HOST].certPEM)])
        report = browser.withBrowser(run, body)
        procs.waitForEnds(self.proxy.log)
        return report, statuses

    def har(self) -> dict[str, Any]:
        harPath = os.path.join(self.tmp, "network.har")
        procs.runNetlog(["har", self.proxy.log, "-o", harPath])
        with open(harPath, "rb") as f:
            data = f.read()
        self.assertEqual(validate(data), [], "har-validator's verdict on netlog har")
        return json.loads(data.decode("utf-8"))  # type: ignore[no-any-return]

    def test_pageOnTheLiveWeb(self) -> None:
        """
        The page works; every request Chromium made to the decrypted hosts
        and every answer they gave is in the log and the HAR, with the bodies
        the origins got and served, marked C{_liveDecrypted}, HTTP/2 on the
        browser's side, and on the origins' HTTP/1.1 toward C{page.test} and
        HTTP/2 toward C{cdn.test}'s C{nghttpx} (which says so in its access
        log); C{blind.test} is a tunnel entry and nothing more;
        C{wrong.test}'s request got 502 naming the wrong host, and no request
        reached it.
        """
        report, statuses = self.visit()
        self.assertEqual(report, EXPECTED_REPORT, "what the page showed")
        self.assertEqual(statuses.get(self.bases[WRONG_HOST] + "/pixel.png"), 502, statuses)

        lines = logLines(self.proxy.log)
        opens = {line["id"]: line for line in lines if line["type"] == "open"}
        ends = {line["id"]: (opens[line["id"]], line) for line in lines if line["type"] == "end"}
        self.assertEqual(set(ends), set(opens), "every exchange of the log ended")
        entries = self.har()["log"]["entries"]
        byHost: dict[str, list[dict[str, Any]]] = {}
        for entry in entries:
            byHost.setdefault(urlsplit(entry["request"]["url"]).hostname or "", []).append(entry)
        self.assertEqual(set(byHost), set(self.origins), [e["request"]["url"] for e in entries])

        # The decrypted hosts: what the origins got and served, entry by
        # entry, and the protocol on each side. Chromium may open a spare
        # connection and drop it once another is up: a tunnel entry that
        # says so, and no request.
        for host in (PAGE_HOST, CDN_HOST, WRONG_HOST):
            for spare in [e for e in byHost[host] if e["request"]["method"] == "CONNECT"]:
                byHost[host].remove(spare)
                self.assertEqual(spare["request"]["url"], self.bases[host] + "/")
                self.assertIs(spare.get("_liveDecrypted"), True)
                self.assertIn(spare["_failed"]["reason"], SPARE_CLOSED)
        # netlog's side: HTTP/1.1 toward page.test, whose origin read each
        # request; HTTP/2 toward cdn.test's nghttpx, whose access log says
        # each request came over h2 (its origin behind reads HTTP/1.1 from
        # nghttpx).
        self.assertEqual({line.rsplit(" ", 1)[1] for line, _ in self.origins[PAGE_HOST].requests}, {"HTTP/1.1"},
                         f"netlog's side toward {PAGE_HOST}")
        access = self.cdnFront.access(3)
        self.assertEqual(sorted((alpn, method, path, version, status)
                                for alpn, _, method, path, version, status in access),
                         sorted(("h2", method, path, "HTTP/2", "200")
                                for method, path, _, _ in self.origins[CDN_HOST].served),
                         f"netlog's side toward {CDN_HOST}'s nghttpx")
        # What the log's end line (server_version) and the HAR's response
        # (_serverHttpVersion) say of the protocol netlog spoke to each
        # host: nothing for HTTP/1.1, the field left out (docs/log-format.rst,
        # docs/har.rst); HTTP/2 for h2.
        serverVersions = {PAGE_HOST: ({}, {}),
                          CDN_HOST: ({"server_version": "HTTP/2"}, {"_serverHttpVersion": "HTTP/2.0"})}
        for host in (PAGE_HOST, CDN_HOST):
            origin = self.origins[host]
            served = sorted((method, path, sha256(asked), sha256(answer))
                            for method, path, asked, answer in origin.served)
            inHAR = sorted((e["request"]["method"], urlsplit(e["request"]["url"]).path,
                            harDigest(e["request"].get("postData", {})), harDigest(e["response"]["content"]))
                           for e in byHost[host])
            self.assertEqual(inHAR, served, f"{host}: the HAR against what the origin got and served")
            logged = [(opened, end) for opened, end in ends.values()
                      if opened["kind"] == "exchange" and opened["server"]["host"] == host]
            inLog = sorted((opened["request"]["method"], urlsplit(opened["request"]["url"]).path,
                            logDigest(end.get("request_body")), logDigest(end["response"].get("body")))
                           for opened, end in logged)
            self.assertEqual(inLog, served, f"{host}: the log against what the origin got and served")
            logVersion, harVersion = serverVersions[host]
            for openLine, endLine in logged:
                self.assertEqual((openLine["request"]["version"], endLine["response"]["version"]),
                                 ("HTTP/2", "HTTP/2"), f"the log: Chromium's side toward {host}")
                self.assertEqual({k: v for k, v in endLine["response"].items() if k == "server_version"}, logVersion,
                                 f"the log: netlog's side toward {host}")
            for entry in byHost[host]:
                self.assertIs(entry.get("_liveDecrypted"), True, entry["request"]["url"])
                self.assertNotIn("_failed", entry)
                self.assertEqual(entry["response"]["status"], 200, entry["request"]["url"])
                self.assertEqual((entry["request"]["httpVersion"], entry["response"]["httpVersion"]),
                                 ("HTTP/2.0", "HTTP/2.0"), f"Chromium's side toward {host}")
                self.assertEqual({k: v for k, v in entry["response"].items() if k == "_serverHttpVersion"},
                                 harVersion,
                                 f"the HAR: netlog's side toward {host}")
        self.assertEqual(len(byHost[PAGE_HOST]), 2)
        self.assertEqual(len(byHost[CDN_HOST]), 3)
        (form,) = [e for e in byHost[PAGE_HOST] if e["request"]["method"] == "POST"]
        self.assertEqual(form["request"]["postData"]["text"], "q=caf\u00e9")

        # The blind tunnel: a CONNECT (one, unless Chromium opened a spare),
        # nothing of what went inside.
        self.assertEqual([line for line, _ in self.origins[BLIND_HOST].requests], ["GET /blind.png HTTP/1.1"])
        self.assertGreater(len(byHost[BLIND_HOST]), 0)
        for tunnel in byHost[BLIND_HOST]:
            self.assertEqual((tunnel["request"]["method"], tunnel["request"]["url"]),
                             ("CONNECT", self.bases[BLIND_HOST] + "/"))
            self.assertNotIn("_liveDecrypted", tunnel)
            self.assertNotIn("_failed", tunnel)

        # The wrong host: 502, the reason, and nothing past the handshake.
        (wrong,) = byHost[WRONG_HOST]
        self.assertEqual(wrong["request"]["url"], self.bases[WRONG_HOST] + "/pixel.png")
        self.assertIs(wrong.get("_liveDecrypted"), True)
        self.assertEqual(wrong["_failed"]["status"], 502)
        self.assertIn("wrong host", wrong["_failed"]["reason"])
        ((_, wrongEnd),) = [(opened, end) for opened, end in ends.values()
                            if opened["kind"] == "exchange" and opened["server"]["host"] == WRONG_HOST]
        self.assertEqual(wrongEnd["response"]["status"], 502, "the answer the log says the browser got")
        origin = self.origins[WRONG_HOST]
        self.assertGreater(origin.connections, 0, "netlog never connected to the wrong host")
        self.assertEqual((origin.handshakes, origin.requests), (0, []))

        # The log says the same: each decrypted request an exchange marked
        # _liveDecrypted, the blind host a tunnel.
        opened = list(opens.values())
        exchanges = sorted((urlsplit(line["request"]["url"]).hostname, line.get("_liveDecrypted"))
                           for line in opened if line["kind"] == "exchange")
        self.assertEqual(exchanges, sorted([(PAGE_HOST, True)] * 2 + [(CDN_HOST, True)] * 3 + [(WRONG_HOST, True)]))
        tunnels = {(urlsplit(line["request"]["url"]).hostname, line.get("_liveDecrypted"))
                   for line in opened if line["kind"] == "tunnel"}
        self.assertEqual(tunnels - {(PAGE_HOST, True), (CDN_HOST, True)}, {(BLIND_HOST, None)})
