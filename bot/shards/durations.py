"""How long each model took before, for the measuring loop's order (``compiler/schedule.py``
``longest_first``): the longest model starts first, so a run does not end waiting on a model
of minutes that started last. The same stored durations (or results files) that balance a
shard plan (``select.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from compilewatch.bot.shards.select import file_durations, stored_durations
from compilewatch.compiler.lanes import Ident
from compilewatch.core.errors import DatabaseError
from compilewatch.db.durations import parts_of


def loop_durations(files: Sequence[str], db_url: str | None, fingerprint: str
                   ) -> dict[Ident, float]:
    """The durations the loop orders its models by: those of results files where given
    (``--shard-durations``: a runner without a database, a PR's with the nightly's
    ``results.json``), else the database's (``durations_of``)."""
    if files:
        return _idents(file_durations(files))
    return durations_of(db_url, fingerprint)


def durations_of(db_url: str | None, fingerprint: str) -> dict[Ident, float]:
    """Each (suite, model, config)'s median duration of its newest stored results in this
    environment; none where there is no database (read-only: a missing file is not
    created) or it cannot be read: the order is then the loop's own."""
    try:
        return _idents(stored_durations(db_url, None, fingerprint))
    except DatabaseError:
        return {}


def _idents(by_name: dict[str, float]) -> dict[Ident, float]:
    return {parts_of(key): seconds for key, seconds in by_name.items()}
