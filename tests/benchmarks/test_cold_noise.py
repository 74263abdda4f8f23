"""benchmarks/cold_noise.py: its pair spread is the verdict's (per compile, from pair
differences), drift shared by a pair does not count in it, models of different sizes pool, and
no round starts that the run's time limit would cut."""

from __future__ import annotations

import math
import random

from tests.benchmark_scripts import load

cn = load("cold_noise")


def _pairs(sd: float, drift: float, n: int = 4000, seed: int = 3, size: float = 3.0
           ) -> list[tuple[dict, dict]]:
    """Pairs of compiles of ``size`` seconds with an independent noise ``sd`` each and a shift
    ``drift`` both compiles of a pair share (the host's state while they ran)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        shared = rng.gauss(0, drift)
        a, b = (size * math.exp(shared + rng.gauss(0, sd)) for _ in range(2))
        out.append(({"wall": a, "cpu": 2 * a, "phases": {}},
                    {"wall": b, "cpu": 2 * b, "phases": {}}))
    return out


def test_the_pair_spread_is_each_compiles_own_noise_and_drift_is_not_in_it():
    for sd, drift in [(0.04, 0.0), (0.04, 0.10), (0.10, 0.05)]:
        pair, whole = cn.spreads(_pairs(sd, drift), lambda r: r["wall"])
        assert abs(pair - sd) < 0.1 * sd, (sd, drift, pair)
        assert abs(whole - math.hypot(sd, drift)) < 0.1 * math.hypot(sd, drift), whole


def test_the_spread_of_all_pools_models_each_about_its_own_mean():
    """A 2 s and a 6 s model, each spread 5%: pooled, 5%; their logs thrown together would
    read the gap between the models (about 55%) as noise."""
    per_model = {"small": _pairs(0.05, 0.0, 500, size=2.0),
                 "large": _pairs(0.05, 0.0, 500, seed=5, size=6.0)}
    pooled = cn.pooled_spread(per_model, lambda r: r["wall"])
    assert abs(pooled - 0.05) < 0.005, pooled
    together = cn.spreads(per_model["small"] + per_model["large"], lambda r: r["wall"])[1]
    assert together > 0.4, together


def test_the_table_pools_models_and_names_every_condition_measured():
    rows = {"pair": {"a": _pairs(0.04, 0.0, 50), "b": _pairs(0.04, 0.0, 50, seed=4)},
            "four": {"a": _pairs(0.08, 0.0, 50)}, "alone": {}}
    text = cn.table(rows)
    lines = {line.split(" | ")[0].strip("| "): line for line in text.splitlines()[2:]}
    assert set(lines) == {"pair", "four"}
    assert "| 100 |" in lines["pair"] and "| 50 |" in lines["four"]
    pair = float(lines["pair"].split(" | ")[3].rstrip("%"))
    four = float(lines["four"].split(" | ")[3].rstrip("%"))
    assert 3.0 < pair < 5.0 and 6.0 < four < 10.0, (pair, four)


def test_a_round_starts_only_if_the_longest_round_so_far_still_fits():
    assert cn.in_time(None, 10_000.0, 500.0)
    assert cn.in_time(470.0, 0.0, 0.0)
    assert cn.in_time(470.0, 300.0, 150.0)
    assert not cn.in_time(470.0, 330.0, 150.0)  # rounds of 150 s: a fourth would end at 480 s
