"""
C{POST /rotate}: close the live segment of every log this process writes
and rotates (see C{docs/rotation.rst}), as C{SIGUSR1} does, and say which
closed. A change, so it needs the API's token (the door checks it first).
"""

from __future__ import annotations

from typing import Any

from twisted.web.resource import Resource
from twisted.web.server import Request

from netlog.api.answers import sendJSON
from netlog.log.writer import rotatingWriters, rotationForwarders


class RotateResource(Resource):
    """
    Rotates the logs of this process's writers: C{200} with
    C{{"logs": [{"log": PATH, "closed": true, "next": N}, ...]}} (C{closed}
    false for a log with no line since its last segment); C{202} with
    C{{"forwarded": true}} from a supervisor, which has its worker do it;
    C{409} when nothing here rotates (no log, or no rotation asked).
    """

    isLeaf = True

    def render_POST(self, request: Request) -> bytes:
        writers = rotatingWriters()
        if not writers and rotationForwarders:
            # Supervised: the worker writing the log closes the segment.
            for forward in list(rotationForwarders):
                forward()
            return sendJSON(request, 202, {"logs": [], "forwarded": True})
        if not writers:
            return sendJSON(request, 409, {
                "error": "this proxy closes no segments: it keeps no log",
            })
        logs: list[dict[str, Any]] = []
        for writer in writers:
            closed = writer.rotate()
            logs.append({"log": writer.path, "closed": closed, "next": writer.nextNumber})
        return sendJSON(request, 200, {"logs": logs})
