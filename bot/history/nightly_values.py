"""The last nightly values of each flagged model, for the PR comment's sparklines.

Read from the database when one is configured; with none (or a database file that does not
exist), there is no history and the comment shows none. One query per flagged model: the
comment flags a handful, the dashboard's query is not needed.
"""

from __future__ import annotations

import logging
from pathlib import Path

from compilewatch.bot.judge.comparison import Comparison, ModelRow
from compilewatch.bot.render.sparkline import NIGHTS
from compilewatch.core.errors import DatabaseError
from compilewatch.db import Database, connect, metric_history
from compilewatch.db.engine import resolve_url

log = logging.getLogger(__name__)  # the CLI shows these on stderr

Key = tuple[str, str, str]  # (suite, model, config slug)


def _moved(d: object) -> bool:
    verdict = getattr(d, "verdict", None)
    return verdict is not None and verdict.value in ("regression", "improvement")


def metric_of(row: ModelRow) -> tuple[str, str]:
    """(stored metric, what it is called) that the row was flagged for: compiled time when it
    moved or when nothing else did (the yardstick of a compiler change). A peak-memory or a
    warm-start change draws that metric's history, not a flat line of compiled time."""
    if not _moved(row.compiled_time):
        for metric, name, delta in (("cold_s", "cold compile", row.cold_compile),
                                    ("warm_s", "warm compile", row.warm_compile),
                                    ("warm_start_s", "warm start", row.warm_start),
                                    ("compiled_peak_bytes", "peak memory", row.memory),
                                    ("graph_breaks", "graph breaks", row.graph_breaks),
                                    ("recompiles", "recompiles", row.recompiles)):
            if _moved(delta):
                return metric, name
    return "compiled_median_us", "compiled time"


def _exists(url: str) -> bool:
    """A SQLite file that is not there holds no history (and is not created here)."""
    u = resolve_url(url)
    return not u.drivername.startswith("sqlite") or Path(u.database or "").is_file()


def nightly_values(db_url: str | None, comparison: Comparison, *, ref: str | None = None,
                   nights: int = NIGHTS) -> dict[Key, tuple[str, tuple[float, ...]]]:
    """(suite, model, config) -> (metric's name, its newest ``nights`` nightly values) of
    every flagged row; empty without a configured database."""
    if db_url is None or not _exists(db_url):
        return {}
    try:
        with connect(db_url, must_exist=True) as db:
            return _values(db, comparison, ref, nights)
    except DatabaseError as e:  # a sparkline is context: it never holds back the verdict
        log.warning("no nightly history in the comment: %s", e)
        return {}


def _values(db: Database, comparison: Comparison, ref: str | None, nights: int
            ) -> dict[Key, tuple[str, tuple[float, ...]]]:
    out = {}
    for row in comparison.flagged():
        metric, name = metric_of(row)
        points = metric_history(db, model=row.model, metric=metric, suite=row.suite,
                                config_slug=row.config, ref=ref)
        if len(points) >= 2:
            out[(row.suite, row.model, row.config)] = (
                name, tuple(p.value for p in points[-nights:]))
    return out
