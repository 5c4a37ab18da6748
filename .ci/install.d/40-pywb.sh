#!/usr/bin/env bash
# pywb (wb-manager, wayback) and py-wacz (wacz validate), the archiving
# world's own replay and checker that tests/warc runs over the WARC and WACZ
# netlog writes. pywb pins its own werkzeug, redis and gevent, so both get a
# virtual environment of their own, .ci/pywb/.venv (ignored by git).
set -euo pipefail
exec bash "$(dirname "$0")/../side-venv.sh" .ci/pywb/.venv pywb==2.10.0 wacz==0.6.0
