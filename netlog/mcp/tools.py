"""
The MCP tools (L{makeServer}): each a few lines over L{netlog.client}, with
a description written for the model that reads it, and small results by
default (summaries, bodies cut to L{BODY_CHARS}) with a parameter to ask for
more.
"""

from __future__ import annotations

import os
from typing import Any

from netlog.client import ApiError, Netlog, NetlogError, Session, TooManyRequests

#: Summaries C{find_exchanges} answers unless asked for more.
FIND_LIMIT = 20
#: Characters of each body C{read_exchange} answers unless asked for more.
BODY_CHARS = 2000
#: Characters of a URL a summary shows.
URL_CHARS = 300
#: The longest C{wait_for_exchange} may wait, in seconds.
MAX_WAIT = 300.0

FILTER_HELP = """\
Filter language (terms joined by spaces = and; also `or`, `not` or a leading `-`, and parentheses):
  method:POST            url:/api/order (substring, any case)    url:~^https://[^/]+/api/ (~ = regular expression)
  host:shop.test         host:*.shop.test (and its subdomains)    status:200  status:4xx  status:400-499
  type:json (answer Content-Type contains)   reqheader:authorization (present)   reqheader:"content-type=application/json"
  resheader:set-cookie   body:TEXT (either body contains)   reqbody:"\\"qty\\":2"   resbody:TEXT
  is:websocket  is:failed  is:refused  is:tunnel    a bare word = url:word    quote values with spaces: "..."
Only exchanges that have ended are found. Example: method:POST url:/api/cart reqbody:"\\"qty\\":2\""""


def _summary(found: dict[str, Any]) -> dict[str, Any]:
    """
    A summary cut to what a model needs to pick an exchange.
    """
    url = str(found.get("url") or "")
    small = {
        "id": found.get("id"),
        "method": found.get("method"),
        "url": url if len(url) <= URL_CHARS else url[:URL_CHARS] + "…",
        "status": found.get("status"),
        "content_type": found.get("content_type"),
        "duration": found.get("duration"),
        "response_size": found.get("response_size"),
    }
    for mark in ("failed", "refused"):
        if isinstance(found.get(mark), dict):
            small[mark] = found[mark].get("reason")
    return small


class Tools:
    """
    The tools' work, on one L{Netlog} client (each call is one API call or a
    few; the SDK runs each in a thread).
    """

    def __init__(self, client: Netlog) -> None:
        self.client = client

    def _on(self, session: str | None) -> Netlog | Session:
        return self.client.get_session(session) if session else self.client

    def list_sessions(self) -> dict[str, Any]:
        return {"sessions": [_session(s) for s in self.client.sessions()]}

    def make_session(self, name: str | None = None, rules: dict[str, Any] | None = None) -> dict[str, Any]:
        return _session(self.client.create_session(name or None, rules=rules))

    def end_session(self, name: str, timeout: float = 10.0) -> dict[str, Any]:
        return self.client.delete_session(name, timeout)

    def find_exchanges(self, filter: str = "", session: str | None = None, after: int = 0,
                       limit: int = FIND_LIMIT) -> dict[str, Any]:
        found = self._on(session).find(filter, after=after, limit=limit)
        return {"exchanges": [_summary(e) for e in found.exchanges], "next": found.next, "more": found.more}

    def read_exchange(self, id: int, session: str | None = None, body_chars: int = BODY_CHARS,
                      body_offset: int = 0) -> dict[str, Any]:
        whole = self._on(session).exchange(id, offset=body_offset, chars=body_chars)
        whole["summary"] = _summary(whole["summary"])
        return whole

    def wait_for_exchange(self, filter: str, session: str | None = None, timeout: float = 30.0,
                          after: int = 0) -> dict[str, Any]:
        found = self._on(session).wait_for(filter, min(max(0.0, timeout), MAX_WAIT), after=after)
        return {"found": found is not None, "exchange": _summary(found) if found is not None else None}

    def set_rules(self, rules: dict[str, Any], session: str | None = None) -> dict[str, Any]:
        return {"rules": self._on(session).set_rules(rules)}

    def save_har(self, path: str, session: str | None = None) -> dict[str, Any]:
        path = os.path.abspath(os.path.expanduser(path))
        written = self._on(session).save_har(path)
        return {"path": path, "bytes": written}


