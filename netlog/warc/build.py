"""
WARC records from an exchange's parsed log lines: pure, no files.

The records are made with warcio's L{RecordBuilder} (which computes the
digests); the shell (L{netlog.warc.export}) writes them. What goes where,
and what is left out, is in C{docs/warc.rst}.
"""

from __future__ import annotations

import io
import json
import re
from datetime import datetime, timezone
from http import HTTPStatus
from typing import Any, Iterable, NamedTuple
from urllib.parse import urlsplit

from warcio.recordbuilder import RecordBuilder
from warcio.recordloader import ArcWarcRecord
from warcio.statusandheaders import StatusAndHeaders
from warcio.timeutils import datetime_to_iso_date

from netlog.core.har import _b64, _int, _num, _pairs

WARC_VERSION = "WARC/1.1"
#: C{WARC-Protocol} of an exchange the browser spoke HTTP/2 in (written as
#: an HTTP/1.1 message), as the WARC 1.1 extension names it.
H2_PROTOCOL = "h2"
#: Why an exchange is left out of the WARC, as the command's last line says.
OPEN = "still open"
BODY_NOT_KEPT = "body not kept (record with --keep-bodies all)"
#: Bytes of a page's HTML looked through for its title.
TITLE_WINDOW = 64 * 1024
_TITLE = re.compile(rb"<title[^>]*>([^<]{0,500})</title", re.IGNORECASE)
#: Header fields of a message whose body the log keeps with its transfer
#: coding undone: left out of the record, which holds the body that way.
_TRANSFER_FIELDS = frozenset({"transfer-encoding"})


class Built(NamedTuple):
    """
    An exchange's records (response first, then what refers to it), or why
    it has none.
    """

    records: list[ArcWarcRecord]
    leftOut: str | None


def warcDate(seconds: float) -> str:
    """
    A WARC-Date to the microsecond.
    """
    moment = datetime.fromtimestamp(seconds, timezone.utc).replace(tzinfo=None)
    return datetime_to_iso_date(moment, use_micros=True)


def infoRecord(builder: RecordBuilder, fields: dict[str, Any]) -> ArcWarcRecord:
    """
    The C{warcinfo} record that begins the file.
    """
    return builder.create_warcinfo_record("", fields)


def exchangeRecords(builder: RecordBuilder, opened: dict[str, Any], ended: dict[str, Any] | None,
                    notes: Iterable[dict[str, Any]] = ()) -> Built:
    """
    The records of one exchange from its open line, end line and notes.
    """
    if ended is None:
        return Built([], OPEN)
    request = _dict(opened.get("request"))
    server = _dict(opened.get("server"))
    url = _str(request.get("url"))
    started = _num(opened.get("started")) or _num(opened.get("time")) or 0.0
    common = {"WARC-Date": warcDate(started)}
    address = server.get("address")
    replayed = ended.get("_replayedServer")
    if not address and isinstance(replayed, dict):
        address = replayed.get("address")
    if isinstance(address, str) and address:
        common["WARC-IP-Address"] = address
    outcome = _outcome(opened, ended)
    if outcome is not None:
        return Built([_metadata(builder, url or _tunnelUrl(server), common, outcome)], None)

    answer = ended["response"]
    body = _dict(answer.get("body"))
    payload = _payload(body)
    reqBody = _dict(ended.get("request_body"))
    reqPayload = _payload(reqBody)
    if payload is None or reqPayload is None:
        return Built([], BODY_NOT_KEPT)
    h2 = str(request.get("version", "")).upper().startswith("HTTP/2")
    if h2:
        common["WARC-Protocol"] = H2_PROTOCOL

    status = _int(answer.get("status"), 0)
    reason = _str(answer.get("reason"))
    if not reason:
        try:
            reason = HTTPStatus(status).phrase
        except ValueError:
            reason = ""
    responseHead = StatusAndHeaders(f"{status} {reason}".rstrip(), _fields(answer.get("headers")),
                                    protocol="HTTP/1.1")
    responseFields = dict(common)
    if payload[1] or ended.get("_failed"):
        # cut at the log's limit, or the answer broke off
        responseFields["WARC-Truncated"] = "length" if payload[1] else "disconnect"
    response = _httpRecord(builder, url, "response", responseHead, payload[0], responseFields)
    responseId = response.rec_headers.get_header("WARC-Record-ID")

    method = _str(request.get("method")) or "GET"
    requestHead = StatusAndHeaders(f"{method} {_target(url)} HTTP/1.1", _requestFields(request.get("headers"), h2),
                                   is_http_request=True)
    requestFields = dict(common, **{"WARC-Concurrent-To": responseId})
    if reqPayload[1]:
        requestFields["WARC-Truncated"] = "length"
    records = [response, _httpRecord(builder, url, "request", requestHead, reqPayload[0], requestFields)]

    messages = [n for n in notes if n.get("type") == "message"]
    if messages or isinstance(ended.get("_websocket"), dict):
        records.append(_webSocketRecord(builder, url, common, responseId, started, messages))
    return Built(records, None)


