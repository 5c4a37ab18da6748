"""
Run warcprox (from its side environment, C{.ci/warcprox/.venv}: this file
imports nothing of netlog's) as the tests need it, with its own command
line, changed in two ways and no other:

  - it may fetch from 127.0.0.1, where the test site listens (warcprox
    refuses a loopback server, and offers no option for it, only its
    handler's class attribute C{allow_localhost});
  - it looks no name up: the WARC file's name asks C{socket.getfqdn()},
    which may ask DNS, and tests never do; the host's own name stands in.

    .ci/warcprox/.venv/bin/python tests/warc/run_warcprox.py -b 127.0.0.1 ...
"""

import socket
import sys

import warcprox.warcproxy
from warcprox.main import main

warcprox.warcproxy.WarcProxyHandler.allow_localhost = True
socket.getfqdn = lambda name="": socket.gethostname()

if __name__ == "__main__":
    main(sys.argv)
