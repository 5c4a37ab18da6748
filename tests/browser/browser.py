"""
Drive Debian's Chromium with Python Playwright the way our users run it behind
netlog, and walk the test site as a person would.

Chromium is C{/usr/bin/chromium} (installed by C{.ci/setup}); Playwright's own
browser downloads are never used. The flags are the ones
C{docs/browser-testing.rst} tells users to pass.
"""

from __future__ import annotations

import base64
import hashlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterator

from tests.browser import site_app

#: Debian's Chromium.
CHROMIUM = "/usr/bin/chromium"

#: Flags for a quiet, reproducible, root-run headless Chromium.
BASE_FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)

#: Google's background hosts go around the proxy, so that (with every name
#: mapped to NOTFOUND) they fail inside the browser instead of filling the log.
GOOGLE_BYPASS = (
    "*.google.com",
    "google.com",
    "*.googleapis.com",
    "*.gstatic.com",
    "*.gvt1.com",
    "*.googleusercontent.com",
    "*.doubleclick.net",
)

#: How long one Playwright action or wait may take (ms).
ACTION_TIMEOUT_MS = 20_000

#: What the scenario types and uploads.
USER = "alice"
PASSWORD = "s3cret pass+word&"
SEARCH = "café & crème 100% + more"
UPLOAD_TITLE = "Holiday photos"
UPLOAD_NAME = "notes.txt"
UPLOAD_BODY = "Shopping list: mug, café, tea".encode("utf-8")
CART_ORDER = {"item": "mug", "qty": 2, "note": "gift wrap ✓"}


