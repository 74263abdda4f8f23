"""How long each (suite, model, config) took in the stored runs: what a shard plan is balanced
by (``bot/shards/plan.py``, docs/scale.md)."""

from __future__ import annotations

import statistics
from collections import defaultdict

from sqlalchemy import select

from compilewatch.db import models as m
from compilewatch.db.engine import Database

R, MR = m.Run.__table__, m.ModelResultRow.__table__
RECENT = 5  # the median of a job's newest results: one slow night does not move the plan
MAX_ROWS = 200_000


def ident_of(suite: str, model: str, slug: str) -> str:
    """A job's name in a shard plan."""
    return f"{suite}/{model}/{slug}"


def parts_of(ident: str) -> tuple[str, str, str]:
    """``ident_of``'s (suite, model, slug) back (a slug has no "/")."""
    suite, model, slug = ident.rsplit("/", 2)
    return suite, model, slug


def model_durations(db: Database, *, fingerprint: str | None = None,
                    exclude_group: str | None = None, recent: int = RECENT) -> dict[str, float]:
    """``suite/model/config`` -> the median ``duration_s`` of its newest ``recent`` stored
    results (of any trigger and side, finished or not), optionally in one environment.

    ``exclude_group``: leave out the runs of this shard group. Its shards plan while the first
    of them may already be ingesting; counting those would give late shards another plan."""
    q = (select(MR.c.suite, MR.c.model, MR.c.config_slug, MR.c.duration_s)
         .join(R, R.c.id == MR.c.run_pk).where(MR.c.duration_s > 0)
         .order_by(R.c.started_at.desc(), R.c.id.desc()).limit(MAX_ROWS))
    if fingerprint is not None:
        q = q.where(R.c.fingerprint == fingerprint)
    if exclude_group is not None:  # meta is compact JSON (db/store.py); a group id is [\w.-]
        q = q.where(R.c.meta.not_like(f'%"group":"{exclude_group}"%'))
    seen: dict[str, list[float]] = defaultdict(list)
    with db.read() as conn:
        for suite, model, slug, seconds in conn.execute(q):
            values = seen[ident_of(suite, model, slug)]
            if len(values) < recent:
                values.append(float(seconds))
    return {k: statistics.median(v) for k, v in seen.items()}
