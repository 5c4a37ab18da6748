"""
C{GET /network.warc.gz} and C{GET /sessions/NAME/network.warc.gz}: the log
as WARC, built in a thread and streamed, with the parameters and answers of
C{/network.har} (L{HarResource}).
"""

from __future__ import annotations

from typing import Any, Callable

from netlog.api.params import BadParameter
from netlog.api.resource import HarResource


class WarcResource(HarResource):
    contentType = b"application/warc"
    fileName = b"network.warc.gz"
    what = "the WARC"

    def export(self) -> Callable[..., Any]:
        from netlog.warc.export import writeWarc

        return writeWarc

    def exportOptions(self, redactor: Any) -> dict[str, Any]:
        """
        None: a WARC archives what was sent and received, so it is not
        redacted (a redacted HAR is the export to share).
        """
        if redactor is not None:
            raise BadParameter("redact", "the WARC is archived as recorded: redaction is for the HAR (network.har)")
        return {}

    @classmethod
    def beside(cls, har: HarResource) -> WarcResource:
        """
        The WARC of the log C{har} exports, from the same line.
        """
        return cls(har._reactor, har._threadpool, har._logPath, har._first)