def _httpRecord(builder: RecordBuilder, url: str, kind: str, head: StatusAndHeaders, body: bytes,
                fields: dict[str, str]) -> ArcWarcRecord:
    """
    A C{request} or C{response} record of an HTTP message. For a
    WebSocket's (a C{ws:} or C{wss:} URL), the head goes in the payload:
    warcio, and so pywb, reads HTTP heads only in records of C{http:} and
    C{https:} URLs, and takes a payload digest over the whole block for
    any other, so that is the digest written.
    """
    if url.startswith(("http:", "https:")):
        return builder.create_warc_record(url, kind, payload=io.BytesIO(body), length=len(body),
                                          warc_headers_dict=fields, http_headers=head)
    block = head.to_ascii_bytes() + body
    return builder.create_warc_record(url, kind, payload=io.BytesIO(block), length=len(block),
                                      warc_content_type=f"application/http; msgtype={kind}",
                                      warc_headers_dict=fields)


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _str(value: object) -> str:
    return value if isinstance(value, str) else ""


def _payload(body: dict[str, Any]) -> tuple[bytes, bool] | None:
    """
    A kept body's bytes and whether the log cut them; L{None} for a body
    that had bytes the log didn't keep.
    """
    size = _int(body.get("size"), 0)
    if "data" not in body:
        return None if size > 0 else (b"", False)
    data = _b64(body["data"])
    return data, bool(body.get("_truncated")) or len(data) < size


def _fields(headers: object) -> list[tuple[str, str]]:
    return [(h["name"], h["value"]) for h in _pairs(headers) if h["name"].lower() not in _TRANSFER_FIELDS]


def _requestFields(headers: object, h2: bool) -> list[tuple[str, str]]:
    """
    A request's fields as an HTTP/1.1 message has them: over HTTP/2, C{Host}
    from C{:authority} first, the other pseudo-fields (which the request
    line carries) left out, and the cookie crumbs joined into one field.
    """
    fields = _fields(headers)
    if not h2:
        return fields
    host = [("host", v) for n, v in fields if n == ":authority"]
    cookies = [v for n, v in fields if n.lower() == "cookie"]
    rest = [(n, v) for n, v in fields if not n.startswith(":") and n.lower() != "cookie"]
    return host + rest + ([("cookie", "; ".join(cookies))] if cookies else [])


