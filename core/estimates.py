"""Estimates every layer reports: geometric means, and head/base ratios whose intervals see the
noise between processes, where most of it lives (docs/measurement.md).

A timing or compile process's host state (CPU frequency, caches, what else runs) shifts all its
samples together, so samples inside one process are not independent evidence: the unit of
evidence is the process. A ratio is estimated from each process's log-median, and its interval
is a Student-t interval whose variance is the spread *between* processes, pooled over both sides,
and optionally pooled with a prior noise band learned for the model (``compilewatch
calibrate``) or a default one. With few processes the t quantile is large, which is the honest
answer; a bootstrap over three clusters would be narrower and wrong (``tests/core``).
"""

from __future__ import annotations

import functools
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from compilewatch.core import tdist

Groups = Sequence[Sequence[float]]
_LOG_MAX = math.log(sys.float_info.max)


def geomean(values: Sequence[float]) -> float | None:
    """Geometric mean of the positive values (None when there are none): speedups and compile
    times aggregate multiplicatively."""
    vals = [v for v in values if v > 0]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


@dataclass(frozen=True)
class Prior:
    """A noise band: the standard deviation of a process's log value, with its degrees of
    freedom (how much evidence stands behind it)."""

    sd: float
    df: int


@dataclass(frozen=True)
class Estimate:
    """head/base, its interval, and the noise it was judged with."""

    ratio: float
    low: float
    high: float
    sd: float  # between-process SD of the log value that the interval used
    df: int  # 0: no evidence of process noise at all (one process a side, no prior)
    processes: tuple[int, int]  # (base, head)
    paired: bool = False

    def excludes_one(self) -> bool:
        return self.low > 1.0 or self.high < 1.0

    @property
    def half_width(self) -> float:
        """Half the interval's width on the log scale (0.1 ≈ ±10%)."""
        return (math.log(self.high) - math.log(self.low)) / 2


def _logs(xs: Sequence[float]) -> list[float]:
    return [math.log(x) for x in map(float, xs) if x > 0]


def _log_median(xs: Sequence[float]) -> float | None:
    logs = _logs(xs)
    return statistics.median(logs) if logs else None


def _median_se(xs: Sequence[float]) -> float:
    """Standard error of a sample's log-median (from its MAD): how well one process knows its
    own median. Matters with one process a side, where nothing else is known."""
    logs = _logs(xs)
    if len(logs) < 3:
        return 0.0
    middle = statistics.median(logs)
    mad = statistics.median([abs(v - middle) for v in logs])
    return 1.2533 * 1.4826 * mad / math.sqrt(len(logs))


def _pooled_var(sides: Sequence[Sequence[float]]) -> tuple[float, int]:
    ss, df = 0.0, 0
    for values in sides:
        if len(values) >= 2:
            m = sum(values) / len(values)
            ss += sum((v - m) ** 2 for v in values)
            df += len(values) - 1
    return (ss / df if df else 0.0), df


def spread(groups: Groups) -> Prior | None:
    """The between-process SD of the log medians (``groups[i]``: process i's samples), the
    noise a verdict's interval pools; ``calibrate`` stores it as a model's band. None with
    fewer than two processes."""
    logs = [m for g in groups if (m := _log_median(g)) is not None]
    var, df = _pooled_var([logs])
    return Prior(math.sqrt(var), df) if df else None


def pooled(priors: Sequence[Prior]) -> Prior | None:
    """One band from several bands of the same noise (the same metric on several sides),
    weighted by their degrees of freedom; None without any."""
    df = sum(p.df for p in priors)
    if df < 1:
        return None
    return Prior(math.sqrt(sum(p.df * p.sd ** 2 for p in priors) / df), df)


def shared_spread(sides: Sequence[Groups]) -> Prior | None:
    """The SD of the noise all of one side's processes share (``sides[s][i]``: side s's
    process i's samples), beyond what their own spread explains: the spread of the sides'
    mean log-medians less its share from within (one-way random effects, method of moments),
    with ``len(sides) - 1`` degrees of freedom. Zero when the sides agree as well as their
    processes predict; None with fewer than two sides of two processes."""
    logs = [[m for g in side if (m := _log_median(g)) is not None] for side in sides]
    logs = [side for side in logs if len(side) >= 2]
    if len(logs) < 2:
        return None
    within, _ = _pooled_var(logs)
    means = [sum(side) / len(side) for side in logs]
    between, _ = _pooled_var([means])
    excess = between - within * sum(1 / len(side) for side in logs) / len(logs)
    return Prior(math.sqrt(max(excess, 0.0)), len(logs) - 1)


