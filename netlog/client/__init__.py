"""
A client for netlog's loopback API, with the standard library only: sessions,
the log page by page, the HAR streamed to a file, the CA.

    with Netlog("http://127.0.0.1:8081") as nl, nl.session("task-17") as s:
        context = browser.new_context(proxy={"server": s.proxy})
        ...
        s.save_har("task-17.har")

Exchanges are found by the filter language (docs/agents.rst): C{find} lists
the ended ones that match, C{exchange} reads one whole, C{wait_for} waits
until one has ended.

A C{429} (too many sessions made at once) is waited out as its
C{Retry-After} says and the call made again, for up to C{retry_within}
seconds in all; past that, L{TooManyRequests}. A connection the API closes
without answering (it holds 64 at once, and closes any more as it accepts
them) is tried again too, after a moment, within the same bound. Any other answer the API
refuses raises L{ApiError}, carrying the API's JSON error and its status; an API that can't be reached (refused, reset, timed out)
raises L{ApiUnreachable}. Every call has a timeout. C{netlog session} is
built on this client, so the two say the same.

The token that changes things (C{Authorization: Bearer ...}) is the one
given, else C{NETLOG_API_TOKEN}, else the file C{api-token} in netlog's state
folder (L{read_token}).
"""

from __future__ import annotations

import http.client
import json
import math
import email.utils
import os
import random
import re
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from types import TracebackType
from typing import Any, BinaryIO, Iterator
from urllib.parse import quote, urlencode, urlsplit

from netlog.state import API_ENV, TOKEN_ENV, TOKEN_FILE, defaultState
from netlog.token import defaultTokenPath, findToken
from netlog.wholefile import writeWhole

#: Where a 401 says the Python client's token comes from (L{read_token}).
PYTHON_TOKEN_HINT = f"token=..., ${TOKEN_ENV}, or a readable {TOKEN_FILE} in the state folder (token_file=...)"

#: Seconds one call may wait for the API (to connect, and for each read).
CALL_TIMEOUT = 30.0
#: Seconds a deleted session's open exchanges have to end (the API's own
#: default for C{DELETE /sessions/NAME}).
STOP_TIMEOUT = 10.0
#: Seconds L{Netlog.follow} waits between polls of a log with nothing new.
FOLLOW_POLL = 0.2
#: Seconds L{Netlog.follow} keeps trying an API that can't be reached (or
#: answers 5xx) before it gives up: a restarting proxy is back well within.
FOLLOW_PATIENCE = 60.0
#: Seconds a HAR download may wait for its next bytes, if longer than the
#: call's timeout: the API runs two exports at once and a third waits its
#: turn (and the API itself gives a stalled client 300 s).
HAR_TIMEOUT = 300.0
#: The most of an error's body read, in bytes.
MAX_ERROR_BODY = 65536
#: Bytes copied at a time when a HAR is streamed to a file.
COPY_CHUNK = 1 << 20
#: Seconds a call keeps waiting out C{429} answers, in all, before it gives
#: up (a client's C{retry_within}).
RETRY_WITHIN = 60.0
#: The most a C{Retry-After} is stretched by, at random, so that many
#: clients told the same second don't all come back in the same instant.
RETRY_JITTER = 0.2
#: Seconds before a call is made again whose connection the API closed
#: without an answer (it holds L{netlog.api.MAX_API_CONNECTIONS} at once and
#: closes any more as it accepts them), doubled at most, at random.
CLOSED_PAUSE = 0.2
#: The longest the API holds one wait, in seconds (its C{MAX_WAIT}):
#: L{Netlog.wait_for} asks again for longer ones.
WAIT_STEP = 60

_MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class NetlogError(Exception):
    """
    Something the client could not do; the subclasses say what.
    """


class ApiError(NetlogError):
    """
    The API answered with an error: C{status} (C{404}, C{409}, C{401}...),
    and C{error}, the API's JSON error object (C{{"error": "..."}}, with
    C{parameter} and C{reason} for a bad parameter).
    """

    def __init__(self, method: str, url: str, status: int, error: dict[str, Any],
                 token_hint: str = PYTHON_TOKEN_HINT) -> None:
        self.method = method
        self.url = url
        self.status = status
        self.error = error
        self._token_hint = token_hint
        NetlogError.__init__(self, self._describe())

    @property
    def message(self) -> str:
        """
        The API's own words (its C{error} field).
        """
        return str(self.error.get("error", ""))

    @property
    def hint(self) -> str:
        """
        For a 401, where the token comes from (C{" (give the API's token:
        ...)"}); else nothing.
        """
        return f" (give the API's token: {self._token_hint})" if self.status == 401 else ""

    def _describe(self) -> str:
        return f"{self.method} {self.url}: {self.status} {json.dumps(self.error)}{self.hint}"


