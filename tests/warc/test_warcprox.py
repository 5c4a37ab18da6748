"""
A WARC written by warcprox, the archiving world's recording proxy, as a
recording for netlog: real warcprox (from its side environment,
C{.ci/warcprox/.venv}) records the test site's answers on loopback, over
HTTP and over HTTPS, then a real C{twistd netlog-proxy --replay} on the
WARC it wrote answers the same requests with the same statuses, fields and
bodies, and the site accepts no connection from it.
"""

from __future__ import annotations

import glob
import http.client
import json
import os
import ssl
import time
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from tests.browser import procs
from tests.support import REPO, freePort

WARCPROX_PYTHON = os.path.join(REPO, ".ci", "warcprox", ".venv", "bin", "python")
RUN_WARCPROX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_warcprox.py")
FORM = "application/x-www-form-urlencoded"
#: The requests made, each through warcprox then through netlog: method,
#: path, extra fields, body. Among the answers: an HTML page, a binary
#: image, a brotli page, a text past netlog's own 1 MB body limit, a form
#: POST answered by a redirect with a cookie, a page that sets one, and a
#: JSON POST answered gzipped and chunked.
STEPS: list[tuple[str, str, list[tuple[str, str]], bytes]] = [
    ("GET", "/", [], b""),
    ("GET", "/logo.png", [], b""),
    ("GET", "/news", [("Accept-Encoding", "br")], b""),
    ("GET", "/big.txt", [], b""),
    ("POST", "/login", [("Content-Type", FORM)], b"username=alice&password=pw"),
    ("GET", "/account", [("Cookie", "session=alice%7C42")], b""),
    ("POST", "/api/cart", [("Content-Type", "application/json")], b'{"item":"mug","qty":2}'),
    ("POST", "/api/cart", [("Content-Type", "application/json")], b'{"item":"cup","qty":3}'),
    ("GET", "/search?q=shoes&page=2", [], b""),
]
#: Fields that belong to one hop, not to the answer (RFC 9110, 7.6.1), and
#: warcprox's own C{Via}: what a proxy may change. The rest, C{Date} and
#: C{Server} among them, must be the site's as warcprox got them.
HOP_FIELDS = {"connection", "keep-alive", "proxy-connection", "te", "trailer", "upgrade", "via"}
#: How long the site may take to log a connection that has ended (seconds).
SETTLE = 1.0

Answer = tuple[int, list[tuple[str, str]], bytes]


def warcproxMissing() -> str | None:
    """
    Why warcprox can't run here, or C{None}. CI installs it (C{.ci/setup}
    runs C{.ci/install.d/45-warcprox.sh}), so there its absence fails the
    test; on a developer's machine without it, the test is skipped.
    """
    if os.path.exists(WARCPROX_PYTHON):
        return None
    why = f"warcprox's side environment {os.path.dirname(os.path.dirname(WARCPROX_PYTHON))} is missing"
    if os.environ.get("CI"):
        raise AssertionError(why + " (.ci/setup installs it)")
    return why + ": run .ci/install.d/45-warcprox.sh"


def fetch(proxyPort: int, origin: str, tls: ssl.SSLContext | None = None) -> list[Answer]:
    """
    Make each of L{STEPS} through the HTTP proxy on C{proxyPort}, one
    connection each (warcprox closes each): status, fields in order, body
    with its transfer coding undone and its content coding kept. An
    C{https:} origin is asked in a C{CONNECT} tunnel, over TLS with
    C{tls} (which trusts the proxy's CA).
    """
    answers = []
    host, port = origin.split("://")[1].split(":")
    for method, path, fields, body in STEPS:
        connection: http.client.HTTPConnection
        if tls is not None:
            connection = http.client.HTTPSConnection("127.0.0.1", proxyPort, timeout=30, context=tls)
            connection.set_tunnel(host, int(port))
            target = path
        else:
            connection = http.client.HTTPConnection("127.0.0.1", proxyPort, timeout=30)
            target = origin + path
        try:
            connection.request(method, target, body=body or None, headers=dict(fields))
            answer = connection.getresponse()
            answers.append((answer.status, answer.getheaders(), answer.read()))
        finally:
            connection.close()
    return answers


def trusting(caPath: str, checkName: bool = True) -> ssl.SSLContext:
    """
    A client's TLS that trusts the proxy's CA (in C{caPath}) alone, and
    (with C{checkName}) checks the name its certificate is for: here an
    address, which warcprox's certificates don't name (it mints them for
    names only), and netlog's do.
    """
    context = ssl.create_default_context(cafile=caPath)
    context.check_hostname = checkName
    context.set_alpn_protocols(["http/1.1"])
    return context


