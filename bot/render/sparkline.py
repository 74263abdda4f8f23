"""A unicode sparkline (``▁▂▃▄▅▆▇█``) of a model's last nightly values, for the PR comment.

Eight levels between the series' own minimum and maximum: the shape, not the scale (the
comment's numbers give the scale). Plain text: no image hosting, nothing to escape.
"""

from __future__ import annotations

from collections.abc import Sequence

BARS = "▁▂▃▄▅▆▇█"
NIGHTS = 30  # the comment shows at most this many of the newest values


def sparkline(values: Sequence[float], nights: int = NIGHTS) -> str:
    """The newest ``nights`` values as bars ('' for fewer than two values)."""
    vs = list(values)[-nights:]
    if len(vs) < 2:
        return ""
    lo, hi = min(vs), max(vs)
    if hi - lo <= 1e-9 * max(abs(hi), 1.0):
        return BARS[0] * len(vs)
    top = len(BARS) - 1
    return "".join(BARS[min(top, int((v - lo) / (hi - lo) * len(BARS)))] for v in vs)
