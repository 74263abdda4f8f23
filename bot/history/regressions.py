"""Every step the dashboard found, as rows of the regressions page: newest first.

"What regressed this year?" is the first question asked of a dashboard; the page answers it
with one row per step (a suite aggregate's or a model's), filterable by suite, model, metric
and size. Whether a step is a regression depends on the metric's direction: a lower speedup
or pass rate, or more of anything else (compile time, breaks, recompiles).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from compilewatch.bot.history.series import Series, Trends, TrendStep
from compilewatch.bot.render import sitemap
from compilewatch.bot.render.sitemap import Links

HIGHER_IS_BETTER = frozenset({"speedup", "pass_rate"})


@dataclass(frozen=True)
class StepRow:
    suite: str
    model: str | None  # None: the suite's aggregate
    config: str | None
    metric: str
    label: str
    time: datetime
    commit: str | None
    before: float
    after: float
    rel_change: float | None
    worse: bool  # a regression (by the metric's direction), not an improvement
    page: str  # the model's page, or the index for a suite step
    commit_url: str | None

    @property
    def size(self) -> float:
        """|relative change| (an absolute change from zero counts as 100 %)."""
        return abs(self.rel_change) if self.rel_change is not None else 1.0


def _row(suite: str, model: str | None, config: str | None, s: Series, st: TrendStep,
         links: Links) -> StepRow:
    worse = (st.after < st.before) if s.metric in HIGHER_IS_BETTER else st.after > st.before
    page = sitemap.model_page(suite, model, config) if model and config else "index.html"
    commit_url = (links.commit.replace("{commit}", st.commit)
                  if links.commit and st.commit else None)
    return StepRow(suite=suite, model=model, config=config, metric=s.metric, label=s.label,
                   time=st.time, commit=st.commit, before=st.before, after=st.after,
                   rel_change=st.rel_change, worse=worse, page=page, commit_url=commit_url)


def all_steps(trends: Trends, links: Links) -> list[StepRow]:
    """Every step of every suite aggregate and every model, newest first."""
    rows = [_row(s.suite, None, None, ser, st, links) for s in trends.suites
            for ser in s.series for st in ser.steps]
    rows += [_row(s.suite, m.model, m.config, ser, st, links) for s in trends.suites
             for m in s.models for ser, st in m.steps]
    return sorted(rows, key=lambda r: (r.time, r.suite, r.model or ""), reverse=True)
