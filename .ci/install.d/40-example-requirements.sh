#!/usr/bin/env bash
# The pytest-playwright example's own requirements, installed as its README
# says, into netlog's .venv: tests/browser/test_example_readme.py checks that
# they are there and runs the example's commands as written.
set -euo pipefail
cd "$(dirname "$0")/../.."
.venv/bin/pip install -q --disable-pip-version-check -r examples/pytest_playwright/requirements.txt