class NoTokenFile(NetlogError):
    """
    The token file named does not exist, or is a folder: a mistake, not
    "no token" (which reads are fine with).
    """


class TooManyRequests(ApiError):
    """
    The API kept answering C{429} for longer than the caller's
    C{retry_within}: C{tries} calls over C{waited} seconds.
    """

    def __init__(self, method: str, url: str, error: dict[str, Any], tries: int, waited: float,
                 within: float) -> None:
        self.tries = tries
        self.waited = waited
        self.within = within
        ApiError.__init__(self, method, url, 429, error)

    def _describe(self) -> str:
        return (f"{ApiError._describe(self)}: gave up after {self.tries} tries over {self.waited:.1f} s"
                f" of waiting out Retry-After (retry_within={self.within:g} s; give a larger one to wait longer)")


class ApiUnreachable(NetlogError):
    """
    The API could not be reached, or went away or timed out mid-answer:
    nothing the API said, unlike L{ApiError}.
    """

    def __init__(self, method: str, url: str, reason: str) -> None:
        self.method = method
        self.url = url
        self.reason = reason
        NetlogError.__init__(self, f"{method} {url}: the API can't be reached: {reason}")


def api_url(text: str | None = None) -> str:
    """
    The API's base URL, from C{text} or else C{$NETLOG_API}: C{http://} is
    understood when only C{host:port} is given; a trailing C{/} is dropped.

    @raise ValueError: there is none, or it is not an HTTP URL (a bare port,
        or an endpoint description such as C{tcp:8081}, says what to write).
    """
    if text is None:
        text = os.environ.get(API_ENV)
        if not text:
            raise ValueError(f"no API given: pass its URL (http://127.0.0.1:PORT) or set {API_ENV}")
    text = text.strip()
    if "://" not in text:
        described = re.match(r"(?:(?:tcp|ssl):(?:port=)?)?(\d+)(?::|$)", text)
        if described or text.startswith("unix:"):
            port = described.group(1) if described else "PORT"
            raise ValueError(f"{text!r} is not the API's URL: write it as http://127.0.0.1:{port}")
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{text!r} is not the API's URL: write it as http://127.0.0.1:PORT")
    try:
        parts.port
    except ValueError:
        raise ValueError(f"{text!r} has a bad port: write it as http://127.0.0.1:PORT") from None
    if parts.query or parts.fragment:
        raise ValueError(f"{text!r} is not the API's URL: give it without ? or #")
    return text.rstrip("/")