def endToEnd(fields: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """
    An answer's fields less L{HOP_FIELDS} and its framing (C{Content-Length}
    or C{Transfer-Encoding}: how the body is carried, which a replay
    chooses again), names in lower case, in order.
    """
    framing = HOP_FIELDS | {"content-length", "transfer-encoding"}
    return [(name.lower(), value) for name, value in fields if name.lower() not in framing]


def framing(fields: list[tuple[str, str]]) -> tuple[str | None, str | None]:
    """
    An answer's C{Content-Length} and C{Transfer-Encoding}.
    """
    found = {name.lower(): value for name, value in fields}
    return found.get("content-length"), found.get("transfer-encoding")


def settledConnections(site: procs.Site) -> int:
    """
    How many connections the site has logged, once none has been added for
    L{SETTLE} seconds (a connection is logged when it ends, just after its
    client went away).
    """
    deadline = time.monotonic() + procs.START_TIMEOUT
    count = len(site.connections())
    while time.monotonic() < deadline:
        time.sleep(SETTLE)
        now = len(site.connections())
        if now == count:
            return count
        count = now
    raise AssertionError(f"the site kept logging connections for {procs.START_TIMEOUT}s")


def startWarcprox(directory: str, addCleanup: Any, gzip: bool) -> tuple[int, Any]:
    """
    warcprox on a free loopback port, writing WARCs (gzipped, a member per
    record, with C{gzip}; else plain, its default) into C{directory}/warcs,
    its CA and certificates in C{directory}, with no deduplication (each
    capture a whole response, not a revisit) and no statistics database:
    its port and process.
    """
    port = freePort()
    out = os.path.join(directory, "warcprox.out")
    proc = procs.start(
        [WARCPROX_PYTHON, RUN_WARCPROX, "--address", "127.0.0.1", "--port", str(port),
         "--dir", os.path.join(directory, "warcs"), *(["--gzip"] if gzip else []),
         "--cacert", os.path.join(directory, "warcprox-ca.pem"), "--certs-dir", os.path.join(directory, "certs"),
         "--dedup-db-file", "", "--stats-db-file", ""],
        addCleanup, out, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    procs.waitForPort(port, proc, out)
    return port, proc


@pytest.mark.slow
class WarcproxRecordingTests(SynchronousTestCase):
    def setUp(self) -> None:
        why = warcproxMissing()
        if why is not None:
            raise self.skipTest(why)  # type: ignore[misc]

    def test_gzipped(self) -> None:
        """
        A gzipped WARC warcprox wrote (C{--gzip}) replays: see L{replay}.
        """
        self.replay(gzip=True)

    def test_plain(self) -> None:
        """
        A plain WARC, as warcprox writes by default, replays: see
        L{replay}.
        """
        self.replay(gzip=False)

    def test_https(self) -> None:
        """
        The site over HTTPS, through warcprox's decrypting tunnels, then
        netlog's: its WARC (C{https:} URLs) replays: see L{replay}.
        """
        self.replay(gzip=True, https=True)

    def replay(self, gzip: bool, https: bool = False) -> None:
        """
        A WARC warcprox wrote of the site's answers, given to C{twistd
        netlog-proxy --replay}: every request gets the status, the
        end-to-end fields in order (C{Date}, C{Server}, C{Location},
        C{Set-Cookie}, C{Content-Type}, C{Content-Encoding} among them) and
        the body byte for byte that warcprox's client got (the image's
        bytes, the brotli and gzip codings kept, the 1.2 MB text whole, the
        chunked JSON de-chunked), framed as recorded (a length where the
        site gave one, chunked where it chunked); each exchange in netlog's
        log is marked replayed from its response record, from the server
        warcprox fetched it from; netlog says at start how many answers the
        WARC holds; and the site accepts no connection from netlog.
        """
        top = os.path.abspath(self.mktemp())
        os.makedirs(top)
        site = procs.startSite(top, self.addCleanup)
        origin = f"https://127.0.0.1:{site.https}" if https else f"http://127.0.0.1:{site.http}"
        port, warcprox = startWarcprox(top, self.addCleanup, gzip)
        recorded = fetch(port, origin, trusting(os.path.join(top, "warcprox-ca.pem"), checkName=False) if https else None)
        procs.stop(warcprox)
        self.assertEqual(warcprox.returncode, 0, procs.readTail(os.path.join(top, "warcprox.out")))
        self.assertEqual([status for status, _, _ in recorded], [200, 200, 200, 200, 302, 200, 200, 200, 200])
        warcs = glob.glob(os.path.join(top, "warcs", "*"))
        self.assertEqual(len(warcs), 1, warcs)
        self.assertTrue(warcs[0].endswith(".warc.gz" if gzip else ".warc"), warcs)  # (closed: no .open)
        before = settledConnections(site)
        self.assertGreater(before, 0)

        directory = os.path.join(top, "replay")
        os.makedirs(directory)
        sites = procs.writeSites(directory, site, origins=(origin,))
        proxy = procs.startSiteProxy(directory, site, self.addCleanup, sitesPath=sites, httpsRoute=False,
                                     extra=("--replay", warcs[0]))
        assert proxy.state is not None
        replayed = fetch(proxy.port, origin, trusting(os.path.join(proxy.state, "ca.pem")) if https else None)
        procs.waitForEnds(proxy.log)
        procs.stop(proxy.proc)

        for (method, path, _, _), (wasStatus, wasFields, wasBody), (status, fields, body) in zip(
                STEPS, recorded, replayed):
            self.assertEqual(status, wasStatus, (method, path))
            self.assertEqual(body, wasBody, (method, path))
            self.assertEqual(endToEnd(fields), endToEnd(wasFields), (method, path))
            self.assertEqual(framing(fields), framing(wasFields), (method, path))
        self.assertEqual(len(replayed[3][2]), 1_200_000)
        self.assertTrue(replayed[1][2].startswith(b"\x89PNG\r\n"))
        self.assertEqual(settledConnections(site), before, "the replay connected to the site")
        with open(proxy.log, "rb") as f:
            ends = [json.loads(line) for line in f if b'"type":"end"' in line]
        self.assertEqual(len(ends), len(STEPS))
        self.assertTrue(all(isinstance(end.get("_replayed"), int) for end in ends), ends)
        # (the server warcprox fetched from: its WARC-IP-Address)
        self.assertEqual({end["_replayedServer"]["address"] for end in ends}, {"127.0.0.1"})
        with open(os.path.join(directory, "netlog-proxy.twistd.log"), encoding="utf-8") as f:
            self.assertIn(f"answered from {warcs[0]} ({len(STEPS)} recorded answers)", f.read())
