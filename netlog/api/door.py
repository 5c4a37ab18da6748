"""
The API's door: what every request passes before it is routed.

  - C{Host} must be one of the API's own names (else C{421}; see
    L{netlog.api.resource.hostAllowed}): DNS rebinding.
  - No cross-site request at all (C{403}): an C{Origin} that is present and
    is not the API's own, or C{Sec-Fetch-Site: cross-site} or C{same-site}.
    A page can't read the answer of a C{fetch(..., {mode: "no-cors"})}, but
    it can make the request; this refuses it before it does anything.
  - A request that may change something (any method but C{GET} and
    C{HEAD}) needs C{Authorization: Bearer TOKEN} (else C{401}), compared in
    constant time; and, when it has a body, C{Content-Type:
    application/json} (else C{415}: a form or C{text/plain} is what a page
    can send without asking).
  - With C{--api-token-reads}, reads need the token too, or the live view's
    cookie, which the one-time URL printed at start sets (HttpOnly,
    C{SameSite=Strict}).

No answer grants anything to another origin: the API sends no CORS headers.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from twisted.logger import Logger
from twisted.python import usage
from twisted.web.resource import Resource
from twisted.web.server import Request

from netlog.api.answers import JSON_TYPE, JSONError
from netlog.token import bearerToken, tokenMatches

_log = Logger()

#: The methods that only read.
SAFE_METHODS = frozenset({b"GET", b"HEAD"})
#: The C{Sec-Fetch-Site} values of a request another site's page made.
CROSS_SITE = frozenset({b"cross-site", b"same-site"})
#: The type a request that changes something sends its body as.
#: The query parameter of the live view's one-time URL.
LOGIN_PARAMETER = "login"
#: The live view's cookie, per port (cookies don't tell ports apart).
COOKIE_PREFIX = "netlog-view-"


#: A host name as C{--api-host} takes it (lowercased).
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?")


def apiHostName(value: str) -> str:
    """
    Check one C{--api-host}: a host name or an IP address, without a port;
    lowercased (an IPv6 address without brackets).

    @raise usage.UsageError: it is neither.
    """
    name = value.strip().lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(name) or len(name) > 253:
        raise usage.UsageError(
            f"--api-host wants a host name the API's clients use, without a port "
            f"(such as netlog.internal), got {value!r}"
        )
    return name


def _hostPort(authority: str, defaultPort: int) -> tuple[str, int] | None:
    """
    C{name[:port]} (an IPv6 address in brackets) as C{(name, port)},
    lowercased; None if it isn't one.
    """
    try:
        parts = urlsplit("//" + authority)
        name, port = parts.hostname, parts.port
    except ValueError:
        return None
    if not name:
        return None
    return name.lower(), port if port is not None else defaultPort


def sameOrigin(origin: bytes, host: bytes, ownPort: int) -> bool:
    """
    Whether the C{Origin} C{origin} is the API's own: C{http://} and the
    C{Host} the request named (which the door checked already).
    """
    try:
        text, hostText = origin.decode("ascii").strip(), host.decode("ascii").strip()
    except UnicodeDecodeError:
        return False
    scheme, sep, authority = text.partition("://")
    if not sep or scheme.lower() != "http" or "/" in authority:
        return False
    theirs = _hostPort(authority, 80)
    ours = _hostPort(hostText, ownPort)
    return theirs is not None and theirs == ours


def crossSite(request: Request) -> str | None:
    """
    Why C{request} is another site's, or None when it isn't.
    """
    headers = request.requestHeaders
    fetchSite = headers.getRawHeaders(b"sec-fetch-site") or []
    for value in fetchSite:
        if value.strip().lower() in CROSS_SITE:
            return f"Sec-Fetch-Site is {value.strip().decode('latin-1')}"
    origins = headers.getRawHeaders(b"origin") or []
    if origins:
        hosts = headers.getRawHeaders(b"host") or [b""]
        ownPort = getattr(request.getHost(), "port", 80)
        if len(origins) != 1 or not sameOrigin(origins[0], hosts[0], ownPort):
            return "its Origin is not this API's own"
    return None


def hasBody(request: Request) -> bool:
    headers = request.requestHeaders
    if headers.hasHeader(b"transfer-encoding"):
        return True
    lengths = headers.getRawHeaders(b"content-length") or []
    return any(v.strip() not in (b"", b"0") for v in lengths)


def isJSON(request: Request) -> bool:
    values = request.requestHeaders.getRawHeaders(b"content-type") or []
    if len(values) != 1:
        return False
    return values[0].split(b";", 1)[0].strip().lower() == JSON_TYPE


class Door:
    """
    What the API lets in (see the module's docstring).

    @param token: the API's token, or None for an API that takes no
        changes (C{netlog view}).
    @param tokenPath: where the token is, to say so in a C{401}.
    @param guardReads: reads need the token (or the live view's cookie) too.
    """

    def __init__(self, token: str | None, tokenPath: str | None = None, guardReads: bool = False) -> None:
        self._token = token.encode("ascii") if token is not None else None
        self._tokenPath = tokenPath
        self.guardReads = guardReads and token is not None
        #: The live view's cookie value (reads only; never the token).
        self._viewKey = secrets.token_urlsafe(32).encode("ascii")
        #: The one-time login code, until it is used.
        self._loginCode: bytes | None = secrets.token_urlsafe(32).encode("ascii") if self.guardReads else None

    def loginURL(self, base: str) -> str | None:
        """
        The live view's one-time URL under C{base} (C{http://host:port}),
        while it is unused, with C{--api-token-reads}.
        """
        if self._loginCode is None:
            return None
        return f"{base}/?{LOGIN_PARAMETER}={self._loginCode.decode('ascii')}"

    def refusal(self, request: Request) -> Resource | None:
        """
        What answers C{request} instead of the resource it names, or None
        when it may pass.
        """
        why = crossSite(request)
        if why is not None:
            return JSONError(403, {"error": f"the API refuses requests from other sites ({why})"}, b"Forbidden")
        if request.method not in SAFE_METHODS:
            if not self._tokenOffered(request):
                return self._unauthorized("a request that changes something", request)
            if hasBody(request) and not isJSON(request):
                return JSONError(
                    415, {"error": "a request that changes something sends its body as application/json"},
                    b"Unsupported Media Type",
                )
            return None
        if not self.guardReads or self._tokenOffered(request) or self._cookieOffered(request):
            return None
        login = self._login(request)
        if login is not None:
            return login
        return self._unauthorized("this API (--api-token-reads): a read", request)

    def _tokenOffered(self, request: Request) -> bool:
        if self._token is None:
            return False
        return tokenMatches(bearerToken(request.requestHeaders.getRawHeaders(b"authorization")), self._token)

    def _cookieName(self, request: Request) -> bytes:
        return f"{COOKIE_PREFIX}{getattr(request.getHost(), 'port', 0)}".encode("ascii")

    def _cookieOffered(self, request: Request) -> bool:
        return tokenMatches(request.getCookie(self._cookieName(request)), self._viewKey)

    def _login(self, request: Request) -> Resource | None:
        """
        The live view's one-time URL: C{GET /?login=CODE} sets the cookie
        and sends the browser to C{/}; the code then stops working.
        """
        path, _, query = request.uri.partition(b"?")
        if path != b"/" or not query:
            return None
        try:
            pairs = parse_qsl(query.decode("ascii"), strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            return None
        if len(pairs) != 1 or pairs[0][0] != LOGIN_PARAMETER:
            return None
        code = pairs[0][1].encode("ascii", "replace")
        if self._loginCode is None or not tokenMatches(code, self._loginCode):
            return JSONError(401, {"error": "this one-time URL was used already, or is not the one netlog printed; "
                                          "restart netlog for a new one, or send the token"}, b"Unauthorized")
        self._loginCode = None
        _log.info("the live view's one-time URL was used; it opens no more")
        return _LoggedIn(self._cookieName(request), self._viewKey)

    def _unauthorized(self, what: str, request: Request) -> Resource:
        where = f"the token in {self._tokenPath}" if self._tokenPath else "the API's token"
        given = bearerToken(request.requestHeaders.getRawHeaders(b"authorization")) is not None
        if self._token is None:
            message = f"{what} is not taken here: this API has no token"
        elif given:
            mine = f"the one in {self._tokenPath}" if self._tokenPath else "the API's"
            message = (f"{what} needs Authorization: Bearer TOKEN, and the token given is not {mine} "
                       f"(readable by root; netlog session finds it there, in NETLOG_API_TOKEN, or takes --token)")
        else:
            message = (f"{what} needs Authorization: Bearer TOKEN, {where} (readable by root; "
                       f"netlog session finds it there, in NETLOG_API_TOKEN, or takes --token)")
        return JSONError(401, {"error": message}, b"Unauthorized", {b"www-authenticate": b'Bearer realm="netlog"'})


class _LoggedIn(Resource):
    isLeaf = True

    def __init__(self, name: bytes, value: bytes) -> None:
        Resource.__init__(self)
        self._name = name
        self._value = value

    def render(self, request: Request) -> bytes:
        request.addCookie(self._name, self._value, path=b"/", httpOnly=True, sameSite="strict")
        request.setResponseCode(303)
        request.setHeader(b"location", b"/")
        request.setHeader(b"cache-control", b"no-store")
        request.setHeader(b"referrer-policy", b"no-referrer")
        return b""
