"""
A pytest plugin: a netlog session per test, its HAR kept when the test fails.

Registered by entry point (C{pytest11}), it does nothing until asked: give
C{--netlog-api URL} or set C{NETLOG_API}. Then the fixture C{netlog_session}
makes a session named after the test (and the pytest-xdist worker, and the
run, so that no two tests, workers or runs share one) and yields the
L{netlog.client.Session}: its C{proxy} is the browser's proxy setting, its
C{client} the L{netlog.client.Netlog}. When the test fails, the session's
HAR is saved under C{--netlog-output} (default C{test-results/}), named
after the test; a test that passes keeps none unless C{--netlog-keep all}.
The session is deleted after.

With pytest-playwright, route each test's context through its session::

    @pytest.fixture
    def context(netlog_session, new_context):
        return new_context(proxy={"server": netlog_session.proxy})

(C{netlog_session} first: fixtures end in the reverse order, so the context
is closed before its HAR is saved.)

A test asks its session what the browser did with the filter language
(docs/agents.rst)::

    order = netlog_session.wait_for('method:POST url:/api/cart reqbody:"\\"qty\\":2"', timeout=10)
    assert order is not None and order["status"] == 200
    whole = netlog_session.exchange(order["id"])
    assert netlog_session.find("status:5xx").exchanges == []
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from typing import TYPE_CHECKING, Generator, Iterator

import pytest

from netlog.state import API_ENV

# netlog.client is imported only once the plugin is asked for: pytest loads
# this module on every run, and urllib's import is 25 ms on top of pytest's.
if TYPE_CHECKING:
    from netlog.client import Netlog, Session

#: Where kept HARs go unless C{--netlog-output} says.
DEFAULT_OUTPUT = "test-results"
#: What C{--netlog-keep} takes: the failed tests' HARs, or every test's.
KEEP_CHOICES = ("failed", "all")
#: The redaction policy kept HARs get unless C{--netlog-redact} says.
DEFAULT_REDACT = "secrets"
#: The longest session name netlog takes.
MAX_SESSION_NAME = 64
#: The longest HAR file name made, before C{.har}.
MAX_FILE_NAME = 200
#: Seconds a test's exchanges get to end (its browser context just closed)
#: before its HAR is saved; past it, the HAR is saved with them open.
SETTLE_TIMEOUT = 5.0

_NOT_NAME = re.compile(r"[^A-Za-z0-9._-]+")
_REPORTS = pytest.StashKey[dict[str, pytest.TestReport]]()
_API = pytest.StashKey["str | None"]()
_RUN = pytest.StashKey[str]()
#: The user property a test's kept HAR is reported under.
KEPT_PROPERTY = "netlog_har"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("netlog", "netlog: a session per test, its HAR kept when the test fails")
    group.addoption("--netlog-api", metavar="URL", default=None,
                    help=f"netlog's API, e.g. http://127.0.0.1:8081 (default ${API_ENV}; "
                         f"without either, the netlog_session fixture is an error)")
    group.addoption("--netlog-output", metavar="DIR", default=DEFAULT_OUTPUT,
                    help=f"where the HARs are kept (default {DEFAULT_OUTPUT}/)")
    group.addoption("--netlog-keep", choices=KEEP_CHOICES, default="failed",
                    help="keep the HARs of the tests that failed (default), or of all")
    group.addoption("--netlog-redact", metavar="POLICY", default=DEFAULT_REDACT,
                    help=f"the built-in policy kept HARs are redacted by (default {DEFAULT_REDACT}; none for none)")


def pytest_configure(config: pytest.Config) -> None:
    given = config.getoption("--netlog-api")
    if given is not None:
        from netlog.client import api_url

        try:
            api_url(given)
        except ValueError as e:
            raise pytest.UsageError(f"--netlog-api: {e}") from None
    config.stash[_API] = given
    from netlog.har.redact import PolicyError, namedPolicy

    try:
        namedPolicy(config.getoption("--netlog-redact"))
    except PolicyError as e:
        raise pytest.UsageError(f"--netlog-redact: {e}") from None
    # One run's sessions are told from another's (a name made again appends
    # to its old log); pytest-xdist's workers share their run's id.
    workerinput = getattr(config, "workerinput", None)
    config.stash[_RUN] = workerinput["testrunuid"][:6] if workerinput else secrets.token_hex(3)
    config.pluginmanager.register(_KeptHars(), "netlog-kept-hars")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_REPORTS, {})[report.when] = report
    return report


class _KeptHars:
    """
    The HARs kept in this run, from the tests' reports (pytest-xdist's
    workers' too, on the controller), listed at the end.
    """

    def __init__(self) -> None:
        self.paths: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for name, value in report.user_properties:
            if name == KEPT_PROPERTY:
                self.paths.append(str(value))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.paths:
            terminalreporter.write_sep("-", "netlog")
            for path in self.paths:
                terminalreporter.write_line(f"HAR kept: {path}")


def session_name(nodeid: str, worker: str, run: str) -> str:
    """
    A session name for a test: the worker, the run, and as much of the
    test's id as fits, with a hash of the whole id (names are unique per
    test whatever was cut or replaced).
    """
    digest = hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:8]
    prefix = f"{worker}-{run}-"
    room = MAX_SESSION_NAME - len(prefix) - len(digest) - 1
    slug = _NOT_NAME.sub("-", nodeid).strip("-.")[-room:].lstrip("-.")
    return f"{prefix}{slug}-{digest}" if slug else f"{prefix}{digest}"


def har_file_name(nodeid: str) -> str:
    """
    The file a test's HAR is kept in: its id with what isn't a letter,
    digit, C{.}, C{_} or C{-} made C{-} (a hash ends one cut short).
    """
    slug = _NOT_NAME.sub("-", nodeid).strip("-.") or "test"
    if len(slug) > MAX_FILE_NAME:
        slug = slug[:MAX_FILE_NAME] + "-" + hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:8]
    return slug + ".har"


@pytest.fixture(scope="session")
def netlog_client(pytestconfig: pytest.Config) -> Netlog:
    """
    The client for the API given with C{--netlog-api} or C{NETLOG_API}.
    """
    given = pytestconfig.stash[_API] or os.environ.get(API_ENV)
    if not given:
        pytest.fail(f"netlog's fixtures need its API: give --netlog-api URL or set {API_ENV}", pytrace=False)
    from netlog.client import Netlog

    try:
        return Netlog(given)
    except ValueError as e:
        pytest.fail(f"netlog's API: {e}", pytrace=False)


@pytest.fixture
def netlog_session(request: pytest.FixtureRequest, netlog_client: Netlog) -> Iterator[Session]:
    """
    A session of its own for this test, deleted after it; its HAR kept in
    C{--netlog-output} if the test failed (or C{--netlog-keep all}).
    """
    config = request.config
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    node = request.node
    session = netlog_client.create_session(session_name(node.nodeid, worker, config.stash[_RUN]))
    try:
        yield session
    finally:
        try:
            reports = node.stash.get(_REPORTS, {})
            failed = any(r.failed for r in reports.values())
            if failed or config.getoption("--netlog-keep") == "all":
                session.wait_ended(SETTLE_TIMEOUT)
                folder = config.getoption("--netlog-output")
                os.makedirs(folder, exist_ok=True)
                path = os.path.join(folder, har_file_name(node.nodeid))
                session.save_har(path, redact=config.getoption("--netlog-redact"))
                node.user_properties.append((KEPT_PROPERTY, path))
        finally:
            session.delete()
