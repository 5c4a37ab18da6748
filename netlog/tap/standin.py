"""
Wiring for C{twistd netlog-standin}.
"""

from __future__ import annotations

from twisted.application.service import MultiService
from twisted.python import usage


class Options(usage.Options):
    synopsis = "[options]"
    longdesc = "A forward proxy that decrypts nothing and logs every connection."


def makeService(config: Options) -> MultiService:
    raise SystemExit("netlog-standin is not built yet")
