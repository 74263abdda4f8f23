#!/usr/bin/env bash
# The training verdicts against a plain loop on a GPU (docs/verdict-quality.md, "Training
# against a plain loop"): every training config of micro and hf timed by `compilewatch run`
# and by benchmarks/plain_loop.py (pinned, as the bot's timing process is), then the GPT
# repository of benchmarks/gpt_repo.py: an A/A of both tasks and REPEATS pairs of the
# written-out attention change. Results go to OUT (default ./training-vs-plain): run.json,
# plain.md (the table), plain.json, repeats.txt (one line a row of each pr), aa_comment.md.
#   bash benchmarks/training_vs_plain.sh [OUT] [REPEATS] [PARTS]
# PARTS (default "run plain aa repeats") picks the steps, so the ~15 minutes can be split
# across calls of a device with a per-command limit: `plain` reads OUT/run.json.
set -u
here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-training-vs-plain}" && cd "${1:-training-vs-plain}" && pwd)
repeats=${2:-3}
parts=" ${3:-run plain aa repeats} "
work=$(mktemp -d)
cd "$work"
has() { [[ "$parts" == *" $1 "* ]]; }
row() {  # one line a row of a pr's comparison: verdict, compiled time and memory
  python3 - "$1" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1])).get("rows", []):
    ct, m = r.get("compiled_time") or {}, r.get("memory") or {}
    print(r.get("model"), r.get("config"), r.get("verdict"), "compiled", ct.get("verdict"),
          ct.get("ratio"), ct.get("ci_low"), ct.get("ci_high"), ct.get("band"),
          "memory", m.get("verdict"), m.get("ratio"))
PY
}
if has run; then
  timeout 330 compilewatch run --suite micro --suite hf --task training --device cuda \
    --cold-processes 1 --processes 2 --no-db --out "$out/run.json" > "$out/run.log" 2>&1
  echo "run rc=$? $(date +%T)" >> "$out/repeats.txt"
fi
if has plain; then
  timeout 300 python3 "$here/plain_loop.py" --suite micro --suite hf --model all \
    --task training --device cuda --processes 1 --condition pinned --cache-dir "$work/pc" \
    --warm-first 4 --bot-run "$out/run.json" --json "$out/plain.json" > "$out/plain.md" 2>&1
  echo "plain rc=$? $(date +%T)" >> "$out/repeats.txt"
fi
if has aa || has repeats; then
  python3 "$here/gpt_repo.py" "$work/g" > /dev/null
fi
if has aa; then
  timeout 260 compilewatch pr --repo "$work/g/repo" --base main --head aa --device cuda \
    --task training --task inference --model gpt --measure-all --cold-processes 1 \
    --processes 2 --no-db --out "$work/pr_aa" > "$out/aa.log" 2>&1
  echo "aa rc=$? $(date +%T)" >> "$out/repeats.txt"
  cp "$work/pr_aa/comment.md" "$out/aa_comment.md" 2>/dev/null
  row "$work/pr_aa/comparison.json" >> "$out/repeats.txt"
fi
if has repeats; then
  for i in $(seq 1 "$repeats"); do
    timeout 150 compilewatch pr --repo "$work/g/repo" --base main --head manual --device cuda \
      --task training --model gpt --cold-processes 1 --processes 2 --no-db --out "$work/pr_m$i" \
      > "$work/m$i.log" 2>&1
    echo "manual $i rc=$? $(date +%T)" >> "$out/repeats.txt"
    row "$work/pr_m$i/comparison.json" >> "$out/repeats.txt"
  done
fi
cat "$out/plain.md" "$out/repeats.txt" 2>/dev/null
