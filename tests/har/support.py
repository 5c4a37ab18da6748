"""
What the HAR tests share: log lines built as the proxies write them (see
docs/log-format.rst), an export in memory, and the two real consumers: the
HAR schema (har-validator, under node) and WebArena-Verified 1.2.3's loader
(in its own virtual environment).
"""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import tempfile
from typing import Any, BinaryIO, Callable, TypeVar

from netlog.core.logline import encodeLine
from netlog.har.export import ExportResult, writeHar
from tests.support import REPO

T = TypeVar("T")

HERE = os.path.dirname(os.path.abspath(__file__))
VALIDATOR = os.path.join(REPO, ".ci", "node", "node_modules", "har-validator")
WAV_PYTHON = os.path.join(REPO, ".ci", "wav", ".venv", "bin", "python")
#: Seconds a consumer may take before the test fails.
CONSUMER_TIMEOUT = 120

#: A fixed start, so that golden values are exact.
T0 = 1767225600.0  # 2026-01-01T00:00:00Z


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


class Log:
    """
    A log being written by hand: numbered lines, as the LogWriter numbers
    them.
    """

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    @property
    def next(self) -> int:
        return len(self.lines) + 1

    def open(
        self,
        method: str = "GET",
        url: str = "https://shop.test/",
        headers: list[tuple[str, str]] | None = None,
        kind: str = "exchange",
        started: float = T0,
        server: dict[str, Any] | None = None,
        connection: str = "c1",
        **extra: Any,
    ) -> int:
        n = self.next
        host = url.split("://", 1)[-1].split("/", 1)[0]
        fields: dict[str, Any] = {
            "proxy": "site",
            "kind": kind,
            "started": started,
            "client": "127.0.0.1:50312",
            "connection": connection,
            "request": {
                "method": method,
                "url": url,
                "version": "HTTP/1.1",
                "headers": [list(h) for h in (headers if headers is not None else [("Host", host)])],
                "headers_size": 100,
            },
            "server": server if server is not None else {"host": host.split(":")[0], "port": 443, "address": "127.0.0.1"},
        }
        fields.update(extra)
        self.lines.append(encodeLine(n, "open", n, 1, started, fields))
        return n

    def end(
        self,
        exchangeId: int,
        status: int | None = 200,
        headers: list[tuple[str, str]] | None = None,
        body: bytes | None = None,
        requestBody: bytes | None = None,
        ended: float = T0 + 1,
        times: dict[str, float | None] | None = None,
        reason: str = "OK",
        responseBody: dict[str, Any] | None = None,
        **extra: Any,
    ) -> int:
        n = self.next
        fields: dict[str, Any] = {
            "ended": ended,
            "times": times if times is not None else {
                "connected": None, "sent": T0 + 0.1, "first_byte": T0 + 0.5, "end": ended},
            "bytes": {"up": 100, "down": 200},
        }
        if requestBody is not None:
            fields["request_body"] = {"size": len(requestBody), "data": b64(requestBody)}
        if status is not None:
            response: dict[str, Any] = {
                "status": status,
                "reason": reason,
                "version": "HTTP/1.1",
                "headers": [list(h) for h in (headers or [])],
                "headers_size": 120,
            }
            if responseBody is not None:
                response["body"] = responseBody
            elif body is not None:
                response["body"] = {"size": len(body), "data": b64(body)}
            else:
                response["body"] = {"size": 0, "data": ""}
            fields["response"] = response
        fields.update(extra)
        self.lines.append(encodeLine(n, "end", exchangeId, 1, ended, fields))
        return n

    def netlogAnswer(
        self,
        exchangeId: int,
        status: int,
        mark: dict[str, Any],
        ended: float = T0 + 1,
        **extra: Any,
    ) -> int:
        """
        An end line for an exchange netlog answered itself, as the proxies
        write it: its own answer (a plain-text page saying why, as the
        browser got it) as C{response}, no byte from the server
        (C{times.first_byte} C{null}), and C{mark} (C{_refused} or
        C{_failed}, with the status inside).
        """
        reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway", 504: "Gateway Timeout"}[status]
        why = next(iter(mark.values()))["reason"]
        page = f"netlog: {why}\n".encode()
        fields: dict[str, Any] = {
            "times": {"connected": None, "sent": None, "first_byte": None, "end": ended},
            "bytes": {"up": 100, "down": 120 + len(page)},
            **mark,
            **extra,
        }
        return self.end(
            exchangeId,
            status=status,
            reason=reason,
            headers=[("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(page))), ("Connection", "close")],
            body=page,
            ended=ended,
            **fields,
        )

    def refuse(self, exchangeId: int, reason: str, status: int = 403, **extra: Any) -> int:
        """
        A refusal's end line, as the proxies write it (see L{netlogAnswer}).
        """
        return self.netlogAnswer(exchangeId, status, {"_refused": {"reason": reason, "status": status}}, **extra)

    def fail(self, exchangeId: int, reason: str, status: int = 502, **extra: Any) -> int:
        """
        A failure's end line where netlog answered the browser itself (the
        server's answer never began), as the proxies write it (see
        L{netlogAnswer}).
        """
        return self.netlogAnswer(exchangeId, status, {"_failed": {"reason": reason, "status": status}}, **extra)

    def raw(self, line: bytes) -> None:
        """
        A line as given (to make cut or foreign lines); it takes a number.
        """
        self.lines.append(line)

    def bytes(self) -> bytes:
        return b"".join(self.lines)


def exportLog(write: Callable[[str, BinaryIO], T], data: bytes) -> tuple[bytes, T]:
    """
    Export a log given as bytes by C{write(logPath, out)} (L{writeHar},
    L{netlog.warc.export.writeWarc}): the bytes written, and its result.
    """
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "network.jsonl")
        with open(path, "wb") as f:
            f.write(data)
        out = io.BytesIO()
        result = write(path, out)
    return out.getvalue(), result


def export(data: bytes) -> tuple[dict[str, Any], bytes, ExportResult]:
    """
    Export a log given as bytes; the HAR parsed, as bytes, and the result.
    """
    har, result = exportLog(writeHar, data)
    return json.loads(har.decode("utf-8")), har, result


def validate(har: bytes) -> list[dict[str, Any]]:
    """
    The schema's verdict on a HAR: an empty list when it validates, else its
    errors. Fails (never skips) when the validator isn't installed.
    """
    if not os.path.isdir(VALIDATOR):
        raise AssertionError(
            f"har-validator is not installed at {VALIDATOR}: run "
            f"bash .ci/install.d/20-har-validator.sh (as .ci/setup does)"
        )
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "network.har")
        with open(path, "wb") as f:
            f.write(har)
        proc = subprocess.run(
            ["node", os.path.join(HERE, "validate.js"), path],
            capture_output=True,
            timeout=CONSUMER_TIMEOUT,
        )
    if proc.returncode != 0:
        raise AssertionError(f"validate.js failed: {proc.stderr.decode(errors='replace')}")
    (result,) = json.loads(proc.stdout)
    errors = [] if result["ok"] else list(result["errors"])
    if result["bom"]:
        errors.append("the HAR starts with a UTF-8 BOM")
    return errors


def wavLoad(har: bytes) -> dict[str, Any]:
    """
    What WebArena-Verified 1.2.3's own loader sees in a HAR (see
    wav_load.py). Fails (never skips) when its environment isn't installed.
    """
    if not os.path.exists(WAV_PYTHON):
        raise AssertionError(
            f"WebArena-Verified's environment is not installed at {WAV_PYTHON}: run "
            f"bash .ci/install.d/30-webarena-verified.sh (as .ci/setup does)"
        )
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "network.har")
        with open(path, "wb") as f:
            f.write(har)
        proc = subprocess.run(
            [WAV_PYTHON, os.path.join(HERE, "wav_load.py"), path],
            capture_output=True,
            timeout=CONSUMER_TIMEOUT,
        )
    if proc.returncode != 0:
        raise AssertionError(f"WebArena-Verified could not load the HAR: {proc.stderr.decode(errors='replace')}")
    return json.loads(proc.stdout)