def _target(url: str) -> str:
    """
    The request line's target (origin form) of an absolute URL.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return url or "/"
    return (parts.path or "/") + ("?" + parts.query if parts.query else "")


def _tunnelUrl(server: dict[str, Any]) -> str:
    return "https://%s:%d/" % (server.get("host") or "", _int(server.get("port"), 443))


def _outcome(opened: dict[str, Any], ended: dict[str, Any]) -> dict[str, Any] | None:
    """
    What a C{metadata} record says of an exchange that has no answer from a
    server to archive (a blind tunnel, a refusal, a failure before any
    answer, netlog's own answer on a replay, an answer that wasn't HTTP);
    L{None} for an exchange with one.
    """
    fields: dict[str, Any] = {"netlog-id": opened.get("id")}
    server = _dict(opened.get("server"))
    refused, failed = ended.get("_refused"), ended.get("_failed")
    if opened.get("kind") == "tunnel":
        wire = _dict(ended.get("bytes"))
        fields.update({"netlog-outcome": "tunnel", "host": server.get("host"), "port": server.get("port"),
                       "bytes-up": wire.get("up"), "bytes-down": wire.get("down"),
                       "closed-by": ended.get("closed_by")})
    elif refused:
        fields["netlog-outcome"] = "refused"
    elif ended.get("_unmatched"):
        fields["netlog-outcome"] = "unmatched"
    elif ended.get("_unparsed"):
        wire = _dict(ended.get("bytes"))
        fields.update({"netlog-outcome": "unparsed", "bytes-up": wire.get("up"), "bytes-down": wire.get("down")})
    elif not isinstance(ended.get("response"), dict) or (isinstance(failed, dict) and "status" in failed):
        fields["netlog-outcome"] = "failed"
    else:
        return None
    for name, mark in (("refused", refused), ("failed", failed)):
        if isinstance(mark, dict):
            fields[name] = mark.get("reason")
            if "status" in mark:
                fields["status"] = mark.get("status")
        elif mark:
            fields[name] = mark
    return fields


def _metadata(builder: RecordBuilder, url: str, common: dict[str, str], fields: dict[str, Any]) -> ArcWarcRecord:
    text = "".join(f"{name}: {value}\r\n" for name, value in fields.items() if value is not None)
    data = text.encode("utf-8")
    return builder.create_warc_record(url, "metadata", payload=io.BytesIO(data), length=len(data),
                                      warc_content_type="application/warc-fields", warc_headers_dict=common)


def _webSocketRecord(builder: RecordBuilder, url: str, common: dict[str, str], responseId: str,
                     started: float, messages: list[dict[str, Any]]) -> ArcWarcRecord:
    """
    A WebSocket's messages as one C{resource} record of JSON lines, in the
    form the draft of the IIPC's WARC WebSocket proposal (and browsertrix)
    takes: per message C{ts} (seconds since the exchange started),
    C{type} (C{send} or C{receive}), C{opcode} and C{payloadData} (text,
    or base64 for binary as Chrome's DevTools protocol gives it).
    """
    lines = []
    for m in messages:
        line: dict[str, Any] = {
            "ts": round((_num(m.get("time")) or started) - started, 6),
            "type": "send" if m.get("direction") == "up" else "receive",
            "opcode": _int(m.get("opcode"), 1),
            "payloadData": m.get("data") if isinstance(m.get("data"), str) else "",
        }
        if m.get("encoding") == "base64" and line["opcode"] == 1:
            line["encoding"] = "base64"
        if m.get("_truncated") or not isinstance(m.get("data"), str):
            line["truncated"] = True
        lines.append(json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n")
    data = "".join(lines).encode("utf-8")
    fields = dict(common, **{"WARC-Concurrent-To": responseId, "WARC-Resource-Type": "websocket"})
    return builder.create_warc_record(url, "resource", payload=io.BytesIO(data), length=len(data),
                                      warc_content_type="application/jsonl", warc_headers_dict=fields)


def pageOf(opened: dict[str, Any], ended: dict[str, Any]) -> dict[str, Any] | None:
    """
    A WACZ page (C{pages.jsonl}'s line) for a top-level navigation: a
    C{GET} the browser made for a top-level document (C{Sec-Fetch-Dest:
    document}, C{Sec-Fetch-Mode: navigate}) that was answered, with the
    title of its HTML when kept; L{None} for any other exchange.
    """
    request = _dict(opened.get("request"))
    response = ended.get("response")
    if not isinstance(response, dict) or request.get("method") != "GET":
        return None
    fields = {h["name"].lower(): h["value"].lower() for h in _pairs(request.get("headers"))}
    if fields.get("sec-fetch-dest") != "document" or fields.get("sec-fetch-mode") != "navigate":
        return None
    page: dict[str, Any] = {"id": str(opened.get("id")), "url": request.get("url"),
                            "ts": warcDate(_num(opened.get("started")) or 0.0)}
    body = _dict(response.get("body"))
    if "data" in body:
        found = _TITLE.search(_b64(body["data"])[:TITLE_WINDOW])
        if found is not None:
            page["title"] = found.group(1).decode("utf-8", "replace").strip()
    return page
