"""
The API's sessions (see L{netlog.session.manager}):

  - C{POST /sessions} with C{{"name": ..., "port": ..., "rules": ...}} (all
    optional; the rules as L{netlog.api.rules} takes them): C{201} and the
    session (its name, C{proxy} address, log, URLs);
  - C{GET /sessions}: C{{"sessions": [...]}};
  - C{GET /sessions/NAME}: one session;
  - C{GET /sessions/NAME/network?after=N&limit=BYTES} and
    C{GET /sessions/NAME/network.har}: its log, as C{/network} and
    C{/network.har} serve the main one;
  - C{GET /sessions/NAME/exchanges?filter=...} and
    C{GET /sessions/NAME/exchanges/ID}: its exchanges found, and one whole
    (L{netlog.api.exchanges});
  - C{GET} and C{PUT /sessions/NAME/rules}: its rules (L{netlog.api.rules});
  - C{DELETE /sessions/NAME?timeout=S}: stops it (its open exchanges have
    S seconds to end, default 10, then are ended as stopped); answers its
    last line number.

Errors are JSON: C{400} a bad name, port or body, C{404} no such session,
C{409} a name in use or a port taken, C{429} more sessions a second than
C{--api-session-rate}, C{503} a log that can't be opened. (The door, see
L{netlog.api.door}, answers C{401}, C{403} and C{415} before this.)
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable

from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request

from netlog.api import SESSION_RATE
from netlog.api.answers import JSONError, sendJSON
from netlog.api.exchanges import ExchangesResource
from netlog.api.params import BadParameter, parseQuery, queryOf
from netlog.api.resource import HarResource, NetworkResource
from netlog.api.rules import MAX_RULES_BODY, RulesResource, readRules
from netlog.core.rules import BadRules
from netlog.core.ratelimit import TokenBucket
from netlog.net.reactors import IProxyReactor
from netlog.session.manager import STOP_TIMEOUT, SessionError
from netlog.api.warc import WarcResource

_log = Logger()

#: The largest body C{POST /sessions} reads, in bytes (its rules too).
MAX_BODY = 4096 + MAX_RULES_BODY
#: The longest C{timeout} a C{DELETE} may ask for, in seconds.
MAX_STOP_TIMEOUT = 300
#: What C{POST /sessions} takes.
_FIELDS = frozenset({"name", "port", "rules"})


def _base(request: Request) -> str:
    """
    The API's origin as the client named it (its C{Host} was checked).
    """
    host = (request.getHeader(b"host") or b"127.0.0.1").decode("ascii", "replace")
    return f"http://{host}"


def _described(request: Request, info: dict[str, Any]) -> dict[str, Any]:
    base = f"{_base(request)}/sessions/{info['name']}"
    return dict(info, urls={"session": base, "network": base + "/network", "har": base + "/network.har",
                            "exchanges": base + "/exchanges", "warc": base + "/network.warc.gz"})


class SessionsResource(Resource):
    """
    C{/sessions}: the list, and a new session.
    """

    def __init__(self, manager: Any, reactor: IProxyReactor, threadpool: Any, harThreadpool: Any,
                 rate: float = SESSION_RATE) -> None:
        """
        @param manager: a L{netlog.session.manager.SessionManager} (in
            process) or L{netlog.session.manager.HeldSessions} (supervised).
        @param rate: sessions made a second at most (past it, C{429}).
        """
        Resource.__init__(self)
        self._manager = manager
        self._reactor = reactor
        self._made = TokenBucket(rate, max(1.0, rate), reactor.seconds())
        self._threadpool = threadpool
        self._harThreadpool = harThreadpool
        #: Per log path, its pages and its HAR: one reader per log keeps
        #: the cursor rules (a log begun again) across requests.
        self._logs: dict[str, tuple[NetworkResource, HarResource]] = {}
        self._exchanges: dict[str, ExchangesResource] = {}

    def getChild(self, path: bytes, request: Request) -> Resource:
        if path == b"":
            return self
        return _SessionResource(self, path.decode("utf-8", "replace"))

    def _firstOf(self, name: str) -> Callable[[], int]:
        def first() -> int:
            # Its HAR and its finds hold only the session's own lines.
            try:
                return int(self._manager.get(name).first)
            except SessionError:
                return 0

        return first

    def resourcesFor(self, logPath: str, name: str) -> tuple[NetworkResource, HarResource]:
        if logPath not in self._logs:
            self._logs[logPath] = (
                NetworkResource(self._reactor, self._threadpool, logPath),
                HarResource(self._reactor, self._harThreadpool, logPath, self._firstOf(name)),
            )
        return self._logs[logPath]

    def exchangesFor(self, logPath: str, name: str) -> ExchangesResource:
        if logPath not in self._exchanges:
            self._exchanges[logPath] = ExchangesResource(self._reactor, self._threadpool, logPath,
                                                         self._firstOf(name))
        return self._exchanges[logPath]

    def render(self, request: Request) -> bytes:
        if request.method in (b"GET", b"HEAD"):
            return sendJSON(request, 200, {"sessions": [_described(request, i) for i in self._manager.list()]})
        if request.method != b"POST":
            request.setHeader(b"allow", b"GET, HEAD, POST")
            return sendJSON(request, 405, {"error": "GET lists the sessions, POST makes one"})
        now = self._reactor.seconds()
        if not self._made.allow(now):
            request.setHeader(b"retry-after", str(max(1, math.ceil(self._made.wait(now)))).encode("ascii"))
            return sendJSON(
                request, 429, {"error": f"sessions are made at most {self._made.rate:g} a second; try again"},
                b"Too Many Requests",
            )
        raw = request.content.read(MAX_BODY + 1) if request.content is not None else b""
        if len(raw) > MAX_BODY:
            return sendJSON(request, 400, {"error": f"the body is longer than {MAX_BODY} bytes"})
        try:
            body = json.loads(raw.decode("utf-8")) if raw.strip() else {}
        except (UnicodeDecodeError, ValueError):
            return sendJSON(request, 400, {"error": "the body is not JSON"})
        if not isinstance(body, dict):
            return sendJSON(request, 400, {"error": 'the body is a JSON object, such as {"name": "task-17"}'})
        unknown = sorted(set(body) - _FIELDS)
        if unknown:
            return sendJSON(request, 400, {"error": f"unknown fields {unknown} (it takes name, port and rules)"})
        try:
            rules = readRules(body.get("rules", {}), self._manager.readFile)
        except BadRules as e:
            return sendJSON(request, 400, {"error": str(e)})
        try:
            session = self._manager.create(body.get("name"), body.get("port", 0), rules)
        except SessionError as e:
            return sendJSON(request, e.status, {"error": e.message})
        except Exception:
            _log.failure("making a session failed")
            return sendJSON(request, 500, {"error": "making the session failed; see the proxy's log"})
        return sendJSON(request, 201, _described(request, session.describe()))


class _SessionResource(Resource):
    """
    C{/sessions/NAME} and its log.
    """

    def __init__(self, parent: SessionsResource, name: str) -> None:
        Resource.__init__(self)
        self._parent = parent
        self._name = name

    def getChild(self, path: bytes, request: Request) -> Resource:
        try:
            session = self._parent._manager.get(self._name)
        except SessionError as e:
            return JSONError(e.status, {"error": e.message})
        network, har = self._parent.resourcesFor(session.logPath, self._name)
        if path == b"network":
            return network
        if path == b"network.har":
            return har
        if path == b"exchanges":
            return self._parent.exchangesFor(session.logPath, self._name)
        if path == b"network.warc.gz":
            return WarcResource.beside(har)
        if path == b"rules":
            return RulesResource(self._parent._manager, self._name)
        if path == b"":
            return self
        return JSONError(404, {"error": "no such resource (a session has network, network.har, network.warc.gz,"
                                        " exchanges and rules)"})

    def render(self, request: Request) -> Any:
        manager = self._parent._manager
        if request.method in (b"GET", b"HEAD"):
            try:
                return sendJSON(request, 200, _described(request, manager.get(self._name).describe()))
            except SessionError as e:
                return sendJSON(request, e.status, {"error": e.message})
        if request.method != b"DELETE":
            request.setHeader(b"allow", b"GET, HEAD, DELETE")
            return sendJSON(request, 405, {"error": "GET describes a session, DELETE stops it"})
        try:
            params = parseQuery(queryOf(request), {"timeout": (int(STOP_TIMEOUT), 0, MAX_STOP_TIMEOUT)})
        except BadParameter as e:
            return sendJSON(request, 400, {"error": "bad parameter", "parameter": e.name, "reason": e.reason})
        try:
            d = manager.delete(self._name, float(params["timeout"]))
        except SessionError as e:
            return sendJSON(request, e.status, {"error": e.message})

        def done(result: dict[str, Any]) -> None:
            request.write(sendJSON(request, 200, result))
            request.finish()

        def failed(failure: Failure) -> None:
            _log.failure("stopping session {name}", failure, name=self._name)
            request.write(sendJSON(request, 500, {"error": "stopping the session failed; see the proxy's log"}))
            request.finish()

        d.addCallbacks(done, failed)
        d.addErrback(lambda f: None)  # the client went away
        return NOT_DONE_YET


def unsupportedSessions() -> Resource:
    """
    C{/sessions} of an API built without sessions (a bare L{netlog.api.root.makeApiRoot}).
    """
    return JSONError(404, {"error": "this API serves no sessions"})
