#!/usr/bin/env bash
# One command for a newcomer: set up, measure the micro suite on CPU, store the run in the
# embedded SQLite database, and write a readable report under compilewatch-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. .venv/bin/activate
mkdir -p compilewatch-out
compilewatch run --suite micro --device cpu --out compilewatch-out/results.json "$@"
# A run compared with itself: every model "unchanged", with all of its numbers. After a change,
# run again and compare the two files (or two run ids from the database) the same way.
compilewatch compare compilewatch-out/results.json compilewatch-out/results.json \
    --format html --out compilewatch-out/report.html
compilewatch compare compilewatch-out/results.json compilewatch-out/results.json \
    --format markdown --out compilewatch-out/comment.md
echo "report: compilewatch-out/report.html (and comment.md); database: $(compilewatch db current)"
