"""benchmarks/cold_noise.py: its pair spread is the verdict's (per compile, from pair
differences), drift shared by a pair does not count in it, models of different sizes pool, and
no round starts that the run's time limit would cut."""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

from tests.benchmark_scripts import ROOT, load

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


def _speed_pairs(core_sd: float, ref_sd: float, n: int = 3000, seed: int = 7
                 ) -> list[tuple[dict, dict]]:
    """Compiles whose only noise is how fast their cores ran (``core_sd``), each with
    reference samples on the same cores that carry the same speed and noise of their own
    (``ref_sd``)."""
    rng = random.Random(seed)

    def one() -> dict:
        speed = math.exp(rng.gauss(0, core_sd))
        refs = [0.02 * speed * math.exp(rng.gauss(0, ref_sd)) for _ in range(16)]
        return {"wall": 3.0 * speed, "cpu": 6.0 * speed, "phases": {},
                "ref_before": {"loop": refs[:8], "mem": []}, "ref_after": {"loop": refs[8:]}}
    return [(one(), one()) for _ in range(n)]


def test_a_compile_over_its_cores_reference_cancels_the_cores_speed_and_adds_the_references_noise():
    """Where a compile is slow because its cores are, the reference taken on them cancels it;
    a reference noisier than that speed makes the ratio worse than the compile alone (what
    the H200 showed)."""
    steady = _speed_pairs(core_sd=0.10, ref_sd=0.01)
    wall = cn.spreads(steady, lambda r: r["wall"])[0]
    ratio = cn.spreads(steady, lambda r: cn.over_reference(r, "loop"))[0]
    assert abs(wall - 0.10) < 0.01 and ratio < 0.01, (wall, ratio)
    jittery = _speed_pairs(core_sd=0.10, ref_sd=0.5)
    ratio = cn.spreads(jittery, lambda r: cn.over_reference(r, "loop"))[0]
    assert ratio > 0.12, ratio


def test_the_table_says_n_a_for_a_reference_the_compiles_did_not_take():
    rows = {"four": {"a": _speed_pairs(0.10, 0.01, n=40)}}
    line = cn.table(rows).splitlines()[2]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[-1] == "n/a"  # no "mem" samples were taken
    assert float(cells[-2].rstrip("%")) < 2.0  # the loop reference cancels the cores' speed
    assert cn.reference({"wall": 1.0}, "loop") == 0.0


def _unrelated_pairs(n: int = 400, seed: int = 11) -> list[tuple[dict, dict]]:
    """Compiles spread 10% by a noise of their own, each with a reference as noisy that has
    nothing to do with it."""
    rng = random.Random(seed)

    def one() -> dict:
        refs = [0.02 * math.exp(rng.gauss(0, 0.3)) for _ in range(16)]
        return {"wall": 3.0 * math.exp(rng.gauss(0, 0.10)), "cpu": 6.0, "phases": {},
                "ref_before": {"loop": refs[:8]}, "ref_after": {"loop": refs[8:]}}
    return [(one(), one()) for _ in range(n)]


def test_the_fitted_share_takes_what_the_reference_explains_and_nothing_it_does_not():
    steady = cn.reference_fit(_speed_pairs(core_sd=0.10, ref_sd=0.01, n=400), "loop")
    assert steady is not None
    assert steady["correlation"] > 0.95 and abs(steady["share"] - 1.0) < 0.05, steady
    assert steady["left"] < 0.01 and steady["steady"] > 0.95, steady
    unrelated = cn.reference_fit(_unrelated_pairs(), "loop")
    assert unrelated is not None
    assert abs(unrelated["correlation"]) < 0.15 and abs(unrelated["share"]) < 0.1, unrelated
    assert 0.09 < unrelated["left"] < 0.11 and abs(unrelated["steady"]) < 0.15, unrelated
    assert cn.reference_fit(_speed_pairs(0.1, 0.01, n=3), "loop") is None  # too few pairs
    assert cn.reference_fit(_speed_pairs(0.1, 0.01, n=40), "mem") is None  # none taken


def _from(path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "cold_noise.py"), "--from",
                           str(path)], capture_output=True, text=True, timeout=120)


def test_from_prints_a_saved_runs_table_and_refuses_what_is_not_one(tmp_path):
    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"four": {"a": _speed_pairs(0.10, 0.01, n=40)}}))
    done = _from(saved)
    assert done.returncode == 0, done.stderr
    assert "| four | 40 |" in done.stdout and "four, loop reference: correlation" in done.stdout
    for bad in ("not json", json.dumps({"four": 3}), json.dumps({"four": {"a": [[{}, {}]]}})):
        (tmp_path / "bad.json").write_text(bad)
        done = _from(tmp_path / "bad.json")
        assert done.returncode == 2 and "is not a cold_noise --out file" in done.stderr, done
        assert "Traceback" not in done.stderr
    done = _from(tmp_path / "missing.json")
    assert done.returncode == 2 and "missing.json" in done.stderr
