"""
The loopback HTTP API's resources: the log's pages, its HAR, the CA.

  - C{GET /network?after=N&limit=BYTES}: the reader's envelope
    C{{"lines": [...], "next": N, "begun_again": false}};
  - C{GET /network.har}: the HAR export, built in a thread and streamed;
  - C{GET /ca.pem}: the site proxy's CA certificate;
  - C{GET /exchange?id=N&end=M}: one exchange's records and HAR entry, for
    the live view's detail pane;
  - C{GET /}: the live view, a page (with its script and style, served
    from the package) that follows C{/network}.

Only a request whose C{Host} names this machine's loopback (C{127.0.0.1},
C{[::1]}, C{localhost}), the address it was sent to, or a name given with
C{--api-host} is answered; any other gets C{421} with a JSON error. A web page
can point a name of its own at 127.0.0.1 (DNS rebinding) and have the browser
read the API as that name's origin: the C{Host} the browser sends is then that
name, and is refused. The port is not judged: a page can't choose the name
the browser sends for another origin, whatever the port, and an SSH tunnel or
a port forward changes it.

Bad parameters get C{400} and a JSON body saying which and why. The file work
runs in threads, so a slow disk or a large export never holds up the event
loop (which, in the supervisor, also watches the worker).
"""

from __future__ import annotations

import importlib.resources
import ipaddress
import json
import os
import threading
from typing import Any, Callable

from twisted.internet.defer import DeferredLock
from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request

from netlog.api.answers import JSON_TYPE, finishJSON, jsonHead, sendJSON
from netlog.api.params import BadParameter, parseQuery, queryOf
from netlog.api.redaction import takeRedaction
from netlog.core.paging import DEFAULT_LIMIT
from netlog.net.reactors import IProxyReactor

_log = Logger()

#: The largest C{limit} a page may ask for, in bytes.
MAX_LIMIT = 64 << 20
#: Seconds a HAR export waits for a stalled client to read before giving up.
STALL_TIMEOUT = 300.0
#: Chunks of a streamed HAR handed to the event loop and not yet written.
CHUNKS_IN_FLIGHT = 4
#: HAR exports that run at once; more wait their turn, and never hold up the
#: threads that answer C{/network}.
HAR_EXPORTS_AT_ONCE = 2

