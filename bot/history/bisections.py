"""The bisections the nightly starts: one per regressing step a model's trend shows, between the
night before the step and the night of it, as many as fit a budget of measuring steps.

A step's cost is what the search can need at worst: the ends' step, then ceil(log2(n+1))
steps over the n commits between the two nights (each timed step may be measured once more
with more processes, so a timed metric is counted twice over). The biggest steps go first; a
model's step seen by several metrics is bisected once, on the surest metric (a deterministic
one needs one measurement a step). Pure: the commits between two nights come from the caller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from compilewatch.bot.history.regressions import HIGHER_IS_BETTER
from compilewatch.bot.history.series import Trends

# a trend's metric -> the bisection's --metric (speedup falls when compiled time rises)
BISECTABLE = {"graph_breaks": "graph-breaks", "recompiles": "recompiles",
              "pass_rate": "accuracy", "speedup": "compiled-time", "cold_s": "cold-compile",
              "warm_s": "warm-compile"}
SURE_FIRST = ("graph-breaks", "recompiles", "accuracy", "compiled-time", "cold-compile",
              "warm-compile")
TIMED = frozenset({"compiled-time", "cold-compile", "warm-compile"})
UNKNOWN_COMMITS = 16  # commits assumed between two nights when the checkout cannot say

Counter = Callable[[str, str], int | None]


@dataclass(frozen=True)
class Planned:
    """One bisection to start: ``good`` the night before the step, ``bad`` its night."""

    good: str
    bad: str
    suite: str
    model: str
    config: str
    metric: str
    change: float | None  # the step's relative change
    commits: int | None = None  # commits after ``good`` up to ``bad`` (None: not known)
    max_steps: int = 0

    def as_input(self) -> dict[str, str | int]:
        """The bisect workflow's inputs, as the nightly's matrix passes them (``steps`` is
        its ``max-steps``)."""
        return {"good": self.good, "bad": self.bad, "model": self.model,
                "metric": self.metric, "steps": self.max_steps}


def steps_needed(metric: str, commits: int) -> int:
    """The worst case of a bisection over ``commits`` (the ends' step included)."""
    search = max(commits - 1, 0).bit_length()
    return (1 + search) * (2 if metric in TIMED else 1)


def regressing_steps(trends: Trends) -> list[Planned]:
    """Every model step that made a bisectable metric worse, with both nights' commits."""
    found: dict[tuple[str, str, str, str], Planned] = {}
    for s in trends.suites:
        for m in s.models:
            for series, st in m.steps:
                metric = BISECTABLE.get(series.metric)
                worse = (st.after < st.before) if series.metric in HIGHER_IS_BETTER \
                    else st.after > st.before
                good = series.commits[st.night - 1] if st.night >= 1 else None
                if metric is None or not worse or not good or not st.commit \
                        or good == st.commit:
                    continue
                p = Planned(good=good, bad=st.commit, suite=s.suite, model=m.model,
                            config=m.config, metric=metric, change=st.rel_change)
                key = (p.good, p.bad, p.suite, p.model)  # a bisection measures every config
                if key not in found or SURE_FIRST.index(metric) < \
                        SURE_FIRST.index(found[key].metric):
                    found[key] = p
    return list(found.values())


def within_budget(steps: list[Planned], budget: int, count: Counter | None = None
                  ) -> list[Planned]:
    """The biggest steps first, each with the steps it may need, while the budget lasts."""
    def size(p: Planned) -> float:
        return abs(p.change) if p.change is not None else 1.0

    chosen: list[Planned] = []
    left = budget
    for p in sorted(steps, key=lambda p: (-size(p), p.model, p.metric)):
        commits = count(p.good, p.bad) if count is not None else None
        need = steps_needed(p.metric, commits if commits is not None else UNKNOWN_COMMITS)
        if need <= left:
            chosen.append(Planned(**{**p.__dict__, "commits": commits, "max_steps": need}))
            left -= need
    return chosen
