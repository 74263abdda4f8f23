"""Saying what a mistyped ``--model`` probably meant.

``--model pointwsie`` used to get "matches no model in micro" and nothing more. ``plan_jobs``
(compiler/plan.py) and pr's ``check_models_matched`` build their message with
``unmatched_models`` so that every command suggests the names it knows.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def did_you_mean(pattern: str, names: Iterable[str], n: int = 3) -> list[str]:
    """The known names closest to ``pattern`` (difflib's ratio, at least 0.6), best first."""
    return difflib.get_close_matches(pattern, sorted(set(names)), n=n, cutoff=0.6)


def unmatched_models(patterns: Iterable[str], names: Iterable[str], where: str) -> str:
    """The error for ``--model`` patterns that match nothing: each with its closest names,
    else the list of models there is (``where``: the suites searched, or "either side")."""
    known = sorted(set(names))
    parts = []
    for p in patterns:
        close = did_you_mean(p, known)
        parts.append(f"{p} (did you mean {' or '.join(close)}?)" if close else p)
    text = f"--model {', '.join(parts)} matches no model in {where}"
    if not any(did_you_mean(p, known) for p in patterns):
        shown = ", ".join(known[:20]) + (f" and {len(known) - 20} more" if len(known) > 20
                                         else "")
        text += f"; models there: {shown or 'none'} (compilewatch suites lists them)"
    return text
