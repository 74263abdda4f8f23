#!/usr/bin/env bash
# Set up .venv (see setup.sh), then lint and run the tests. Arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh test
. .venv/bin/activate
ruff check .
# two test processes: most tests wait on a compile or a child process, so two share the two
# cores of a CI runner well (COMPILEWATCH_TEST_WORKERS=0 runs them in this one process)
# --dist loadgroup: tests marked with one xdist_group (those that read one expensive session
# fixture) run in one process, which makes the fixture once
python -m pytest -q -n "${COMPILEWATCH_TEST_WORKERS:-2}" --dist loadgroup "$@"