def _session(session: Session) -> dict[str, Any]:
    return {"name": session.name, "proxy": session.proxy, "port": session.port, "first_line": session.first}


#: Each tool's description, for the model.
DESCRIPTIONS = {
    "list_sessions": "List netlog's recording sessions: each has a name and a `proxy` URL "
                     "(http://127.0.0.1:PORT) that a browser or HTTP client uses as its proxy; "
                     "everything sent through it is recorded in that session's log.",
    "make_session": "Make a new recording session and return its name and `proxy` URL. Point a browser or "
                    "client at that proxy (e.g. curl -x URL, or a browser's proxy setting) to record its "
                    "traffic apart from everyone else's. `name` is optional (netlog picks one); `rules` "
                    "is an optional rules document (headers to set, hosts to block or allow, remaps, latency).",
    "end_session": "End a recording session by name: its open exchanges get `timeout` seconds to finish. "
                   "Its log stays on disk; save its HAR first if you need it.",
    "find_exchanges": "Find recorded HTTP exchanges (request + response) that match a filter, in the order "
                      "they ended. Returns short summaries (id, method, url, status, content_type, duration, "
                      "size); use read_exchange with an id for headers and bodies. Without `session` it "
                      "searches the main log. At most `limit` results (default 20); if `more` is true, call "
                      "again with after=`next`.\n" + FILTER_HELP,
    "read_exchange": "Read one exchange whole by its id (from find_exchanges or wait_for_exchange): request "
                     "and response heads and bodies as text. Each body is cut to `body_chars` characters "
                     "(default 2000); a body's `next_offset` says where the rest starts: call again with "
                     "body_offset=next_offset (and a larger body_chars) to read on.",
    "wait_for_exchange": "Wait until an exchange matching `filter` has ended, up to `timeout` seconds "
                         "(default 30), and return its summary; `found` is false if none did in time. "
                         "By default one that already ended counts too, so you can start the request "
                         "before or after calling this; pass after=N (a `next` from find_exchanges) to wait "
                         "only for later ones.\n" + FILTER_HELP,
    "set_rules": "Replace a session's rules (or the main listener's, without `session`); they apply from "
                 "the next request. The document: {\"headers\": [...], \"block\": [...], \"allow\": [...], "
                 "\"remap\": [...], \"latency\": ...}; a mistake is refused with a one-line reason.",
    "save_har": "Save a session's recorded traffic (or the main log's, without `session`) as a HAR 1.2 "
                "file at `path` on this machine; returns the absolute path and its size in bytes.",
}


def _told(e: Exception) -> str:
    """
    An error as the model is told it: the API's own words for its refusals.
    """
    if isinstance(e, ApiError) and not isinstance(e, TooManyRequests):
        said = "; ".join(f"{k}: {v}" for k, v in e.error.items() if k != "error")
        return f"netlog refused ({e.status}): {e.message}" + (f" ({said})" if said else "") + e.hint
    return str(e)


def makeServer(client: Netlog) -> Any:
    """
    The MCP server (an C{mcp.server.mcpserver.MCPServer}) whose tools drive
    C{client}'s API.
    """
    import functools

    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(
        "netlog",
        instructions="netlog records HTTP traffic that goes through its proxy, per session. Make a session, "
                     "send traffic through its proxy URL, then find, wait for and read exchanges with the "
                     "filter language, and save a HAR.",
    )
    tools = Tools(client)
    for name, description in DESCRIPTIONS.items():
        method = getattr(tools, name)

        def call(*args: Any, _method: Any = method, **kwargs: Any) -> Any:
            try:
                return _method(*args, **kwargs)
            except (NetlogError, OSError, ValueError) as e:
                raise ToolError(_told(e)) from None

        server.add_tool(functools.wraps(method)(call), name=name, description=description)
    return server
