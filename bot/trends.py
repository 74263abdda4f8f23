"""``compilewatch trends``: load the stored history and write the static dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from compilewatch.bot.history.dashboard import write_site
from compilewatch.bot.history.series import load_trends
from compilewatch.db import connect


@dataclass(frozen=True)
class TrendsReport:
    """What the command wrote, and a warning when no stored run matched the filters."""

    index: Path
    summary: str
    warning: str | None = None


def trends_command(*, out: Path, db_url: str | None = None, suite: str | None = None,
                   ref: str | None = "main", trigger: str | None = "nightly",
                   since: datetime | None = None) -> TrendsReport:
    """Load the history from the database and write the dashboard into ``out``."""
    with connect(db_url, must_exist=True) as db:
        trends = load_trends(db, suite=suite, ref=ref, trigger=trigger, since=since)
    index = write_site(trends, out)
    n_models = sum(len(s.models) for s in trends.suites)
    n_steps = sum(len(m.steps) for s in trends.suites for m in s.models)
    summary = (f"compilewatch: wrote {index} ({len(trends.suites)} suites, {n_models} model "
               f"configs, {n_steps} model steps)")
    warning = None
    if not trends.suites:
        warning = (f"compilewatch: no run matched (ref {ref or '*'}, trigger {trigger or '*'}"
                   f"{f', suite {suite}' if suite else ''}); runs without git information have "
                   f"no ref: try --ref '*'")
    return TrendsReport(index, summary, warning)
