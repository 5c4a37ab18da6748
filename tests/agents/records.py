"""
Exchanges as the proxies log them, for the in-memory tests of finding and
filtering.
"""

from __future__ import annotations

import base64
import gzip
from typing import Any

from netlog.core.logline import END, OPEN, encodeLine


def opened(n: int, method: str = "GET", url: str = "http://shop.test/", headers: Any = (),
           kind: str = "exchange") -> dict[str, Any]:
    return {"n": n, "type": "open", "id": n, "open_from": n, "time": 1.0, "kind": kind, "started": 100.0 + n,
            "request": {"method": method, "url": url, "version": "HTTP/1.1", "headers": [list(h) for h in headers]},
            "server": {"host": "shop.test", "port": 80, "address": "127.0.0.1"}}


def ended(n: int, exchangeId: int, status: int | None = 200, headers: Any = (), body: bytes | None = None,
          requestBody: bytes | None = None, **marks: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"n": n, "type": "end", "id": exchangeId, "open_from": exchangeId, "time": 2.0,
                              "ended": 100.5 + exchangeId, "bytes": {"up": 10, "down": 20}}
    if requestBody is not None:
        record["request_body"] = {"size": len(requestBody), "data": base64.b64encode(requestBody).decode()}
    if status is not None:
        record["response"] = {"status": status, "reason": "OK", "version": "HTTP/1.1",
                              "headers": [list(h) for h in headers], "headers_size": 50,
                              "body": {"size": len(body or b""),
                                       "data": base64.b64encode(body or b"").decode()}}
    record.update(marks)
    return record


def logBytes(records: list[dict[str, Any]]) -> bytes:
    out = []
    for r in records:
        fields = {k: v for k, v in r.items() if k not in ("n", "type", "id", "open_from", "time")}
        out.append(encodeLine(r["n"], OPEN if r["type"] == "open" else END, r["id"], r["open_from"], r["time"],
                              fields))
    return b"".join(out)


def gzipped(data: bytes) -> bytes:
    return gzip.compress(data)
