"""The data of the dashboard: nightly series per suite and per model, with their steps.

Pulled from the database one model at a time (``results_history``, one query per page); no
drawing and no I/O beyond it, so charts, HTML and JSON all render the same ``Trends`` object.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from compilewatch.bot.history.changepoints import Step, detect_steps
from compilewatch.core.estimates import geomean
from compilewatch.core.schema import Status
from compilewatch.db import Database, ResultPoint, results_history

# metric key -> (label, unit); the order is the order of the panels
METRICS: dict[str, tuple[str, str]] = {
    "speedup": ("speedup (eager / compiled)", "×"),
    "cold_s": ("cold compile time", "s"),
    "warm_s": ("warm compile time", "s"),
    "warm_start_s": ("warm start compile time (artifact)", "s"),
    "graph_breaks": ("graph breaks", ""),
    "recompiles": ("recompiles", ""),
    "pass_rate": ("pass rate", ""),
}
# what load_trends asks the database for (pass_rate comes from the status)
QUERIED = tuple(k for k in METRICS if k != "pass_rate")
# metric key -> the header of its column in the dashboard's model table
COLUMNS: dict[str, str] = {
    "speedup": "speedup", "cold_s": "cold (s)", "warm_s": "warm (s)",
    "warm_start_s": "warm start (s)", "graph_breaks": "breaks", "recompiles": "recompiles",
    "pass_rate": "passing",
}
SUITE_LABELS = {"speedup": "geomean speedup", "cold_s": "geomean cold compile time",
                "warm_s": "geomean warm compile time",
                "warm_start_s": "geomean warm start compile time",
                "graph_breaks": "graph breaks (sum)", "recompiles": "recompiles (sum)"}


@dataclass(frozen=True)
class TrendStep:
    """A detected step, placed on its night."""

    night: int  # index in the series of the first night at the new level
    time: datetime
    commit: str | None
    before: float
    after: float
    rel_change: float | None


@dataclass(frozen=True)
class PointInfo:
    """What a point's hover text and link say beyond its time, commit and value."""

    run_id: str | None = None
    pr: int | None = None
    interval: tuple[float, float] | None = None


INTEGER_METRICS = frozenset({"graph_breaks", "recompiles"})


@dataclass(frozen=True)
class Series:
    metric: str
    label: str
    unit: str
    times: tuple[datetime, ...]
    commits: tuple[str | None, ...]
    values: tuple[float, ...]
    steps: tuple[TrendStep, ...]
    points: tuple[PointInfo, ...] = ()  # one per value when known

    @property
    def integer(self) -> bool:
        """Counts (and a model's pass, 1 or 0) are drawn on an integer axis."""
        return self.metric in INTEGER_METRICS or (
            self.metric == "pass_rate" and all(v in (0.0, 1.0) for v in self.values))

    def info(self, i: int) -> PointInfo:
        return self.points[i] if i < len(self.points) else PointInfo()

    @property
    def infos(self) -> tuple[PointInfo, ...]:
        """One ``PointInfo`` per value (an empty one where none is known)."""
        if len(self.points) == len(self.values):
            return self.points
        return tuple(self.info(i) for i in range(len(self.values)))

    @property
    def latest(self) -> float | None:
        return self.values[-1] if self.values else None


@dataclass(frozen=True)
class ModelTrend:
    suite: str
    model: str
    config: str
    series: tuple[Series, ...]

    @property
    def steps(self) -> list[tuple[Series, TrendStep]]:
        return [(s, st) for s in self.series for st in s.steps]

    def latest(self, metric: str) -> float | None:
        """The newest value of one metric (None: never measured)."""
        return next((s.latest for s in self.series if s.metric == metric), None)


@dataclass(frozen=True)
class SuiteTrend:
    suite: str
    runs: int
    series: tuple[Series, ...]
    models: tuple[ModelTrend, ...] = field(default_factory=tuple)
    dates: int = 0  # distinct UTC dates the runs started on

    def span(self, trigger: str | None) -> str:
        """How much history this is: nights only for nightly runs one date apart each
        (two local runs minutes apart are not "2 nights")."""
        if trigger == "nightly" and self.dates == self.runs:
            return f"{self.runs} night{'s' if self.runs != 1 else ''}"
        text = f"{self.runs} run{'s' if self.runs != 1 else ''}"
        if self.dates < self.runs:
            text += f" on {self.dates} date{'s' if self.dates != 1 else ''}"
        return text

    def columns(self) -> list[tuple[str, str]]:
        """(metric, header) of the model table: every metric of ``COLUMNS``, except a warm
        start that no model of the suite has (runs without ``--warm-cache``)."""
        return [(k, h) for k, h in COLUMNS.items()
                if k != "warm_start_s" or any(m.latest(k) is not None for m in self.models)]


