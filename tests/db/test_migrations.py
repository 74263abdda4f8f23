"""Migrations: up from empty and down again, models and migrations agree, and who may migrate."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from conftest import pg_database
from sqlalchemy import inspect, text

from compilewatch.core.errors import DatabaseError
from compilewatch.db import connect, default_sqlite_path, ingest, load_run, resolve_url
from compilewatch.db.engine import create
from compilewatch.db.migrate import downgrade, state, upgrade
from compilewatch.db.models import Base
from tests.factories import run_results

TABLES = {t.name for t in Base.metadata.sorted_tables}


def _up_and_down(url: str) -> None:
    with create(resolve_url(url)) as db:
        assert state(db).current is None
        assert upgrade(db).is_current
        with db.read() as conn:
            assert set(inspect(conn).get_table_names()) >= TABLES
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == [], f"models and migrations disagree: {diff}"
        run = run_results(commit="d" * 40)
        ingest(db, run)
        assert load_run(db, run.run_id) == run
        assert downgrade(db, "base").current is None
        with db.read() as conn:
            assert not TABLES & set(inspect(conn).get_table_names())
        assert upgrade(db).is_current  # and up again on the emptied database


def test_sqlite_up_and_down(tmp_path: Path) -> None:
    _up_and_down(f"sqlite:///{tmp_path / 'm.db'}")


@pytest.mark.postgres
def test_postgres_up_and_down() -> None:
    with pg_database() as url:
        _up_and_down(url)


@pytest.mark.postgres
def test_postgres_is_never_migrated_by_connect() -> None:
    with pg_database() as url:
        with pytest.raises(DatabaseError, match="run `compilewatch db upgrade"):
            connect(url)
        with create(resolve_url(url)) as db, db.read() as conn:
            assert inspect(conn).get_table_names() == []
            upgrade(db)
            conn.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
            conn.commit()
        with pytest.raises(DatabaseError, match="newer than this compilewatch"):
            connect(url)


def test_new_sqlite_file_is_created_and_migrated(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "new.db"
    with connect(str(path)) as db:
        assert db.is_sqlite and state(db).is_current
        with db.read() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() >= 10_000


def test_sqlite_out_of_date_is_migrated_but_unknown_revision_is_refused(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with create(resolve_url(url)) as db:
        upgrade(db)
        downgrade(db, "base")
    with connect(url) as db:
        assert state(db).is_current
        with db.write() as conn:
            conn.execute(text("UPDATE alembic_version SET version_num = 'ffff'"))
    with pytest.raises(DatabaseError, match="newer than this compilewatch"):
        connect(url)


def test_url_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert resolve_url(None).database == str(tmp_path / "xdg" / "compilewatch" / "compilewatch.db")
    assert default_sqlite_path() == tmp_path / "xdg" / "compilewatch" / "compilewatch.db"
    assert resolve_url("postgresql://u@h/d").drivername == "postgresql+psycopg"
    assert resolve_url("postgres://u@h/d").drivername == "postgresql+psycopg"
    assert resolve_url("runs.db").database == "runs.db"
    monkeypatch.setenv("COMPILEWATCH_DB", "postgresql://u@h/fromenv")
    assert resolve_url(None).database == "fromenv"
    assert resolve_url("sqlite:///x.db").database == "x.db"  # the argument wins
    with pytest.raises(DatabaseError, match="unsupported database 'mysql'"):
        resolve_url("mysql://u@h/d")


@pytest.mark.postgres
def test_unreachable_server_says_so() -> None:
    with pytest.raises(DatabaseError, match="is the server running"):
        connect("postgresql://postgres@127.0.0.1:1/none?connect_timeout=2")
