#!/usr/bin/env bash
# WebArena-Verified 1.2.3, whose loader tests/har reads our HAR with. It pins
# pydantic==2.12.0, so it gets a virtual environment of its own, .ci/wav/.venv
# (ignored by git as every .venv/ is). Quick when it is there already.
set -euo pipefail
cd "$(dirname "$0")/../.."
WAV_VERSION=1.2.3
venv=.ci/wav/.venv
if [ -x "$venv/bin/python" ] &&
   "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('webarena-verified') != '$WAV_VERSION')" 2>/dev/null; then
    exit 0
fi
# the interpreter netlog's own .venv was made from (>= 3.11, as both need)
base=python3
if [ -x .venv/bin/python ]; then
    base=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
fi
"$base" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "webarena-verified==$WAV_VERSION"
