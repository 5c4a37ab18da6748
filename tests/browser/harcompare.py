"""
Compare netlog's HAR with Playwright's HAR of the same browser session, entry
by entry, and say for every difference either why netlog's is right (an
L{Explained}) or that it is wrong (a problem naming the entry and the field).

Playwright's HAR comes from Chromium's DevTools, so it sees what the page saw;
netlog sees what passed on the wire. Where they legitimately differ, the rule
that accepts the difference says why here, once.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
from collections import Counter
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

#: How much of a differing value a problem shows.
SHOW_CHARS = 160

#: The reasons a difference is accepted, by kind.
WHY = {
    "multipart-body": (
        "Playwright records no body for a multipart upload (DevTools hands it none); "
        "netlog keeps the bytes the browser sent, so a grader can read the form's fields"
    ),
    "redirect-body": (
        "Chromium gives DevTools no body for a redirect; netlog keeps the body the "
        "server sent with the 3xx"
    ),
    "truncated-text": (
        "netlog keeps the first 1 MB of an answer (its documented limit) and marks the "
        "entry _truncated; what it keeps is exactly the start of what the page got"
    ),
    "favicon": (
        "Chromium asks for /favicon.ico itself, outside the page, so Playwright (which "
        "records the page's requests) has no entry for it; netlog records every request "
        "the browser sent"
    ),
    "binary-digest": (
        "netlog keeps a binary answer as its size and _sha256, not its bytes; the "
        "digest is that of the bytes Playwright recorded"
    ),
}


@dataclass(frozen=True)
class Explained:
    """
    A difference that is right, and why.
    """

    index: int
    label: str
    field: str
    kind: str

    def __str__(self) -> str:
        return f"entry {self.index} ({self.label}) {self.field}: {WHY[self.kind]}"


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOW_CHARS else text[:SHOW_CHARS] + f"... ({len(text)} chars)"


def textDifference(ours: str, theirs: str) -> str:
    """
    Where two texts first differ, with a little of each around it.
    """
    at = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))
    return (
        f"first differ at char {at} (ours {len(ours)} chars, Playwright's {len(theirs)}): "
        f"ours {show(ours[max(0, at - 20) : at + 40])}, Playwright's {show(theirs[max(0, at - 20) : at + 40])}"
    )


def label(entry: dict[str, Any]) -> str:
    return f"{entry['request']['method']} {entry['request']['url']}"


def headerCounts(headers: list[dict[str, str]]) -> Counter[tuple[str, str]]:
    return Counter((h["name"].lower(), h["value"]) for h in headers)


def cookieView(cookies: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """
    The parts of a response's cookies both HARs must agree on; C{expires} as
    an instant, so that C{.000Z} and C{Z} spellings compare equal.
    """
    out = []
    for c in cookies:
        expires = c.get("expires")
        when = None
        if expires:
            when = datetime.datetime.fromisoformat(str(expires).replace("Z", "+00:00")).timestamp()
        out.append(
            (c["name"], c["value"], c.get("path"), c.get("domain"), bool(c.get("httpOnly")), bool(c.get("secure")), when)
        )
    return sorted(out, key=repr)


class Comparison:
    """
    One comparison: C{problems} (strings naming entry and field) and
    C{explained}.
    """

    def __init__(self, ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> None:
        self.problems: list[str] = []
        self.explained: list[Explained] = []
        self.ours = ours
        self.theirs = theirs
        self._compare()

    def report(self) -> str:
        lines = [f"{len(self.problems)} difference(s) between netlog's HAR and Playwright's:"]
        lines += ["  " + p for p in self.problems]
        if self.explained:
            lines.append("accepted differences:")
            lines += ["  " + str(e) for e in self.explained]
        return "\n".join(lines)

    def kinds(self) -> Counter[tuple[str, str]]:
        """
        Which accepted differences were met, by (label, kind).
        """
        return Counter((e.label, e.kind) for e in self.explained)

    def _problem(self, index: int, entry: dict[str, Any], field: str, message: str) -> None:
        self.problems.append(f"entry {index} ({label(entry)}) {field}: {message}")

    def _compare(self) -> None:
        ours = list(enumerate(self.ours))
        if not any(urlsplit(e["request"]["url"]).path == "/favicon.ico" for e in self.theirs):
            kept = []
            for index, e in ours:
                if e["request"]["method"] == "GET" and urlsplit(e["request"]["url"]).path == "/favicon.ico":
                    self.explained.append(Explained(index, label(e), "entry", "favicon"))
                else:
                    kept.append((index, e))
            ours = kept
        oursKeys = [(e["request"]["method"], e["request"]["url"]) for _, e in ours]
        theirsKeys = [(e["request"]["method"], e["request"]["url"]) for e in self.theirs]
        if oursKeys != theirsKeys:
            width = max((len(f"{m} {u}") for m, u in oursKeys), default=10)
            rows = []
            for i in range(max(len(oursKeys), len(theirsKeys))):
                a = " ".join(oursKeys[i]) if i < len(oursKeys) else "-"
                b = " ".join(theirsKeys[i]) if i < len(theirsKeys) else "-"
                mark = "  " if a == b else "!!"
                rows.append(f"    {mark} {i:3d} {a:<{width}}  |  {b}")
            self.problems.append(
                "the requests differ (netlog's | Playwright's, in order; netlog's favicon "
                "requests left out):\n" + "\n".join(rows)
            )
            return
        for (index, mine), theirs in zip(ours, self.theirs):
            self._entry(index, mine, theirs)

    def _entry(self, index: int, ours: dict[str, Any], theirs: dict[str, Any]) -> None:
        where = label(ours)
        oReq, tReq = ours["request"], theirs["request"]
        oRes, tRes = ours["response"], theirs["response"]
        if oReq["url"] != tReq["url"]:
            self._problem(index, ours, "request.url", f"ours {show(oReq['url'])}, Playwright's {show(tReq['url'])}")
        for field, a, b in [
            ("response.status", oRes["status"], tRes["status"]),
            ("response.redirectURL", oRes.get("redirectURL", ""), tRes.get("redirectURL", "")),
            (
                "request.queryString",
                [(q["name"], q["value"]) for q in oReq.get("queryString", [])],
                [(q["name"], q["value"]) for q in tReq.get("queryString", [])],
            ),
            ("response.cookies", cookieView(oRes.get("cookies", [])), cookieView(tRes.get("cookies", []))),
        ]:
            if a != b:
                self._problem(index, ours, field, f"ours {show(a)}, Playwright's {show(b)}")
        self._headers(index, ours, "request.headers", oReq["headers"], tReq["headers"])
        self._headers(index, ours, "response.headers", oRes["headers"], tRes["headers"])
        self._requestBody(index, ours, oReq, tReq)
        self._responseText(index, ours, oRes, tRes)

    def _headers(self, index: int, ours: dict[str, Any], field: str, a: list[Any], b: list[Any]) -> None:
        oursCount, theirsCount = headerCounts(a), headerCounts(b)
        if oursCount != theirsCount:
            self._problem(
                index,
                ours,
                field,
                f"only ours {show(sorted((oursCount - theirsCount).elements()))}, "
                f"only Playwright's {show(sorted((theirsCount - oursCount).elements()))}",
            )

    def _requestBody(self, index: int, ours: dict[str, Any], oReq: dict[str, Any], tReq: dict[str, Any]) -> None:
        oPost, tPost = oReq.get("postData"), tReq.get("postData")
        if tPost is None and oPost is not None and oPost.get("mimeType", "").startswith("multipart/form-data"):
            self.explained.append(Explained(index, label(ours), "request.postData", "multipart-body"))
            return
        if (oPost is None) != (tPost is None):
            self._problem(index, ours, "request.postData", f"ours {show(oPost)}, Playwright's {show(tPost)}")
            return
        if oPost is None or tPost is None:
            return
        if oPost.get("mimeType") != tPost.get("mimeType"):
            self._problem(
                index, ours, "request.postData.mimeType",
                f"ours {show(oPost.get('mimeType'))}, Playwright's {show(tPost.get('mimeType'))}",
            )
        if oPost.get("text") != tPost.get("text"):
            self._problem(
                index, ours, "request.postData.text", textDifference(oPost.get("text") or "", tPost.get("text") or "")
            )

    def _responseText(self, index: int, ours: dict[str, Any], oRes: dict[str, Any], tRes: dict[str, Any]) -> None:
        oContent, tContent = oRes.get("content", {}), tRes.get("content", {})
        where = label(ours)
        if oContent.get("mimeType") != tContent.get("mimeType"):
            self._problem(
                index, ours, "response.content.mimeType",
                f"ours {show(oContent.get('mimeType'))}, Playwright's {show(tContent.get('mimeType'))}",
            )
        theirText = tContent.get("text") or ""
        if tContent.get("encoding") == "base64":
            digest = hashlib.sha256(base64.b64decode(theirText)).hexdigest()
            if oContent.get("text") is None and oContent.get("_sha256") == digest:
                self.explained.append(Explained(index, where, "response.content", "binary-digest"))
            else:
                self._problem(
                    index, ours, "response.content",
                    f"Playwright's bytes have sha256 {digest}; ours text {show(oContent.get('text'))}, "
                    f"_sha256 {show(oContent.get('_sha256'))}",
                )
            return
        ourText = oContent.get("text") or ""
        if ourText == theirText:
            return
        if not theirText and 300 <= int(oRes["status"]) < 400:
            self.explained.append(Explained(index, where, "response.content.text", "redirect-body"))
            return
        if oContent.get("_truncated") and ourText and theirText.startswith(ourText):
            self.explained.append(Explained(index, where, "response.content.text", "truncated-text"))
            return
        self._problem(index, ours, "response.content.text", textDifference(ourText, theirText))
