"""The scripts under ``benchmarks/`` and ``scripts/`` as modules, for their tests: a script is not
a package, and one may put ``benchmarks/`` first on ``sys.path`` for its helpers, which is taken
off again so that no other test imports a benchmark's helper by a bare name."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load(name: str, folder: str = "benchmarks") -> ModuleType:
    """``<folder>/<name>.py`` (``benchmarks/`` or ``scripts/``), imported once more under that
    name."""
    spec = importlib.util.spec_from_file_location(name, ROOT / folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # where dataclasses look up the module's annotations
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = path
    return module
