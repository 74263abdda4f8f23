"""benchmarks/verdict_quality.py judges a six-pair run as a ``pr`` with three cold compiles a
side and its follow-up would (``--cold-follow-up-check``): its detection rates stand on this."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.benchmark_scripts import load
from tests.factories import cold_result, run_results

vq = load("verdict_quality")

FLAT = [3.0, 3.02, 2.98, 3.01, 2.99, 3.0]
CASES = {
    # (base, head): what the first three pairs say, and what all six say
    # the H200's A/A pair: three pairs call a -14.9% improvement, six do not
    "chance": ([4.05, 4.46, 4.40, 3.95, 4.06, 3.71], [3.70, 3.67, 3.61, 3.86, 4.52, 3.39]),
    # the H200's A/A pair of repeat 31: three pairs call +28.1%, the interval wholly past the
    # threshold; the next three say +2%, all six within noise
    "past": ([3.08, 3.24, 3.05, 3.94, 2.81, 2.94], [3.99, 4.20, 3.83, 3.43, 3.43, 2.94]),
    # undecided near the threshold on three pairs
    "open": ([3.0, 3.3, 2.8, 3.0, 3.3, 2.8], [3.5, 3.3, 3.9, 3.5, 3.3, 3.9]),
    # unchanged on three: the follow-up's pairs are dropped
    "flat": (FLAT, [x * 1.01 for x in FLAT]),
    # one of head's cold compiles failed: its index no longer pairs, so it is not cut
    "failed": (FLAT, [x * 1.01 for x in FLAT[:5]]),
}


def _run(cases: dict[str, tuple[list[float], list[float]]]) -> dict:
    sides = {}
    for i, side in enumerate(("base", "head")):
        results = [cold_result(m, pair[i], seed=i + 1) for m, pair in cases.items()]
        sides[side] = json.loads(run_results(results).model_dump_json())
    return sides


def _cold(comparison: dict, model: str) -> dict:
    return next(r for r in comparison["rows"] if r["model"] == model)["cold_compile"]


def test_a_six_pair_run_is_judged_on_three_pairs_and_six_where_the_rule_asks(tmp_path: Path):
    judged, more = vq.as_pr(_run(CASES), tmp_path, 3)
    assert judged is not None
    assert sorted(more) == ["chance", "open", "past"]
    chance = _cold(judged, "chance")
    assert chance["samples"] == [6, 6] and chance["verdict"] != "improvement", chance
    past = _cold(judged, "past")
    assert past["samples"] == [6, 6] and past["verdict"] != "regression", past
    assert _cold(judged, "open")["samples"] == [6, 6]
    assert _cold(judged, "flat")["samples"] == [3, 3]
    assert _cold(judged, "failed")["samples"] == [6, 5]
    # the same run judged on all six pairs everywhere: no model on three
    whole = vq.compare_run(_run(CASES), tmp_path / "whole")
    assert whole is not None and _cold(whole, "flat")["samples"] == [6, 6]


def test_the_first_three_pairs_alone_make_the_chance_call(tmp_path: Path):
    """What the follow-up takes back is really there on three pairs, the second call with its
    interval wholly past the threshold."""
    first = {m: (b[:3], h[:3]) for m, (b, h) in CASES.items() if m in ("chance", "past")}
    judged = vq.compare_run(_run(first), tmp_path)
    assert judged is not None and _cold(judged, "chance")["verdict"] == "improvement"
    past = _cold(judged, "past")
    assert past["verdict"] == "regression" and past["ci_low"] > 1.15, past


# an untouched model whose pairs, once +20% is applied to head, leave the first three open
# (within noise, +21%) and call it on six (regression, interval from +11%)
SCALED_BASE = [3.0, 3.3, 2.8, 3.1, 2.9, 3.05]
SCALED_HEAD = [x * math.exp(lr) / 1.2 for x, lr in
               zip(SCALED_BASE, [0.26, 0.02, 0.30, 0.17, 0.19, 0.18], strict=True)]


def test_the_scaled_check_meets_the_follow_up(tmp_path: Path):
    """+20% on the untouched models' head samples, judged as a pr: a model the first three
    pairs leave open is found on six; without the simulation, three pairs miss it and count
    it as left open. A flat model is found either way; the counts are models."""
    run = _run({"open": (SCALED_BASE, SCALED_HEAD), "flat": CASES["flat"]})
    assert vq.scaled_cold(run, tmp_path / "as-pr", 1.2, 3) == (2, 2, 0)
    three = _run({"open": (SCALED_BASE[:3], SCALED_HEAD[:3]),
                  "flat": (CASES["flat"][0][:3], CASES["flat"][1][:3])})
    assert vq.scaled_cold(three, tmp_path / "three", 1.2) == (1, 2, 1)


def test_a_copy_of_an_injected_change_is_not_an_untouched_model_of_the_scaled_check(
        tmp_path: Path):
    run = _run({"flat": CASES["flat"], "backward_heavy_copy2": CASES["flat"]})
    assert vq.scaled_cold(run, tmp_path / "copies", 1.2)[1] == 1  # "flat" alone


def test_a_run_without_more_than_three_pairs_is_refused(tmp_path: Path):
    three = {m: (b[:3], h[:3]) for m, (b, h) in CASES.items()}
    with pytest.raises(SystemExit, match="--cold-follow-up-check"):
        vq.as_pr(_run(three), tmp_path, 3)


def test_copies_of_the_backward_change_are_models_of_their_own_counted_as_injected(
        tmp_path: Path):
    import importlib.util
    import subprocess

    from compilewatch.suites.registry import models_of

    repo = vq.make_inject_repo(tmp_path, ["micro"], training=True, copies=3)
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "head"], check=True)
    spec = importlib.util.spec_from_file_location("vq_inject_copies", repo / "inject.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    models = models_of("vq_inject_copies")
    assert {"backward_heavy", "backward_heavy_copy2", "backward_heavy_copy3",
            "saved_more"} == set(models)
    assert models["backward_heavy_copy3"].tasks == ("training",)
    assert module.HEAD is True
    assert [vq.kind(n) for n in models] == ["backward_heavy"] * 3 + ["saved_more"]
    assert vq.kind("linear32") == "linear32"