#: The live view's files (package data in C{netlog/api/static}), by the
#: name they are served under, with their types.
VIEW_FILES = {
    b"": ("view.html", b"text/html; charset=utf-8"),
    b"view.js": ("view.js", b"text/javascript; charset=utf-8"),
    b"view.css": ("view.css", b"text/css; charset=utf-8"),
}
#: The live view runs only its own script and style, fetches only from the
#: API, and can't be framed: a log holds what any site sent, and the page
#: shows it as text only.
VIEW_POLICY = (
    b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    b"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

#: The names the API answers to whatever C{--api-host} says.
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


class _JSONResource(Resource):
    """
    A leaf that answers only C{GET} (and C{HEAD}), with JSON errors.
    """

    isLeaf = True

    def render(self, request: Request) -> Any:
        if request.postpath and request.postpath != [b""]:
            return sendJSON(request, 404, {"error": "no such resource", "path": request.path.decode("latin-1")})
        if request.method not in (b"GET", b"HEAD"):
            request.setHeader(b"allow", b"GET, HEAD")
            return sendJSON(request, 405, {"error": "only GET is served here"})
        try:
            return self.renderGET(request)
        except BadParameter as e:
            return sendJSON(
                request, 400, {"error": "bad parameter", "parameter": e.name, "reason": e.reason}
            )

    def renderGET(self, request: Request) -> Any:
        raise NotImplementedError()


class _LogResource(_JSONResource):
    """
    A leaf that reads the log (at C{logPath}, L{None} when the proxy keeps
    none) in C{threadpool}'s threads.
    """

    def __init__(self, reactor: IProxyReactor, threadpool: Any, logPath: str | None) -> None:
        Resource.__init__(self)
        self._reactor = reactor
        self._threadpool = threadpool
        self._logPath = logPath

    @staticmethod
    def _noLog(request: Request) -> Any:
        """
        The answer when the proxy keeps no log.
        """
        return sendJSON(request, 404, {"error": "this proxy keeps no log (--no-log)"})


class NetworkResource(_LogResource):
    """
    C{GET /network?after=N&limit=BYTES}: one page of the log.

    One L{netlog.log.reader.LogReader} serves every request (taking turns,
    in a thread), so a poller that asks with the cursor it was handed sees a
    log that was replaced or truncated as I{begun again}.
    """

    def __init__(self, reactor: IProxyReactor, threadpool: Any, logPath: str | None) -> None:
        _LogResource.__init__(self, reactor, threadpool, logPath)
        self._lock = DeferredLock()
        self._reader: Any = None

    def renderGET(self, request: Request) -> Any:
        params = parseQuery(
            queryOf(request),
            {"after": (0, 0, 2**63 - 1), "limit": (DEFAULT_LIMIT, 1, MAX_LIMIT)},
        )
        if self._logPath is None:
            return self._noLog(request)
        if self._reader is None:
            from netlog.log.reader import LogReader

            self._reader = LogReader(self._logPath)
        reader = self._reader

        def page() -> Any:
            return deferToThreadPool(
                self._reactor, self._threadpool, reader.read, params["after"], params["limit"]
            )

        d = self._lock.run(page)

        def done(result: Any) -> None:
            finishJSON(request, result.envelope() + b"\n")

        d.addCallbacks(done, lambda f: readFailed(request, f, "the log"))
        d.addErrback(lambda f: None)  # the client went away
        return NOT_DONE_YET


class _ClientGone(Exception):
    """
    The client of a streamed answer went away (or stalled too long).
    """


class _ThreadStream:
    """
    A binary file for a thread to write an answer through: each C{write}
    goes to the request on the event loop, and blocks while the client is not
    reading (the request pauses it as a push producer).
    """

    def __init__(self, reactor: IProxyReactor, request: Request) -> None:
        self._reactor = reactor
        self._request = request
        self._flowing = threading.Event()
        self._flowing.set()
        # Chunks handed to the event loop and not yet written: bounded, so a
        # busy event loop doesn't let the export run ahead of it in memory.
        self._inFlight = threading.BoundedSemaphore(CHUNKS_IN_FLIGHT)
        self.gone = False
        self.started = False
        request.registerProducer(self, True)
        request.notifyFinish().addErrback(self._lost)

    def _lost(self, reason: Failure) -> None:
        self.stopProducing()

    # IPushProducer, on the event loop
    def pauseProducing(self) -> None:
        self._flowing.clear()

    def resumeProducing(self) -> None:
        self._flowing.set()

    def stopProducing(self) -> None:
        self.gone = True
        self._flowing.set()
        self._release(CHUNKS_IN_FLIGHT)

    def _release(self, count: int) -> None:
        for _ in range(count):
            try:
                self._inFlight.release()
            except ValueError:
                return

    # file, in the thread
    def write(self, data: bytes) -> int:
        if not self._flowing.wait(STALL_TIMEOUT) or self.gone:
            raise _ClientGone()
        if not self._inFlight.acquire(timeout=STALL_TIMEOUT) or self.gone:
            raise _ClientGone()
        self.started = True
        self._reactor.callFromThread(self._write, bytes(data))
        return len(data)

    def _write(self, data: bytes) -> None:
        if not self.gone:
            self._request.write(data)
            self._release(1)

    def flush(self) -> None:
        pass


class _NoSuchLine(Exception):
    """
    C{upto} names a line the log doesn't have.
    """


def _readerAt(fd: int) -> Callable[[int, int], bytes]:
    return lambda offset, size: os.pread(fd, size, offset)


def _sizeThrough(upto: int) -> Callable[[int, int], int]:
    """
    For L{writeHar}: the log's bytes through line C{upto}.
    """
    from netlog.core.exchange import sizeThrough

    def upTo(fd: int, size: int) -> int:
        through = sizeThrough(_readerAt(fd), size, upto)
        if through is None:
            raise _NoSuchLine(upto)
        return through

    return upTo


class HarResource(_LogResource):
    """
    C{GET /network.har[?upto=N][&from=M]}: the HAR export of the whole log,
    or of the log as it was when it ended at line C{N} (what a reader whose
    cursor is C{N} has seen), streamed; with C{from}, only the exchanges
    whose open line is C{M} or later (C{from=0}: all of them); with
    C{redact=POLICY} (and C{redact_key}), redacted (L{netlog.api.redaction}).

    @param first: the C{from} when none is asked for (a session's first
        line: its log may begin with an earlier session's of the same name);
        a log begun again since then is exported whole.
    """

    #: What it serves: its type, the file name it suggests, and what it is
    #: called in the proxy's log (a subclass exports another format).
    contentType = JSON_TYPE
    fileName = b"network.har"
    what = "the HAR"

    def __init__(self, reactor: IProxyReactor, threadpool: Any, logPath: str | None,
                 first: Callable[[], int] = lambda: 0) -> None:
        _LogResource.__init__(self, reactor, threadpool, logPath)
        self._first = first

    def export(self) -> Callable[..., Any]:
        """
        The export run in a thread: C{export(logPath, out, upTo=,
        fromLine=, wholeIfMissing=)}, as L{netlog.har.export.writeHar}.
        """
        from netlog.har.export import writeHar

        return writeHar

    def exportOptions(self, redactor: Any) -> dict[str, Any]:
        """
        The export's keyword arguments beyond the span: for the HAR, the
        redaction asked for (None for none).

        @raise BadParameter: this export can't do what is asked.
        """
        return {"transform": redactor}

    def renderGET(self, request: Request) -> Any:
        query, redactor = takeRedaction(queryOf(request))
        params = parseQuery(query, {"upto": (-1, 0, 2**63 - 1), "from": (-1, 0, 2**63 - 1)})
        options = self.exportOptions(redactor)
        upto = params["upto"]
        fromLine = params["from"] if params["from"] >= 0 else self._first()
        if self._logPath is None:
            return self._noLog(request)
        from netlog.har.export import MissingLine

        request.setHeader(b"content-type", self.contentType)
        request.setHeader(b"content-disposition", b'attachment; filename="%s"' % self.fileName)
        request.setHeader(b"cache-control", b"no-store")
        if request.method == b"HEAD":
            return b""
        stream = _ThreadStream(self._reactor, request)
        out: Any = stream
        upTo = _sizeThrough(upto) if upto >= 0 else None
        d = deferToThreadPool(self._reactor, self._threadpool, self.export(), self._logPath, out, upTo=upTo,
                              fromLine=fromLine, wholeIfMissing=params["from"] < 0, **options)

        def done(result: Any) -> None:
            if stream.gone:
                return
            request.unregisterProducer()
            request.finish()

        def failed(failure: Failure) -> None:
            if stream.gone or failure.check(_ClientGone):
                return
            request.unregisterProducer()
            if stream.started:
                # Half a HAR is no HAR: cut the answer so the client sees it.
                _log.failure("exporting {what} failed midway", failure, what=self.what)
                request.channel.transport.abortConnection()  # type: ignore[union-attr]
                return
            if failure.check(_NoSuchLine, MissingLine):
                request.setHeader(b"content-disposition", b"inline")
                parameter, line = ("upto", upto) if failure.check(_NoSuchLine) else ("from", fromLine - 1)
                body = sendJSON(
                    request,
                    400,
                    {"error": "bad parameter", "parameter": parameter, "reason": f"the log has no line {line}"},
                )
            elif isinstance(failure.value, FileNotFoundError):
                body = sendJSON(request, 503, {"error": "the log can't be read", "reason": str(failure.value)})
            else:
                _log.failure("exporting {what} failed", failure, what=self.what)
                body = sendJSON(request, 500, {"error": f"exporting {self.what} failed; see the proxy's log"})
            request.write(body)
            request.finish()

        d.addCallbacks(done, failed)
        d.addErrback(lambda f: None)
        return NOT_DONE_YET


def _exchangeDetail(logPath: str, exchangeId: int, endLine: int | None) -> bytes:
    """
    In a thread: the JSON of L{netlog.core.exchange.exchangeDetail}.
    """
    from netlog.core.exchange import MAX_SCAN, exchangeDetail, findExchange, findNotes
    from netlog.log.span import seriesFrom

    with seriesFrom(logPath, exchangeId, MAX_SCAN, endLine) as (readAt, size):
        opened, ended = findExchange(readAt, size, exchangeId, endLine)
        notes = findNotes(readAt, size, exchangeId, ended["n"] if ended is not None else None)
    # ASCII escapes: a lone surrogate a body decoded to survives as JSON.
    return json.dumps(exchangeDetail(opened, ended, notes)).encode("ascii") + b"\n"


class ExchangeResource(_LogResource):
    """
    C{GET /exchange?id=N[&end=M]}: the exchange whose open line is C{N}
    (and whose end line is C{M}, when the caller knows it) as
    C{{"id", "open", "end", "entry"}}: its records without their bodies'
    base64, and its HAR entry. The live view fetches it when a row is
    opened, so the page never holds every body.
    """

    def renderGET(self, request: Request) -> Any:
        params = parseQuery(queryOf(request), {"id": (0, 1, 2**63 - 1), "end": (0, 1, 2**63 - 1)})
        if params["id"] == 0:
            raise BadParameter("id", "is required: the n of the exchange's open line")
        if self._logPath is None:
            return self._noLog(request)
        d = deferToThreadPool(
            self._reactor,
            self._threadpool,
            _exchangeDetail,
            self._logPath,
            params["id"],
            params["end"] or None,
        )

        d.addCallbacks(lambda body: finishJSON(request, body), lambda f: readFailed(request, f))
        d.addErrback(lambda f: None)  # the client went away
        return NOT_DONE_YET


def readFailed(request: Request, failure: Failure, what: str = "the exchange") -> None:
    """
    Answer C{request} for a read of the log that failed: C{404} for no such
    exchange, C{503} for a log that can't be read, else C{500} (logged).

    @param what: what was being read, for the C{500}'s words and the log.
    """
    from netlog.core.exchange import NoSuchExchange
    from netlog.log.reader import LogUnreadable

    if failure.check(NoSuchExchange):
        body = sendJSON(request, 404, {"error": "no such exchange", "reason": str(failure.value)})
    elif failure.check(LogUnreadable):
        body = sendJSON(request, 503, {"error": "the log can't be read", "reason": str(failure.value)})
    else:
        _log.failure("reading {what} for {uri}", failure, what=what, uri=request.uri)
        body = sendJSON(request, 500, {"error": f"reading {what} failed; see the proxy's log"})
    request.write(body)
    request.finish()


def viewFile(name: str) -> bytes:
    """
    One of the live view's files, from the package.
    """
    return importlib.resources.files("netlog.api").joinpath("static", name).read_bytes()


class ViewResource(_JSONResource):
    """
    One of the live view's files (L{VIEW_FILES}), read from the package once.
    """

    def __init__(self, name: str, contentType: bytes) -> None:
        Resource.__init__(self)
        self._name = name
        self._contentType = contentType
        self._data: bytes | None = None

    def renderGET(self, request: Request) -> Any:
        parseQuery(queryOf(request), {})
        if self._data is None:
            self._data = viewFile(self._name)
        request.setHeader(b"content-type", self._contentType)
        request.setHeader(b"cache-control", b"no-cache")
        request.setHeader(b"x-content-type-options", b"nosniff")
        request.setHeader(b"content-security-policy", VIEW_POLICY)
        request.setHeader(b"referrer-policy", b"no-referrer")
        return self._data


class FileResource(_JSONResource):
    """
    A small file read at each request (the CA certificate).
    """

    def __init__(self, path: Callable[[], str | None], contentType: bytes, missing: str) -> None:
        Resource.__init__(self)
        self._path = path
        self._contentType = contentType
        self._missing = missing

    def renderGET(self, request: Request) -> Any:
        parseQuery(queryOf(request), {})
        path = self._path()
        try:
            if path is None:
                raise FileNotFoundError(self._missing)
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            return sendJSON(request, 404, {"error": self._missing, "reason": str(e.strerror or e)})
        request.setHeader(b"content-type", self._contentType)
        request.setHeader(b"cache-control", b"no-store")
        return data


def _hostName(value: bytes) -> str | None:
    """
    The name part of a C{Host} header (an IPv6 address without its
    brackets), lowercased; None when it is not C{name[:port]}.
    """
    try:
        text = value.decode("ascii").strip().lower()
    except UnicodeDecodeError:
        return None
    if text.startswith("["):
        name, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return name
    name, colon, port = text.partition(":")
    if colon and not port.isdigit():
        return None
    return name or None


def _sameAddress(name: str, address: str) -> bool:
    try:
        one, other = ipaddress.ip_address(name), ipaddress.ip_address(address)
    except ValueError:
        return False
    if isinstance(other, ipaddress.IPv6Address) and other.ipv4_mapped is not None:
        other = other.ipv4_mapped
    return one == other


def hostAllowed(request: Request, names: frozenset[str]) -> bool:
    """
    Whether C{request}'s one C{Host} names loopback, the address the
    request was sent to, or one of C{names} (from C{--api-host}).
    """
    values = request.requestHeaders.getRawHeaders(b"host") or []
    if len(values) != 1:
        return False
    name = _hostName(values[0])
    if name is None:
        return False
    if name in LOOPBACK_NAMES or name in names:
        return True
    local = request.getHost()
    return _sameAddress(name, getattr(local, "host", ""))


class ApiRoot(Resource):
    """
    The API's root: its resources, and JSON for anything else; a request
    whose C{Host} is not one of the API's own names gets C{421}, and one
    its L{netlog.api.door.Door} refuses gets the door's answer, before any
    resource sees it.
    """

    def __init__(self, hosts: frozenset[str] = frozenset(), door: Any = None) -> None:
        Resource.__init__(self)
        from netlog.api.door import Door

        self._hosts = hosts
        self.door = door if door is not None else Door(None)

    def _refusal(self, request: Request) -> Resource | None:
        if not hostAllowed(request, self._hosts):
            return _Misdirected()
        refusal: Resource | None = self.door.refusal(request)
        return refusal

    def getChildWithDefault(self, path: bytes, request: Request) -> Resource:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal
        return Resource.getChildWithDefault(self, path, request)

    def getChild(self, path: bytes, request: Request) -> Resource:
        return _NotFound()

    def render(self, request: Request) -> bytes:
        refusal = self._refusal(request)
        if refusal is not None:
            return refusal.render(request)  # type: ignore[no-any-return]
        return sendJSON(
            request,
            404,
            {"error": "no such resource", "resources": sorted(n.decode() for n in self.children)},
        )


class _Misdirected(Resource):
    isLeaf = True

    def render(self, request: Request) -> bytes:
        values = request.requestHeaders.getRawHeaders(b"host") or []
        return sendJSON(
            request,
            421,
            {
                "error": "this API answers only requests for 127.0.0.1, [::1], localhost, "
                "the address it listens on, or a name given with --api-host",
                "host": [v.decode("latin-1") for v in values],
            },
            b"Misdirected Request",
        )


class _NotFound(Resource):
    isLeaf = True

    def render(self, request: Request) -> bytes:
        return sendJSON(request, 404, {"error": "no such resource", "path": request.path.decode("latin-1")})
