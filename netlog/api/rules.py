"""
The API's rules (see L{netlog.core.rules} and C{docs/rules.rst}):

  - C{GET /rules} and C{GET /sessions/NAME/rules}: C{{"rules": DOCUMENT}},
    the main listener's or a session's;
  - C{PUT} of a rules document at either: checked whole, then in force for
    the next request (C{200} and the document); a document that is wrong
    gets C{400} with one line (which key, where, why) and the rules in
    force stay.

A C{PUT} needs the API's token, as every change does (the door,
L{netlog.api.door}, answers C{401}, C{403} and C{415} before this).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from twisted.internet.defer import Deferred, succeed
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request

from netlog.api.answers import sendJSON
from netlog.core.rules import BadRules, ReadFile, Rules, compileRules
from netlog.session.manager import SessionError

_log = Logger()

#: The longest rules document the API takes, in bytes (it is carried to a
#: supervised worker in one control line).
MAX_RULES_BODY = 32 * 1024


class RulesHolder(Protocol):
    """
    What holds the rules: a L{netlog.session.manager.SessionManager} (in
    process) or a L{netlog.session.manager.HeldSessions} (supervised).
    """

    @property
    def readFile(self) -> ReadFile | None:
        """
        How an answer rule's C{body_file} is read (from the state folder).
        """

    def rulesOf(self, name: str | None) -> Rules: ...

    def setRules(self, name: str | None, rules: Rules) -> Deferred[Any] | None: ...


def readRules(document: Any, readFile: ReadFile | None) -> Rules:
    """
    A rules document from a request's JSON, checked whole; the bodies its
    answer rules name in the state folder are read now, through
    C{readFile}.

    @raise BadRules: it is wrong, or longer than L{MAX_RULES_BODY} once
        written compactly.
    """
    rules = compileRules(document, readFile)
    if len(json.dumps(rules.document, separators=(",", ":"))) > MAX_RULES_BODY:
        raise BadRules(f"rules: a rules document is at most {MAX_RULES_BODY} bytes")
    return rules


class RulesResource(Resource):
    """
    C{/rules} (C{name} L{None}: the main listener) or C{/sessions/NAME/rules}.
    """

    isLeaf = True

    def __init__(self, holder: RulesHolder, name: str | None) -> None:
        Resource.__init__(self)
        self._holder = holder
        self._name = name

    def render(self, request: Request) -> Any:
        try:
            if request.method in (b"GET", b"HEAD"):
                return sendJSON(request, 200, {"rules": self._holder.rulesOf(self._name).document})
            if request.method != b"PUT":
                request.setHeader(b"allow", b"GET, HEAD, PUT")
                return sendJSON(request, 405, {"error": "GET reads the rules, PUT replaces them"})
            raw = request.content.read(MAX_RULES_BODY + 1) if request.content is not None else b""
            if len(raw) > MAX_RULES_BODY:
                return sendJSON(request, 400, {"error": f"rules: the body is longer than {MAX_RULES_BODY} bytes"})
            try:
                document = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                return sendJSON(request, 400, {"error": "rules: the body is not JSON"})
            try:
                rules = readRules(document, self._holder.readFile)
            except BadRules as e:
                return sendJSON(request, 400, {"error": str(e)})
            result = self._holder.setRules(self._name, rules)
        except SessionError as e:
            return sendJSON(request, e.status, {"error": e.message})

        def done(_: object) -> None:
            request.write(sendJSON(request, 200, {"rules": rules.document}))
            request.finish()

        def failed(failure: Failure) -> None:
            _log.failure("setting the rules of {name}", failure, name=self._name)
            request.write(sendJSON(request, 500, {"error": "setting the rules failed; see the proxy's log"}))
            request.finish()

        d = result if result is not None else succeed(None)
        d.addCallbacks(done, failed)
        d.addErrback(lambda f: None)  # the client went away
        return NOT_DONE_YET
