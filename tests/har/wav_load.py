"""
Load a HAR with WebArena-Verified 1.2.3's own loader and print, as JSON, what
it sees. Run with the interpreter of its own virtual environment
(.ci/wav/.venv, made by .ci/install.d/30-webarena-verified.sh), not netlog's.

Usage: python wav_load.py HAR; prints {"events": [...], "evaluation_urls": [...]}.
"""

import json
import sys
from importlib.metadata import version
from pathlib import Path

from webarena_verified.types.tracing import NetworkTrace


def main(path: str) -> None:
    trace = NetworkTrace.from_content(Path(path))
    events = []
    for event in trace.events:
        events.append(
            {
                "method": event.http_method,
                "url": event.url,
                "url_path": event.url_path,
                "post_data": event.post_data,
                "referer": event.referer,
                "status": event.request_status,
                "is_redirect": event.is_redirect,
                "redirect_url": event.redirect_url,
                "is_request_success": event.is_request_success,
                "response_cookies": event.response_cookies,
                "response_content": event.response_content,
                "request_headers": event.request_headers,
                "is_navigation": event.is_navigation_event,
                "is_evaluation": event.is_evaluation_event,
            }
        )
    json.dump(
        {
            "version": version("webarena-verified"),
            "is_playwright": trace.is_playwright,
            "events": events,
            "evaluation_urls": [e.url for e in trace.evaluation_events],
        },
        sys.stdout,
    )


if __name__ == "__main__":
    main(sys.argv[1])
