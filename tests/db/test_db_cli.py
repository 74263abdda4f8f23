"""The ``db`` and ``ingest`` commands, end to end through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.core.results_file import save_results
from compilewatch.core.schema import SCHEMA_VERSION
from tests.factories import run_results


@pytest.fixture
def results_file(tmp_path: Path) -> Path:
    path = tmp_path / "results.json"
    save_results(run_results(commit="e" * 40), path)
    return path


def test_upgrade_current_ingest_downgrade(db_url: str, results_file: Path) -> None:
    cli = CliRunner()
    up = cli.invoke(main, ["db", "upgrade", "--db", db_url])
    assert up.exit_code == 0 and "0004 (head)" in up.output
    assert "0004 (head)" in cli.invoke(main, ["db", "current", "--db", db_url]).output
    first = cli.invoke(main, ["ingest", str(results_file), "--db", db_url])
    assert first.exit_code == 0 and "stored (1 results, 60 timing samples)" in first.output
    second = cli.invoke(main, ["ingest", str(results_file)], env={"COMPILEWATCH_DB": db_url})
    assert second.exit_code == 0 and "already stored, nothing added" in second.output
    down = cli.invoke(main, ["db", "downgrade", "base", "--db", db_url])
    assert down.exit_code == 0 and "no compilewatch schema" in down.output


def test_ingest_bad_file_exits_2_naming_the_field(tmp_path: Path, results_file: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(results_file.read_text().replace(
        f'"schema_version": {SCHEMA_VERSION}', '"schema_version": 7'))
    out = CliRunner().invoke(main, ["ingest", str(bad), "--db", str(tmp_path / "x.db")])
    assert out.exit_code == 2 and "schema_version" in out.output and str(bad) in out.output


def test_default_database_is_the_per_user_file(tmp_path: Path, results_file: Path) -> None:
    out = CliRunner().invoke(main, ["ingest", str(results_file)])
    assert out.exit_code == 0
    assert (tmp_path / "xdg" / "compilewatch" / "compilewatch.db").exists()


def test_db_commands_have_examples() -> None:
    for name in ("upgrade", "current", "downgrade"):
        assert "Example" in (main.commands["db"].commands[name].help or "")  # type: ignore[attr-defined]
    assert "Example" in (main.commands["ingest"].help or "")
