"""Schema migrations (Alembic, shipped in ``migrations/`` inside the package).

The only way the schema changes. SQLite files, which are per user, are brought to the newest
schema on first use; a shared Postgres only by ``compilewatch db upgrade``, so that an operator
decides when the runners' schema moves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from filelock import FileLock

from compilewatch.core.errors import DatabaseError
from compilewatch.db.engine import Database, wrap_errors

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


@dataclass(frozen=True)
class SchemaState:
    """Where a database's schema stands against the newest one this package knows."""

    current: str | None
    head: str

    @property
    def is_current(self) -> bool:
        return self.current == self.head

    def describe(self) -> str:
        if self.current is None:
            return f"no compilewatch schema (newest is {self.head})"
        tail = "(head)" if self.is_current else f"(newest is {self.head})"
        return f"{self.current} {tail}"


def alembic_config(db: Database) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["cw_engine"] = db.engine
    return cfg


def _script() -> ScriptDirectory:
    return ScriptDirectory(str(MIGRATIONS_DIR))


def state(db: Database) -> SchemaState:
    """The revision a database is at (None when it has no compilewatch schema)."""
    head = _script().get_current_head()
    assert head is not None, "the package ships no migrations"
    with db.read() as conn:
        heads = MigrationContext.configure(conn).get_current_heads()
    return SchemaState(current=heads[0] if heads else None, head=head)


def known(revision: str) -> bool:
    """Whether this package ships ``revision`` (an unknown one was written by a newer version)."""
    try:
        return _script().get_revision(revision) is not None
    except CommandError:
        return False


def check_current(db: Database) -> SchemaState:
    """Raise ``DatabaseError`` unless the schema is at head (never changes anything)."""
    st = state(db)
    if st.is_current:
        return st
    if st.current is not None and not known(st.current):
        raise DatabaseError(f"{db.url}: schema revision {st.current} is newer than this "
                            "compilewatch knows; upgrade compilewatch")
    if st.current is None:
        raise DatabaseError(f"{db.url}: has no compilewatch schema; run "
                            "`compilewatch db upgrade --db URL` to create it")
    raise DatabaseError(f"{db.url}: schema is at {st.current}, this compilewatch needs "
                        f"{st.head}; run `compilewatch db upgrade --db URL` to migrate it")


def upgrade(db: Database, revision: str = "head") -> SchemaState:
    """Migrate up to ``revision``; a no-op when already there."""
    with wrap_errors(db):
        try:
            command.upgrade(alembic_config(db), revision)
        except CommandError as e:
            raise DatabaseError(f"{db.url}: cannot upgrade to {revision!r}: {e}") from None
    return state(db)


def downgrade(db: Database, revision: str) -> SchemaState:
    """Migrate down to ``revision`` (``base`` drops every compilewatch table)."""
    with wrap_errors(db):
        try:
            command.downgrade(alembic_config(db), revision)
        except CommandError as e:
            raise DatabaseError(f"{db.url}: cannot downgrade to {revision!r}: {e}") from None
    return state(db)


def ensure_sqlite_current(db: Database) -> SchemaState:
    """Create or migrate a SQLite file; a lock beside it makes concurrent first use safe."""
    st = state(db)
    if st.is_current:
        return st
    path = db.engine.url.database
    if not path or path == ":memory:":
        return upgrade(db)
    with FileLock(f"{path}.lock", timeout=120):
        st = state(db)
        if st.current is not None and not known(st.current):
            check_current(db)  # raises: newer than this package
        return st if st.is_current else upgrade(db)