def spkiHash(certPEM: bytes) -> str:
    """
    The value C{--ignore-certificate-errors-spki-list} takes for a
    certificate: base64 of the SHA-256 of its DER SubjectPublicKeyInfo.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_pem_x509_certificate(certPEM)
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return base64.b64encode(hashlib.sha256(spki).digest()).decode("ascii")


def resolverRules(maps: dict[str, str] | None = None) -> str:
    """
    C{--host-resolver-rules}: every name NOTFOUND (so Chromium looks nothing
    up in DNS) except loopback, after C{maps} (C{{"shop.test":
    "127.0.0.1:8443"}}), which come first because the first matching MAP wins.
    """
    rules = [f"MAP {host} {target}" for host, target in (maps or {}).items()]
    rules += ["MAP * ~NOTFOUND", "EXCLUDE 127.0.0.1", "EXCLUDE localhost"]
    return ", ".join(rules)


def chromiumArgs(spkiHashes: list[str] | None = None, maps: dict[str, str] | None = None) -> list[str]:
    """
    Every Chromium flag for one run.
    """
    args = list(BASE_FLAGS)
    args.append("--host-resolver-rules=" + resolverRules(maps))
    if spkiHashes:
        args.append("--ignore-certificate-errors-spki-list=" + ",".join(spkiHashes))
    return args


@dataclass
class Run:
    """
    How to run Chromium once: through which proxy (C{http://127.0.0.1:PORT}
    or None), trusting which SPKI hashes, with which names mapped, and where
    Playwright writes its own HAR (None: no HAR), and which hosts it reaches
    without the proxy besides Google's (C{127.0.0.1}: loopback directly, as
    Chromium does by default and Playwright does not unless told).
    """

    proxy: str | None = None
    spkiHashes: list[str] = field(default_factory=list)
    maps: dict[str, str] = field(default_factory=dict)
    harPath: str | None = None
    bypass: list[str] = field(default_factory=list)


def withBrowser(run: Run, body: Any) -> Any:
    """
    Launch Chromium for C{run}, call C{body(page)} in a fresh context, close
    everything (which writes Playwright's HAR), and return what C{body}
    returned.
    """
    from playwright.sync_api import sync_playwright

    launch: dict[str, Any] = {
        "executable_path": CHROMIUM,
        "headless": True,
        "args": chromiumArgs(run.spkiHashes, run.maps),
    }
    if run.proxy is not None:
        launch["proxy"] = {"server": run.proxy, "bypass": ",".join([*GOOGLE_BYPASS, *run.bypass])}
    contextOptions: dict[str, Any] = {}
    if run.harPath is not None:
        contextOptions.update(record_har_path=run.harPath, record_har_content="embed")
    with sync_playwright() as p:
        browser = p.chromium.launch(**launch)
        try:
            context = browser.new_context(**contextOptions)
            context.set_default_timeout(ACTION_TIMEOUT_MS)
            try:
                page = context.new_page()
                result = body(page)
            finally:
                context.close()
        finally:
            browser.close()
    return result


@contextmanager
def pagesThrough(proxies: dict[str, str]) -> Iterator[dict[str, Any]]:
    """
    One Chromium with a context of its own per proxy (each a netlog
    session's C{proxy} URL, by name) and a page in each, as several agents
    share a browser; the pages by name, everything closed after.
    """
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=chromiumArgs(), proxy={"server": "http://per-context"},
        )
        try:
            pages = {}
            for name, proxy in proxies.items():
                context = chromium.new_context(proxy={"server": proxy})
                context.set_default_timeout(ACTION_TIMEOUT_MS)
                pages[name] = context.new_page()
            yield pages
            for page in pages.values():
                page.context.close()
        finally:
            chromium.close()


def shopScenario(page: Any, base: str, webSocket: bool = True) -> dict[str, Any]:
    """
    Walk the test site at C{base} (C{https://shop.test}) as a person would:
    sign in through the form, add to the cart, upload a file, open each page,
    chat over the WebSocket (unless not C{webSocket}), search. Returns what
    the pages showed.
    """
    seen: dict[str, Any] = {}
    page.goto(base + "/")
    page.click("#to-login")
    page.wait_for_url(base + "/login")
    page.locator("#username").press_sequentially(USER)
    page.locator("#password").press_sequentially(PASSWORD)
    page.click("#submit")
    page.wait_for_url(base + "/account")
    seen["account"] = page.inner_text("#who")

    page.goto(base + "/cart")
    page.click("#add")
    page.wait_for_function("document.getElementById('result').textContent.startsWith('ok')")
    seen["cart"] = page.inner_text("#result")

    page.goto(base + "/upload")
    page.locator("#title").press_sequentially(UPLOAD_TITLE)
    page.set_input_files("#file", {"name": UPLOAD_NAME, "mimeType": "text/plain", "buffer": UPLOAD_BODY})
    page.click("#send")
    page.wait_for_selector("#fields")
    seen["upload"] = page.inner_text("#fields")

    page.goto(base + "/latin1")
    seen["latin1"] = page.inner_text("#words")

    page.goto(base + "/big.txt")
    seen["big"] = len(page.evaluate("document.body.innerText"))

    page.goto(base + "/news")
    seen["news"] = page.locator("#news li").count()

    if webSocket:
        page.goto(base + "/chat")
        page.wait_for_function("document.getElementById('status').textContent.startsWith('closed')")
        seen["chat"] = page.inner_text("#status")

    page.goto(base + "/")
    page.locator("#q").press_sequentially(SEARCH)
    page.click("#go")
    page.wait_for_url(base + "/search?**")
    seen["search"] = page.inner_text("#query")
    seen["searchURL"] = page.url
    return seen


def expectedSeen() -> dict[str, Any]:
    """
    What L{shopScenario} returns when every page worked (but C{searchURL}).
    """
    return {
        "account": f"Signed in as {USER}",
        "cart": f"ok 6.00 {site_app.CART_NOTE}",
        "upload": f"title: {UPLOAD_TITLE}\nfile: file {UPLOAD_NAME}, {len(UPLOAD_BODY)} bytes",
        "latin1": site_app.LATIN1_WORDS,
        "big": site_app.BIG_SIZE,
        "news": 40,
        "chat": 'closed 1000 sent=3 received=3 ["hello netlog","bytes:0,1,2,254,255","'
        + "".join(site_app.FRAGMENTS)
        + '"]',
        "search": SEARCH,
    }


def openWebScenario(page: Any, httpBase: str, httpsBase: str, unreachable: list[str]) -> dict[str, Any]:
    """
    The open-web pattern, for the stand-in: sign in over plain HTTP at
    C{httpBase}, then use the HTTPS site at C{httpsBase} (cart, big text,
    chat), then try each of C{unreachable} (destinations the proxy turns down
    or can't reach). Returns what the pages showed and, for each unreachable
    URL, the error Chromium gave.
    """
    seen: dict[str, Any] = {}
    page.goto(httpBase + "/")
    page.click("#to-login")
    page.wait_for_url(httpBase + "/login")
    page.locator("#username").press_sequentially(USER)
    page.locator("#password").press_sequentially(PASSWORD)
    page.click("#submit")
    page.wait_for_url(httpBase + "/account")
    seen["account"] = page.inner_text("#who")

    page.goto(httpsBase + "/cart")
    page.click("#add")
    page.wait_for_function("document.getElementById('result').textContent.startsWith('ok')")
    seen["cart"] = page.inner_text("#result")
    page.goto(httpsBase + "/big.txt")
    seen["big"] = len(page.evaluate("document.body.innerText"))
    page.goto(httpsBase + "/chat")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('closed')")
    seen["chat"] = page.inner_text("#status")

    from playwright.sync_api import Error

    errors: dict[str, str | None] = {}
    for url in unreachable:
        try:
            page.goto(url)
            errors[url] = None
        except Error as e:  # the navigation failed, as it should
            errors[url] = str(e).splitlines()[0]
    seen["errors"] = errors
    return seen
