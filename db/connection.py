"""Opening the database the commands use: created and migrated on first use (SQLite), checked
(Postgres). Above both ``engine`` (the engine and its errors) and ``migrate`` (the schema's
revisions), which is why it lives apart from either."""

from __future__ import annotations

from compilewatch.db import migrate
from compilewatch.db.engine import Database, create, require_existing, resolve_url


def connect(url: str | None = None, *, must_exist: bool = False) -> Database:
    """Open the database that commands read and write.

    A SQLite file is created and migrated to the newest schema on first use (under a file lock,
    so that concurrent first users do not race); with ``must_exist`` (every command that only
    reads) a missing file is a ``DatabaseError`` naming the path and nothing is created.
    Postgres is never changed here: an empty or out-of-date schema raises ``DatabaseError``
    that says to run ``compilewatch db upgrade``.
    """
    resolved = resolve_url(url)
    if must_exist:
        require_existing(resolved)
    db = create(resolved, make_dirs=True)
    try:
        if db.is_sqlite:
            migrate.ensure_sqlite_current(db)
        else:
            migrate.check_current(db)
    except BaseException:
        db.close()
        raise
    return db
