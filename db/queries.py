"""Questions asked of stored runs: ``results_history`` feeds ``trends``; the others
(latest run, one metric's history, A/A noise, a PR's runs) are the library API for scripts and
dashboards (docs/storage.md), not used by the commands themselves.

All return plain frozen dataclasses in time order (oldest first), never ORM objects, so that
callers need no session. Times are naive UTC.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, select

from compilewatch.core.errors import UsageError
from compilewatch.core.estimates import geomean
from compilewatch.core.schema import Status
from compilewatch.db import models as m
from compilewatch.db.engine import Database

R, MR, RS, TS = (m.Run.__table__, m.ModelResultRow.__table__, m.RunSuite.__table__,
                 m.TimingSample.__table__)

# metric name -> column of model_results. Counts are only meaningful where a compile ran,
# so every metric is read from results with status pass or fail (see _measured).
METRICS = {
    "speedup": MR.c.speedup,
    "compiled_median_us": MR.c.compiled_median_us,
    "eager_median_us": MR.c.eager_median_us,
    "cold_s": MR.c.cold_s,
    "warm_s": MR.c.warm_s,
    "warm_start_s": MR.c.warm_start_s,
    "graph_breaks": MR.c.graph_break_count,
    "recompiles": MR.c.recompile_count,
    "guard_count": MR.c.guard_count,
    "max_abs_err": MR.c.max_abs_err,
    "eager_peak_bytes": MR.c.eager_peak_bytes,
    "compiled_peak_bytes": MR.c.compiled_peak_bytes,
}


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    commit: str | None
    ref: str | None
    merge_base: str | None
    pr: int | None
    trigger: str
    side: str | None
    status: str
    fingerprint: str
    started_at: datetime
    finished_at: datetime | None
    n_results: int
    n_pass: int
    suites: tuple[str, ...]
    repository: str | None = None


@dataclass(frozen=True)
class HistoryPoint:
    time: datetime
    commit: str | None
    run_id: str
    value: float


@dataclass(frozen=True)
class NoiseStats:
    """Spread of repeated measurements of one commit; ``rel_spread`` = (max - min) / median."""

    n: int
    median: float
    min: float
    max: float
    rel_spread: float
    stdev: float


@dataclass(frozen=True)
class SuitePoint:
    time: datetime
    commit: str | None
    run_id: str
    n: int
    pass_rate: float
    geomean_speedup: float | None


def _column(metric: str):  # type: ignore[no-untyped-def]
    try:
        return METRICS[metric]
    except KeyError:
        raise UsageError(f"unknown metric {metric!r}; one of: {', '.join(METRICS)}") from None


def _measured(stmt: Select, *, suite: str | None, config_slug: str | None,
              fingerprint: str | None) -> Select:
    stmt = stmt.where(MR.c.status.in_((Status.PASS.value, Status.FAIL.value)))
    if suite is not None:
        stmt = stmt.where(MR.c.suite == suite)
    if config_slug is not None:
        stmt = stmt.where(MR.c.config_slug == config_slug)
    if fingerprint is not None:
        stmt = stmt.where(R.c.fingerprint == fingerprint)
    return stmt


def _run_infos(db: Database, stmt: Select) -> list[RunInfo]:
    cols = [c for c in R.c if c.name not in ("meta", "id", "content_sha256", "schema_version",
                                             "environment_id", "ingested_at")]
    with db.read() as conn:
        rows = conn.execute(stmt.with_only_columns(R.c.id, *cols)).all()
        suites: dict[int, list[str]] = {}
        if rows:
            pks = [r.id for r in rows]
            for pk, suite in conn.execute(select(RS.c.run_pk, RS.c.suite)
                                          .where(RS.c.run_pk.in_(pks))
                                          .order_by(RS.c.suite)):
                suites.setdefault(pk, []).append(suite)
    return [RunInfo(**{c.name: getattr(r, c.name) for c in cols},
                    suites=tuple(suites.get(r.id, ()))) for r in rows]


def latest_run(db: Database, *, commit: str, suite: str, fingerprint: str | None = None,
               trigger: str | None = None) -> RunInfo | None:
    """The newest run of ``suite`` at ``commit`` (full sha) in that environment, if any."""
    stmt = (select(R.c.id).where(R.c.commit == commit)
            .where(R.c.id.in_(select(RS.c.run_pk).where(RS.c.suite == suite)))
            .order_by(R.c.started_at.desc(), R.c.id.desc()).limit(1))
    if fingerprint is not None:
        stmt = stmt.where(R.c.fingerprint == fingerprint)
    if trigger is not None:
        stmt = stmt.where(R.c.trigger == trigger)
    found = _run_infos(db, stmt)
    return found[0] if found else None


def list_runs(db: Database, *, limit: int | None = 20, trigger: str | None = None,
              ref: str | None = None, repository: str | None = None) -> list[RunInfo]:
    """The newest stored runs first (what ``compilewatch runs`` lists), optionally filtered."""
    stmt = select(R.c.id).order_by(R.c.started_at.desc(), R.c.id.desc())
    for col, want in ((R.c.trigger, trigger), (R.c.ref, ref), (R.c.repository, repository)):
        if want is not None:
            stmt = stmt.where(col == want)
    return _run_infos(db, stmt.limit(limit) if limit is not None else stmt)


def count_runs(db: Database) -> int:
    """How many runs the database holds."""
    with db.read() as conn:
        return int(conn.execute(select(func.count()).select_from(R)).scalar_one())


def runs_for_pr(db: Database, pr: int) -> list[RunInfo]:
    """Every run recorded for a pull request (both sides, all pushes), oldest first."""
    return _run_infos(db, select(R.c.id).where(R.c.pr == pr)
                      .order_by(R.c.started_at, R.c.id))


def metric_history(db: Database, *, model: str, metric: str, suite: str | None = None,
                   config_slug: str | None = None, ref: str | None = None,
                   trigger: str | None = "nightly", fingerprint: str | None = None,
                   since: datetime | None = None) -> list[HistoryPoint]:
    """One model's metric over time (by default: nightlies), oldest first."""
    col = _column(metric)
    stmt = _measured(select(R.c.started_at, R.c.commit, R.c.run_id, col)
                     .join(R, R.c.id == MR.c.run_pk)
                     .where(MR.c.model == model).where(col.is_not(None)),
                     suite=suite, config_slug=config_slug, fingerprint=fingerprint)
    if ref is not None:
        stmt = stmt.where(R.c.ref == ref)
    if trigger is not None:
        stmt = stmt.where(R.c.trigger == trigger)
    if since is not None:
        stmt = stmt.where(R.c.started_at >= since)
    with db.read() as conn:
        rows = conn.execute(stmt.order_by(R.c.started_at, R.c.id)).all()
    return [HistoryPoint(time=t, commit=c, run_id=rid, value=float(v)) for t, c, rid, v in rows]


