"""One measuring step of a bisection: one or two candidates, each from a temporary worktree of
its commit with its own interpreter, through the one measuring loop that ``run`` and ``pr``
measure with (``measure_sides``: interleaved where there are two), planned as a ``pr`` side is
(``plan_side``: the checkout's own suites and code), recorded as ``run`` records (one results
file per side, stored in the database).

A candidate that cannot be measured (its pyproject or suite does not load, it lacks the model)
is not an error: it is what ``git bisect skip`` is for, and the step says why.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilewatch.bot.checkout.worktrees import worktrees
from compilewatch.bot.commands.pr import side_sources
from compilewatch.bot.judge.bisection import Candidate
from compilewatch.bot.measure.harness import (
    Measuring,
    OnProgress,
    collect_environment,
    measure_sides,
    side_code,
)
from compilewatch.bot.measure.side import Side as SidePlan
from compilewatch.bot.measure.side import plan_side
from compilewatch.compiler import overrides
from compilewatch.compiler.schedule import JobRun, SideJobs
from compilewatch.core.errors import CompilewatchError
from compilewatch.core.schema import Environment, HostCheck, ModelResult, RunResults
from compilewatch.db import store_runs


@dataclass(frozen=True)
class Setup:
    """What every step of one bisection shares."""

    repo: Path
    models: tuple[str, ...]
    suites: tuple[str, ...] = ()
    db_url: str | None = None
    no_db: bool = False
    started: str = ""
    repository: str | None = None
    host: HostCheck | None = None
    progress: OnProgress | None = None
    allow_installed: tuple[str, ...] = ()
    # interpreter -> its environment, asked once per bisection
    environments: dict[str, Environment] = field(default_factory=dict)

    def environment(self, python: str) -> Environment:
        if python not in self.environments:
            self.environments[python] = collect_environment(python)
        return self.environments[python]


@dataclass(frozen=True)
class Side:
    """One candidate in a step: ``overrides`` are Inductor config values its workers set."""

    name: str
    candidate: Candidate
    python: str = sys.executable
    commit: str = ""
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Measured:
    """One side of a step: its run, or why it could not be measured."""

    run: RunResults | None = None
    failed: str | None = None

    def result(self, ident: tuple[str, str, str]) -> ModelResult | None:
        return None if self.run is None else self.run.by_ident().get(ident)

    def idents(self) -> list[tuple[str, str, str]]:
        return [] if self.run is None else [r.ident for r in self.run.results]


def measure_step(setup: Setup, sides: list[Side], measuring: Measuring,
                 run_extra: Mapping[str, Any] | None = None) -> dict[str, Measured]:
    """Measure each side's models once (``run_extra``: more ``RunOptions``, e.g. no timing for
    a deterministic metric), interleaved where both can be measured; store every run."""
    with worktrees(setup.repo, {s.name: s.commit for s in sides}) as trees:
        plans: dict[str, SidePlan] = {}
        out: dict[str, Measured] = {}
        for s in sides:
            plan, why = side_plan(setup, s, trees[s.name], measuring)
            if plan is None:
                out[s.name] = Measured(failed=why)
            else:
                plans[s.name] = plan
        jobs = [SideJobs(s.name, plans[s.name].jobs, measuring.run_options(
            s.python, code=plans[s.name].code, home_root=setup.repo.resolve(),
            extra_env=env_of(s), **dict(run_extra or {})))
            for s in sides if s.name in plans]
        pythons = {s.python for s in sides if s.name in plans}
        envs = {s.name: setup.environment(s.python) for s in sides if s.name in plans}
        same = len(pythons) <= 1 and len({e.fingerprint for e in envs.values()}) <= 1
        done = measure_sides(jobs, measuring, same_environment=same,
                             progress=setup.progress) if jobs else {}
        for s in sides:
            if s.name in plans:
                out[s.name] = Measured(_results(setup, s, plans[s.name], envs[s.name],
                                                measuring, done.get(s.name, [])))
    runs = [m.run for m in out.values() if m.run is not None]
    if runs and not setup.no_db:
        store_runs(setup.db_url, *runs)
    return out


def side_plan(setup: Setup, side: Side, tree: Path, measuring: Measuring
          ) -> tuple[SidePlan | None, str]:
    """The side's jobs for the asked models, or why there are none at this candidate."""
    try:
        sources = side_sources(setup.suites, tree)
        plan = plan_side(sources, code_of(setup, tree), measuring, python=side.python,
                         models=setup.models, strict=False, tree=tree)
    except CompilewatchError as e:
        return None, f"does not load: {str(e).splitlines()[0][:300]}"
    if not plan.jobs:
        names = ", ".join(setup.models)
        return None, f"no model matching {names} here"
    return plan, ""


def code_of(setup: Setup, tree: Path) -> Any:
    return side_code(tree, home=setup.repo, allow_installed=setup.allow_installed)


def env_of(side: Side) -> dict[str, str]:
    return {overrides.ENV: overrides.encode(side.overrides)} if side.overrides else {}


def _results(setup: Setup, side: Side, plan: SidePlan, env: Environment,
             measuring: Measuring, runs: list[JobRun]) -> RunResults:
    models = [j.result for j in runs]
    git = {"commit": side.commit, "ref": None, "dirty": False,
           "repository": setup.repository}
    results = plan.results(models, env=env, git=git, options=measuring,
                           started=setup.started, trigger="bisect", host=setup.host)
    if side.overrides:  # the flags a step applied are part of what it measured
        note = f"inductor config set: {json.dumps(dict(side.overrides), default=str)}"
        results = results.model_copy(update={"results": [
            r.model_copy(update={"notes": [*r.notes, note[:8000]][:64]})
            for r in results.results]})
    return results


def with_processes(measuring: Measuring, metric_timed: str | None, processes: int) -> Measuring:
    """The measuring options of a timed step with ``processes`` a side: cold compiles for
    the cold-compile metric, timing processes otherwise."""
    if metric_timed == "cold-compile":
        return dataclasses.replace(measuring, cold_processes=processes)
    return dataclasses.replace(measuring, timing_processes=processes)
