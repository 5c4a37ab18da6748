#!/usr/bin/env bash
# .ci/side-venv.sh VENV PACKAGE==VERSION...: a virtual environment of its
# own for tools whose pins clash with netlog's (.ci/install.d steps call
# it). Quick when each package is there at its version already.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=$1
shift
if [ -x "$venv/bin/python" ] && "$venv/bin/python" - "$@" <<'PY' 2>/dev/null
import importlib.metadata as m, sys
sys.exit(any(m.version(p.split("==")[0]) != p.split("==")[1] for p in sys.argv[1:]))
PY
then
    exit 0
fi
# the interpreter netlog's own .venv was made from
base=python3
if [ -x .venv/bin/python ]; then
    base=$(.venv/bin/python -c 'import sys; print(sys._base_executable)')
fi
"$base" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check "$@"
