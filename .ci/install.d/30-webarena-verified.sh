#!/usr/bin/env bash
# WebArena-Verified 1.2.3, whose loader tests/har reads our HAR with. It pins
# pydantic==2.12.0, so it gets a virtual environment of its own, .ci/wav/.venv
# (ignored by git as every .venv/ is).
set -euo pipefail
exec bash "$(dirname "$0")/../side-venv.sh" .ci/wav/.venv webarena-verified==1.2.3
