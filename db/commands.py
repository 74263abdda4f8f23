"""What the ``db`` and ``ingest`` commands do; bot/cli.py only parses arguments and echoes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from compilewatch.db import migrate
from compilewatch.db.engine import connect, create, resolve_url
from compilewatch.db.store import ingest_files


def db_upgrade(*, db_url: str | None, revision: str = "head") -> str:
    with create(resolve_url(db_url)) as db:
        before = migrate.state(db)
        after = migrate.upgrade(db, revision)
        verb = "already at" if before.current == after.current else "upgraded to"
        return f"{db.url}: {verb} {after.describe()}"


def db_downgrade(*, db_url: str | None, revision: str) -> str:
    with create(resolve_url(db_url)) as db:
        return f"{db.url}: downgraded to {migrate.downgrade(db, revision).describe()}"


def db_current(*, db_url: str | None) -> str:
    with create(resolve_url(db_url)) as db:
        return f"{db.url}: {migrate.state(db).describe()}"


def ingest_command(*, files: Sequence[Path], db_url: str | None) -> list[str]:
    """Ingest each file; one line per file saying whether it was stored or already there."""
    with connect(db_url) as db:
        return [f"{o.source}: run {o.run_id} "
                + (f"stored ({o.results} results, {o.samples} timing samples)" if o.stored
                   else "already stored, nothing added")
                for o in ingest_files(db, files)] + [f"database: {db.url}"]
