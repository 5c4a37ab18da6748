"""
The example's fixtures: a small shop on loopback for the tests to visit, and
pytest-playwright's C{context} routed through the test's netlog session.
"""

from __future__ import annotations

import http.server
import json
import os
import shlex
import threading
from typing import Any, Iterator
from urllib.parse import parse_qs, urlsplit

import pytest

#: The shop's name: give netlog C{--resolve shop.test=127.0.0.1}.
SHOP = "shop.test"
ITEMS = ["mug", "tea towel", "travel mug", "teaspoon"]
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>Shop</title></head>
<body><h1>Search</h1><ul id="results"></ul>
<script>
const q = new URLSearchParams(location.search).get("q") || "";
fetch("/api/items?q=" + encodeURIComponent(q)).then(r => r.json()).then(items => {
  for (const item of items) {
    const li = document.createElement("li");
    li.textContent = item;
    document.getElementById("results").append(li);
  }
});
</script></body></html>
"""


class _Shop(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/api/items":
            q = parse_qs(url.query).get("q", [""])[0]
            body, kind = json.dumps([i for i in ITEMS if q and q in i]).encode(), "application/json"
        else:
            body, kind = PAGE.encode(), "text/html; charset=utf-8"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="session")
def shop() -> Iterator[str]:
    """
    The shop's origin, C{http://shop.test:PORT}.
    """
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Shop)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://{SHOP}:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def context(netlog_session: Any, new_context: Any) -> Any:
    """
    Each test's browser context through its own netlog session.
    C{netlog_session} comes first: fixtures end in the reverse order, so the
    context is closed (its connections end) before its HAR is saved.
    """
    return new_context(proxy={"server": netlog_session.proxy})


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """
    A placeholder launch proxy that each context overrides (some Playwright
    releases need one for a context's proxy to apply with Chromium), and a
    Chromium of the system's if C{CHROMIUM} names one (C{CHROMIUM_FLAGS}
    its flags).
    """
    args = dict(browser_type_launch_args, proxy={"server": "http://per-context"})
    if os.environ.get("CHROMIUM"):
        args["executable_path"] = os.environ["CHROMIUM"]
    if os.environ.get("CHROMIUM_FLAGS"):
        args["args"] = shlex.split(os.environ["CHROMIUM_FLAGS"])
    return args
