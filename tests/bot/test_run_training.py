"""``compilewatch run --task training`` end to end: real workers, real Inductor (CPU), the
results file, the summary table and the database all carry the training slug."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.core.results_file import load_results
from compilewatch.core.schema import Status


@pytest.mark.slow
def test_run_task_training_measures_and_stores_the_training_step(tmp_path: Path) -> None:
    out, db = tmp_path / "results.json", tmp_path / "cw.db"
    res = CliRunner().invoke(main, [
        "run", "--suite", "micro", "--device", "cpu", "--task", "training",
        "--model", "ln_mlp_block", "--no-warm", "--rounds", "3", "--block-ms", "2",
        "--no-diagnostics", "--out", str(out), "--db", f"sqlite:///{db}"],
        env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    [r] = load_results(out).results
    assert r.config.task == "training" and r.config.slug == "cpu-default-float32-auto-training"
    assert r.status is Status.PASS, r.error
    assert r.training is not None and r.training.optimizer == "adam"
    assert r.accuracy is not None and r.accuracy.passed
    assert len({k.components.get("fx_kwargs[is_backward]") for k in r.cache.fx}) == 2
    assert r.latency is not None and r.latency.compiled_us
    assert r.memory.unknown_reason  # peak memory on cuda only
    assert "cpu-default-float32-auto-training" in res.output
    with sqlite3.connect(db) as con:
        slugs = [row[0] for row in con.execute("select config_slug from model_results")]
    assert slugs == ["cpu-default-float32-auto-training"]
