"""Aggregates every layer reports (the comparison, the run report, trends, db queries)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of the positive values (None when there are none): speedups and compile
    times aggregate multiplicatively."""
    vals = [v for v in values if v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))
