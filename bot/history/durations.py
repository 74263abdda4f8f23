"""How long each model took before, read back from the database for the measuring loop's
order (``compiler/schedule.py`` ``longest_first``): the longest model starts first, so a run
does not end waiting on a model of minutes that started last."""

from __future__ import annotations

from compilewatch.compiler.lanes import Ident
from compilewatch.core.errors import DatabaseError
from compilewatch.db import connect, model_durations


def durations_of(db_url: str | None, fingerprint: str) -> dict[Ident, float]:
    """Each (suite, model, config)'s median duration of its newest stored results in this
    environment; none where there is no database (read-only: a missing file is not
    created) or it cannot be read: the order is then the loop's own."""
    try:
        with connect(db_url, must_exist=True) as db:
            stored = model_durations(db, fingerprint=fingerprint)
    except DatabaseError:
        return {}
    out: dict[Ident, float] = {}
    for key, seconds in stored.items():
        suite, model, slug = key.rsplit("/", 2)  # db.durations.ident_of: a slug has no "/"
        out[(suite, model, slug)] = seconds
    return out
