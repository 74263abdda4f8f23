"""A scratch Postgres database for the benchmarks that measure against the machine's server."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator

import psycopg

from compilewatch.db.engine import create, resolve_url
from compilewatch.db.migrate import upgrade

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


@contextlib.contextmanager
def scratch_postgres(prefix: str = "cw_bench") -> Iterator[str]:
    """A new database, migrated, named ``PREFIX_<random>``; dropped on exit."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        with create(resolve_url(url)) as db:
            upgrade(db)
        yield url
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
