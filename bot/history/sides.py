"""Where a side of a comparison comes from: a results file, or a run id in the database."""

from __future__ import annotations

import re
from pathlib import Path

from compilewatch.core.errors import UsageError
from compilewatch.core.results_file import load_results
from compilewatch.core.schema import RunResults
from compilewatch.db import connect, load_run

RUN_ID = re.compile(r"^[A-Za-z0-9_\-]{6,64}$")  # schema.RunId, or a prefix (db.MIN_PREFIX)


def load_side(spec: str, db_url: str | None) -> RunResults:
    """An existing file is read as results; otherwise ``spec`` must be a run id in the database,
    or a unique prefix of one (at least 6 characters, as ``compilewatch runs`` shows them)."""
    path = Path(spec)
    if path.is_file():
        return load_results(path)
    if path.exists():
        raise UsageError(f"{spec}: not a regular file")
    if not RUN_ID.match(spec):
        raise UsageError(f"{spec}: no such results file, and not a run id (6-64 letters, digits, "
                         "'-' or '_': a stored run's id or a unique prefix of it)")
    with connect(db_url, must_exist=True) as db:
        return load_run(db, spec)


def results_root(spec: str, run: RunResults) -> Path | None:
    """Where the run's diagnostics paths start: the folder of the results file given, else the
    folder the run recorded when it was written (a run read back from the database)."""
    path = Path(spec)
    if path.is_file():
        return path.parent.resolve()
    recorded = run.settings.results_dir
    return Path(recorded) if recorded else None
