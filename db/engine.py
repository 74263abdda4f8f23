"""Opening the database: URL resolution, engine set-up, and errors wrapped where they enter.

The default is a SQLite file in the per-user data directory that needs no set-up; teams point
``--db`` / ``COMPILEWATCH_DB`` at a Postgres shared by all GPU runners (psycopg 3).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Connection, Engine, create_engine, event, exc, make_url

from compilewatch.core.errors import CompilewatchError, DatabaseError
from compilewatch.db.failures import advice, hide_password, hint, scheme_hint

log = logging.getLogger(__name__)  # the CLI shows these on stderr
ENV_VAR = "COMPILEWATCH_DB"
SQLITE_BUSY_TIMEOUT_S = 60.0
# How long a Postgres connection may take to answer: psycopg's own default is 130 s per address
# tried, which reads as a hang in CI. ``?connect_timeout=N`` in the URL (or libpq's
# $PGCONNECT_TIMEOUT) wins.
POSTGRES_CONNECT_TIMEOUT_S = 10
# ``postgresql:/host/db`` (one slash) would otherwise be a SQLite file named "postgresql:"
_SCHEME_TYPO = re.compile(r"^(postgres(ql)?|sqlite)(\+\w+)?:/?(?!/)", re.IGNORECASE)


def default_sqlite_path() -> Path:
    """``compilewatch.db`` in the platform's per-user data folder (platformdirs): on Linux
    ``$XDG_DATA_HOME/compilewatch/``, else ``~/.local/share/compilewatch/`` (the path of every
    earlier version); on macOS ``~/Library/Application Support/compilewatch/``; on Windows
    ``%LOCALAPPDATA%\\compilewatch\\``. Where an earlier version's file is at the Linux path
    and none at the platform's, that file stays the default, said once."""
    import platformdirs

    new = Path(platformdirs.user_data_dir("compilewatch", appauthor=False)) / "compilewatch.db"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    legacy = Path(base) / "compilewatch" / "compilewatch.db"
    if new != legacy and not new.exists() and legacy.exists():
        if legacy not in _SAID:
            _SAID.add(legacy)
            log.warning("using the database at %s, where earlier versions kept it; this "
                        "platform's data folder is %s (move the file there to use it)",
                        legacy, new.parent)
        return legacy
    return new


_SAID: set[Path] = set()


def utcnow() -> datetime:
    """Naive UTC, the one way times are stored (SQLite keeps no time zone)."""
    return datetime.now(UTC).replace(tzinfo=None)


