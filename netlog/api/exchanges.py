"""
Finding exchanges over the API (L{netlog.core.finding}), on the main log and
on each session's:

  - C{GET /exchanges?filter=EXPR&after=N&limit=K&wait=S}: the summaries of
    the exchanges that ended after line C{N} and match C{EXPR} (the filter
    language of L{netlog.core.filters}), C{{"exchanges": [...], "next": N,
    "begun_again": false, "more": false}}; with C{wait}, when none has, the
    answer is held until one does or C{S} seconds (at most L{MAX_WAIT}) have
    passed, and then is empty;
  - C{GET /exchanges/ID?offset=C&chars=K}: one exchange whole, its bodies as
    text, C{K} characters of each from C{C} (C{next_offset} says where the
    rest begins).

A wait costs nothing while nothing is written: it is woken by the kernel's
word that the log changed (L{netlog.api.watch}), reads only the lines
written since it last looked, and holds no thread.
"""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import urlencode

from twisted.internet.threads import deferToThreadPool
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.resource import Resource
from twisted.web.server import NOT_DONE_YET, Request

from netlog.api.answers import JSONError, finishJSON, jsonBytes, sendJSON
from netlog.api.params import MAX_QUERY, BadParameter, parseQuery, queryOf, queryPairs
from netlog.api.resource import _JSONResource, _LogResource, readFailed
from netlog.api.watch import LogChanges
from netlog.core.exchange import MAX_SCAN
from netlog.core.filters import MAX_FILTER, BadFilter, Filter, parseFilter
from netlog.core.finding import (
    DEFAULT_BODY_CHARS,
    DEFAULT_RESULTS,
    MAX_BODY_CHARS,
    MAX_RESULTS,
    MAX_SEARCH,
    Found,
    exchangeWhole,
    findExchanges,
)
from netlog.net.reactors import IProxyReactor

_log = Logger()

#: The longest C{wait} asked for, in seconds.
MAX_WAIT = 60


def _find(logPath: str, wanted: Filter, after: int, limit: int, first: int) -> Found:
    """
    In a thread: one search of the log at C{logPath}.
    """
    from netlog.log.span import seriesFrom

    with seriesFrom(logPath, after + 1, MAX_SEARCH) as (readAt, size):
        return findExchanges(readAt, size, wanted, after, limit, first=first)


def _whole(logPath: str, exchangeId: int, offset: int, chars: int) -> bytes:
    """
    In a thread: one exchange whole, as JSON.
    """
    from netlog.log.span import seriesFrom

    with seriesFrom(logPath, exchangeId, MAX_SCAN) as (readAt, size):
        return jsonBytes(exchangeWhole(readAt, size, exchangeId, offset, chars))


def _filterOf(query: bytes) -> tuple[Filter, bytes]:
    """
    The C{filter} parameter parsed, and the rest of the query for
    L{parseQuery}.

    @raise BadParameter: a query that can't be read, or a filter that can't.
    """
    if len(query) > MAX_QUERY + 3 * MAX_FILTER:
        raise BadParameter("query", "the query string is too long")
    pairs = queryPairs(query)
    texts = [value for name, value in pairs if name == "filter"]
    if len(texts) > 1:
        raise BadParameter("filter", "given more than once")
    try:
        wanted = parseFilter(texts[0] if texts else "")
    except BadFilter as e:
        raise BadParameter("filter", str(e)) from None
    return wanted, urlencode([(name, value) for name, value in pairs if name != "filter"]).encode("ascii")


