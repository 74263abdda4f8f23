"""Alembic environment: runs with the engine that ``compilewatch.db.migrate`` passes in."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from compilewatch.db.models import Base

PG_MIGRATION_LOCK = 0x636F6D70  # an arbitrary key, shared by every compilewatch upgrade


def run_migrations_online() -> None:
    engine = context.config.attributes["cw_engine"]
    with engine.connect() as connection:
        context.configure(
            connection=connection,
            target_metadata=Base.metadata,
            render_as_batch=connection.dialect.name == "sqlite",  # SQLite cannot ALTER much
            compare_type=True,
        )
        with context.begin_transaction():
            if connection.dialect.name == "postgresql":
                # Two runners upgrading at once: the second waits, then finds nothing to do.
                connection.execute(text("SELECT pg_advisory_xact_lock(:k)"),
                                   {"k": PG_MIGRATION_LOCK})
            context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("compilewatch migrations run online only (compilewatch db upgrade)")
run_migrations_online()