def read_token(token: str | None = None, token_file: str | None = None) -> str | None:
    """
    The API's token, found as C{netlog session} finds it: C{token} if given,
    else C{$NETLOG_API_TOKEN}, else the contents of C{token_file} (default
    C{api-token} in the state folder). None when there is none to be had (no
    default file, or one this user may not read): reads need no token.

    @raise NoTokenFile: C{token_file} is given and does not exist, or is a
        folder.
    """
    if token_file is not None:
        if not os.path.exists(token_file):
            raise NoTokenFile(f"the token file {token_file} does not exist")
        if os.path.isdir(token_file):
            raise NoTokenFile(f"the token file {token_file} is a folder")
    return findToken(token, token_file or defaultTokenPath(defaultState()))


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """
    The seconds a C{Retry-After} header asks to wait (a number of seconds,
    or an HTTP date), or None when there is none or it can't be read.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


@dataclass(frozen=True)
class Found:
    """
    The exchanges a search found (C{exchanges}: summaries, in the order they
    ended), the cursor to search on from (C{next}), whether the log was
    begun again, and whether there may be more past C{next} (C{more}).
    """

    exchanges: list[dict[str, Any]]
    next: int
    begun_again: bool
    more: bool


@dataclass(frozen=True)
class Page:
    """
    One page of a log: its whole C{lines} after the cursor asked with, the
    cursor to ask next (C{next}), and whether the log was begun again
    (replaced or truncated: C{lines} then start from its new first line).
    """

    lines: list[dict[str, Any]]
    next: int
    begun_again: bool


class Netlog:
    """
    One netlog's API.

    A context manager only for the shape of C{with Netlog(url) as nl}: it
    holds no connection between calls (each call is one request, so a
    client may be shared by threads).
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        token_file: str | None = None,
        timeout: float = CALL_TIMEOUT,
        retry_within: float = RETRY_WITHIN,
    ) -> None:
        """
        @param url: the API, e.g. C{http://127.0.0.1:8081} (default
            C{$NETLOG_API}); see L{api_url}.
        @param token: the API's token (default: see L{read_token}).
        @param token_file: where the token is kept, when not in the default
            state folder.
        @raise NoTokenFile: C{token_file} does not exist.
        @param timeout: seconds each call may wait to connect and for each
            read of its answer.
        @param retry_within: seconds a call may spend waiting out C{429}
            answers (as their C{Retry-After} says) before it raises
            L{TooManyRequests}; 0 raises at the first.
        """
        self.url = api_url(url)
        self.timeout = timeout
        self.retry_within = retry_within
        self._token = read_token(token, token_file)
        #: Where a 401 says the token comes from (the command line names
        #: its options here).
        self.token_hint = PYTHON_TOKEN_HINT
        # Never through the environment's http_proxy: the API is on loopback.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def __enter__(self) -> Netlog:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __repr__(self) -> str:
        return f"Netlog({self.url!r})"

    # -- one request ---------------------------------------------------------

    def _open(self, method: str, path: str, body: dict[str, Any] | None = None,
              timeout: float | None = None) -> http.client.HTTPResponse:
        """
        Send one request and hand back its (2xx) answer, unread.

        @raise ApiError: an error answer.
        @raise ApiUnreachable: no answer.
        """
        url = self.url + path
        data = json.dumps(body).encode("utf-8") if body is not None else None
        tries = 0
        waited = 0.0
        while True:
            request = urllib.request.Request(url, data=data, method=method)
            if method in _MUTATIONS:
                request.add_header("Content-Type", "application/json")
            if self._token is not None:
                request.add_header("Authorization", f"Bearer {self._token}")
            tries += 1
            try:
                response: http.client.HTTPResponse = self._opener.open(request, timeout=timeout or self.timeout)
            except urllib.error.HTTPError as e:
                with e:
                    error = _error_of(e)
                    pause = retry_after(e.headers.get("Retry-After")) if e.code == 429 else None
                if pause is None:
                    raise ApiError(method, url, e.code, error, self.token_hint) from None
                pause *= 1 + random.uniform(0, RETRY_JITTER)
                if waited + pause > self.retry_within:
                    raise TooManyRequests(method, url, error, tries, waited, self.retry_within) from None
            except (OSError, http.client.HTTPException) as e:
                reason = e.reason if isinstance(e, urllib.error.URLError) else e
                if not isinstance(reason, (ConnectionResetError, BrokenPipeError)):
                    raise ApiUnreachable(method, url, str(reason) if isinstance(reason, str)
                                         else _reason_of(reason)) from None
                # Closed without an answer: the API holds so many connections
                # at once and closes any more as soon as it accepts them.
                pause = CLOSED_PAUSE * (1 + random.uniform(0, 1))
                if waited + pause > self.retry_within:
                    raise ApiUnreachable(method, url, f"{_reason_of(reason)}, {tries} times over {waited:.1f} s"
                                         f" (retry_within={self.retry_within:g} s)") from None
            else:
                return response
            time.sleep(pause)
            waited += pause

    def _json(self, method: str, path: str, body: dict[str, Any] | None = None,
              timeout: float | None = None) -> Any:
        response = self._open(method, path, body, timeout)
        with response:
            try:
                raw = response.read()
            except (OSError, http.client.HTTPException) as e:
                raise ApiUnreachable(method, self.url + path, _reason_of(e)) from None
        try:
            return json.loads(raw)
        except ValueError:
            raise NetlogError(f"{method} {self.url + path}: the answer is not JSON: {raw[:200]!r}") from None

    def _copy(self, path: str, out: BinaryIO, timeout: float | None = None) -> int:
        """
        Stream a GET's answer into C{out}; the bytes written.
        """
        response = self._open("GET", path, timeout=timeout)
        written = 0
        with response:
            while True:
                try:
                    chunk = response.read(COPY_CHUNK)
                except (OSError, http.client.HTTPException) as e:
                    raise ApiUnreachable("GET", self.url + path, _reason_of(e)) from None
                if not chunk:
                    return written
                out.write(chunk)
                written += len(chunk)

    def _save(self, path: str, to: str, timeout: float | None = None) -> int:
        """
        Stream a GET's answer into the file C{to}, whole or not at all (a
        failed download leaves no file behind).
        """
        with writeWhole(to, ".part") as out:
            return self._copy(path, out, timeout)

    @property
    def _har_timeout(self) -> float:
        """
        How long a HAR download waits for its bytes (L{HAR_TIMEOUT}).
        """
        return max(self.timeout, HAR_TIMEOUT)

    # -- the log ---------------------------------------------------------------

    def read(self, after: int = 0, limit: int | None = None) -> Page:
        """
        One page of the main log: the whole lines numbered above C{after},
        at most C{limit} bytes of them (the API's default 1 MiB) but at
        least one.
        """
        return self._page("/network", after, limit)

    def _page(self, path: str, after: int, limit: int | None) -> Page:
        query: dict[str, int] = {"after": after}
        if limit is not None:
            query["limit"] = limit
        answer = self._json("GET", f"{path}?{urlencode(query)}")
        return Page(list(answer["lines"]), int(answer["next"]), bool(answer["begun_again"]))

    def follow(self, after: int = 0, *, poll: float = FOLLOW_POLL,
               patience: float = FOLLOW_PATIENCE) -> Iterator[dict[str, Any]]:
        """
        The main log's lines numbered above C{after}, each once and in
        order, as they come: it never ends by itself (stop iterating to
        stop). See L{_follow}.
        """
        return self._follow("/network", after, poll, patience)

    def _follow(self, path: str, after: int, poll: float, patience: float) -> Iterator[dict[str, Any]]:
        """
        Page through a log with the cursor each page hands out, as the API's
        cursor rules ask: a worker restart changes nothing (the log numbers
        on), a log begun again goes on from its new first line. An API that
        can't be reached or answers 5xx (a proxy restarting) is asked again
        for up to C{patience} seconds in a row before L{ApiUnreachable} or
        L{ApiError} is raised.
        """
        cursor = after
        failing_since: float | None = None
        while True:
            try:
                page = self._page(path, cursor, None)
            except (ApiUnreachable, ApiError) as e:
                if isinstance(e, ApiError) and e.status < 500:
                    raise
                now = time.monotonic()
                if failing_since is None:
                    failing_since = now
                elif now - failing_since > patience:
                    raise
                time.sleep(poll)
                continue
            failing_since = None
            if page.lines or page.begun_again:
                cursor = page.next
            yield from page.lines
            if not page.lines:
                time.sleep(poll)

    def save_har(self, path: str, *, upto: int | None = None, redact: str | None = None,
                 redact_key: str | None = None) -> int:
        """
        Stream the main log's HAR into the file C{path} (through line
        C{upto} only, if given); the bytes written.

        @param redact: a built-in redaction policy's name (C{secrets}), done
            by the API before a byte leaves it (C{docs/redaction.rst}).
        @param redact_key: the key values are hashed under (default: one
            made for this export).
        """
        return self._save(_har_path("/network.har", upto, redact=redact, redact_key=redact_key), path,
                          self._har_timeout)

    def write_har(self, out: BinaryIO, *, upto: int | None = None) -> int:
        """
        Stream the main log's HAR into C{out}; the bytes written.
        """
        return self._copy(_har_path("/network.har", upto), out, self._har_timeout)

    # -- finding exchanges -----------------------------------------------------

    def find(self, filter: str = "", *, after: int = 0, limit: int | None = None) -> Found:
        """
        The main log's exchanges that ended after line C{after} and match
        C{filter} (the filter language, docs/agents.rst), as summaries:
        C{id}, line numbers, C{method}, C{url}, C{status}, C{content_type},
        times and sizes. At most C{limit} (the API's default 50); C{more}
        says to ask again from C{next}. A filter with a mistake is a 400
        L{ApiError} saying where.
        """
        return self._find("/exchanges", filter, after, limit)

    def _find(self, path: str, filter: str, after: int, limit: int | None, wait: int = 0) -> Found:
        query: dict[str, Any] = {"filter": filter, "after": after}
        if limit is not None:
            query["limit"] = limit
        if wait:
            query["wait"] = wait
        answer = self._json("GET", f"{path}?{urlencode(query)}", timeout=self.timeout + wait)
        return Found(list(answer["exchanges"]), int(answer["next"]), bool(answer["begun_again"]),
                     bool(answer["more"]))

    def exchange(self, id: int, *, offset: int = 0, chars: int | None = None) -> dict[str, Any]:
        """
        One exchange of the main log whole: C{summary}, C{request} and
        C{response} (C{None} while it is open) with their headers and
        bodies as text, each body C{chars} characters (the API's default
        16384) from C{offset}; a body's C{next_offset} is where the rest
        begins (None: no more).
        """
        return self._exchange("/exchanges", id, offset, chars)

    def _exchange(self, path: str, id: int, offset: int, chars: int | None) -> dict[str, Any]:
        query: dict[str, int] = {"offset": offset}
        if chars is not None:
            query["chars"] = chars
        return dict(self._json("GET", f"{path}/{int(id)}?{urlencode(query)}"))

    def wait_for(self, filter: str = "", timeout: float = 30.0, *, after: int = 0) -> dict[str, Any] | None:
        """
        Wait up to C{timeout} seconds for an exchange of the main log that
        matches C{filter} to have ended after line C{after}; its summary,
        or None when none did in time. With the default C{after=0} one that
        ended before the call counts too (so a request made just before
        isn't missed); give a cursor (a L{Found}'s C{next}) to wait only
        for later ones. The API holds the call until then: no polling.
        """
        return self._wait_for("/exchanges", filter, timeout, after)

    def _wait_for(self, path: str, filter: str, timeout: float, after: int) -> dict[str, Any] | None:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            found = self._find(path, filter, after, 1, max(0, min(WAIT_STEP, math.ceil(left))))
            if found.exchanges:
                return found.exchanges[0]
            after = found.next
            if not found.more and time.monotonic() >= deadline - 0.001:
                return None

    def save_warc(self, path: str, *, upto: int | None = None) -> int:
        """
        Stream the main log's WARC (C{.warc.gz}) into the file C{path}, as
        L{save_har} does its HAR; the bytes written.
        """
        return self._save(_har_path("/network.warc.gz", upto), path, self._har_timeout)

    # -- the CA ----------------------------------------------------------------

    def ca(self) -> bytes:
        """
        The site proxy's CA certificate, PEM (the stand-in has none: a 404
        L{ApiError}).
        """
        response = self._open("GET", "/ca.pem")
        with response:
            try:
                return bytes(response.read())
            except (OSError, http.client.HTTPException) as e:
                raise ApiUnreachable("GET", self.url + "/ca.pem", _reason_of(e)) from None

    def save_ca(self, path: str) -> int:
        """
        Write the CA certificate to the file C{path}; the bytes written.
        """
        return self._save("/ca.pem", path)

    # -- sessions --------------------------------------------------------------

    def sessions(self) -> list[Session]:
        """
        The proxy's sessions.
        """
        return [Session(self, info) for info in self._json("GET", "/sessions")["sessions"]]

    def create_session(self, name: str | None = None, port: int | None = None,
                       rules: dict[str, Any] | None = None) -> Session:
        """
        Make a session (C{POST /sessions}): netlog picks the name and a free
        port unless they are given; C{rules} is its rules document
        (C{docs/rules.rst}).
        """
        body: dict[str, Any] = {}
        if name is not None:
            body["name"] = name
        if port is not None:
            body["port"] = port
        if rules is not None:
            body["rules"] = rules
        return Session(self, self._json("POST", "/sessions", body))

    def rotate(self) -> dict[str, Any]:
        """
        Close the live segment of the proxy's log now (C{POST /rotate}, with
        the token; see docs/rotation.rst): C{{"logs": [{"log": PATH,
        "closed": true, "next": N}]}}, or C{{"logs": [], "forwarded": true}}
        from a supervisor, which hands it on to its worker.
        """
        return dict(self._json("POST", "/rotate", {}))

    def rules(self) -> dict[str, Any]:
        """
        The main listener's rules document (C{GET /rules}).
        """
        return dict(self._json("GET", "/rules")["rules"])

    def set_rules(self, rules: dict[str, Any]) -> dict[str, Any]:
        """
        Replace the main listener's rules (C{PUT /rules}), in force for the
        next request; a wrong document is a 400 L{ApiError} whose message is
        the one line that says why, and the rules stay as they were.
        """
        return dict(self._json("PUT", "/rules", rules)["rules"])

    def get_session(self, name: str) -> Session:
        """
        A session by name (a 404 L{ApiError} if there is none).
        """
        return Session(self, self._json("GET", _session_path(name)))

    def delete_session(self, name: str, timeout: float = STOP_TIMEOUT) -> dict[str, Any]:
        """
        Stop a session: its open exchanges have C{timeout} seconds to end,
        then are ended as stopped. The API's answer: C{name}, C{log} (the
        file stays) and C{last}, its last line number.
        """
        seconds = max(0, math.ceil(timeout))
        return dict(self._json("DELETE", f"{_session_path(name)}?timeout={seconds}",
                               timeout=self.timeout + seconds))

    def session(self, name: str | None = None, port: int | None = None,
                stop_timeout: float = STOP_TIMEOUT) -> Session:
        """
        Make a session to use as a context manager: it is deleted on leaving
        the C{with} block, by an exception too (waiting up to
        C{stop_timeout} seconds for its open exchanges, as C{DELETE} does).
        """
        made = self.create_session(name, port)
        made.stop_timeout = stop_timeout
        return made


