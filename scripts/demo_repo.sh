#!/usr/bin/env bash
# Make a two-commit git repository to try `compilewatch pr` on: main holds a copy of the micro
# suite; branch `feature` adds a graph break to `pointwise` and halves gelu_mm's input (a
# cache-key change in example_inputs). Usage: bash scripts/demo_repo.sh DIR
set -euo pipefail
src="$(cd "$(dirname "$0")/.." && pwd)/suites/micro.py"
dir=${1:?usage: demo_repo.sh DIR}
mkdir -p "$dir" && cd "$dir"
git init -q -b main
git config user.email demo@example.invalid && git config user.name demo
printf '[tool.compilewatch]\nsuites = ["models.py"]\n' > pyproject.toml
cp "$src" models.py
git add -A && git commit -qm "models: the micro suite"
git checkout -q -b feature
python3 - <<'PY'
import re, pathlib
p = pathlib.Path("models.py"); s = p.read_text()
s = s.replace("return torch.sin(x) * torch.cos(x) + torch.tanh(x)",
              "y = torch.sin(x) * torch.cos(x)\n        return (y + torch.tanh(x)) * y.mean().item()")
s = s.replace("n = 2048 if ctx.large else 128", "n = 1024 if ctx.large else 96")
p.write_text(s)
PY
git commit -qam "pointwise: scale by the mean (a graph break); gelu_mm: smaller input"
git checkout -q main
echo "$dir: main and feature ready"
