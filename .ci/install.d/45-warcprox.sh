#!/usr/bin/env bash
# warcprox, the archiving world's recording proxy, whose WARC tests/warc
# replays through netlog (test_warcprox.py). It pins cryptography below 46
# (netlog's .venv has a newer one), so it gets a virtual environment of its
# own, .ci/warcprox/.venv (ignored by git).
set -euo pipefail
exec bash "$(dirname "$0")/../side-venv.sh" .ci/warcprox/.venv warcprox==2.13.1
