"""
A tiny proxy for testing the supervisor: it answers each line a client sends
with C{ok LINE} and logs an open and an end line per connection, through the
same C{buildProxy} contract as the real proxies.

It is also a twistd plugin (C{twistd netlog-dummy}) when
C{tests/supervise/plugins} is on C{PYTHONPATH}: see L{PLUGIN_PATH}.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from twisted.application.service import MultiService
from twisted.internet.protocol import Factory
from twisted.protocols.basic import LineOnlyReceiver

from netlog.config import ProxyConfig
from netlog.privileged import openPrivileged
from netlog.tap.common import LogOptions, makeProxyService

#: The folder to put on C{PYTHONPATH} for twistd to find C{netlog-dummy}.
PLUGIN_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plugins")


@dataclass(frozen=True, kw_only=True)
class DummyConfig:
    """
    What only the dummy has.

    @ivar startDelay: seconds each worker waits before it serves.
    @ivar secret: a file only root may read, if any.
    @ivar dieAtStart: fail at once in each worker.
    @ivar ignoreTerm: ignore SIGTERM in the worker.
    """

    startDelay: float
    secret: str | None
    dieAtStart: bool
    ignoreTerm: bool


class Options(LogOptions[DummyConfig]):
    optParameters = [
        ["start-delay", None, 0.0, "Seconds each worker waits before it serves.", float],
        ["secret", None, None, "A file only root may read, told to a client that asks 'secret'."],
    ]
    optFlags = [
        ["die-at-start", None, "Fail at once in each worker (to test giving up)."],
        ["ignore-term", None, "Ignore SIGTERM in the worker (to test the KILL after the grace)."],
    ]

    def postOptions(self) -> None:
        # Where to answer: --listen (once), by default any free loopback port.
        if not self.get("listen"):
            self["listen"] = ["tcp:0:interface=127.0.0.1"]
        LogOptions.postOptions(self)

    def pluginConfig(self) -> DummyConfig:
        return DummyConfig(
            startDelay=self["start-delay"],
            secret=self["secret"],
            dieAtStart=bool(self["die-at-start"]),
            ignoreTerm=bool(self["ignore-term"]),
        )


class Answer(LineOnlyReceiver):
    delimiter = b"\n"

    def connectionMade(self) -> None:
        self.exchangeId = 0

    def lineReceived(self, line: bytes) -> None:
        writer = self.factory.writer
        self.exchangeId = writer.open({"request": line.decode("ascii", "replace"), "pid": os.getpid()})
        if line == b"secret":
            self.transport.write(self.factory.secret + b"\n")
            writer.end(self.exchangeId, {"status": "secret"})
            self.transport.loseConnection()
            return
        if line == b"hang":
            while True:  # a stuck event loop
                time.sleep(0.01)
        if line == b"hold":
            return  # keep the exchange open until the connection ends
        self.transport.write(b"ok " + line + b" " + str(os.getpid()).encode() + b"\n")
        writer.end(self.exchangeId, {"status": "ok"})
        self.exchangeId = 0
        self.transport.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:
        if self.exchangeId:
            self.factory.writer.end(self.exchangeId, {"_failed": {"reason": "connection lost"}})


class DummyProxy(MultiService):
    def __init__(self, config: ProxyConfig[DummyConfig], writer: Any) -> None:
        MultiService.__init__(self)
        self.config = config.plugin
        factory = Factory.forProtocol(Answer)
        factory.writer = writer
        factory.secret = b""
        self.factory = factory
        self.listeners = [("answer", config.listen[0], factory)]
        #: A worker's heartbeat counts them (L{ServedProxy}); it keeps none.
        self.connections: set[Any] = set()
        self.connectionPrefix = ""
        self.privilegedFiles = [self.config.secret] if self.config.secret else []
        self.handedData: dict[str, bytes] = {}

    def mint(self, host: str) -> Any:
        """
        It decrypts nothing (L{ServedProxy}).
        """
        from twisted.internet.defer import fail

        from netlog.proxy.mode import MintError

        return fail(MintError("the dummy mints nothing"))

    def mintVia(self, ask: Any) -> None:
        pass

    def startService(self) -> None:
        if self.config.dieAtStart:
            raise RuntimeError("told to die at start")
        if self.config.secret:
            fd = openPrivileged(self.config.secret)
            try:
                self.factory.secret = os.read(fd, 1024).strip()
            finally:
                os.close(fd)
        if self.config.startDelay:
            time.sleep(self.config.startDelay)
        if self.config.ignoreTerm:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        MultiService.startService(self)


def buildProxy(config: ProxyConfig[DummyConfig], writer: Any, reactor: Any) -> DummyProxy:
    return DummyProxy(config, writer)


def makeService(options: Options) -> MultiService:
    return makeProxyService(options.config(), buildProxy)