class Session:
    """
    One session of a proxy: its C{name}, its C{proxy} (C{http://127.0.0.1:PORT},
    what a browser's proxy setting takes), C{port}, C{log} (its file on the
    proxy's machine), C{first} (the number of its first line: the file may
    hold an earlier session's of its name before it) and C{info}, the API's
    description as it came.

    As a context manager, it is deleted on leaving the block.
    """

    def __init__(self, client: Netlog, info: dict[str, Any]) -> None:
        self.client = client
        self.info = info
        self.name: str = info["name"]
        self.port: int = int(info["port"])
        self.proxy = f"http://{info['proxy']}"
        self.log: str = info["log"]
        self.first: int = int(info.get("first", 1))
        self.stop_timeout = STOP_TIMEOUT
        #: The API's answer to the delete, once deleted.
        self.deleted: dict[str, Any] | None = None
        # What open_exchanges has read of the log so far.
        self._cursor = 0
        self._open: set[int] = set()

    def __repr__(self) -> str:
        return f"<Session {self.name} {self.proxy}>"

    def __enter__(self) -> Session:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.deleted is not None:
            return
        try:
            self.delete(self.stop_timeout)
        except NetlogError as e:
            if value is None:
                raise
            # The block's own exception goes on, and says this too.
            value.add_note(f"deleting session {self.name} failed too: {e}")

    def rules(self) -> dict[str, Any]:
        """
        This session's rules document (C{GET /sessions/NAME/rules}).
        """
        return dict(self.client._json("GET", _session_path(self.name) + "/rules")["rules"])

    def set_rules(self, rules: dict[str, Any]) -> dict[str, Any]:
        """
        Replace this session's rules, as L{Netlog.set_rules} does the main
        listener's.
        """
        return dict(self.client._json("PUT", _session_path(self.name) + "/rules", rules)["rules"])

    def read(self, after: int = 0, limit: int | None = None) -> Page:
        """
        One page of this session's log (see L{Netlog.read}).
        """
        return self.client._page(_session_path(self.name) + "/network", after, limit)

    def follow(self, after: int = 0, *, poll: float = FOLLOW_POLL,
               patience: float = FOLLOW_PATIENCE) -> Iterator[dict[str, Any]]:
        """
        This session's lines as they come (see L{Netlog.follow}).
        """
        return self.client._follow(_session_path(self.name) + "/network", after, poll, patience)

    def find(self, filter: str = "", *, after: int = 0, limit: int | None = None) -> Found:
        """
        This session's exchanges that match C{filter} (see L{Netlog.find}).
        """
        return self.client._find(_session_path(self.name) + "/exchanges", filter, after, limit)

    def exchange(self, id: int, *, offset: int = 0, chars: int | None = None) -> dict[str, Any]:
        """
        One of this session's exchanges whole (see L{Netlog.exchange}).
        """
        return self.client._exchange(_session_path(self.name) + "/exchanges", id, offset, chars)

    def wait_for(self, filter: str = "", timeout: float = 30.0, *, after: int = 0) -> dict[str, Any] | None:
        """
        Wait for one of this session's exchanges (see L{Netlog.wait_for}).
        """
        return self.client._wait_for(_session_path(self.name) + "/exchanges", filter, timeout, after)

    def open_exchanges(self) -> set[int]:
        """
        The ids of this session's exchanges (and tunnels) that have an open
        line and no end line yet (read on from where the last call stopped).
        """
        while True:
            page = self.read(self._cursor)
            if page.begun_again:
                self._open.clear()
            for line in page.lines:
                if line.get("type") == "open":
                    self._open.add(line["id"])
                elif line.get("type") == "end":
                    self._open.discard(line.get("id"))
            if page.lines or page.begun_again:
                self._cursor = page.next
            if not page.lines:
                return set(self._open)

    def wait_ended(self, timeout: float = STOP_TIMEOUT, poll: float = FOLLOW_POLL) -> bool:
        """
        Wait up to C{timeout} seconds until every exchange of the session has
        ended (a browser context just closed: its connections end a moment
        later), so that a HAR saved next has each entry whole. Whether they
        all did.
        """
        deadline = time.monotonic() + timeout
        while self.open_exchanges():
            if time.monotonic() >= deadline:
                return False
            time.sleep(poll)
        return True

    def save_har(self, path: str, *, upto: int | None = None, from_line: int | None = None,
                 redact: str | None = None, redact_key: str | None = None) -> int:
        """
        Stream this session's HAR into the file C{path} (through line C{upto}
        only, if given); the bytes written. It holds the exchanges since the
        session was made (its C{first} line on), unless C{from_line} says
        where to begin (0: the whole file, earlier sessions of its name too).
        C{redact} and C{redact_key} as L{Netlog.save_har} takes them.
        """
        return self.client._save(
            _har_path(_session_path(self.name) + "/network.har", upto, from_line, redact, redact_key), path,
            self.client._har_timeout)

    def write_har(self, out: BinaryIO, *, upto: int | None = None, from_line: int | None = None,
                  redact: str | None = None, redact_key: str | None = None) -> int:
        """
        Stream this session's HAR into C{out}, as L{save_har} does; the bytes written.
        """
        return self.client._copy(
            _har_path(_session_path(self.name) + "/network.har", upto, from_line, redact, redact_key), out,
            self.client._har_timeout)

    def save_warc(self, path: str, *, upto: int | None = None, from_line: int | None = None) -> int:
        """
        Stream this session's WARC into the file C{path} (see L{save_har});
        the bytes written.
        """
        return self.client._save(_har_path(_session_path(self.name) + "/network.warc.gz", upto, from_line), path,
                                 self.client._har_timeout)

    def delete(self, timeout: float | None = None) -> dict[str, Any]:
        """
        Stop the session (see L{Netlog.delete_session}).
        """
        self.deleted = self.client.delete_session(self.name, self.stop_timeout if timeout is None else timeout)
        return self.deleted


