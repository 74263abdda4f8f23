"""What the ``db`` and ``ingest`` commands do; bot/cli/ only parses arguments and echoes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from compilewatch.core.results_file import load_results
from compilewatch.db import migrate
from compilewatch.db.connection import connect
from compilewatch.db.engine import create, require_existing, resolve_url
from compilewatch.db.store import store


def db_upgrade(*, db_url: str | None, revision: str = "head") -> str:
    with create(resolve_url(db_url), make_dirs=True) as db:
        before = migrate.state(db)
        after = migrate.upgrade(db, revision)
        verb = "already at" if before.current == after.current else "upgraded to"
        return f"{db.url}: {verb} {after.describe()}"


def _existing(db_url: str | None):  # type: ignore[no-untyped-def]
    url = resolve_url(db_url)
    require_existing(url)
    return create(url)


def db_downgrade(*, db_url: str | None, revision: str) -> str:
    with _existing(db_url) as db:
        return f"{db.url}: downgraded to {migrate.downgrade(db, revision).describe()}"


def db_current(*, db_url: str | None) -> str:
    """Where the schema stands; a missing SQLite file is an error (never created here)."""
    with _existing(db_url) as db:
        return f"{db.url}: {migrate.state(db).describe()}"


def ingest_command(*, files: Sequence[Path], db_url: str | None) -> list[str]:
    """Validate every file, then store each; one line per file saying whether it was stored or
    already there. A refused file stops everything before the database is opened, so a bad
    input neither creates a database nor leaves the files before it stored alone."""
    loaded = [(str(path), load_results(path)) for path in files]  # errors name the file
    with connect(db_url) as db:
        return [f"{o.source}: run {o.run_id} "
                + (f"stored ({o.results} results, {o.samples} timing samples)" if o.stored
                   else "already stored, nothing added")
                for o in (store(db, results, source) for source, results in loaded)
                ] + [f"database: {db.url}"]
