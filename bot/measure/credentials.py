"""A measuring command lets go of the job's credentials before any repository code runs.

Workers get an allow-listed environment, but a process of the same user can still read the
command's own ``/proc/<pid>/environ`` (the environment it was started with, whatever Python
later removes from ``os.environ``) and, where ptrace allows, its memory. So ``run``, ``pr``,
``calibrate`` and a measuring ``nightly`` do what needs a credential first (``--warm-cache
release`` downloads with the token), then replace themselves (``execve``: same pid, a new
image, no old memory) with the same command in an environment without any credential. What was
downloaded is handed over by folder.

A database URL with a password cannot be let go of and still be used: ``pr``, which runs a
PR's code by design, is refused one (``--no-db``, then ``compilewatch ingest`` in a later step,
records the run instead); ``run``, ``calibrate`` and ``nightly`` keep the database's own
password (``keep_database``), since they record into it and measure code the user vouches for.

The shared compile cache (``bot/measure/remote.py``) is the same: its trusted writer's URL and
key are let go of unless the command is a trusted writer (``keep_remote_writer``); its reader's
URL is kept in this process, which reads the shared cache for the remote phase's workers
(``compiler/remoteproxy.py``) and is non-dumpable while it holds it: no worker is given it.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from collections.abc import Mapping, Sequence

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from compilewatch.bot.measure.remote import KEY_ENV, READER_ENV, WRITER_ENV
from compilewatch.compiler.processes import is_credential, is_secret_name
from compilewatch.core.errors import UsageError

DB_ENV = "COMPILEWATCH_DB"
SCRUBBED = "COMPILEWATCH_LET_GO"  # names (never values) of what the command let go of
# libpq's variables that say where and as whom to connect, not how to prove it
PG_PLAIN = frozenset({"PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGDATABASE",
                      "PGCONNECT_TIMEOUT", "PGSSLMODE", "PGAPPNAME", "PGOPTIONS", "PGTZ",
                      "PGTARGETSESSIONATTRS", "PGCLIENTENCODING", "PGDATESTYLE"})
# libpq's variables that hold a secret or point at one
PG_SECRET = ("PGPASSWORD", "PGPASSFILE", "PGSSLKEY", "PGSERVICEFILE")
# a service's CA bundle (AWS_CA_BUNDLE, CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE): a path to public
# certificates, kept from workers with the service's other settings but no credential to name
CA_PATHS = ("*CA_BUNDLE", "*CA_CERTS_FILE", "*CA_CERTS", "*CA_FILE", "*SSL_CERT_FILE",
            "*SSL_CERT_DIR")


def _url_password(url: str) -> bool:
    try:
        return make_url(url).password is not None
    except ArgumentError:
        return False  # not a URL the database layer would take; it says so itself


def credentials(environ: Mapping[str, str] | None = None, *,
                keep_database: bool = False, keep_remote_writer: bool = False) -> list[str]:
    """The names in ``environ`` that hold (or may hold) a credential: those the workers never
    see, less plain settings (libpq's host and user, the runner's folders, a database URL
    without a password, the shared cache's reader URL). ``keep_database``: the database's own
    password is not counted; ``keep_remote_writer``: nor the shared cache's writer's."""
    env = os.environ if environ is None else environ
    out = []
    for name, value in env.items():
        if not is_credential(name) or name in PG_PLAIN or _plain_ci(name) \
                or name == READER_ENV or _ca_path(name):
            continue
        if keep_remote_writer and name in (WRITER_ENV, KEY_ENV):
            continue
        if name == DB_ENV and (keep_database or not _url_password(value)):
            continue
        if keep_database and name in PG_SECRET:
            continue
        out.append(name)
    return sorted(out)


def _ca_path(name: str) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in CA_PATHS) and not is_secret_name(name)


def _plain_ci(name: str) -> bool:
    """The CI runner's settings (``GITHUB_STEP_SUMMARY``, ``RUNNER_TEMP``): plain, unless the
    name says secret."""
    return name.startswith(("GITHUB_", "RUNNER_")) and not is_secret_name(name)


def check_database(url: str | None, no_db: bool,
                   environ: Mapping[str, str] | None = None) -> None:
    """Refuse a database the measuring command could use only by holding its password while
    repository code runs."""
    if no_db:
        return
    env = os.environ if environ is None else environ
    url = url or env.get(DB_ENV)
    where = "--db" if url and url != env.get(DB_ENV) else DB_ENV
    fix = ("measure with --no-db (the results stay in --out) and record them with "
           "`compilewatch ingest FILE --db URL` in a step that runs no repository code, or "
           "connect with a method that needs no secret in this environment (peer or trust "
           "authentication)")
    if url and _url_password(url):
        raise UsageError(f"the database URL of {where} holds a password, which the "
                         f"repository's code could read while it is measured: {fix}")
    if url and url.startswith("postgres"):
        held = [n for n in PG_SECRET if env.get(n)]
        if held:
            raise UsageError(f"{', '.join(held)} holds a database credential, which the "
                             f"repository's code could read while it is measured: {fix}")


def let_go(argv: Sequence[str], handoff: Mapping[str, str] | None = None, *,
           keep_database: bool = False, keep_remote_writer: bool = False) -> None:
    """Replace this process with ``compilewatch ARGV`` in an environment without credentials
    (plus ``handoff``); return at once when there is none to let go of. Never returns
    otherwise."""
    names = credentials(keep_database=keep_database, keep_remote_writer=keep_remote_writer)
    if not names:
        return
    if os.environ.get(SCRUBBED) is not None:  # the exec'd command found one again
        raise UsageError(f"{', '.join(names)} is still set after compilewatch let go of its "
                         "credentials")
    env = {k: v for k, v in os.environ.items() if k not in names}
    env.update(handoff or {})
    env[SCRUBBED] = ",".join(names)
    sys.stdout.flush()
    sys.stderr.flush()
    python = sys.executable
    os.execve(python, [python, "-P", "-m", "compilewatch.bot.cli", *argv], env)


def let_go_of() -> list[str]:
    """What this command let go of before it started (names), for its note."""
    value = os.environ.get(SCRUBBED, "")
    return [n for n in value.split(",") if n]
