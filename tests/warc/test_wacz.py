"""
C{netlog wacz LOG -o out.wacz}: a WACZ 1.1.1 package that py-wacz's own
C{wacz validate} accepts, with the WARC stored, its index, the top-level
navigations as pages, and every file's hash in datapackage.json.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import subprocess
import zipfile

from twisted.trial.unittest import SynchronousTestCase

from tests.browser.procs import runNetlog
from tests.har.support import T0, Log
from tests.standin.support import tempDirectory
from tests.warc.support import pywbTool, readWarc

NAVIGATE = [("Host", "shop.test"), ("Sec-Fetch-Dest", "document"), ("Sec-Fetch-Mode", "navigate"),
            ("Accept", "text/html")]
PAGE = b"<!doctype html><title>The shop</title><img src=/logo.png>"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(64)


def shopLog() -> bytes:
    """
    A navigation, its image, a fetch of JSON and a second navigation.
    """
    log = Log()
    a = log.open(url="https://shop.test/", headers=NAVIGATE)
    log.end(a, headers=[("Content-Type", "text/html")], body=PAGE)
    b = log.open(url="https://shop.test/logo.png", started=T0 + 0.2,
                 headers=[("Host", "shop.test"), ("Sec-Fetch-Dest", "image"), ("Sec-Fetch-Mode", "no-cors")])
    log.end(b, headers=[("Content-Type", "image/png")], body=PNG)
    c = log.open(method="POST", url="https://shop.test/api/cart", started=T0 + 0.4,
                 headers=[("Host", "shop.test"), ("Sec-Fetch-Dest", "empty"), ("Content-Type", "application/json")])
    log.end(c, headers=[("Content-Type", "application/json")], body=b'{"ok":true}', requestBody=b'{"item":1}')
    d = log.open(url="https://shop.test/cart", started=T0 + 1, headers=NAVIGATE)
    log.end(d, headers=[("Content-Type", "text/html")], body=b"<html>cart</html>")
    return log.bytes()


class WaczTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.folder = tempDirectory(self)
        self.log = os.path.join(self.folder, "network.jsonl")
        with open(self.log, "wb") as f:
            f.write(shopLog())
        self.wacz = os.path.join(self.folder, "shop.wacz")
        self.done = runNetlog(["wacz", self.log, "-o", self.wacz])

    def test_validates(self) -> None:
        """
        py-wacz's validator accepts the package (its files, their hashes,
        the datapackage's schema, the pages' form).
        """
        checked = subprocess.run([pywbTool("wacz"), "validate", "-f", self.wacz], capture_output=True,
                                 timeout=120)
        output = checked.stdout.decode() + checked.stderr.decode()
        self.assertEqual(checked.returncode, 0, output)
        self.assertIn("Validation succeeded", output)

    def test_contents(self) -> None:
        """
        The WARC is stored (not deflated) and holds every exchange; the
        index has a line per response; the pages are the two navigations,
        with the first's title; datapackage.json has each file's sha256 and
        size; the command says what went in and leaves no work files.
        """
        self.assertEqual(self.done.stderr.decode().strip(), "netlog wacz: 4 exchanges in 9 records")
        self.assertEqual(sorted(os.listdir(self.folder)), ["network.jsonl", "shop.wacz"])
        with zipfile.ZipFile(self.wacz) as package:
            self.assertEqual(package.namelist(), ["archive/data.warc.gz", "indexes/index.cdx", "pages/pages.jsonl",
                                                  "datapackage.json", "datapackage-digest.json"])
            self.assertEqual(package.getinfo("archive/data.warc.gz").compress_type, zipfile.ZIP_STORED)
            files = {name: package.read(name) for name in package.namelist()}
        records = readWarc(files["archive/data.warc.gz"])
        self.assertEqual(len([r for r in records if r.type == "response"]), 4)
        self.assertEqual(gzip.decompress(files["archive/data.warc.gz"])[:8], b"WARC/1.1")
        index = files["indexes/index.cdx"].decode().splitlines()
        self.assertEqual(len(index), 4)
        self.assertEqual(index, sorted(index))
        self.assertTrue(any(line.startswith("test,shop)/logo.png ") for line in index), index)
        pages = [json.loads(line) for line in files["pages/pages.jsonl"].splitlines()]
        self.assertEqual(pages[0], {"format": "json-pages-1.0", "id": "pages", "title": "All Pages"})
        self.assertEqual([(p["url"], p["ts"], p.get("title")) for p in pages[1:]], [
            ("https://shop.test/", "2026-01-01T00:00:00Z", "The shop"),
            ("https://shop.test/cart", "2026-01-01T00:00:01Z", None),
        ])
        datapackage = json.loads(files["datapackage.json"])
        self.assertEqual(datapackage["wacz_version"], "1.1.1")
        for resource in datapackage["resources"]:
            data = files[resource["path"]]
            self.assertEqual(resource["hash"], "sha256:" + hashlib.sha256(data).hexdigest())
            self.assertEqual(resource["bytes"], len(data))
        digest = json.loads(files["datapackage-digest.json"])
        self.assertEqual(digest["hash"], "sha256:" + hashlib.sha256(files["datapackage.json"]).hexdigest())