def resolve_url(url: str | None = None) -> URL:
    """The URL to open: the argument, else ``$COMPILEWATCH_DB``, else the default SQLite file.

    A plain path means a SQLite file; ``postgresql://`` and ``postgres://`` mean psycopg 3.
    """
    raw = url or os.environ.get(ENV_VAR) or ""
    if not raw:
        return URL.create("sqlite", database=str(default_sqlite_path()))
    if _SCHEME_TYPO.match(raw):
        raise DatabaseError(f"database URL {hide_password(raw)!r} lacks the // after its "
                            "scheme: write sqlite:///PATH or postgresql://USER@HOST/DB")
    if "://" not in raw:
        return URL.create("sqlite", database=str(Path(raw).expanduser()))
    try:
        parsed = make_url(raw)
    except (exc.ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise DatabaseError(f"cannot parse database URL {hide_password(raw)!r}; expected "
                            "sqlite:///PATH or postgresql://USER@HOST/DB") from None
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg2"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername not in ("sqlite", "sqlite+pysqlite", "postgresql+psycopg"):
        raise DatabaseError(f"unsupported database {parsed.drivername!r}"
                            f"{scheme_hint(parsed.drivername, ('postgresql', 'sqlite'))}; use "
                            "sqlite:///PATH or postgresql://...")
    return parsed


def _sqlite_pragmas(engine: Engine) -> None:
    """WAL so readers never block the writer; ``BEGIN IMMEDIATE`` for writes so that concurrent
    writers queue on the busy timeout instead of failing on a stale read snapshot."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (below)
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = NORMAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get("cw_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")


class Database:
    """An engine plus what compilewatch needs to know about it (backend, printable URL)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def url(self) -> str:
        """The URL with any password hidden, for messages."""
        return self.engine.url.render_as_string(hide_password=True)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        with wrap_errors(self), self.engine.connect() as conn:
            yield conn

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """One transaction: committed if the block ends normally, rolled back otherwise."""
        with wrap_errors(self), self.engine.connect() as conn:
            conn = conn.execution_options(cw_write=True)
            with conn.begin():
                yield conn

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Database({self.url!r})"


@contextlib.contextmanager
def wrap_errors(db: Database) -> Iterator[None]:
    """Turn SQLAlchemy / driver errors into ``DatabaseError`` with a next step.

    Driver errors that SQLAlchemy never saw (Postgres ``COPY`` runs on psycopg's own cursor) are
    wrapped too.
    """
    where = db.url
    try:
        yield
    except CompilewatchError:
        raise
    except db.engine.dialect.loaded_dbapi.Error as e:
        raise DatabaseError(f"{where}: the database refused the data: {_first_line(e)}") from e
    except exc.OperationalError as e:
        detail = _first_line(e)
        todo = advice(detail, sqlite=db.is_sqlite, timeout=_timeout_words(db.engine.url))
        raise DatabaseError(f"{where}: {todo} ({detail})") from e
    except exc.ProgrammingError as e:
        raise DatabaseError(f"{where}: {_first_line(e)} (is the schema current? run "
                            "`compilewatch db upgrade`)") from e
    except exc.IntegrityError as e:
        raise DatabaseError(f"{where}: the database refused the write: {_first_line(e)}") from e
    except exc.SQLAlchemyError as e:
        detail = _first_line(e)
        todo = hint(detail, sqlite=db.is_sqlite, timeout=_timeout_words(db.engine.url))
        raise DatabaseError(f"{where}: {todo} ({detail})" if todo else f"{where}: {detail}"
                            ) from e


def _timeout_words(url: URL) -> str:
    """The timeout in force for ``url`` (SQLite's busy timeout, Postgres' connect timeout),
    for a message."""
    if url.get_backend_name() == "sqlite":
        return f"{SQLITE_BUSY_TIMEOUT_S:g} s"
    value = url.query.get("connect_timeout") or os.environ.get("PGCONNECT_TIMEOUT")
    return f"{value if value else POSTGRES_CONNECT_TIMEOUT_S} s"


def _first_line(e: Exception) -> str:
    orig = getattr(e, "orig", None) or e
    return (str(orig).strip().splitlines() or [type(orig).__name__])[0]


def sqlite_file(url: URL) -> Path | None:
    """The file of a SQLite URL (None for Postgres and for an in-memory database)."""
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return Path(url.database)


def require_existing(url: URL) -> None:
    """Refuse a SQLite file that does not exist: reading commands must never create one (a typo
    in ``--db`` would otherwise give a new, empty database and a silent empty answer)."""
    path = sqlite_file(url)
    if path is not None and not path.is_file():
        raise DatabaseError(f"no database at {path} (check --db / {ENV_VAR}; a database is "
                            "created by `compilewatch run`, `ingest` or `db upgrade`)")


def create(url: URL, *, make_dirs: bool = False) -> Database:
    """An engine for ``url``; ``make_dirs`` makes the SQLite file's directory. No schema
    check. SQLite creates a missing file on first connection: callers that only read check
    ``require_existing`` first."""
    if url.get_backend_name() == "sqlite":
        path = sqlite_file(url)
        if make_dirs and path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_S})
        _sqlite_pragmas(engine)
    else:
        own = "connect_timeout" in url.query or os.environ.get("PGCONNECT_TIMEOUT")
        args = {} if own else {"connect_timeout": POSTGRES_CONNECT_TIMEOUT_S}
        try:
            engine = create_engine(url, pool_pre_ping=True, connect_args=args)
        except ImportError:
            raise DatabaseError("Postgres needs psycopg 3: pip install 'compilewatch[postgres]'"
                                ) from None
    return Database(engine)
