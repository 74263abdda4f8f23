"""``compilewatch calibrate``: noise bands from many processes of the same code, stored per
environment, then used by comparisons that have the database. The loop runs with no process
started (``FakeLauncher``); its synthetic timings have known noise."""

from __future__ import annotations

import functools
import math
import random
from pathlib import Path

import pytest

from compilewatch.bot.commands.calibrate import CalibrateRequest, bands_of, calibrate_command
from compilewatch.bot.history.noise import noise_bands
from compilewatch.bot.measure.harness import MeasureOptions
from compilewatch.core.estimates import Prior
from compilewatch.db import connect, load_noise_bands, save_noise_bands
from compilewatch.db.queries import list_runs
from tests.factories import FakeLauncher, model_result, run_results, worker_output


def _noisy(spec, name):  # type: ignore[no-untyped-def]
    """Each process's host state shifts its samples by 4% (sd), as a launch-bound model's."""
    rng = random.Random(name)
    return worker_output(spec, compiled_us=50 * (1 + rng.gauss(0, 0.04)),
                         cold_s=2 * (1 + rng.gauss(0, 0.04)), seed=hash(name) % 1000)


def test_calibrate_stores_each_models_noise_and_compare_uses_it(
        harness_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = f"sqlite:///{tmp_path / 'cw.db'}"
    [results], bands = calibrate_command(CalibrateRequest(
        suites=(harness_suite,), models=("breaks", "branchy"), db_url=db,
        measure=MeasureOptions(rounds=5, block_ms=1.0, quiet=True)),
        launcher=functools.partial(FakeLauncher, output=_noisy))
    assert len(bands) == 2
    for metrics in bands.values():
        assert set(metrics) == {"compiled_time", "compiled_time_normalised", "cold_compile",
                                "warm_compile"}
        assert metrics["compiled_time"].df == 3  # four processes on cpu
        assert 0.005 < metrics["compiled_time"].sd < 0.15
    with connect(db) as conn:
        assert load_noise_bands(conn, results.environment.fingerprint) == bands
    noise = noise_bands(db, results)
    assert noise.source == "calibrate"
    ident = next(iter(bands))
    prior, calibrated = noise.prior(ident, "compiled_time")
    assert calibrated and prior == bands[ident]["compiled_time"]
    assert noise.prior(("x", "y", "z"), "compiled_time")[1] is False


SIDE_SHIFT = {"run1": 0.97, "run2": 1.0, "run3": 1.03}


def _side_shifted(spec, name):  # type: ignore[no-untyped-def]
    """Each side's processes share a shift (3% between sides), and differ by 0.5% each."""
    rng = random.Random(name)
    shift = SIDE_SHIFT[name.split("-", 1)[0]]
    return worker_output(spec, compiled_us=50 * shift * (1 + rng.gauss(0, 0.005)),
                         eager_us=100.0, seed=hash(name) % 1000)


@pytest.mark.parametrize(("sides", "low"), [(3, 0.02), (2, 0.01)])
def test_several_sides_learn_what_a_sides_processes_share(
        harness_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sides: int,
        low: float) -> None:
    """Two sides too: the loop must not take them for a base and a head whose equal keys
    make timing unnecessary."""
    db = f"sqlite:///{tmp_path / 'cw.db'}"
    runs, bands = calibrate_command(CalibrateRequest(
        suites=(harness_suite,), models=("breaks",), db_url=db, sides=sides,
        measure=MeasureOptions(rounds=5, block_ms=1.0, quiet=True)),
        launcher=functools.partial(FakeLauncher, output=_side_shifted))
    assert len(runs) == sides and len({r.run_id for r in runs}) == sides
    [metrics] = bands.values()
    assert metrics["compiled_time"].df == sides  # two processes on each side
    assert metrics["compiled_time"].sd < 0.02  # the processes, 0.5% apart, not the sides
    shared = metrics["compiled_time_shared"]
    assert shared.df == sides - 1 and low < shared.sd < 0.04
    prior, calibrated = noise_bands(db, runs[0]).prior(next(iter(bands)),
                                                        "compiled_time_shared")
    assert calibrated and prior == shared
    with connect(db) as conn:  # every side is a stored run of the checkout
        assert {r.run_id for r in runs} <= {row.run_id for row in list_runs(conn, limit=10)}


def test_bands_come_from_the_spread_between_processes() -> None:
    r = model_result("m", processes=6, process_spread=0.03, spread=0.001, cold_processes=5,
                     cold_spread=0.05)
    b = bands_of(r)
    assert 0.01 < b["compiled_time"].sd < 0.06 and b["compiled_time"].df == 5
    assert b["cold_compile"].df == 4
    # compiled/eager cancels the host state both share in the synthetic processes
    assert b["compiled_time_normalised"].sd < b["compiled_time"].sd / 3
    assert bands_of(model_result("one", processes=1)) .get("compiled_time") is None


def test_calibrating_again_replaces_the_band_and_bad_bands_are_skipped(tmp_path: Path) -> None:
    ident = ("micro", "m", "cpu-default-float32-auto")
    with connect(f"sqlite:///{tmp_path / 'cw.db'}") as db:
        save_noise_bands(db, fingerprint="f" * 32, run_id=None,
                         bands={ident: {"compiled_time": Prior(0.02, 7)}})
        save_noise_bands(db, fingerprint="f" * 32, run_id=None,
                         bands={ident: {"compiled_time": Prior(0.03, 7),
                                        "cold_compile": Prior(math.nan, 3)}})
        assert load_noise_bands(db, "f" * 32) == {ident: {"compiled_time": Prior(0.03, 7)}}
        assert load_noise_bands(db, "e" * 32) == {}


def test_without_a_database_the_defaults_apply(tmp_path: Path) -> None:
    run = run_results()
    assert noise_bands(f"sqlite:///{tmp_path / 'missing.db'}", run).source == "defaults"
    assert not (tmp_path / "missing.db").exists()


def test_an_explicit_zero_timing_processes_stands(
        harness_suite: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--processes 0`` learns the cold compiles' bands only; it once became the default."""
    [results], bands = calibrate_command(CalibrateRequest(
        suites=(harness_suite,), models=("breaks",), db_url=f"sqlite:///{tmp_path / 'cw.db'}",
        measure=MeasureOptions(rounds=5, block_ms=1.0, quiet=True, timing_processes=0,
                               cold_processes=3)),
        launcher=functools.partial(FakeLauncher, output=_noisy))
    [r] = results.results
    assert r.latency is None or r.latency.processes == 1  # only the cold process timed, if any
    [metrics] = bands.values()
    assert "cold_compile" in metrics and "compiled_time" not in metrics
