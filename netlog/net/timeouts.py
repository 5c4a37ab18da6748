"""
The timeouts (and the one limit on upstream connections) both proxies
share, each the default of a command-line option,
defined once here. Pure: it imports nothing, so the core, the shell and the
taps can all take their defaults from it.
"""

from __future__ import annotations

#: Seconds to wait for an upstream TCP connection (C{--connect-timeout});
#: then C{504}.
DEFAULT_CONNECT_TIMEOUT = 10.0

#: Seconds a tunnel or a kept-alive connection may pass no byte either way
#: before the proxy closes it (C{--idle-timeout}).
DEFAULT_IDLE_TIMEOUT = 300.0

#: Seconds a browser has to send a whole request head once it has begun one
#: (C{--header-timeout}); then C{408}.
DEFAULT_HEADER_TIMEOUT = 30.0

#: Connections open at once to one upstream (a site's backend, a live host's
#: origin) unless the site's C{backend_connections} or
#: C{--upstream-connections} says otherwise; the requests beyond wait for one
#: in the order they came. Above what one browser connection asks at once
#: over HTTP/1.1 (6 to a host) and under what it may over HTTP/2 (100
#: streams): see C{docs/site-proxy.rst}, "Connections to backends".
MAX_CONNECTIONS_PER_UPSTREAM = 32
