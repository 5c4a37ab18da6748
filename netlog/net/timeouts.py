"""
The timeouts both proxies share, each the default of a command-line option,
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
