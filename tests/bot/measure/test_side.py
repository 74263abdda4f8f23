"""``bot/measure/side.py``: one checkout planned and measured, through the real loop with a
launcher that starts no process (``FakeLauncher``)."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

from compilewatch.bot.measure.harness import MeasureOptions, side_code
from compilewatch.bot.measure.side import Checkout, measure_side, plan_side
from compilewatch.compiler.schedule import JobRun
from compilewatch.core.schema import RunResults
from tests.factories import FakeLauncher, environment

MEASURING = MeasureOptions(rounds=3, block_ms=1.0, timing_processes=1).resolve()


def test_several_names_are_several_runs_of_the_same_jobs(harness_suite: str,
                                                           tmp_path: Path) -> None:
    """``calibrate``'s sides: one run each, its own id, every model measured on each, and
    a checkpoint after every model that says the runs are not finished."""
    seen: list[tuple[int, bool]] = []

    def checkpoint(runs: dict[str, RunResults], done: dict[str, list[JobRun]]) -> None:
        seen.append((sum(len(r.results) for r in runs.values()),
                     all(r.finished_at is None for r in runs.values())))

    measured = measure_side(
        Checkout(tmp_path, [harness_suite], models=("breaks", "branchy"),
                 names=("run1", "run2")),
        MEASURING, checkpoint=checkpoint, launcher=functools.partial(FakeLauncher))
    assert set(measured.results) == {"run1", "run2"}
    ids = {r.run_id for r in measured.results.values()}
    assert len(ids) == 2
    for run in measured.results.values():
        assert [r.model for r in run.results] == ["breaks", "branchy"]
        assert run.finished_at is not None and run.settings.suites == [harness_suite]
    assert seen == [(n, True) for n in range(1, 5)]


def test_a_temporary_checkout_records_its_suite_files_relative_to_it(
        harness_suite: str, tmp_path: Path) -> None:
    """A pr's worktree is gone after the run: its suite file is recorded as the checkout
    holds it, and the code record names where its imports came from."""
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    shutil.copy(harness_suite, tree / "sub" / "models.py")
    source = str(tree / "sub" / "models.py")
    side = plan_side([source], side_code(tree), MEASURING, models=["breaks"], tree=tree)
    assert side.shown == ["sub/models.py"] and [j.spec.name for j in side.jobs] == ["breaks"]
    run = side.results([], env=environment(), git=None, options=MEASURING, started="2026-12-08")
    assert run.settings.suites == ["sub/models.py"] and run.code is not None
    assert run.code.paths == ["."]
