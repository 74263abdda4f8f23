"""Step detection on synthetic nightly series: exact night, no false steps, several steps."""

from __future__ import annotations

import numpy as np
import pytest

from compilewatch.bot.history.changepoints import detect_steps, noise_sigma


def _noisy(levels: list[tuple[int, float]], seed: int, rel_noise: float = 0.02) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.concatenate([np.full(n, level) for n, level in levels])
    return x * (1 + rng.normal(0, rel_noise, len(x)))


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("k", [5, 17, 34])
def test_one_injected_step_is_found_at_its_night(seed: int, k: int) -> None:
    x = _noisy([(k, 10.0), (40 - k, 12.0)], seed)  # +20 % compile time at night k
    (step,) = detect_steps(x)
    assert step.index == k
    assert step.before == pytest.approx(10.0, rel=0.03)
    assert step.after == pytest.approx(12.0, rel=0.03)
    assert step.rel_change == pytest.approx(0.2, abs=0.04) and step.p_value < 0.05


@pytest.mark.parametrize("seed", range(200))
def test_flat_noisy_series_has_no_step(seed: int) -> None:
    assert detect_steps(_noisy([(40, 2.0)], seed, rel_noise=0.05)) == []


@pytest.mark.parametrize("seed", range(20))
def test_one_outlier_night_is_not_a_step(seed: int) -> None:
    x = _noisy([(40, 2.0)], seed)
    x[20] *= 3  # one bad night (a noisy runner), not a change of level
    assert detect_steps(x) == []


@pytest.mark.parametrize("seed", range(20))
def test_two_steps_are_both_found(seed: int) -> None:
    x = _noisy([(12, 2.0), (15, 1.7), (13, 2.2)], seed)  # speedup drops, then recovers above
    assert [s.index for s in detect_steps(x)] == [12, 27]


def test_integer_counts_step_and_blip() -> None:
    breaks = [1.0] * 10 + [2.0] * 10
    assert [(s.index, s.before, s.after) for s in detect_steps(breaks)] == [(10, 1.0, 2.0)]
    assert detect_steps([1.0] * 9 + [2.0] + [1.0] * 10) == []
    assert detect_steps([0.0] * 20) == []


def test_min_size_and_short_series() -> None:
    assert detect_steps([1.0, 1.0, 5.0, 5.0, 5.0]) == []  # fewer than 2 * min_size nights
    assert detect_steps([1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0, 5.0])[0].index == 3
    assert detect_steps([1.0, 1.0, 1.0, 5.0, 5.0, 5.0, 5.0, 5.0], min_size=4) == []
    assert detect_steps([]) == []
    assert detect_steps([1.0, float("nan"), 1.0, 1.0, 1.0, 1.0, 1.0]) == []


def test_noise_sigma_ignores_the_step() -> None:
    x = _noisy([(20, 10.0), (20, 20.0)], seed=1, rel_noise=0.01)
    assert noise_sigma(x) == pytest.approx(0.1, rel=0.5)  # 1 % of 10, not the step of 10
    assert noise_sigma([5.0] * 10) == pytest.approx(5e-3)