class ExchangesResource(_LogResource):
    """
    C{/exchanges} and C{/exchanges/ID} of one log.

    @param first: the first line that counts (a session's: its log may begin
        with an earlier session's of the same name).
    """

    isLeaf = False

    def __init__(self, reactor: IProxyReactor, threadpool: Any, logPath: str | None,
                 first: Callable[[], int] = lambda: 0) -> None:
        _LogResource.__init__(self, reactor, threadpool, logPath)
        self._first = first
        self._changes = LogChanges(reactor, logPath) if logPath is not None else None

    def getChild(self, path: bytes, request: Request) -> Resource:
        if path == b"":
            return self
        if not path.isdigit() or request.postpath:
            return JSONError(404, {"error": "no such resource (/exchanges, or /exchanges/ID)"})
        return _OneExchange(self, int(path))

    def renderGET(self, request: Request) -> Any:
        wanted, rest = _filterOf(queryOf(request))
        params = parseQuery(rest, {
            "after": (0, 0, 2**63 - 1),
            "limit": (DEFAULT_RESULTS, 1, MAX_RESULTS),
            "wait": (0, 0, MAX_WAIT),
        })
        if self._logPath is None or self._changes is None:
            return self._noLog(request)
        _Search(self._reactor, self._threadpool, self._logPath, self._changes, request, wanted,
                max(params["after"], self._first() - 1), params["limit"], self._first(), params["wait"])
        return NOT_DONE_YET

    def renderOne(self, request: Request, exchangeId: int) -> Any:
        """
        C{GET /exchanges/ID}.
        """
        params = parseQuery(queryOf(request), {
            "offset": (0, 0, 2**63 - 1),
            "chars": (DEFAULT_BODY_CHARS, 1, MAX_BODY_CHARS),
        })
        if self._logPath is None:
            return self._noLog(request)
        d = deferToThreadPool(self._reactor, self._threadpool, _whole, self._logPath, exchangeId,
                              params["offset"], params["chars"])
        d.addCallbacks(lambda body: finishJSON(request, body), lambda f: readFailed(request, f))
        d.addErrback(lambda f: None)  # the client went away
        return NOT_DONE_YET


class _OneExchange(_JSONResource):
    """
    C{/exchanges/ID}, answered by its log's L{ExchangesResource}.
    """

    def __init__(self, log: ExchangesResource, exchangeId: int) -> None:
        Resource.__init__(self)
        self._log = log
        self._id = exchangeId

    def renderGET(self, request: Request) -> Any:
        return self._log.renderOne(request, self._id)


class _Search:
    """
    One C{GET /exchanges}: a search, and with C{wait} more of them, each
    from where the one before stopped, whenever the log changes, until one
    finds something or the wait runs out. One search at a time: a change
    while one runs has it run again once it is done.
    """

    def __init__(self, reactor: IProxyReactor, threadpool: Any, logPath: str, changes: LogChanges,
                 request: Request, wanted: Filter, after: int, limit: int, first: int, wait: int) -> None:
        self._reactor = reactor
        self._threadpool = threadpool
        self._logPath = logPath
        self._request = request
        self._wanted = wanted
        self._limit = limit
        self._first = first
        self._found = Found(next=after)
        self._running = False
        self._again = False
        self._done = False
        self._timer: Any = None
        # Subscribed before the first search, so no line written while it
        # runs goes unseen.
        self._unsubscribe = changes.subscribe(self._changed) if wait else (lambda: None)
        if wait:
            self._timer = reactor.callLater(wait, self._finish)
        request.notifyFinish().addBoth(self._gone)
        self._wait = wait
        self._search()

    def _changed(self) -> None:
        if self._running:
            self._again = True
        elif not self._done:
            self._search()

    def _search(self) -> None:
        self._running = True
        self._again = False
        d = deferToThreadPool(self._reactor, self._threadpool, _find, self._logPath, self._wanted,
                              self._found.next, self._limit, self._first)
        d.addCallbacks(self._searched, self._failed)

    def _searched(self, found: Found) -> None:
        self._running = False
        if self._done:
            return
        found.begunAgain = found.begunAgain or self._found.begunAgain
        self._found = found
        if found.summaries or found.more or not self._wait:
            self._finish()
        elif self._again:
            self._search()

    def _failed(self, failure: Failure) -> None:
        self._running = False
        if self._done:
            return
        self._stop()
        readFailed(self._request, failure)

    def _finish(self) -> None:
        if self._done:
            return
        self._stop()
        finishJSON(self._request, jsonBytes(self._found.answer()))

    def _stop(self) -> None:
        self._done = True
        self._unsubscribe()
        if self._timer is not None and self._timer.active():
            self._timer.cancel()

    def _gone(self, ignored: object) -> None:
        # Finished, or the client went away: nothing more to do either way.
        if not self._done:
            self._stop()
