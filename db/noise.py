"""Noise bands learned per model on a runner: stored by ``compilewatch calibrate``, read by
every comparison that has a database. Calibrating again replaces a model's bands."""

from __future__ import annotations

import math

from sqlalchemy import delete, insert, select

from compilewatch.core.errors import UsageError
from compilewatch.core.estimates import Prior
from compilewatch.db import models as m
from compilewatch.db.engine import Database, utcnow

NB = m.NoiseBand.__table__
Ident = tuple[str, str, str]
METRICS = ("compiled_time", "compiled_time_normalised", "cold_compile", "warm_compile",
           "compiled_time_shared", "compiled_time_normalised_shared")


def save_noise_bands(db: Database, *, fingerprint: str, run_id: str | None,
                     bands: dict[Ident, dict[str, Prior]]) -> int:
    """Store (replacing) the bands of each model for this environment; the rows written."""
    rows = []
    for (suite, model, slug), metrics in bands.items():
        for metric, prior in metrics.items():
            if metric not in METRICS:
                raise UsageError(f"noise band metric {metric!r} is not one of {METRICS}")
            if not math.isfinite(prior.sd) or prior.sd < 0 or prior.df < 1:
                continue
            rows.append({"suite": suite, "model": model, "config_slug": slug,
                         "fingerprint": fingerprint, "metric": metric, "sd": prior.sd,
                         "df": prior.df, "run_id": run_id, "created_at": utcnow()})
    with db.write() as conn:
        for r in rows:
            conn.execute(delete(NB).where(
                NB.c.suite == r["suite"], NB.c.model == r["model"],
                NB.c.config_slug == r["config_slug"], NB.c.fingerprint == fingerprint,
                NB.c.metric == r["metric"]))
        if rows:
            conn.execute(insert(NB), rows)
    return len(rows)


def load_noise_bands(db: Database, fingerprint: str) -> dict[Ident, dict[str, Prior]]:
    """Every band stored for this environment."""
    out: dict[Ident, dict[str, Prior]] = {}
    stmt = select(NB.c.suite, NB.c.model, NB.c.config_slug, NB.c.metric, NB.c.sd,
                  NB.c.df).where(NB.c.fingerprint == fingerprint)
    with db.read() as conn:
        for suite, model, slug, metric, sd, df in conn.execute(stmt):
            out.setdefault((suite, model, slug), {})[metric] = Prior(float(sd), int(df))
    return out