@dataclass(frozen=True)
class Trends:
    ref: str | None
    trigger: str | None
    suites: tuple[SuiteTrend, ...]
    repositories: tuple[str, ...] = ()  # of the runs drawn ("" for runs that recorded none)
    repository: str | None = None  # the --repo filter, if any


def make_series(metric: str, points: Sequence[tuple[datetime, str | None, float]],
                label: str | None = None, info: Sequence[PointInfo] = ()) -> Series:
    """A series in time order with its steps detected and placed on their nights."""
    times, commits, values = (tuple(c) for c in zip(*points, strict=True)) if points else ((),) * 3
    steps = [_place(s, times, commits) for s in detect_steps(values)]
    name, unit = METRICS[metric]
    return Series(metric=metric, label=label or name, unit=unit, times=times, commits=commits,
                  values=values, steps=tuple(steps), points=tuple(info))


def _place(step: Step, times: Sequence[datetime], commits: Sequence[str | None]) -> TrendStep:
    return TrendStep(night=step.index, time=times[step.index], commit=commits[step.index],
                     before=step.before, after=step.after, rel_change=step.rel_change)


_RAN = (Status.PASS.value, Status.FAIL.value)  # measured: the metrics are the model's


def _value(r: ResultPoint, metric: str) -> float | None:
    if metric == "pass_rate":
        return 1.0 if r.status == Status.PASS.value else 0.0
    return r.metrics[metric] if r.status in _RAN else None


def _model_trend(key: tuple[str, str, str], rows: list[ResultPoint]) -> ModelTrend:
    series = []
    ran = [r for r in rows if r.status in _RAN]
    for metric in METRICS:
        kept = [(r, 1.0 if r.status == Status.PASS.value else 0.0) for r in rows] \
            if metric == "pass_rate" else \
            [(r, v) for r in ran if (v := r.metrics[metric]) is not None]
        info = [PointInfo(r.run_id, r.pr, r.speedup_ci if metric == "speedup" else None)
                for r, _ in kept]
        series.append(make_series(metric, [(r.time, r.commit, v) for r, v in kept], info=info))
    return ModelTrend(*key, series=tuple(series))


AGGREGATES: dict[str, Callable[[list[float]], float | None]] = {
    "speedup": geomean, "cold_s": geomean, "warm_s": geomean, "warm_start_s": geomean,
    "graph_breaks": lambda v: float(sum(v)) if v else None,
    "recompiles": lambda v: float(sum(v)) if v else None,
    "pass_rate": lambda v: sum(v) / len(v) if v else None,
}


def _suite_trend(suite: str, rows: list[ResultPoint]) -> SuiteTrend:
    runs: dict[str, list[ResultPoint]] = defaultdict(list)
    for r in rows:
        runs[r.run_id].append(r)
    series = []
    for metric in METRICS:
        pts: list[tuple[datetime, str | None, float]] = []
        info: list[PointInfo] = []
        for run_rows in runs.values():
            vals = [v for r in run_rows if (v := _value(r, metric)) is not None]
            if (agg := AGGREGATES[metric](vals)) is not None:
                pts.append((run_rows[0].time, run_rows[0].commit, agg))
                info.append(PointInfo(run_rows[0].run_id, run_rows[0].pr))
        series.append(make_series(metric, pts, SUITE_LABELS.get(metric), info))
    by_model: dict[tuple[str, str, str], list[ResultPoint]] = defaultdict(list)
    for r in rows:
        by_model[(r.suite, r.model, r.config_slug)].append(r)
    models = tuple(_model_trend(k, v) for k, v in sorted(by_model.items()))
    dates = {run_rows[0].time.date() for run_rows in runs.values()}
    return SuiteTrend(suite=suite, runs=len(runs), series=tuple(series), models=models,
                      dates=len(dates))


def load_trends(db: Database, *, suite: str | None = None, ref: str | None = "main",
                trigger: str | None = "nightly", since: datetime | None = None,
                repository: str | None = None) -> Trends:
    """Every suite's and model's nightly series (by default: nightlies of main, of every
    repository the database holds), read in one query (docs/trends.md has its time)."""
    where = {"ref": ref, "trigger": trigger, "since": since, "repository": repository}
    rows = results_history(db, suite=suite, metrics=QUERIED, **where)  # oldest run first
    per_suite: dict[str, list[ResultPoint]] = defaultdict(list)
    for r in rows:
        per_suite[r.suite].append(r)
    return Trends(ref=ref, trigger=trigger,
                  suites=tuple(_suite_trend(s, rs) for s, rs in sorted(per_suite.items())),
                  repositories=tuple(sorted({r.repository or "" for r in rows})),
                  repository=repository)
