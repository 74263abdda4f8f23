"""Read-only commands never create a database; ``ingest`` creates one only for valid input.

A typo in ``--db`` must be an error naming the path, not a new empty database (and, for
``trends``, an empty site with exit status 0).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.core.errors import DatabaseError
from compilewatch.core.results_file import save_results
from compilewatch.core.schema import SCHEMA_VERSION
from compilewatch.db import connect
from tests.factories import run_results


def _files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("args", [
    ["db", "current", "--db", "{db}"],
    ["db", "downgrade", "base", "--db", "{db}"],
    ["trends", "--out", "{tmp}/site", "--db", "{db}"],
    ["compare", "0123456789abcdef", "fedcba9876543210", "--db", "{db}"],
    ["report", "0123456789abcdef", "--out", "{tmp}/r.html", "--db", "{db}"],
    ["baseline", "update", "0123456789abcdef", "--repo", "{tmp}", "--db", "{db}"],
    ["runs", "--db", "{db}"],
])
def test_reading_a_missing_sqlite_file_is_an_error_that_creates_nothing(tmp_path: Path,
                                                                       args: list[str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    db = work / "nope" / "dir" / "x.db"
    argv = [a.format(db=db, tmp=work) for a in args]
    result = CliRunner().invoke(main, argv)
    assert result.exit_code == 2, result.output
    assert f"{db}" in result.output and "no database" in result.output
    assert _files_under(work) == set()  # no folder, no file, no site


def test_connect_must_exist_refuses_a_missing_file_and_opens_an_existing_one(
        tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with pytest.raises(DatabaseError, match=r"no database at .*typo\.db"):
        connect(str(path), must_exist=True)
    assert not path.exists()
    with connect(str(path)):  # a writing command creates it
        pass
    with connect(str(path), must_exist=True) as db:
        assert db.is_sqlite


def test_a_refused_ingest_creates_no_database(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    save_results(run_results(commit="e" * 40), good)
    bad.write_text(good.read_text().replace(
        f'"schema_version": {SCHEMA_VERSION}', '"schema_version": 7'))
    db = tmp_path / "new" / "runs.db"
    out = CliRunner().invoke(main, ["ingest", str(good), str(bad), "--db", str(db)])
    assert out.exit_code == 2 and "schema_version" in out.output
    assert not db.parent.exists()  # the good file is not stored alone either: all or nothing
    ok = CliRunner().invoke(main, ["ingest", str(good), "--db", str(db)])
    assert ok.exit_code == 0 and db.is_file()