def _session_path(name: str) -> str:
    return "/sessions/" + quote(name, safe="")


def _har_path(path: str, upto: int | None, from_line: int | None = None, redact: str | None = None,
              redact_key: str | None = None) -> str:
    query = {name: value for name, value in (("upto", upto), ("from", from_line), ("redact", redact),
                                             ("redact_key", redact_key)) if value is not None}
    return f"{path}?{urlencode(query)}" if query else path


def _reason_of(e: BaseException) -> str:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timed out"
    return str(e) or type(e).__name__


def _error_of(e: urllib.error.HTTPError) -> dict[str, Any]:
    """
    The API's JSON error from an error answer; an answer that is not a JSON
    object (a reverse proxy's page) is carried as its text.
    """
    try:
        raw = e.read(MAX_ERROR_BODY)
    except (OSError, http.client.HTTPException):
        raw = b""
    try:
        found = json.loads(raw)
    except ValueError:
        found = None
    if isinstance(found, dict):
        return found
    return {"error": raw.decode("utf-8", "replace").strip() or str(e.reason)}


__all__ = [
    "ApiError", "ApiUnreachable", "Found", "Netlog", "NetlogError", "NoTokenFile", "Page", "Session",
    "TooManyRequests", "api_url", "read_token", "retry_after",
]
