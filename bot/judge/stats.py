"""The rule that turns an estimate, its noise and a threshold into a verdict, and the noise bands
a verdict is judged with. The estimates themselves (process-level intervals) are in
``core/estimates.py``; the method is in docs/compare.md.

A change is a regression only when (1) its interval excludes no change, and (2) it is larger than
the metric's threshold *and* larger than ``noise_factor`` times the model's between-process noise
(the band): a model whose processes disagree by 5% cannot show a 3% change. When the interval is
so wide that no verdict means anything (a loaded host), the verdict says so (``noisy``) and never
gates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from compilewatch.bot.judge.comparison import Verdict
from compilewatch.bot.judge.thresholds import MetricThreshold
from compilewatch.core.estimates import Estimate, Prior

Ident = tuple[str, str, str]

# What a verdict assumes about a metric's noise when nothing was calibrated for the model: the
# between-process standard deviation of its log value, worth ``df`` processes of evidence. From
# docs/measurement.md (H200): compiled time of GPU-bound models spread 1-2% between processes,
# cold compiles 5-25% when run one after another (pairs run side by side cancel most of it).
DEFAULT_PRIORS: dict[str, Prior] = {
    "compiled_time": Prior(sd=0.015, df=2),
    "compiled_time_normalised": Prior(sd=0.015, df=2),
    "cold_compile": Prior(sd=0.05, df=4),
    "warm_compile": Prior(sd=0.08, df=4),
    # noise one side's processes share (its compile and warm cache), which only ``calibrate``
    # with several sides measures: none assumed without it
    "compiled_time_shared": Prior(sd=0.0, df=0),
    "compiled_time_normalised_shared": Prior(sd=0.0, df=0),
}


@dataclass(frozen=True)
class NoiseBands:
    """Noise learned per model on this runner (``compilewatch calibrate``): (suite, model,
    config) -> metric -> prior. What is not there falls back to ``DEFAULT_PRIORS``."""

    bands: dict[Ident, dict[str, Prior]] = field(default_factory=dict)
    source: str = "defaults"

    def prior(self, ident: Ident, metric: str) -> tuple[Prior, bool]:
        """The prior for a model's metric, and whether it was calibrated."""
        learned = self.bands.get(ident, {}).get(metric)
        if learned is not None:
            return learned, True
        return DEFAULT_PRIORS[metric], False


BAND_PROCESSES = 3  # the band is noise_factor SDs at up to this many processes a side


def _narrowing(processes: tuple[int, int]) -> float:
    """How much the band narrows with more than ``BAND_PROCESSES`` timing processes a side:
    by the fourth root of ``BAND_PROCESSES / n`` (n the harmonic mean of the two sides'
    counts), never wider than at three. More processes (``--processes``, a follow-up) narrow
    the interval; without this they could not settle a change smaller than three of their own
    spreads. The fourth root, not the square root a standard error would shrink by: part of
    the noise does not average out over a side's processes (they share its compile and its
    cache). The measurements: docs/verdict-quality.md, "The measurements behind the judging
    rules"."""
    b, h = processes
    if b <= 0 or h <= 0:
        return 1.0
    n = 2.0 / (1.0 / b + 1.0 / h)
    return min(1.0, (BAND_PROCESSES / n) ** 0.25)


def verdict_of(est: Estimate, threshold: MetricThreshold, *, base: float, head: float,
               noise_factor: float, noisy_half_width: float,
               strict: bool = False) -> tuple[Verdict, float]:
    """The verdict for a higher-is-worse ratio, and the band (the relative change a verdict
    needed) it was judged with.

    regression: past the band, and the interval excludes no change; improvement: its mirror;
    unchanged: the whole interval lies inside the threshold (or the absolute change is under
    ``min_abs``); noisy: an interval wider than ``noisy_half_width`` either way (log scale), so
    that nothing else can be concluded; within noise: anything else. ``strict`` (a CPU
    timing, whose noise the default bands do not describe): a change is called only where the
    whole interval lies past the band.
    """
    band = max(threshold.regression, noise_factor * est.sd * _narrowing(est.processes))
    if abs(head - base) < threshold.min_abs:
        return Verdict.UNCHANGED, band
    past = (1.0 + band, 1.0 / (1.0 + band)) if strict else (1.0, 1.0)
    if est.ratio >= 1.0 + band and est.low > past[0]:
        return Verdict.REGRESSION, band
    if est.ratio <= 1.0 / (1.0 + band) and est.high < past[1]:
        return Verdict.IMPROVEMENT, band
    up = 1.0 + threshold.regression
    if est.low >= 1.0 / up and est.high <= up:
        return Verdict.UNCHANGED, band
    if est.half_width > max(noisy_half_width, math.log1p(band)):
        return Verdict.NOISY, band
    return Verdict.WITHIN_NOISE, band


# an interval whose ends are further apart than this factor bounds nothing worth printing
TOO_WIDE = 4.0


def too_wide(low: float | None, high: float | None) -> bool:
    """An interval that says nothing: its low end at or under zero, or its ends more than
    ``TOO_WIDE`` apart (a CPU run's speedup read [0.00, 428027.87])."""
    if low is None or high is None:
        return False
    return low <= 0 or high / low > TOO_WIDE


def too_wide_why(low: float, high: float, processes: int | None = None) -> str:
    """Why an interval is not shown as a number, for a reader."""
    spread = "reaches zero" if low <= 0 else f"spans a factor of {high / low:,.0f}"
    where = f" from {processes} timing process{'es' * (processes != 1)}" if processes else ""
    return f"not judged: too noisy (the 95% interval{where} {spread})"
