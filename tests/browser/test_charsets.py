"""
Text as Chromium reads it. Pages in the legacy encodings real sites use, with
the characters their vendors added to the strict standards, go through the
site proxy; each HAR entry's text holds exactly what Chromium rendered. Then
Chromium's own decoder (C{TextDecoder}) and netlog's read every label and
every one- and two-byte sequence of every encoding alike.

The pages come from a small server of this file's own, the site's backend.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.core.encodings import ENCODINGS, decode, getEncoding
from tests.browser import browser, procs

BASE = "https://shop.test"


def page(body: bytes) -> bytes:
    return b"<!doctype html><html><head><title>t</title></head><body>" + body + b"</body></html>"


#: path: (Content-Type, body, the encoding Chromium should pick, the text it
#: should show).
PAGES: dict[str, tuple[str, bytes, str, str]] = {
    # Windows-31J: NEC and IBM extensions, Microsoft's mappings, half-width
    # katakana, and a lead byte that must not swallow the "A" after it
    "/shift_jis": (
        "text/html; charset=Shift_JIS",
        page("①②③、㈱、Ⅲ、髙橋さん、﨑、～∥－￢、ｱｲｳ".encode("cp932") + b"[\x82A]"),
        "Shift_JIS",
        "①②③、㈱、Ⅲ、髙橋さん、﨑、～∥－￢、ｱｲｳ[\ufffdA]",
    ),
    # GBK characters as real gb2312-labelled pages hold them, the euro, and
    # a GB18030-2022 vertical form
    "/gb2312": (
        "text/html; charset=gb2312",
        page("朱镕基、陶喆、张珺、".encode("gbk") + b"\x80\xa1\xa2\xa6\xd9"),
        "GBK",
        "朱镕基、陶喆、张珺、€、\ufe10",
    ),
    # Windows-949's Unified Hangul Code
    "/euc-kr": (
        "text/html; charset=euc-kr",
        page("똠방각하, 펲시콜라, 쀍".encode("cp949")),
        "EUC-KR",
        "똠방각하, 펲시콜라, 쀍",
    ),
    # HKSCS (Cantonese characters, an HKSCS-2008 one), the euro, U+2027
    "/big5": (
        "text/html; charset=big5",
        page("香港嘅咗啲、".encode("big5hkscs") + b"\x87\x40\xa3\xe1\xa1\x45"),
        "Big5",
        "香港嘅咗啲、\u43f0€\u2027",
    ),
    # windows-1254's quotes, dash, euro and per mille where ISO-8859-9 has
    # C1 controls
    "/iso-8859-9": (
        "text/html; charset=iso-8859-9",
        page("“Güzel” İstanbul — 5 € ‰ Şş".encode("cp1254")),
        "windows-1254",
        "“Güzel” İstanbul — 5 € ‰ Şş",
    ),
    # a label Python doesn't know, and the direction marks of the 1999 edition
    "/iso-8859-8-i": (
        "text/html; charset=ISO-8859-8-I",
        page("שלום עולם".encode("iso8859_8") + b"\xfd!\xfe"),
        "ISO-8859-8-I",
        "שלום עולם\u200e!\u200f",
    ),
    # no charset in Content-Type: the body's <meta> says it
    "/meta-euc-jp": (
        "text/html",
        b'<!doctype html><html><head><meta charset="EUC-JP"><title>t</title></head><body>'
        + "日本語、".encode("euc_jp") + b"\xad\xa1\xfc\xee\x8e\xb1</body></html>",
        "EUC-JP",
        "日本語、①黑ｱ",
    ),
    "/meta-http-equiv": (
        "text/html",
        b'<!doctype html><html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1251">'
        b"<title>t</title></head><body>" + "Привет, мир — €".encode("cp1251") + b"</body></html>",
        "windows-1251",
        "Привет, мир — €",
    ),
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        found = PAGES.get(self.path)
        if found is None:
            self.send_error(404)
            return
        contentType, body, _, _ = found
        self.send_response(200)
        self.send_header("Content-Type", contentType)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def startPages(addCleanup: Any) -> int:
    """
    Serve L{PAGES} on a free loopback port, until cleanup; returns the port.
    """
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    addCleanup(thread.join, procs.STOP_TIMEOUT)
    addCleanup(server.server_close)
    addCleanup(server.shutdown)
    return int(server.server_address[1])


@pytest.mark.slow
class CharsetPageTests(SynchronousTestCase):
    """
    Legacy-encoded pages through the site proxy, read by Chromium and by the
    HAR export.
    """

    def test_pages(self) -> None:
        """
        Chromium picks the encoding the label or C{<meta>} names and shows the
        vendors' characters; each HAR entry's C{content.text} holds exactly
        the C{document.body.innerText} Chromium rendered.
        """
        tmp = tempfile.mkdtemp(prefix="netlog-charsets-")
        self.addCleanup(shutil.rmtree, tmp, True)
        site = procs.Site(http=startPages(self.addCleanup), https=0, certPEM=b"", connLog="")
        proxy = procs.startSiteProxy(tmp, site, self.addCleanup)
        spki = procs.runNetlog(["ca", "--state", str(proxy.state), "--spki-only"]).stdout.decode().strip()

        def visit(tab: Any) -> dict[str, tuple[str, str]]:
            seen = {}
            for path in PAGES:
                tab.goto(BASE + path)
                seen[path] = (tab.evaluate("document.characterSet"), tab.evaluate("document.body.innerText"))
            return seen

        run = browser.Run(proxy=f"http://127.0.0.1:{proxy.port}", spkiHashes=[spki])
        seen = browser.withBrowser(run, visit)
        self.assertEqual(seen, {path: (p[2], p[3]) for path, p in PAGES.items()}, "what Chromium showed")

        procs.waitForEnds(proxy.log)
        harPath = os.path.join(tmp, "network.har")
        procs.runNetlog(["har", proxy.log, "-o", harPath])
        with open(harPath, encoding="utf-8") as f:
            entries = json.load(f)["log"]["entries"]
        texts = {e["request"]["url"][len(BASE):]: e["response"]["content"].get("text") for e in entries}
        for path, (_, innerText) in seen.items():
            text = texts.get(path)
            self.assertIsNotNone(text, f"no entry with text for {path}")
            self.assertIn(innerText, text, path)


def sequences(name: str) -> list[bytes]:
    """
    What L{DecoderParityTests} reads in C{name}: every byte, every pair
    (those that start past ASCII: an ASCII byte is read alone), and the
    longer sequences of the encodings that have them.
    """
    singles = [bytes((a,)) for a in range(256)]
    pairs = [bytes((a, b)) for a in range(0x80, 0x100) for b in range(256)]
    if name in ("Shift_JIS", "EUC-KR", "Big5", "UTF-8"):
        return singles + pairs
    if name in ("GBK", "gb18030"):
        return singles + pairs + [
            bytes((a, b, c, d)) for a in range(0x81, 0x85) for b in range(0x30, 0x3A)
            for c in range(0x81, 0xFF) for d in range(0x30, 0x3A)
        ] + [bytes((0x90 + a, 0x30, 0x81, 0x30)) for a in range(0x54)] + [b"\xe3\x32\x9a\x35", b"\xe3\x32\x9a\x36"]
    if name == "EUC-JP":
        return singles + pairs + [bytes((0x8F, a, b)) for a in range(0xA1, 0xFF) for b in range(0xA0, 0x100)]
    if name == "ISO-2022-JP":
        return singles + [b"\x1b$B" + bytes((a, b)) for a in range(0x20, 0x80) for b in range(0x20, 0x80)] + [
            escape + bytes((a,)) for escape in (b"\x1b(J", b"\x1b(I", b"\x1b$@", b"\x1b(B") for a in range(256)
        ]
    if name in ("UTF-16LE", "UTF-16BE"):
        units = [0x0041, 0x00E9, 0xD800, 0xDBFF, 0xDC00, 0xDFFF, 0xFFFD, 0xFEFF]
        order = "little" if name == "UTF-16LE" else "big"
        words = [u.to_bytes(2, order) for u in units]
        return singles + [a + b for a in words for b in words] + [a + b + c for a in words for b in words for c in (b"", b"\x41")]
    return singles


#: Where Chromium 156 strays from the standard, which netlog follows: it reads
#: Big5's four pairs that the standard maps to two code points each (Ê̄ Ê̌ ê̄
#: ê̌) as a C1 control and a lone surrogate.
CHROMIUM_DEVIATIONS = {"Big5": {b"\x88\x62", b"\x88\x64", b"\x88\xa3", b"\x88\xa5"}}

_DECODE_ALL = """
([encoding, hexes]) => hexes.map((hex) => {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.substr(2 * i, 2), 16);
  return new TextDecoder(encoding, {ignoreBOM: true}).decode(bytes);
})
"""

_LABELS = "(labels) => labels.map((l) => { try { return new TextDecoder(l).encoding; } catch (e) { return null; } })"


@pytest.mark.slow
class DecoderParityTests(SynchronousTestCase):
    """
    Chromium's decoder and netlog's, side by side.
    """

    def test_labels(self) -> None:
        """
        Every label of the standard names the same encoding in Chromium (the
        replacement encoding's labels it refuses, as the standard says), and
        names Python knows but the standard doesn't name none in either.
        """
        labels = [label for labels in ENCODINGS.values() for label in labels]
        labels += ["cp932", "big5hkscs", "euc_kr", "utf-32", "latin-1", " Shift_JIS\t", "x-cp1252\x0b"]
        theirs = browser.withBrowser(browser.Run(), lambda tab: tab.evaluate(_LABELS, labels))
        ours = [getEncoding(label) for label in labels]
        ours = [None if name in (None, "replacement") else name.lower() for name in ours]
        self.assertEqual(dict(zip(labels, ours)), dict(zip(labels, theirs)))

    def test_sequences(self) -> None:
        """
        Every byte and byte pair of every encoding (with GB18030's four-byte
        BMP sequences, EUC-JP's JIS X 0212 ones, ISO-2022-JP's JIS X 0208
        ones) reads the same in Chromium's decoder as in netlog's, errors
        included: about 380,000 sequences.
        """
        names = [name for name in ENCODINGS if name != "replacement"]
        work = {name: sequences(name) for name in names}

        def readAll(tab: Any) -> dict[str, list[str]]:
            return {name: tab.evaluate(_DECODE_ALL, [name, [s.hex() for s in seqs]]) for name, seqs in work.items()}

        theirs = browser.withBrowser(browser.Run(), readAll)
        for name, seqs in work.items():
            skip = CHROMIUM_DEVIATIONS.get(name, set())
            differ = [
                (s.hex(), decode(s, name)[0], read)
                for s, read in zip(seqs, theirs[name])
                if s not in skip and decode(s, name)[0] != read
            ]
            self.assertEqual(differ[:10], [], f"{name}: {len(differ)} of {len(seqs)} differ")
