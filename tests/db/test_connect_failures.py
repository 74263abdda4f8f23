"""A database that cannot be opened gets a message for what actually failed: a Postgres URL
never gets the hint for a locked SQLite file, a port that accepts TCP and never answers times
out (and says so) instead of hanging, and no message shows the URL's password."""

from __future__ import annotations

import contextlib
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.core.errors import DatabaseError
from compilewatch.db import connect, engine
from tests.db.conftest import _pg_reachable

PASSWORD = "hunter2-secret"
SQLITE_HINTS = ("locked", "busy timeout", "SQLite")
SERVER_HINTS = ("server", "host and port", "in the URL")


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A port whose listener accepts connections (the kernel completes the handshake from the
    backlog) and never says a word."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield s.getsockname()[1]


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed on return: nothing listens there


def _error(url: str, *, must_exist: bool = True) -> tuple[str, float]:
    start = time.monotonic()
    with pytest.raises(DatabaseError) as e:
        connect(url, must_exist=must_exist).close()
    return str(e.value), time.monotonic() - start


@pytest.mark.parametrize(("url", "phrase"), [
    (f"postgresql://postgres:{PASSWORD}@no-such-host.invalid/db",
     "the host name does not resolve: check the host in the URL"),
    (f"postgresql://postgres:{PASSWORD}@127.0.0.1:{refused_port()}/db",
     "nothing listens on that host and port: is the Postgres server running"),
], ids=["unresolved host", "refused port"])  # ids, not the port: each test process draws one
def test_a_wrong_host_or_port_says_so(url: str, phrase: str) -> None:
    msg, _ = _error(url)
    assert phrase in msg and PASSWORD not in msg and "postgres:***@" in msg
    assert not any(h in msg for h in SQLITE_HINTS), msg


@pytest.mark.postgres
@pytest.mark.parametrize(("url", "phrase"), [
    ("postgresql://postgres@127.0.0.1:5432/cw_no_such_database",
     "the server has no database cw_no_such_database: fix the database name in the URL, or "
     "create it (createdb cw_no_such_database)"),
    ("postgresql://cw_no_such_user@127.0.0.1:5432/postgres",
     "the server has no user cw_no_such_user: fix the user in the URL"),
])
def test_an_unknown_database_or_user_says_so(url: str, phrase: str) -> None:
    if not _pg_reachable():
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is not reachable")
    msg, _ = _error(url)
    assert phrase in msg, msg
    assert not any(h in msg for h in SQLITE_HINTS), msg


@pytest.mark.parametrize(("url", "phrase"), [
    ("mysql://u@h/db", "unsupported database 'mysql'; use sqlite:///PATH or postgresql://"),
    ("postgresq://u@h/db", "unsupported database 'postgresq' (did you mean postgresql?)"),
    ("postgresql+asyncpg://u@h/db", "unsupported database 'postgresql+asyncpg'"),
    (f"postgresql:/u:{PASSWORD}@h/db", "lacks the // after its scheme"),
    ("sqlite:runs.db", "lacks the // after its scheme"),
    (f"postgresql://u:{PASSWORD}@h:notaport/db", "cannot parse database URL "
     "'postgresql://u:***@h:notaport/db'"),
    (f"postgresql://u:p@ss{PASSWORD}@h:notaport/db", "'postgresql://u:***@h:notaport/db'"),
])
def test_a_bad_scheme_or_unparsable_url_says_so_without_the_password(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, url: str, phrase: str) -> None:
    monkeypatch.chdir(tmp_path)
    msg, _ = _error(url, must_exist=False)
    assert phrase in msg and PASSWORD not in msg, msg
    assert list(tmp_path.iterdir()) == []  # no SQLite file named after a mistyped URL


def test_a_missing_driver_says_what_to_install(tmp_path: Path) -> None:
    """psycopg hidden from the import system, as in an environment without the extra."""
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from compilewatch.db import connect\n"
            "from compilewatch.core.errors import DatabaseError\n"
            "try:\n    connect('postgresql://postgres@127.0.0.1:5432/postgres')\n"
            "except DatabaseError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert "Postgres needs psycopg 3: pip install 'compilewatch[postgres]'" in out.stdout, \
        out.stdout + out.stderr


def test_a_port_that_never_answers_times_out_with_a_message() -> None:
    with silent_port() as port:
        msg, took = _error(f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/db"
                           "?connect_timeout=2")
    assert took < 8.0, took
    assert f"postgresql+psycopg://postgres:***@127.0.0.1:{port}/db" in msg and PASSWORD not in msg
    assert "no answer within 2 s: is a Postgres server at that host and port" in msg, msg
    assert not any(h in msg for h in SQLITE_HINTS), msg


def test_every_postgres_url_gets_a_connect_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without ?connect_timeout, ours applies (psycopg's own is 130 s per address)."""
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    monkeypatch.setattr(engine, "POSTGRES_CONNECT_TIMEOUT_S", 2)
    with silent_port() as port:
        msg, took = _error(f"postgresql://postgres@127.0.0.1:{port}/db")
    assert took < 8.0 and "no answer within 2 s" in msg, (took, msg)
    assert took >= 2.0  # it waited for the timeout: the refusal is the timeout's


def test_the_cli_exits_2_within_the_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    with silent_port() as port:
        url = f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/db?connect_timeout=2"
        start = time.monotonic()
        result = CliRunner().invoke(main, ["runs", "--db", url])
        took = time.monotonic() - start
    assert result.exit_code == 2, result.output
    assert took < 8.0 and "no answer within 2 s" in result.stderr
    assert PASSWORD not in result.output and "Traceback" not in result.output


def test_a_locked_sqlite_file_keeps_its_own_hint(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "runs.db"
    connect(f"sqlite:///{path}").close()  # created and migrated
    monkeypatch.setattr(engine, "SQLITE_BUSY_TIMEOUT_S", 0.2)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another writer, holding the lock
    try:
        with connect(f"sqlite:///{path}") as db, pytest.raises(DatabaseError) as e, \
                db.write() as conn:
            conn.exec_driver_sql("DELETE FROM runs")
    finally:
        holder.rollback()
        holder.close()
    msg = str(e.value)
    assert "another process has held a write lock on the file for longer than 0.2 s" in msg
    assert not any(h in msg for h in SERVER_HINTS), msg


@pytest.mark.parametrize(("make", "phrase"), [
    (lambda p: p.mkdir(), "cannot open the file: does its folder exist"),
    (lambda p: p.write_text("not a database, a note\n" * 100),
     "the file is not a SQLite database (does --db point at another file?)"),
])
def test_an_unusable_sqlite_file_says_what_is_wrong(tmp_path: Path, make: object,
                                                    phrase: str) -> None:
    path = tmp_path / "runs.db"
    make(path)  # type: ignore[operator]
    msg, _ = _error(f"sqlite:///{path}", must_exist=False)
    assert phrase in msg, msg
    assert not any(h in msg for h in SERVER_HINTS) and "locked" not in msg, msg
