"""The flagged models' last nightly values come from the database, when one is configured."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from compilewatch.bot.history.nightly_values import metric_of, nightly_values
from compilewatch.bot.judge.verdicts import compare
from compilewatch.db import connect, ingest
from tests.factories import GPU, model_result, nightly_history, one_loop, run_results


def _comparison():  # type: ignore[no-untyped-def]
    """A pr's two sides (one loop: a CPU's compile times are judged there)."""
    base = run_results([model_result("mlp", seed=1, cold_s=10.0, cold_processes=3)],
                       run_id="base-run-0001")
    head = run_results([model_result("mlp", seed=2, cold_s=30.0, cold_processes=3)],
                       run_id="head-run-0001")
    return compare(*one_loop(base, head))


def test_the_flagged_metric_s_nightly_values_newest_last(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    with connect(url) as db:
        for run in nightly_history(10, models=("mlp", "convnet"),
                                   step=("mlp", 7, {"cold_s": 20.0})):
            ingest(db, run)
    c = _comparison()
    ((key, (name, values)),) = nightly_values(url, c).items()
    assert key == ("micro", "mlp", c.rows[0].config) and name == "cold compile"
    assert len(values) == 10 and min(values[7:]) > max(values[:7])  # the step, newest last
    assert len(nightly_values(url, c, nights=4)[key][1]) == 4


def test_no_database_no_history(tmp_path: Path) -> None:
    assert nightly_values(None, _comparison()) == {}
    missing = tmp_path / "nothing.db"
    assert nightly_values(f"sqlite:///{missing}", _comparison()) == {}
    assert not missing.exists()  # never created to look


def test_a_database_that_cannot_be_read_leaves_out_the_history_only(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A sparkline is context: a broken database must not stop compare or post."""
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database" * 100)
    with caplog.at_level(logging.WARNING):
        assert nightly_values(f"sqlite:///{junk}", _comparison()) == {}
    assert "no nightly history in the comment" in caplog.text and "not a SQLite" in caplog.text


@pytest.mark.parametrize(("head", "metric"), [
    ({"peak_bytes": 3 * 2**30}, ("compiled_peak_bytes", "peak memory")),
    ({"peak_bytes": 2**30, "compiled_us": 80.0}, ("compiled_median_us", "compiled time")),
    ({"peak_bytes": 2**30, "graph_breaks": ["Tensor.item()"]}, ("graph_breaks", "graph breaks")),
    ({"peak_bytes": 2**30}, ("compiled_median_us", "compiled time")),  # nothing moved
])
def test_the_sparkline_draws_the_metric_the_row_was_flagged_for(
        head: dict[str, object], metric: tuple[str, str]) -> None:
    kw = {"processes": 3, "process_spread": 0.005, "spread": 0.01, "config": GPU}
    base = run_results([model_result("mlp", seed=1, peak_bytes=2**30, **kw)])
    [row] = compare(base, run_results([model_result("mlp", seed=2, **kw, **head)])).rows
    assert metric_of(row) == metric
