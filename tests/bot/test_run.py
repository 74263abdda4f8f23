"""`compilewatch run` orchestration: checkpoints after each model, so a killed run keeps what
it measured. The measuring is replaced (``run_job_full``): what is checked is when files are
written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from compilewatch.bot import measuring
from compilewatch.bot import run as runmod
from compilewatch.compiler.plan import Job
from compilewatch.compiler.runner import JobRun, RunOptions
from compilewatch.core.schema import load_results
from tests.factories import model_result


def _fake(kill_at: int | None) -> Any:
    calls: list[str] = []

    def measure(job: Job, opts: RunOptions, on_phase: Any = None) -> JobRun:
        calls.append(job.spec.name)
        if len(calls) == kill_at:
            raise KeyboardInterrupt  # the CI job is cancelled while this model runs
        return JobRun(model_result(job.spec.name, suite=job.suite.name, config=job.config))

    return measure


CHECKOUT = Path(__file__).resolve().parents[2]  # this repository's checkout


def _run(harness_suite: str, out: Path, tmp_path: Path, repo: Path = CHECKOUT) -> None:
    runmod.run_command(suites=(harness_suite,), models=("breaks", "branchy"), device="cpu",
                       modes=(), dtypes=(), dynamics=(), out=out, timeout_s=60.0, rounds=3,
                       block_ms=2.0, cache_dir=None, no_warm=True,
                       db_url=f"sqlite:///{tmp_path / 'cw.db'}", quiet=True, repo=repo)


def test_a_killed_run_keeps_the_models_it_finished(harness_suite: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results.json"
    monkeypatch.setattr(measuring, "run_job_full", _fake(kill_at=2))
    with pytest.raises(KeyboardInterrupt):
        _run(harness_suite, out, tmp_path)
    partial = load_results(out)
    assert [r.model for r in partial.results] == ["breaks"]
    assert partial.finished_at is None  # says: this run did not finish


def test_a_finished_run_says_so(harness_suite: str, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "results.json"
    monkeypatch.setattr(measuring, "run_job_full", _fake(kill_at=None))
    _run(harness_suite, out, tmp_path)
    done = load_results(out)
    assert [r.model for r in done.results] == ["breaks", "branchy"]
    assert done.finished_at is not None


def test_the_git_block_is_the_checkout_or_empty(harness_suite: str, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(measuring, "run_job_full", _fake(kill_at=None))
    _run(harness_suite, tmp_path / "in.json", tmp_path)  # this repository
    assert load_results(tmp_path / "in.json").git.commit is not None
    plain = tmp_path / "plain"
    plain.mkdir()
    _run(harness_suite, tmp_path / "out.json", tmp_path, repo=plain)  # not a checkout
    assert load_results(tmp_path / "out.json").git.commit is None