def metric_values(db: Database, *, model: str, commit: str, metric: str,
                  suite: str | None = None, config_slug: str | None = None,
                  fingerprint: str | None = None) -> list[float]:
    """Every stored value of a metric for one model at one commit (all runs, all triggers)."""
    col = _column(metric)
    stmt = _measured(select(col).join(R, R.c.id == MR.c.run_pk)
                     .where(MR.c.model == model).where(R.c.commit == commit)
                     .where(col.is_not(None)).order_by(R.c.started_at, R.c.id),
                     suite=suite, config_slug=config_slug, fingerprint=fingerprint)
    with db.read() as conn:
        return [float(v) for v in conn.execute(stmt).scalars()]


def noise_stats(values: Sequence[float]) -> NoiseStats | None:
    if not values:
        return None
    med = statistics.median(values)
    lo, hi = min(values), max(values)
    return NoiseStats(n=len(values), median=med, min=lo, max=hi,
                      rel_spread=(hi - lo) / med if med else math.inf if hi > lo else 0.0,
                      stdev=statistics.stdev(values) if len(values) > 1 else 0.0)


def aa_noise(db: Database, *, model: str, commit: str, metric: str, suite: str | None = None,
             config_slug: str | None = None,
             fingerprint: str | None = None) -> NoiseStats | None:
    """A/A noise: the spread of repeated measurements of the same commit (None: no data)."""
    return noise_stats(metric_values(db, model=model, commit=commit, metric=metric, suite=suite,
                                     config_slug=config_slug, fingerprint=fingerprint))


def timing_samples(db: Database, *, run_id: str, model: str, suite: str, config_slug: str,
                   side: str = "compiled") -> list[float]:
    """The per-call µs samples of one result, in measurement order."""
    side_no = {"eager": m.EAGER, "compiled": m.COMPILED}.get(side)
    if side_no is None:
        raise UsageError(f"side must be 'eager' or 'compiled', not {side!r}")
    stmt = (select(TS.c.value_us).join(MR, MR.c.id == TS.c.result_id)
            .join(R, R.c.id == MR.c.run_pk)
            .where(R.c.run_id == run_id, MR.c.model == model, MR.c.suite == suite,
                   MR.c.config_slug == config_slug, TS.c.side == side_no)
            .order_by(TS.c.idx))
    with db.read() as conn:
        return [float(v) for v in conn.execute(stmt).scalars()]




