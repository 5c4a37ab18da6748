"""
The API's JSON answers, shared by every resource and by the door that
turns requests away before they reach one: one line of JSON with markup
escaped, never cached, never sniffed.
"""

from __future__ import annotations

import json
from typing import Any

from twisted.web.resource import Resource
from twisted.web.server import Request

JSON_TYPE = b"application/json"


#: Characters a JSON answer writes as C{\\uXXXX} escapes, so that no
#: attacker text (a path, a Host, a name) in an error reads as markup if a
#: browser ever takes the answer for HTML.
_MARKUP = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}


def jsonBytes(body: Any) -> bytes:
    """
    C{body} as one line of JSON, with C{<}, C{>} and C{&} escaped.
    """
    return json.dumps(body).translate(_MARKUP).encode("utf-8") + b"\n"


def jsonHead(request: Request) -> None:
    request.setHeader(b"content-type", JSON_TYPE)
    request.setHeader(b"cache-control", b"no-store")
    request.setHeader(b"x-content-type-options", b"nosniff")


def finishJSON(request: Request, body: bytes) -> None:
    """
    Answer C{request} with C{body}, JSON made for it (a page of the log, an
    exchange), never cached; a C{HEAD} gets the head alone.
    """
    jsonHead(request)
    request.setHeader(b"content-length", str(len(body)).encode("ascii"))
    if request.method != b"HEAD":
        request.write(body)
    request.finish()


def sendJSON(request: Request, code: int, body: dict[str, Any], message: bytes | None = None) -> bytes:
    request.setResponseCode(code, message)
    jsonHead(request)
    return jsonBytes(body)


class JSONError(Resource):
    """
    A JSON error answered in place of a resource: C{{"error": ...}} and
    whatever else C{body} says, with C{headers}.
    """

    isLeaf = True

    def __init__(self, status: int, body: dict[str, Any], message: bytes | None = None,
                 headers: dict[bytes, bytes] | None = None) -> None:
        Resource.__init__(self)
        self._status = status
        self._body = body
        self._message = message
        self._headers = headers or {}

    def render(self, request: Request) -> bytes:
        for name, value in self._headers.items():
            request.setHeader(name, value)
        return sendJSON(request, self._status, self._body, self._message)
