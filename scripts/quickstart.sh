#!/usr/bin/env bash
# One command for a newcomer: set up, measure the micro suite on CPU, store the run in the
# embedded SQLite database, and write a readable report under compilewatch-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
mkdir -p compilewatch-out
compilewatch run --suite micro --device cpu --out compilewatch-out/results.json "$@"
compilewatch report compilewatch-out/results.json --out compilewatch-out/report.html
echo "report: compilewatch-out/report.html; database: $(compilewatch db current)"
echo "after a change, run again and compare: compilewatch compare OLD.json NEW.json --format html"
