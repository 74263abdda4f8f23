#!/usr/bin/env bash
# Create .venv with torch pinned for CI (requirements/ci.txt) and compilewatch installed
# editable. Usage: bash scripts/setup.sh [EXTRAS], e.g. "test".
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -r requirements/ci.txt
python -m pip install -q -e ".${1:+[$1]}"
