#!/usr/bin/env bash
# Create .venv with torch pinned for CI (requirements/ci.txt) and compilewatch installed
# editable. Usage: bash scripts/setup.sh [EXTRAS], e.g. "test". The first run downloads and
# installs torch (up to 5 minutes on a fresh machine, about one with pip's cache warm); each
# step says what it does.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'setup: %s\n' "$*" >&2; }
if [ -x .venv/bin/python ]; then
  say "using the existing .venv"
else
  say "creating .venv (python3 -m venv)"
  python3 -m venv .venv
fi
. .venv/bin/activate
say "upgrading pip"
python -m pip install -q --upgrade pip
say "installing torch and the other pinned packages from requirements/ci.txt (the first time: up to 5 minutes, most of it downloading torch)"
python -m pip install -q -r requirements/ci.txt
say "installing compilewatch, editable${1:+, with extras [$1]}"
# pyproject.toml maps compilewatch.bot -> bot/, compilewatch.db -> db/, ... (DESIGN: no
# top-level `bot` or `db` module may be installed). setuptools cannot express that mapping as a
# plain .pth entry, so its editable install uses a meta-path finder, and for that strategy it
# always prints an "Editable installation ... folders with the same name as your package"
# notice: a folder named compilewatch/ in the working directory would shadow the package. The
# repository has none, so the notice (and only it, matched by its text) is filtered out.
PYTHONWARNINGS="ignore:Editable installation" python -m pip install -q -e ".${1:+[$1]}"
say "done: activate it with . .venv/bin/activate"
