"""
Recordings made for the replay tests: netlog logs written with the same
record builders and line encoder the proxy uses.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import Any, Sequence

from netlog.core.logline import END, OPEN, encodeLine
from netlog.core.records import EXCHANGE, endRecord, openRecord


@dataclass
class Exchange:
    """
    One recorded exchange: its request, and its answer (or its failure).
    """

    method: str
    url: str
    status: int = 200
    body: bytes = b""
    requestBody: bytes = b""
    requestType: str | None = None
    headers: list[tuple[str, str]] = field(default_factory=lambda: [("Content-Type", "text/plain")])
    failed: str | None = None
    refused: bool = False
    truncated: bool = False
    wait: float = 0.0


def lines(exchanges: Sequence[Exchange | tuple[str, str, int, bytes]]) -> bytes:
    out = []
    n = 1
    for x in exchanges:
        if isinstance(x, tuple):
            x = Exchange(*x)
        requestHeaders = [["Host", x.url.split("/")[2]]]
        if x.requestType is not None:
            requestHeaders.append(["Content-Type", x.requestType])
        request = {"method": x.method, "url": x.url, "version": "HTTP/1.1", "headers": requestHeaders,
                   "headers_size": 40}
        opened = openRecord("site", EXCHANGE, 100.0, "127.0.0.1:5000", "c1", request, "127.0.0.1", 8080)
        exchangeId = n
        body: dict[str, Any] = {"size": len(x.body), "data": base64.b64encode(x.body).decode()}
        if x.truncated:
            body["_truncated"] = True
            body["size"] = len(x.body) + 100
        headers = [[k, v] for k, v in x.headers] + [["Content-Length", str(body["size"])]]
        response = {"status": x.status, "reason": "OK", "version": "HTTP/1.1", "headers": headers,
                    "headers_size": 50, "body": body}
        requestBody = ({"size": len(x.requestBody), "data": base64.b64encode(x.requestBody).decode()}
                       if x.requestBody else None)
        if x.refused:
            ended = endRecord(100.1, up=40, down=50, refused=("not a site", 403))
        elif x.failed:
            ended = endRecord(100.1, up=40, down=0, requestBody=requestBody, failed=x.failed, failedStatus=502)
        else:
            ended = endRecord(100.0 + x.wait + 0.01, 100.0, 100.0, 100.0 + x.wait, up=40, down=100,
                              requestBody=requestBody, response=response)
        out.append(encodeLine(n, OPEN, exchangeId, exchangeId, 100.0, opened))
        n += 1
        out.append(encodeLine(n, END, exchangeId, n + 1, 100.1, ended))
        n += 1
    return b"".join(out)


def writeLog(path: str, exchanges: Sequence[Exchange | tuple[str, str, int, bytes]]) -> str:
    """
    Write a log of C{exchanges} at C{path}; return C{path}.
    """
    with open(path, "wb") as f:
        f.write(lines(exchanges))
    return path
