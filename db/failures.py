"""What a database error means, in words: a hint for what actually failed, chosen from the
driver's error and the backend. A Postgres URL never gets the hint for a locked SQLite file,
and a locked SQLite file never gets "is the server running?"."""

from __future__ import annotations

import difflib
import re

# (a phrase of libpq's or the server's message, what to do); the first that matches wins
POSTGRES = (
    (r"timeout expired", "no answer within {timeout}: is a Postgres server at that host and "
     "port (something that accepts the connection and never answers, or a firewall dropping "
     "packets, looks like this)? Add ?connect_timeout=SECONDS to the URL to wait longer"),
    (r"failed to resolve host|could not translate host name",
     "the host name does not resolve: check the host in the URL"),
    (r"Connection refused", "nothing listens on that host and port: is the Postgres server "
     "running, and is the port right (5432 by default)?"),
    (r"Network is unreachable|No route to host",
     "the host cannot be reached from this machine (network or firewall)"),
    (r'database "(?P<name>[^"]*)" does not exist', "the server has no database {name}: fix "
     "the database name in the URL, or create it (createdb {name})"),
    (r'role "(?P<name>[^"]*)" does not exist', "the server has no user {name}: fix the user "
     "in the URL"),
    (r"password authentication failed|no password supplied",
     "the server refused the user or password: check them in the URL (or ~/.pgpass)"),
    (r"no pg_hba\.conf entry", "the server does not accept this user and database from this "
     "host (its pg_hba.conf)"),
    (r"too many clients|remaining connection slots",
     "the server has no free connection slot: retry later, or raise its max_connections"),
    (r"starting up|shutting down|in recovery mode",
     "the server is starting or stopping: retry in a moment"),
    (r"invalid response to SSL|expected authentication request|closed the connection",
     "what answers on that port does not speak Postgres's protocol, or closed the "
     "connection: check the host and port"),
)
SQLITE = (
    (r"database is locked", "another process has held a write lock on the file for longer "
     "than {timeout} (the busy timeout): it clears when that writer ends"),
    (r"unable to open database file", "cannot open the file: does its folder exist, and may "
     "this user write there?"),
    (r"readonly database|read-only", "the file or its folder is read-only for this user (a "
     "database in WAL mode also writes -wal and -shm files beside it)"),
    (r"file is not a database|malformed", "the file is not a SQLite database (does --db "
     "point at another file?)"),
    (r"disk I/O error", "the file cannot be read as a database (is it a regular file on a "
     "working disk?)"),
)
POSTGRES_OTHER = "check the host, port, user and database in the URL, and that the server runs"
SQLITE_OTHER = "check the path in --db / COMPILEWATCH_DB"


def hint(message: str, *, sqlite: bool, timeout: str = "the timeout") -> str | None:
    """What to do about a driver's ``message``, for the backend it came from; None when the
    message is none of those known."""
    for pattern, text in SQLITE if sqlite else POSTGRES:
        m = re.search(pattern, message)
        if m:
            return text.format(timeout=timeout, **m.groupdict())
    return None


def advice(message: str, *, sqlite: bool, timeout: str = "the timeout") -> str:
    """``hint``, else the checks that fit the backend."""
    return hint(message, sqlite=sqlite, timeout=timeout) or \
        (SQLITE_OTHER if sqlite else POSTGRES_OTHER)


def scheme_hint(drivername: str, known: tuple[str, ...]) -> str:
    """`` (did you mean postgresql?)`` for a mistyped scheme."""
    close = difflib.get_close_matches(drivername.split("+")[0], known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else ""


def hide_password(raw: str) -> str:
    """``scheme://user:***@host``: a URL that cannot be parsed is still shown without its
    password."""
    # from the user's ":" (after one slash or two) to the last @: a password may hold one
    return re.sub(r"^([\w+.-]*:/*[^:/@]*:).*@", r"\1***@", raw)
