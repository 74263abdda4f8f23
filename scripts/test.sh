#!/usr/bin/env bash
# Set up a virtualenv (torch CPU pinned by requirements/ci.txt) and run lint + tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -r requirements/ci.txt
python -m pip install -q -e '.[test]'
ruff check .
command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium) || echo "chromium unavailable: screenshot test will skip"
python -m pytest -q "$@"
