"""Statistics behind the verdicts: bootstrap confidence intervals of a ratio of medians, and the
rule that turns an interval and a threshold into a verdict. Method and defaults: docs/compare.md.

Medians, because per-call timings have a long right tail (a descheduled block); the ratio on a log
scale, because a slowdown and the matching speed-up must be symmetric; percentile bootstrap,
because it needs no distributional assumption and is exact enough at 30+ samples per side.
"""

from __future__ import annotations

import hashlib
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compilewatch.bot.judge.comparison import Verdict
from compilewatch.bot.judge.thresholds import MetricThreshold

N_RESAMPLES = 2000
_LOG_MAX = math.log(sys.float_info.max)


@dataclass(frozen=True)
class RatioEstimate:
    """head/base with a confidence interval; a single sample per side gives a point interval."""

    ratio: float
    low: float
    high: float

    def widened(self, factor: float) -> RatioEstimate:
        """The interval stretched by ``factor`` (>= 1) on each side, on the log scale."""
        return RatioEstimate(self.ratio, self.low / factor, self.high * factor)

    def excludes_one(self) -> bool:
        return self.low > 1.0 or self.high < 1.0


def seed_for(*parts: str) -> int:
    """A stable seed per model, so that rendering the same comparison twice gives equal text."""
    return int.from_bytes(hashlib.sha256("\0".join(parts).encode()).digest()[:8], "little")


def _resampled_medians(x: np.ndarray, processes: int, rng: np.random.Generator,
                       n: int) -> np.ndarray:
    """Medians of ``n`` bootstrap resamples of ``x``.

    With several processes the samples are stored process after process; a process's host state
    shifts all its samples together, so resample processes first, then samples within them
    (a two-stage cluster bootstrap). Otherwise resample the samples.
    """
    if processes > 1 and len(x) >= 2 * processes:
        per = len(x) // processes
        groups = np.stack([c[:per] for c in np.array_split(x, processes)])
        pick = rng.integers(0, processes, size=(n, processes))
        idx = rng.integers(0, per, size=(n, processes, per))
        return np.median(groups[pick[:, :, None], idx].reshape(n, -1), axis=1)
    idx = rng.integers(0, len(x), size=(n, len(x)))
    return np.median(x[idx], axis=1)


def ratio_of_medians(base: Sequence[float], head: Sequence[float], *, confidence: float = 0.95,
                     base_processes: int = 1, head_processes: int = 1, seed: int = 0,
                     n_resamples: int = N_RESAMPLES) -> RatioEstimate | None:
    """median(head) / median(base) with a percentile-bootstrap interval; None if undefined."""
    b, h = np.asarray(base, dtype=float), np.asarray(head, dtype=float)
    if b.size == 0 or h.size == 0:
        return None
    with np.errstate(over="ignore"):  # the median of two huge samples is inf: refused below
        mb, mh = float(np.median(b)), float(np.median(h))
        ratio = mh / mb if 0 < mb < math.inf and 0 < mh < math.inf else 0.0
        if not 0 < ratio < math.inf:
            return None  # a zero median, or medians too far apart for a float ratio
        if b.size == 1 and h.size == 1:
            return RatioEstimate(ratio, ratio, ratio)
        rng = np.random.default_rng(seed)
        bm = _resampled_medians(b, base_processes, rng, n_resamples)
        hm = _resampled_medians(h, head_processes, rng, n_resamples)
    valid = (bm > 0) & (hm > 0) & np.isfinite(bm) & np.isfinite(hm)
    logs = np.log(hm[valid]) - np.log(bm[valid])
    if logs.size == 0:
        return RatioEstimate(ratio, ratio, ratio)
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(logs, [alpha, 1.0 - alpha])
    return RatioEstimate(ratio, min(_exp(lo), ratio), max(_exp(hi), ratio))


def _exp(x: float) -> float:
    """exp that saturates at the largest float instead of raising OverflowError."""
    return math.exp(min(x, _LOG_MAX))


def judge(est: RatioEstimate, threshold: MetricThreshold, *, base: float,
          head: float) -> Verdict:
    """Verdict for a higher-is-worse ratio.

    regression: the estimate is past the threshold *and* the interval excludes no change;
    unchanged: the whole interval lies inside the threshold band (or the absolute change is under
    ``min_abs``); improvement: mirror of regression; within noise: anything else, that is an
    interval that straddles the threshold, or an estimate past it that is not significant.
    """
    up = 1.0 + threshold.regression
    down = 1.0 / up
    if abs(head - base) < threshold.min_abs:
        return Verdict.UNCHANGED
    if est.low >= down and est.high <= up:
        return Verdict.UNCHANGED
    if est.ratio >= up and est.low > 1.0:
        return Verdict.REGRESSION
    if est.ratio <= down and est.high < 1.0:
        return Verdict.IMPROVEMENT
    return Verdict.WITHIN_NOISE


