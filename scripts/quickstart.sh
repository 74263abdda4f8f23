#!/usr/bin/env bash
# One command for a newcomer: set up, measure the micro suite on CPU, store the run in the
# embedded SQLite database, and write a readable report to compilewatch-out/run/report.html.
# Arguments go to `compilewatch run`, e.g. --model pointwise for a one-model look.
# COMPILEWATCH_NO_SETUP=1 skips the set-up (an existing .venv is used as it is).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${COMPILEWATCH_NO_SETUP:-}" = 1 ] || bash scripts/setup.sh
. .venv/bin/activate
out=compilewatch-out/run  # `compilewatch pr` writes compilewatch-out/pr: the two never collide
mkdir -p "$out"
compilewatch run --suite micro --device cpu --out "$out/results.json" "$@"
compilewatch report "$out/results.json" --out "$out/report.html"  # prints the report's path
run_id=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["run_id"][:12])' \
  "$out/results.json")
echo "run id: $run_id (stored; compilewatch runs lists the stored runs)"
echo "database: $(compilewatch db current)"
echo "after a change, run the quickstart again (the database keeps every run), then compare:"
echo "  compilewatch runs --limit 2         # the ids of the two newest runs"
echo "  compilewatch compare $run_id NEW_ID --format html --out compilewatch-out/compare.html"
