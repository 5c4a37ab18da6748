#!/usr/bin/env bash
# Debian's squid: tests/net/test_upstream_proxy.py runs it on loopback as the
# proxies' --upstream-proxy (and the benchmarks as a peer). Quick when it is there.
set -euo pipefail
if command -v squid >/dev/null 2>&1 || [ -x /usr/sbin/squid ]; then
    exit 0
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends squid
