"""
netlog.api: the loopback HTTP API.

Its limits live here, apart from the service, so that the taps can name
them in their options without importing C{twisted.web} into a supervisor
that serves no API.
"""

#: Connections the API holds open at once; one more is closed at once. The
#: supervisor serves the API, and a descriptor held by an idle client is
#: one it can't use to start a worker.
MAX_API_CONNECTIONS = 64
#: Seconds an API connection may sit idle (before its first request, or
#: between two) before it is closed (a request being answered, a HAR
#: streaming, is not idle); C{--api-idle-timeout}.
API_IDLE_TIMEOUT = 15.0
#: Sessions C{POST /sessions} makes a second at most (and at once after a
#: quiet spell); more get C{429}. C{--api-session-rate}.
SESSION_RATE = 20.0
