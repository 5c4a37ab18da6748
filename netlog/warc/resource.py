"""
C{GET /network.warc.gz} and C{GET /sessions/NAME/network.warc.gz}: the log
as WARC, built in a thread and streamed, with the parameters and answers of
C{/network.har} (L{HarResource}).
"""

from __future__ import annotations

from typing import Any, Callable

from netlog.api.resource import HarResource


class WarcResource(HarResource):
    contentType = b"application/warc"
    fileName = b"network.warc.gz"
    what = "the WARC"

    def export(self) -> Callable[..., Any]:
        from netlog.warc.export import writeWarc

        return writeWarc

    @classmethod
    def beside(cls, har: HarResource) -> WarcResource:
        """
        The WARC of the log C{har} exports, from the same line.
        """
        return cls(har._reactor, har._threadpool, har._logPath, har._first)
