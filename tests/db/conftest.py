"""Databases for the db tests: a SQLite file per test, and a Postgres database per session.

The Postgres database (``cw_test_<random>`` on 127.0.0.1:5432, user postgres) is created,
migrated, emptied between tests and dropped at the end; its tests skip only when the server
cannot be reached.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import text

from compilewatch.db import Database, connect
from compilewatch.db.engine import create, resolve_url
from compilewatch.db.migrate import upgrade
from compilewatch.db.models import Base

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


@pytest.fixture(autouse=True)
def _no_user_database(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A test that forgets to choose a database gets a throwaway one, never the user's."""
    monkeypatch.delenv("COMPILEWATCH_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def _pg_reachable() -> bool:
    try:
        psycopg.connect(PG_ADMIN).close()
    except psycopg.OperationalError:
        return False
    return True


@contextlib.contextmanager
def pg_database() -> Iterator[str]:
    """A new, empty Postgres database; dropped on exit."""
    if not _pg_reachable():
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is not reachable")
    name = f"cw_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """The session's Postgres database, migrated to head."""
    with pg_database() as url:
        with create(resolve_url(url)) as db:
            upgrade(db)
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A URL of an empty, current database of each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'runs.db'}"
    url: str = request.getfixturevalue("pg_url")
    tables = ", ".join(t.name for t in Base.metadata.sorted_tables)
    with create(resolve_url(url)) as db:
        upgrade(db)  # a no-op unless a test downgraded it
        with db.write() as conn:
            conn.execute(text(f"TRUNCATE {tables} RESTART IDENTITY CASCADE"))
    return url


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    with connect(db_url) as database:
        yield database


def row_counts(db: Database) -> dict[str, int]:
    """Rows per compilewatch table: what "nothing written" and "nothing added" are checked by."""
    with db.read() as conn:
        return {t.name: conn.execute(text(f"SELECT count(*) FROM {t.name}")).scalar_one()
                for t in Base.metadata.sorted_tables}


@pytest.fixture
def counts() -> object:
    return row_counts
