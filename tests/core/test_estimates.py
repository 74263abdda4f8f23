"""Noise one side's processes share (``core/estimates.py``: ``shared_spread`` and the
``shared`` term of ``ratio``), from synthetic sides with known process and side effects."""

from __future__ import annotations

import math
import random

import pytest

from compilewatch.core.estimates import Prior, pooled, ratio, shared_spread


def _side(rng: random.Random, level: float, processes: int, process_sd: float,
          side_sd: float) -> list[list[float]]:
    """One side's processes, each a few samples: the side draws one shift, each process
    another."""
    side = level * math.exp(rng.gauss(0, side_sd))
    return [[side * math.exp(rng.gauss(0, process_sd)) * (1 + rng.gauss(0, 0.001))
             for _ in range(5)] for _ in range(processes)]


@pytest.mark.parametrize(("side_sd", "low", "high"), [(0.02, 0.014, 0.027), (0.0, 0.0, 0.005)])
def test_the_shared_part_is_found_and_not_invented(side_sd: float, low: float,
                                                   high: float) -> None:
    rng = random.Random(7)
    sides = [_side(rng, 100.0, 3, 0.01, side_sd) for _ in range(60)]
    got = shared_spread(sides)
    assert got is not None and got.df == 59
    assert low <= got.sd <= high, got


def test_fewer_than_two_sides_of_two_processes_say_nothing() -> None:
    rng = random.Random(1)
    assert shared_spread([_side(rng, 1.0, 3, 0.01, 0.0)]) is None
    assert shared_spread([_side(rng, 1.0, 1, 0.01, 0.0), _side(rng, 1.0, 3, 0.01, 0.0)]) is None


def test_the_shared_term_widens_an_unpaired_interval_by_one_draw_a_side() -> None:
    rng = random.Random(3)
    b, h = _side(rng, 100.0, 3, 0.01, 0.0), _side(rng, 100.0, 3, 0.01, 0.0)
    plain = ratio(b, h)
    shared = ratio(b, h, shared=Prior(0.02, 2))
    assert plain is not None and shared is not None
    assert shared.ratio == plain.ratio and shared.sd == plain.sd  # the band's noise is the same
    # the variance of the log ratio grows by 2 x 0.02^2, and its degrees of freedom shrink
    assert shared.half_width > plain.half_width + 0.02
    assert shared.df < plain.df
    assert ratio(b, h, shared=Prior(0.0, 5)) == plain  # nothing shared: nothing changes
    assert ratio(b, h, shared=Prior(0.02, 0)) == plain  # no evidence: nothing assumed


def test_bands_of_the_same_noise_pool_by_their_degrees_of_freedom() -> None:
    got = pooled([Prior(0.01, 2), Prior(0.03, 6)])
    assert got is not None and got.df == 8
    assert got.sd == pytest.approx(math.sqrt((2 * 0.01 ** 2 + 6 * 0.03 ** 2) / 8))
    assert pooled([]) is None and pooled([Prior(0.05, 0)]) is None
