"""The queries compare and trends use, on a small history of nightlies, PR runs and repeats."""

from __future__ import annotations

from datetime import datetime

import pytest

from compilewatch.core.errors import UsageError
from compilewatch.core.schema import Category, Config
from compilewatch.db import (
    Database,
    aa_noise,
    ingest,
    latest_run,
    metric_history,
    runs_for_pr,
    suite_history,
    timing_samples,
)
from tests.factories import environment, model_result, run_results

C1, C2, C3 = "1" * 40, "2" * 40, "3" * 40
GPU = environment(fingerprint="g" * 32, gpu="H200")


def _nightly(day: int, commit: str, compiled_us: float, breaks: int = 0, **kw: object):  # type: ignore[no-untyped-def]
    results = [model_result("mlp", compiled_us=compiled_us, seed=day,
                            graph_breaks=[f"break {i}" for i in range(breaks)]),
               model_result("convnet", seed=day)]
    return run_results(results, commit=commit, ref="main",
                       created_at=f"2026-11-{day:02d}T03:00:00+00:00", **kw)


def _as_nightly(run):  # type: ignore[no-untyped-def]
    run.settings.trigger = "nightly"
    return run


@pytest.fixture
def history(db: Database) -> Database:
    for day, commit, us, breaks in [(3, C1, 50.0, 0), (1, C1, 48.0, 1), (2, C2, 60.0, 2)]:
        ingest(db, _as_nightly(_nightly(day, commit, us, breaks)))
    # the same commit on another branch, a failing night, and PR runs: none are main nightlies
    ingest(db, _as_nightly(run_results([model_result("mlp", compiled_us=999.0)], commit=C3,
                                       ref="release", created_at="2026-11-04T03:00:00Z")))
    ingest(db, _as_nightly(run_results(
        [model_result("mlp", category=Category.COMPILE_ERROR, error="boom")], commit=C3,
        ref="main", created_at="2026-11-05T03:00:00Z")))
    for hour, side, commit in ((4, "base", C1), (5, "head", C2)):
        run = run_results([model_result("mlp", seed=7)], commit=commit, pr=42, env=GPU,
                          created_at=f"2026-11-06T0{hour}:00:00Z")
        run.settings.trigger, run.settings.side = "pr", side
        ingest(db, run)
    return db


def test_metric_history_is_one_model_on_one_branch_in_time_order(history: Database) -> None:
    points = metric_history(history, model="mlp", metric="compiled_median_us", ref="main")
    assert [p.time.day for p in points] == [1, 2, 3]
    assert [p.commit for p in points] == [C1, C2, C1]
    assert 40 < points[0].value < 56 and 54 < points[1].value < 66
    breaks = metric_history(history, model="mlp", metric="graph_breaks", ref="main")
    assert [p.value for p in breaks] == [1.0, 2.0, 0.0]
    anywhere = metric_history(history, model="mlp", metric="speedup")
    assert len(anywhere) == 4  # + the release branch; the failing night has no value
    assert len(metric_history(history, model="mlp", metric="cold_s", trigger=None)) == 6
    since = metric_history(history, model="mlp", metric="warm_s", ref="main",
                           since=datetime(2026, 11, 2))
    assert [p.time.day for p in since] == [2, 3]


def test_metric_history_filters_config(db: Database) -> None:
    big = Config(mode="max-autotune")
    ingest(db, _as_nightly(run_results([model_result("mlp", compiled_us=10.0),
                                        model_result("mlp", config=big, compiled_us=90.0)])))
    (point,) = metric_history(db, model="mlp", metric="compiled_median_us",
                              config_slug=big.slug)
    assert point.value > 80


def test_unknown_metric_lists_the_known_ones(history: Database) -> None:
    with pytest.raises(UsageError, match=r"unknown metric 'speed'.*compiled_median_us"):
        metric_history(history, model="mlp", metric="speed")


def test_latest_run_for_commit_suite_environment(history: Database) -> None:
    latest = latest_run(history, commit=C1, suite="micro", fingerprint="f" * 32)
    assert latest is not None and latest.started_at.day == 3 and latest.suites == ("micro",)
    on_gpu = latest_run(history, commit=C1, suite="micro", fingerprint=GPU.fingerprint)
    assert on_gpu is not None and on_gpu.trigger == "pr" and on_gpu.side == "base"
    assert latest_run(history, commit=C1, suite="hf") is None
    assert latest_run(history, commit="9" * 40, suite="micro") is None


def test_runs_for_pr(history: Database) -> None:
    runs = runs_for_pr(history, 42)
    assert [(r.side, r.commit) for r in runs] == [("base", C1), ("head", C2)]
    assert runs[0].n_results == 1 and runs[0].status == "pass"
    assert runs_for_pr(history, 43) == []


def test_aa_noise_is_the_spread_of_one_commit(history: Database) -> None:
    values = [p.value for p in metric_history(history, model="mlp", metric="compiled_median_us",
                                              trigger=None) if p.commit == C1]
    noise = aa_noise(history, model="mlp", commit=C1, metric="compiled_median_us")
    assert noise is not None and noise.n == 3 == len(values)
    assert (noise.min, noise.max) == (min(values), max(values))
    assert noise.rel_spread == pytest.approx((max(values) - min(values)) / noise.median)
    assert noise.stdev > 0
    only_gpu = aa_noise(history, model="mlp", commit=C1, metric="compiled_median_us",
                        fingerprint=GPU.fingerprint)
    assert only_gpu is not None and only_gpu.n == 1 and only_gpu.rel_spread == 0.0
    assert aa_noise(history, model="mlp", commit="9" * 40, metric="speedup") is None


def test_suite_history_pass_rate_and_geomean(history: Database) -> None:
    points = suite_history(history, suite="micro", ref="main")
    assert [p.time.day for p in points] == [1, 2, 3, 5]
    assert [p.pass_rate for p in points] == [1.0, 1.0, 1.0, 0.0]
    assert points[-1].geomean_speedup is None
    assert points[0].geomean_speedup == pytest.approx(2.0, rel=0.2)


def test_timing_samples_come_back_in_order(db: Database) -> None:
    run = run_results([model_result("mlp", n=25)])
    ingest(db, run)
    r = run.results[0]
    assert r.latency is not None
    args = {"run_id": run.run_id, "model": "mlp", "suite": "micro", "config_slug": r.config.slug}
    assert timing_samples(db, **args) == r.latency.compiled_us
    assert timing_samples(db, **args, side="eager") == r.latency.eager_us


def test_results_history_has_every_metric_of_every_result(history: Database) -> None:
    from compilewatch.db import results_history

    rows = results_history(history, suite="micro", ref="main")
    assert [(r.time.day, r.model) for r in rows] == [
        (1, "convnet"), (1, "mlp"), (2, "convnet"), (2, "mlp"), (3, "convnet"), (3, "mlp"),
        (5, "mlp")]
    mlp2 = rows[3]
    assert mlp2.commit == C2 and mlp2.status == "pass" and mlp2.metrics["graph_breaks"] == 2.0
    assert 54 < (mlp2.metrics["compiled_median_us"] or 0) < 66
    assert rows[-1].status == "error" and rows[-1].metrics["speedup"] is None
    assert len(results_history(history, trigger=None)) == 10
    assert [r.time.day for r in results_history(history, ref="main",
                                                since=datetime(2026, 11, 3))] == [3, 3, 5]
