"""
C{GET /network.warc.gz} and C{GET /sessions/NAME/network.warc.gz} on a real
C{twistd netlog-proxy} keeping every body, through the client's
C{save_warc}: each log's own exchanges, as archived records.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import urllib.request

import pytest
from twisted.trial.unittest import SynchronousTestCase

from netlog.client import Netlog
from netlog.state import TOKEN_FILE
from tests.browser import procs
from tests.client.support import get
from tests.warc.support import readWarc

SITE = "http://shop.test"


@pytest.mark.slow
class WarcApiTests(SynchronousTestCase):
    def setUp(self) -> None:
        self.tmp = tempfile.mkdtemp(prefix="netlog-warc-api-")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        site = procs.startSite(self.tmp, self.addCleanup)
        directory = os.path.join(self.tmp, "proxy")
        os.makedirs(directory)
        sites = procs.writeSites(directory, site, (SITE,))
        self.proxy = procs.startSiteProxy(directory, site, self.addCleanup, api=True, sitesPath=sites,
                                          httpsRoute=False, extra=("--keep-bodies", "all"))
        with open(os.path.join(str(self.proxy.state), TOKEN_FILE)) as f:
            self.client = Netlog(f"http://127.0.0.1:{self.proxy.apiPort}", token=f.read().strip())

    def saved(self, save: object, name: str) -> dict[str, bytes]:
        """
        Call C{save(path)}; the response records' payloads by URL.
        """
        path = os.path.join(self.tmp, name)
        self.assertGreater(save(path), 0)  # type: ignore[operator]
        self.assertFalse(os.path.exists(path + ".part"))
        with open(path, "rb") as f:
            records = readWarc(f.read())
        self.assertEqual(records[0].type, "warcinfo")
        return {r.fields["WARC-Target-URI"]: r.payload for r in records if r.type == "response"}

    def test_mainAndSession(self) -> None:
        """
        A session's WARC holds its exchanges with their bodies, the main
        log's its own; the answer is named network.warc.gz and typed
        application/warc.
        """
        with self.client as nl:
            session = nl.create_session("task-1")
            self.assertEqual(get(session.proxy, SITE + "/"), 200)
            self.assertEqual(get(session.proxy, SITE + "/logo.png"), 200)
            self.assertEqual(get(f"http://127.0.0.1:{self.proxy.port}", SITE + "/latin1"), 200)
            self.assertTrue(session.wait_ended())
            procs.waitForEnds(self.proxy.log)

            inSession = self.saved(session.save_warc, "task-1.warc.gz")
            self.assertEqual(sorted(inSession), [SITE + "/", SITE + "/logo.png"])
            self.assertIn(b"Netlog test shop", inSession[SITE + "/"])
            self.assertTrue(inSession[SITE + "/logo.png"].startswith(b"\x89PNG\r\n\x1a\n"))
            main = self.saved(nl.save_warc, "main.warc.gz")
            self.assertEqual(sorted(main), [SITE + "/latin1"])

        with urllib.request.urlopen(f"http://127.0.0.1:{self.proxy.apiPort}/network.warc.gz", timeout=30) as r:
            self.assertEqual(r.headers["Content-Type"], "application/warc")
            self.assertIn('filename="network.warc.gz"', r.headers["Content-Disposition"])
            self.assertEqual(r.read(2), b"\x1f\x8b")
