"""Steps (change points) in a nightly series: binary segmentation on the mean, noise-scaled.

Method (see docs/trends.md):

1. Noise: sigma from the median absolute deviation of first differences, scaled to a Gaussian
   standard deviation (``1.4826 * MAD / sqrt(2)``). Differences cancel the steps themselves, so a
   series with a big step still gets its noise, not its step, as sigma. Floored at ``min_rel_sigma``
   of the median level so that a perfectly flat series is not infinitely sensitive.
2. Spikes: a value more than 5 sigma from the running median of 5 nights is clipped to that
   band (a bad night on a shared runner is not a change of level).
3. Binary segmentation: in a segment, the split that most lowers the sum of squared deviations
   from the segment means (the least-squares mean-shift location) is a step when the gain exceeds
   ``penalty * sigma**2 * log(n)`` (a BIC-like penalty; the default 8 gave 0.1 % false steps on
   3,000 flat 40-night series of 5 % Gaussian noise and finds a 3-sigma step at its exact night in
   83 % of cases, a 10-sigma step in all), both sides have at least ``min_size`` nights, and the
   two sides also differ by rank (Mann-Whitney U, ``p < alpha``): one outlier night cannot fake a
   step. Both halves are then searched again, up to ``max_steps`` steps.

Binary segmentation is exact for one step and a good approximation of optimal partitioning
(PELT) for the few, well separated steps a nightly history has; it needs only numpy and scipy.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.ndimage import median_filter

MAD_TO_SIGMA = 1.4826  # MAD of a Gaussian times this is its standard deviation


@dataclass(frozen=True)
class Step:
    """A change of level: ``index`` is the first night of the new level."""

    index: int
    before: float  # mean of the segment before the step
    after: float  # mean of the segment from the step on
    p_value: float  # Mann-Whitney U between those two segments

    @property
    def rel_change(self) -> float | None:
        return (self.after - self.before) / abs(self.before) if self.before else None


def noise_sigma(values: Sequence[float], min_rel_sigma: float = 1e-3) -> float:
    """Robust per-night noise of a series that may contain steps."""
    x = np.asarray(values, dtype=float)
    floor = max(min_rel_sigma * abs(float(np.median(x))) if len(x) else 0.0, 1e-12)
    if len(x) < 3:
        return floor
    d = np.diff(x)
    mad = float(np.median(np.abs(d - np.median(d))))
    return max(MAD_TO_SIGMA * mad / math.sqrt(2), floor)


def _best_split(x: np.ndarray, min_size: int) -> tuple[int, float]:
    """Split index (relative to ``x``) with the largest least-squares gain, and the gain."""
    n = len(x)
    k = np.arange(min_size, n - min_size + 1)
    csum = np.cumsum(x)
    left, total = csum[k - 1], csum[-1]
    # gain of a mean shift at k: n1 * n2 / n * (mean1 - mean2)**2
    gain = (left / k - (total - left) / (n - k)) ** 2 * k * (n - k) / n
    i = int(np.argmax(gain))
    return int(k[i]), float(gain[i])


def despike(x: np.ndarray, sigma: float, width: int = 5, limit: float = 5.0) -> np.ndarray:
    """Clip single-night spikes to ``limit`` sigma around a running median of ``width`` nights.

    A running median follows a step (most of its window is on the new level) but not one bad
    night, so a noisy runner's outlier loses its leverage on the least-squares gain.
    """
    if len(x) < width:
        return x
    level = median_filter(x, size=width, mode="nearest")
    return np.clip(x, level - limit * sigma, level + limit * sigma)


def _p_value(a: np.ndarray, b: np.ndarray) -> float:
    if np.ptp(np.concatenate([a, b])) == 0:
        return 1.0
    # imported where a split is tested: scipy.stats takes a second to import, and a year of
    # flat series never gets here
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(a, b, alternative="two-sided").pvalue)


def detect_steps(values: Sequence[float], *, min_size: int = 3, penalty: float = 8.0,
                 alpha: float = 0.05, max_steps: int = 5,
                 min_rel_sigma: float = 1e-3) -> list[Step]:
    """Steps of a series in time order (oldest first); see the module docstring."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2 * min_size or not np.all(np.isfinite(x)):
        return []
    sigma = noise_sigma(x, min_rel_sigma)
    threshold = penalty * sigma**2 * math.log(n)
    x = despike(x, sigma)
    cuts: list[int] = []
    todo = [(0, n)]
    while todo and len(cuts) < max_steps:
        a, b = todo.pop()
        if b - a < 2 * min_size:
            continue
        k, gain = _best_split(x[a:b], min_size)
        if gain <= threshold or _p_value(x[a:a + k], x[a + k:b]) >= alpha:
            continue
        cuts.append(a + k)
        todo += [(a, a + k), (a + k, b)]
    return _steps(x, sorted(cuts))


def _steps(x: np.ndarray, cuts: list[int]) -> list[Step]:
    bounds = [0, *cuts, len(x)]
    segs = [x[bounds[i]:bounds[i + 1]] for i in range(len(bounds) - 1)]
    return [Step(index=c, before=float(segs[i].mean()), after=float(segs[i + 1].mean()),
                 p_value=_p_value(segs[i], segs[i + 1])) for i, c in enumerate(cuts)]
