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
id_of() { python -c 'import json, sys; print(json.load(open(sys.argv[1]))["run_id"][:12])' "$1"; }
previous=""  # the last quickstart's run, which this one's results replace
[ -f "$out/results.json" ] && previous=$(id_of "$out/results.json" 2>/dev/null || true)
compilewatch run --suite micro --device cpu --out "$out/results.json" "$@"
compilewatch report "$out/results.json" --out "$out/report.html"  # prints the report's path
run_id=$(id_of "$out/results.json")
echo "run id: $run_id (stored; compilewatch runs --trigger local lists the quickstart's runs)"
echo "database: $(compilewatch db current)"
if [ -n "$previous" ] && [ "$previous" != "$run_id" ]; then
  echo "compare it with the quickstart run before it:"
  echo "  compilewatch compare $previous $run_id --format html --out compilewatch-out/compare.html"
else
  echo "after a change, run the quickstart again (the database keeps every run): it ends with"
  echo "the compare command of its two runs"
fi
