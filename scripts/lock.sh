#!/usr/bin/env bash
# Regenerate the hashed locks in requirements/ from pyproject.toml (scripts/lock.py says which
# lock holds what, and how it is checked). Needs PyPI. Pins already in a lock are kept; pass
# --upgrade (or --upgrade-package NAME) for newer ones. Arguments go to `uv pip compile`.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { printf 'lock: %s\n' "$*" >&2; }
UV_VERSION=0.13.9
PACKAGING_VERSION=26.4
tools="${XDG_CACHE_HOME:-$HOME/.cache}/compilewatch-lock"
if ! "$tools/bin/uv" --version 2>/dev/null | grep -qx "uv $UV_VERSION.*"; then
  say "installing uv $UV_VERSION into $tools"
  python3 -m venv --clear "$tools"
  # From PyPI only: no index or find-links of this machine's pip configuration.
  PIP_CONFIG_FILE=/dev/null "$tools/bin/python" -m pip install -q --index-url https://pypi.org/simple \
    "uv==$UV_VERSION" "packaging==$PACKAGING_VERSION"
fi
say "writing requirements/*.in from pyproject.toml, compiling requirements/*.txt"
"$tools/bin/python" scripts/lock.py --uv "$tools/bin/uv" "$@"
