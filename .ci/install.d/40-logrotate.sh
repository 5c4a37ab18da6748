#!/usr/bin/env bash
# Debian's logrotate: tests/log/test_rotation_processes.py runs it (copytruncate,
# and a rename with a postrotate SIGUSR1) on a live proxy. Quick when it is there.
set -euo pipefail
if command -v logrotate >/dev/null 2>&1; then
    exit 0
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends logrotate
