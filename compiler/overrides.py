"""Inductor config values a worker sets before it builds and compiles its model.

``compilewatch bisect`` tries one side's Inductor config flags on the other side's code to find
the flag behind a regression (docs/bisect.md). The values travel as one environment variable
of the side (``RunOptions.extra_env``: the same for every process of the side, so a fork
server takes it too): a JSON object of config names (``triton.cudagraphs`` for a nested one)
to the values the cache key recorded, parsed as Python literals.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Mapping
from typing import Any

ENV = "COMPILEWATCH_INDUCTOR_CONFIG"
MAX_BYTES = 256 * 1024


def encode(values: Mapping[str, Any]) -> str:
    return json.dumps(dict(values), sort_keys=True)


def literal(text: str) -> tuple[bool, Any]:
    """A value as the cache key shows it (``True``, ``300``, ``'heuristic'``, ``None``) as
    Python: (False, None) where it is not a literal (a function, an object's repr)."""
    try:
        return True, ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False, None


def requested(environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The overrides this process was given; {} without any. A malformed value raises
    ``ValueError`` naming the variable."""
    raw = (os.environ if environ is None else environ).get(ENV)
    if not raw:
        return {}
    if len(raw) > MAX_BYTES:
        raise ValueError(f"{ENV}: more than {MAX_BYTES} bytes")
    data = json.loads(raw)
    if not isinstance(data, dict) or not all(isinstance(k, str) for k in data):
        raise ValueError(f"{ENV}: expected a JSON object of config names to values")
    return data


def apply(environ: Mapping[str, str] | None = None) -> list[str]:
    """Set the requested values on ``torch._inductor.config`` for the rest of the process;
    returns the names set. An unknown name raises, naming it."""
    values = requested(environ)
    if not values:
        return []
    from torch._inductor import config

    unknown = [k for k in values if k not in config._config]
    if unknown:
        raise ValueError(f"{ENV}: torch._inductor.config has no {', '.join(unknown[:5])}")
    config.patch(values).__enter__()  # kept for the process's life: nothing restores it
    return sorted(values)
