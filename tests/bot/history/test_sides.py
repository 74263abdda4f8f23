"""A side of a comparison is a results file or a run id stored in the database."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.history.sides import load_side
from compilewatch.core.errors import DatabaseError, UsageError
from compilewatch.db import connect, ingest
from tests.factories import model_result, run_results


@pytest.fixture
def stored(tmp_path):
    url = f"sqlite:///{tmp_path / 'cw.db'}"
    base = run_results([model_result("mlp", compiled_us=50.0)], commit="a" * 40)
    head = run_results([model_result("mlp", compiled_us=60.0, seed=1)], commit="b" * 40)
    db = connect(url)
    for run in (base, head):
        ingest(db, run)
    db.close()
    return url, base, head


def test_run_ids_load_the_stored_runs(stored):
    url, base, head = stored
    assert load_side(base.run_id, url) == base
    assert load_side(head.run_id, url) == head


def test_compare_two_run_ids_through_the_cli(stored):
    url, base, head = stored
    result = CliRunner().invoke(main, ["compare", base.run_id, head.run_id, "--db", url,
                                       "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    [row] = data["rows"]
    assert row["model"] == "mlp" and row["verdict"] == "regression"


def test_unknown_run_id_and_bad_spec(stored, tmp_path):
    url, _, _ = stored
    with pytest.raises(DatabaseError, match="0123456789abcdef"):
        load_side("0123456789abcdef", url)
    with pytest.raises(UsageError, match="not a run id"):
        load_side("no such file.json", url)
    with pytest.raises(UsageError, match="not a regular file"):
        load_side(str(tmp_path), url)
