"""``compilewatch ingest`` of hostile files on SQLite and Postgres: exit 2 naming the problem, no
traceback, no row; values at the schema's limits are stored exactly on both backends."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from compilewatch.bot.cli import main
from compilewatch.core.errors import DatabaseError
from compilewatch.core.results_file import save_results
from compilewatch.core.schema import INT32_MAX, INT64_MAX, GraphBreak
from compilewatch.db import connect, load_run
from compilewatch.db import models as m
from compilewatch.db.store import COPY_ABOVE, _copy
from tests.db.conftest import row_counts
from tests.hostile import NAMES, edited, honest_run, write_hostile


def ingest(path: Path, db_url: str) -> Result:
    return CliRunner().invoke(main, ["ingest", str(path), "--db", db_url])


def assert_refused(result: Result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and "internal error" not in result.output
    assert result.stderr.startswith("compilewatch: error: "), result.stderr[:300]
    assert re.search(needle, result.stderr), result.stderr[:1000]
    assert len(result.stderr) < 3000


def assert_empty(db_url: str) -> None:
    with connect(db_url) as db:
        assert set(row_counts(db).values()) == {0}


@pytest.mark.parametrize("name", NAMES)
def test_hostile_file_is_refused_and_stores_nothing(db_url: str, tmp_path: Path,
                                                    name: str) -> None:
    path = tmp_path / "head.json"
    needle = write_hostile(path, name)
    result = ingest(path, db_url)
    assert_refused(result, needle)
    assert str(path) in result.stderr
    assert_empty(db_url)


def test_a_time_out_of_range_in_utc_is_refused(db_url: str, tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_bytes(edited(lambda d: d.update(created_at="0001-01-01T00:00:00+01:00")))
    assert_refused(ingest(path, db_url), r"created_at: .*'0001-01-01T00:00:00\+01:00' is out of "
                                         "range in UTC")
    assert_empty(db_url)


@pytest.mark.parametrize(("url", "needle"), [
    ("postgresql://u@h:abc/db", "cannot parse database URL"),
    ("postgresql://u@[::1/db", "cannot parse database URL"),
    ("postgresql://postgres@127.0.0.1:99999999/db", "invalid port number"),
    ("mysql://u@h/db", "unsupported database"),
])
def test_a_bad_database_url_is_a_clear_error(tmp_path: Path, url: str, needle: str) -> None:
    path = tmp_path / "run.json"
    save_results(honest_run(), path)
    assert_refused(ingest(path, url), needle)


def test_values_at_the_limits_are_stored_exactly(db_url: str, tmp_path: Path) -> None:
    """The largest integers each column holds, -0, and enough rows for Postgres' COPY path."""
    run = honest_run()
    first = run.results[0]
    first.memory.eager_peak_bytes = INT64_MAX
    first.compile.frames = first.compile.graphs = INT32_MAX
    first.compile.cold_s = 1.7976931348623157e308
    first.graph_breaks = [GraphBreak(reason=f"break {i}", count=1) for i in range(COPY_ABOVE)]
    first.graph_breaks.append(GraphBreak(reason="the rest", count=INT32_MAX - COPY_ABOVE))
    assert first.latency is not None
    first.latency.compiled_us = [0.0, -0.0, 5e-324, *first.latency.compiled_us[3:]]
    path = tmp_path / "run.json"
    save_results(run, path)
    result = ingest(path, db_url)
    assert result.exit_code == 0, result.output
    with connect(db_url) as db:
        assert load_run(db, run.run_id) == run
        assert row_counts(db)["graph_breaks"] == COPY_ABOVE + 1


@pytest.mark.postgres
def test_driver_errors_of_copy_are_database_errors(pg_url: str) -> None:
    """COPY writes through psycopg's own cursor, which SQLAlchemy never wraps."""
    rows = [{"run_pk": 1, "suite": "nul\x00"}]
    with (connect(pg_url) as db, pytest.raises(DatabaseError, match="cannot contain NUL"),
          db.write() as conn):
        _copy(conn, m.RunSuite.__table__, rows)
