"""
The API's query strings: a request's query, its whole-number parameters
read in range, and L{BadParameter} for one that is wrong (a C{400} saying
which and why). The routes and their redaction parameters share it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

if TYPE_CHECKING:
    from twisted.web.server import Request

#: The longest query string read, in bytes.
MAX_QUERY = 1024


class BadParameter(Exception):
    """
    A request parameter is wrong: C{name} and C{reason} say how.
    """

    def __init__(self, name: str, reason: str) -> None:
        Exception.__init__(self, name, reason)
        self.name = name
        self.reason = reason


def queryPairs(query: bytes) -> list[tuple[str, str]]:
    """
    The C{name=value} pairs of a query string, in order.

    @raise BadParameter: it is not ASCII C{name=value} pairs joined by C{&}.
    """
    try:
        return parse_qsl(query.decode("ascii"), keep_blank_values=True, strict_parsing=bool(query))
    except (UnicodeDecodeError, ValueError):
        raise BadParameter("query", "the query string is not name=value pairs joined by &") from None


def parseQuery(query: bytes, allowed: dict[str, tuple[int, int, int]]) -> dict[str, int]:
    """
    Read integer parameters from a query string.

    @param allowed: name -> C{(default, lowest, highest)}.
    @raise BadParameter: an unknown or repeated name, or a value that is not
        a whole number in range.
    """
    if len(query) > MAX_QUERY:
        raise BadParameter("query", f"the query string is longer than {MAX_QUERY} bytes")
    values = {name: spec[0] for name, spec in allowed.items()}
    seen: set[str] = set()
    for name, raw in queryPairs(query):
        if name not in allowed:
            known = ", ".join(sorted(allowed)) or "none"
            raise BadParameter(name, f"unknown parameter (this resource takes: {known})")
        if name in seen:
            raise BadParameter(name, "given more than once")
        seen.add(name)
        _, lowest, highest = allowed[name]
        if not raw.isdigit() or not raw.isascii():
            raise BadParameter(name, f"must be a whole number from {lowest} to {highest}, got {raw!r}")
        value = int(raw)
        if not lowest <= value <= highest:
            raise BadParameter(name, f"must be from {lowest} to {highest}, got {value}")
        values[name] = value
    return values


def queryOf(request: Request) -> bytes:
    """
    The query string of C{request}'s URI (nothing for none).
    """
    uri = request.uri
    return uri.split(b"?", 1)[1] if b"?" in uri else b""
