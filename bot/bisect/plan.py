"""``compilewatch bisect-plan``: which bisections the nightly starts tonight, within its budget.

The stored nightly history is read as ``trends`` reads it; every regressing step of a model's
series that is new (its night among the last ``recent`` nights of the series: a step is found
once ``min_size`` nights follow it, so each is planned on the night it is first found) becomes
a bisection between the night before it and its own night, the biggest first, while the budget
of measuring steps lasts (``history/bisections.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.history.bisections import (
    Counter,
    Planned,
    regressing_steps,
    within_budget,
)
from compilewatch.bot.history.series import Trends, load_trends
from compilewatch.core.errors import GitError, UsageError
from compilewatch.db import connect

PLAN_VERSION = 1


@dataclass(frozen=True)
class PlanRequest:
    budget: int
    db_url: str | None = None
    ref: str | None = "main"
    repository: str | None = None  # OWNER/NAME as stored (None: every repository)
    checkout: Path | None = None  # a clone that holds the nights' commits, to count them
    recent: int = 3


def _recent(trends: Trends, recent: int) -> set[tuple[str, str, str, str]]:
    """(suite, model, config, bad commit) of the steps among each series' newest nights."""
    keep = set()
    for s in trends.suites:
        for m in s.models:
            for series, st in m.steps:
                if st.night >= len(series.values) - recent and st.commit:
                    keep.add((s.suite, m.model, m.config, st.commit))
    return keep


def _counter(checkout: Path | None) -> Counter | None:
    """Commits after ``good`` up to ``bad`` on ``bad``'s first-parent line, from a clone."""
    if checkout is None:
        return None

    def count(good: str, bad: str) -> int | None:
        try:
            return int(gitutil.git(checkout, "rev-list", "--first-parent", "--count",
                                   f"{good}..{bad}"))
        except (GitError, ValueError):
            return None

    return count


def plan_command(req: PlanRequest) -> list[Planned]:
    if req.budget < 0:
        raise UsageError(f"--budget {req.budget}: a number of measuring steps, 0 or more")
    if req.recent < 1:
        raise UsageError(f"--recent {req.recent}: at least 1 night")
    with connect(req.db_url, must_exist=True) as db:
        trends = load_trends(db, ref=req.ref, trigger="nightly", repository=req.repository)
    recent = _recent(trends, req.recent)
    steps = [p for p in regressing_steps(trends)
             if (p.suite, p.model, p.config, p.bad) in recent]
    return within_budget(steps, req.budget, _counter(req.checkout))


def plan_json(planned: list[Planned], budget: int) -> str:
    """The plan for people and scripts: each bisection with why and what it may cost."""
    return json.dumps({"kind": "bisect-plan", "version": PLAN_VERSION, "budget": budget,
                       "steps": sum(p.max_steps for p in planned),
                       "bisections": [{**p.as_input(), "suite": p.suite, "config": p.config,
                                       "change": p.change, "commits": p.commits}
                                      for p in planned]}, indent=1) + "\n"


def plan_matrix(planned: list[Planned]) -> str:
    """One line of JSON: a GitHub Actions matrix's ``include`` of the bisect workflow's
    inputs (``fromJSON`` in the nightly)."""
    return json.dumps([p.as_input() for p in planned], separators=(",", ":"))
