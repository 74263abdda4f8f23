#!/usr/bin/env bash
# Set up .venv (see setup.sh), then lint and run the tests. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
. .venv/bin/activate
ruff check .
python -m pytest -q "$@"