def suite_history(db: Database, *, suite: str, config_slug: str | None = None,
                  ref: str | None = None, trigger: str | None = "nightly") -> list[SuitePoint]:
    """Per run of a suite: pass rate over all its results and the geomean speedup."""
    stmt = (select(R.c.id, R.c.started_at, R.c.commit, R.c.run_id, MR.c.status, MR.c.speedup)
            .join(R, R.c.id == MR.c.run_pk).where(MR.c.suite == suite)
            .order_by(R.c.started_at, R.c.id))
    for col, want in ((MR.c.config_slug, config_slug), (R.c.ref, ref), (R.c.trigger, trigger)):
        if want is not None:
            stmt = stmt.where(col == want)
    per_run: dict[int, tuple[tuple[datetime, str | None, str], list[str], list[float]]] = {}
    with db.read() as conn:
        for pk, t, commit, rid, status, speedup in conn.execute(stmt):
            _, statuses, speedups = per_run.setdefault(pk, ((t, commit, rid), [], []))
            statuses.append(status)
            if status == Status.PASS.value and speedup is not None:
                speedups.append(speedup)
    return [SuitePoint(time=t, commit=c, run_id=rid, n=len(st),
                       pass_rate=st.count(Status.PASS.value) / len(st),
                       geomean_speedup=geomean(sp))
            for (t, c, rid), st, sp in per_run.values()]


@dataclass(frozen=True, slots=True)
class ResultPoint:
    """One stored result with the metrics asked for (None where not measured)."""

    time: datetime
    commit: str | None
    run_id: str
    suite: str
    model: str
    config_slug: str
    status: str
    metrics: dict[str, float | None]
    repository: str | None = None
    pr: int | None = None
    speedup_ci: tuple[float, float] | None = None  # the speedup's interval, where measured


def _history_runs(db: Database, *, ref: str | None, trigger: str | None,
                  since: datetime | None, repository: str | None) -> Select:
    stmt = select(R.c.id, R.c.started_at, R.c.commit, R.c.run_id, R.c.repository, R.c.pr)
    for col, want in ((R.c.ref, ref), (R.c.trigger, trigger), (R.c.repository, repository)):
        if want is not None:
            stmt = stmt.where(col == want)
    if since is not None:
        stmt = stmt.where(R.c.started_at >= since)
    return stmt


def result_keys(db: Database, *, suite: str | None = None, ref: str | None = None,
                trigger: str | None = "nightly", since: datetime | None = None,
                repository: str | None = None) -> list[tuple[str, str, str]]:
    """(suite, model, config slug) of every result of the matching runs, sorted: the pages of
    a dashboard, each then read with ``results_history(..., model=, config_slug=)``."""
    runs = _history_runs(db, ref=ref, trigger=trigger, since=since, repository=repository)
    stmt = (select(MR.c.suite, MR.c.model, MR.c.config_slug).distinct()
            .where(MR.c.run_pk.in_(runs.with_only_columns(R.c.id)))
            .order_by(MR.c.suite, MR.c.model, MR.c.config_slug))
    if suite is not None:
        stmt = stmt.where(MR.c.suite == suite)
    with db.read() as conn:
        return [(s, m, c) for s, m, c in conn.execute(stmt)]


def results_history(db: Database, *, suite: str | None = None, ref: str | None = None,
                    trigger: str | None = "nightly", since: datetime | None = None,
                    repository: str | None = None, model: str | None = None,
                    config_slug: str | None = None,
                    metrics: Sequence[str] | None = None) -> list[ResultPoint]:
    """Every result of the matching runs (of one model with ``model``, one config with
    ``config_slug``), the ``metrics`` asked for (default: every metric of ``METRICS``) at
    once, oldest run first.

    ``trends`` asks once per page: one model's year of nightlies is 365 rows, read through
    ``ix_model_results_history`` (migration 0004), which leads with the model and covers every
    column read here, so neither backend touches the large ``payload`` rows. A whole year of
    a 100-model suite at once is 36,500 rows, and building them is most of its cost
    (docs/storage.md has both timings).
    """
    names = list(METRICS) if metrics is None else list(metrics)
    cols = [_column(n) for n in names]
    runs = _history_runs(db, ref=ref, trigger=trigger, since=since, repository=repository)
    stmt = (select(MR.c.run_pk, MR.c.suite, MR.c.model, MR.c.config_slug, MR.c.status,
                   MR.c.speedup_ci_low, MR.c.speedup_ci_high, *cols)
            .where(MR.c.run_pk.in_(runs.with_only_columns(R.c.id))))
    for col, want in ((MR.c.suite, suite), (MR.c.model, model),
                      (MR.c.config_slug, config_slug)):
        if want is not None:
            stmt = stmt.where(col == want)
    stmt = stmt.order_by(MR.c.run_pk, MR.c.suite, MR.c.model, MR.c.config_slug)
    with db.read() as conn:
        run_rows = conn.execute(runs.order_by(R.c.started_at, R.c.id)).all()
        per_run: dict[int, list[Any]] = {r.id: [] for r in run_rows}
        for row in conn.execute(stmt):
            per_run[row[0]].append(row)
    return [_point(run, row, names) for run in run_rows for row in per_run[run.id]]


def _point(run: Any, r: Any, names: list[str]) -> ResultPoint:
    low, high = r[5], r[6]
    return ResultPoint(run.started_at, run.commit, run.run_id, r[1], r[2], r[3], r[4],
                       {n: None if v is None else float(v)
                        for n, v in zip(names, r[7:], strict=True)},
                       run.repository, run.pr,
                       None if low is None or high is None else (float(low), float(high)))
