"""The statistics behind verdicts, held to the bar in MEASUREMENT.md: no alarm on A/A runs, a
real 5% slowdown under 2% noise found."""

from __future__ import annotations

import random

import pytest

from compilewatch.bot.judge.comparison import Verdict
from compilewatch.bot.judge.stats import RatioEstimate, judge, ratio_of_medians
from compilewatch.bot.judge.thresholds import MetricThreshold
from compilewatch.bot.judge.verdicts import compare
from compilewatch.core.estimates import geomean
from tests.factories import model_result, run_results


def _suite(n: int, seed: int, **kw: object) -> list:
    return [model_result(f"m{i}", seed=seed * 1000 + i, **kw) for i in range(n)]


def test_aa_same_distribution_gives_no_alarm_over_200_seeded_comparisons():
    base = run_results(_suite(200, seed=1))
    head = run_results(_suite(200, seed=2))
    c = compare(base, head)
    assert not c.gating_regression
    assert c.headline.regressions == 0
    # Most are confidently unchanged; the rest are honestly "within noise", never flagged.
    assert c.headline.unchanged >= 180


def test_real_5_percent_slowdown_with_2_percent_noise_is_a_regression_on_every_seed():
    base = run_results(_suite(100, seed=3, spread=0.02))
    head = run_results(_suite(100, seed=4, spread=0.02, compiled_us=52.5))
    c = compare(base, head)
    verdicts = [r.compiled_time.verdict for r in c.rows]
    assert verdicts.count(Verdict.REGRESSION) == 100
    assert c.gating_regression and c.headline.gating == 100


def test_5_percent_speedup_is_an_improvement():
    c = compare(run_results(_suite(20, seed=5)), run_results(_suite(20, seed=6, compiled_us=47.5)))
    assert {r.compiled_time.verdict for r in c.rows} == {Verdict.IMPROVEMENT}
    assert not c.gating_regression


def test_interval_covers_the_true_ratio_and_is_deterministic():
    rng = random.Random(0)
    base = [100 * (1 + rng.gauss(0, 0.02)) for _ in range(30)]
    head = [110 * (1 + rng.gauss(0, 0.02)) for _ in range(30)]
    est = ratio_of_medians(base, head, seed=7)
    assert est.low < 1.10 < est.high
    assert est.high - est.low < 0.04
    assert ratio_of_medians(base, head, seed=7) == est


def test_cluster_bootstrap_widens_the_interval_when_processes_disagree():
    rng = random.Random(1)
    # Four processes per side, each shifted by its host state (+-5%), 1% noise within.
    def side(level: float) -> list[float]:
        out: list[float] = []
        for shift in (0.95, 1.05, 0.97, 1.03):
            out += [level * shift * (1 + rng.gauss(0, 0.01)) for _ in range(10)]
        return out

    base, head = side(100), side(100)
    naive = ratio_of_medians(base, head, seed=1)
    clustered = ratio_of_medians(base, head, base_processes=4, head_processes=4, seed=1)
    assert clustered.high - clustered.low > 1.2 * (naive.high - naive.low)


def test_undefined_ratios_give_none():
    assert ratio_of_medians([], [1.0]) is None
    assert ratio_of_medians([0.0, 0.0], [1.0, 1.0]) is None


T = MetricThreshold(regression=0.03)


@pytest.mark.parametrize(("est", "expected"), [
    (RatioEstimate(1.05, 1.04, 1.06), Verdict.REGRESSION),
    (RatioEstimate(1.05, 1.01, 1.09), Verdict.REGRESSION),  # past threshold and significant
    (RatioEstimate(1.05, 0.98, 1.12), Verdict.WITHIN_NOISE),  # past threshold, not significant
    (RatioEstimate(1.01, 0.99, 1.04), Verdict.WITHIN_NOISE),  # straddles the threshold
    (RatioEstimate(1.01, 0.99, 1.02), Verdict.UNCHANGED),
    (RatioEstimate(0.95, 0.94, 0.96), Verdict.IMPROVEMENT),
    (RatioEstimate(1.30, 1.30, 1.30), Verdict.REGRESSION),  # single sample per side
])
def test_judge(est, expected):
    assert judge(est, T, base=100, head=100 * est.ratio) is expected


def test_judge_ignores_changes_under_the_absolute_floor():
    t = MetricThreshold(regression=0.1, min_abs=0.5)
    assert judge(RatioEstimate(1.5, 1.5, 1.5), t, base=0.4, head=0.6) is Verdict.UNCHANGED
    assert judge(RatioEstimate(1.5, 1.5, 1.5), t, base=4, head=6) is Verdict.REGRESSION


def test_eager_drift_widens_the_compiled_interval():
    # Head's process ran on a host 10% slower: eager and compiled both moved.
    base = run_results([model_result("m", seed=1)])
    head = run_results([model_result("m", seed=2, eager_us=110, compiled_us=55)])
    row = compare(base, head).rows[0]
    assert row.compiled_time.verdict is Verdict.WITHIN_NOISE
    assert row.compiled_time.ci_low < 1.0 and row.notes
    assert "eager time moved +10" in row.notes[0] or "eager time moved +9" in row.notes[0]


def test_geomean():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([]) is None
