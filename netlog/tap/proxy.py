"""
Wiring for C{twistd netlog-proxy}.
"""

from __future__ import annotations

from twisted.application.service import MultiService
from twisted.python import usage


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = "The site proxy: decrypts configured sites and keeps each exchange whole."


def makeService(config: Options) -> MultiService:
    raise SystemExit("netlog-proxy is not built yet")
