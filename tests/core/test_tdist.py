"""Student-t quantiles without scipy (``core/tdist.py``): held to scipy's and to closed forms
over the degrees of freedom and confidences the verdicts use, and far past them."""

from __future__ import annotations

import math
import random
import time

import pytest
from scipy import stats

from compilewatch.core import tdist

DFS = [1, 2, 3, 4, 5, 7, 10, 19, 20, 39, 40, 41, 60, 100, 250, 1000, 3000, 9_999, 10_000,
       10_001, 100_000, 10**6, 10**8, 10**9]
CONFIDENCES = [0.51, 0.6, 0.8, 0.9, 0.95, 0.975, 0.99, 0.999, 0.9999, 0.999999]


@pytest.mark.parametrize("df", DFS)
@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_quantiles_agree_with_scipy(df: int, confidence: float) -> None:
    # scipy's own error reaches 1.1e-10 (df 1, 0.999999) against 30-digit arithmetic
    want = float(stats.t.ppf(0.5 + confidence / 2, df))
    assert tdist.two_sided_quantile(confidence, df) == pytest.approx(want, rel=3e-10)


@pytest.mark.parametrize("confidence", CONFIDENCES)
def test_closed_forms_of_one_and_two_degrees_of_freedom(confidence: float) -> None:
    assert tdist.two_sided_quantile(confidence, 1) == pytest.approx(
        math.tan(math.pi * confidence / 2), rel=1e-10)
    assert tdist.two_sided_quantile(confidence, 2) == pytest.approx(
        confidence * math.sqrt(2 / (1 - confidence**2)), rel=1e-10)


@pytest.mark.parametrize("df", [0, -1])
def test_no_degrees_of_freedom_is_the_normal_quantile(df: int) -> None:
    for confidence in CONFIDENCES:
        want = float(stats.norm.ppf(0.5 + confidence / 2))
        assert tdist.two_sided_quantile(confidence, df) == pytest.approx(want, rel=1e-14)


def test_coverage_inverts_the_quantile_and_grows_with_q() -> None:
    """Below 10⁴ degrees of freedom the quantile is the root of ``coverage``; above, a series
    that the fraction (which loses digits there, 7e-14 at 10⁴) must still agree with."""
    rng = random.Random(5)
    for _ in range(300):
        df, confidence = rng.choice([d for d in DFS if d <= 10_001]), rng.uniform(0.5, 0.9999)
        q = tdist.two_sided_quantile(confidence, df)
        assert tdist.coverage(q, df) == pytest.approx(confidence, abs=1e-12)
        assert tdist.coverage(q * 0.99, df) < confidence < tdist.coverage(q * 1.01, df)
    assert tdist.coverage(0.0, 5) == 0.0 and tdist.coverage(1e200, 5) == 1.0


@pytest.mark.parametrize("confidence", [0.0, 1.0, -0.5, 1.5, math.nan])
def test_a_confidence_outside_the_open_interval_is_refused(confidence: float) -> None:
    with pytest.raises(ValueError, match="confidence"):
        tdist.two_sided_quantile(confidence, 3)


def test_every_degree_of_freedom_up_to_ten_thousand_is_fast() -> None:
    """A results file can make many distinct degrees of freedom; each costs tens of µs."""
    start = time.perf_counter()
    for df in range(1, 10_001):
        tdist.two_sided_quantile(0.95, df)
    assert time.perf_counter() - start < 5.0