def _satterthwaite(a: float, df_a: int, b: float, df_b: int) -> int:
    """Degrees of freedom of the sum of two variance estimates (Welch-Satterthwaite)."""
    if df_a <= 0 or df_b <= 0 or a + b <= 0:
        return max(df_a, 0)
    return max(1, int((a + b) ** 2 / (a * a / df_a + b * b / df_b)))


def _combine(var: float, df: int, prior: Prior | None) -> tuple[float, int]:
    if prior is None or prior.df <= 0:
        return var, df
    total = df + prior.df
    return (df * var + prior.df * prior.sd ** 2) / total, total


@functools.lru_cache(maxsize=256)
def _quantile(df: int, confidence: float) -> float:
    """Student-t (normal with no degrees of freedom) two-sided quantile; few distinct values
    occur, each computed once (tens of microseconds)."""
    return tdist.two_sided_quantile(confidence, df)


def _interval(delta: float, se: float, df: int, confidence: float) -> tuple[float, float]:
    if se <= 0:
        return delta, delta
    q = _quantile(df, confidence)
    return delta - q * se, delta + q * se


def ratio(base: Groups, head: Groups, *, confidence: float = 0.95, prior: Prior | None = None,
          paired: bool = False, shared: Prior | None = None) -> Estimate | None:
    """head/base from per-process samples (``base[i]`` are process i's samples).

    Unpaired: the difference of the mean log-medians of each side, with the between-process
    variance pooled over both sides (and the prior). Paired (``base[i]`` and ``head[i]`` ran at
    the same time, so host drift hits both): the mean of per-pair log differences. None when a
    side has no positive sample. ``shared``: noise every process of one side shares (its
    compile and cache; ``shared_spread``), one draw a side whatever its process count, added
    to an unpaired interval's variance.
    """
    b = [m for g in base if (m := _log_median(g)) is not None]
    h = [m for g in head if (m := _log_median(g)) is not None]
    if not b or not h:
        return None
    within = max(_median_se(g) for g in [*base, *head]) ** 2
    if paired and len(b) == len(h):
        diffs = [y - x for x, y in zip(b, h, strict=True)]
        delta = sum(diffs) / len(diffs)
        var, df = _pooled_var([diffs])
        pair_prior = Prior(prior.sd * math.sqrt(2), prior.df) if prior else None
        var, df = _combine(var, df, pair_prior)
        var = max(var, 2 * within)
        se = math.sqrt(var / len(diffs))
        sd = math.sqrt(var / 2)
    else:
        paired = False
        delta = sum(h) / len(h) - sum(b) / len(b)
        var, df = _combine(*_pooled_var([b, h]), prior)
        var = max(var, within)
        se2 = var * (1 / len(b) + 1 / len(h))
        if shared is not None and shared.df > 0 and shared.sd > 0:
            df = _satterthwaite(se2, df, 2 * shared.sd ** 2, shared.df)
            se2 += 2 * shared.sd ** 2
        se = math.sqrt(se2)
        sd = math.sqrt(var)
    lo, hi = _interval(delta, se, df, confidence)
    if max(abs(lo), abs(hi)) > _LOG_MAX:
        return None  # sides too far apart for a float ratio: no ratio rather than an overflow
    return Estimate(math.exp(delta), math.exp(lo), math.exp(hi), sd, df, (len(b), len(h)),
                    paired)


def process_mean(groups: Groups) -> float | None:
    """The geometric mean of each process's median: the scale every ratio here is taken on, so
    the values shown beside a ratio agree with it (a median pooled over all samples mixes
    processes that ran at different host speeds, and can move the other way)."""
    logs = [m for g in groups if (m := _log_median(g)) is not None]
    return math.exp(sum(logs) / len(logs)) if logs else None


def level(groups: Groups, *, confidence: float = 0.95) -> tuple[float, float, float] | None:
    """A value with its interval from per-process samples (e.g. a speedup): the geometric mean
    of the process medians, interval from their spread. None without positive samples."""
    logs = [m for g in groups if (m := _log_median(g)) is not None]
    if not logs:
        return None
    mean = sum(logs) / len(logs)
    var, df = _pooled_var([logs])
    se = math.sqrt(max(var, max(_median_se(g) for g in groups) ** 2) / len(logs))
    lo, hi = _interval(mean, se, df, confidence)
    if max(abs(lo), abs(hi)) > _LOG_MAX:
        return None
    return math.exp(mean), math.exp(lo), math.exp(hi)
