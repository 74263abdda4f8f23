"""A side: one checkout, planned and measured.

``plan_side`` lists a checkout's suites with its own code and plans their jobs; ``Side.results``
turns what the loop measured of it into a results file. ``run``, ``nightly`` and ``calibrate``
measure one checkout with ``measure_side`` (``calibrate`` as several sides of it, each its own
run); ``pr`` and a bisection step plan each worktree with ``plan_side`` and measure their sides
interleaved, through the same loop (``measure_sides``).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.judge.project import ProjectConfig
from compilewatch.bot.measure.harness import (
    Measuring,
    OnProgress,
    build_results,
    code_record,
    collect_environment,
    measure_sides,
    now,
    preflight,
    side_code,
)
from compilewatch.bot.measure.listing import load_suites, modules_of
from compilewatch.bot.measure.outcome import check_device_available
from compilewatch.bot.shards.durations import loop_durations
from compilewatch.bot.shards.plan import ShardOptions
from compilewatch.bot.shards.select import plan_shard, stamped
from compilewatch.compiler.plan import Job, plan_jobs
from compilewatch.compiler.processes import Launcher
from compilewatch.compiler.schedule import JobRun, MakeWorkers, SideJobs
from compilewatch.core.schema import Environment, ModelResult, RunResults
from compilewatch.suites.imports import SideCode
from compilewatch.suites.loader import Suite


@dataclass(frozen=True)
class Side:
    """One checkout planned: its code, its suites (as given, and as a results file records
    them), what they list and the jobs to measure."""

    code: SideCode
    sources: list[str]
    suites: list[Suite]
    jobs: list[Job]
    shown: list[str] = field(default_factory=list)

    def keep(self, jobs: list[Job]) -> Side:
        return dataclasses.replace(self, jobs=jobs)

    def results(self, models: list[ModelResult], **how: Any) -> RunResults:
        """The results file of what was measured of this side (``how``: ``build_results``'s
        other arguments)."""
        return build_results(models, sources=self.shown, code=code_record(
            self.code, modules_of(self.suites), models), **how)


def plan_side(sources: list[str], code: SideCode, measuring: Measuring, *,
              python: str = sys.executable, models: Iterable[str] = (),
              modes: Iterable[str] = (), dtypes: Iterable[str] = (),
              dynamics: Iterable[str] = (), strict: bool = True,
              tree: Path | None = None) -> Side:
    """The side's suites listed from its own ``code`` (a built-in suite is ours and loaded
    here; any other by a process of its own, ``bot/measure/listing.py``) and their jobs for
    ``measuring``'s device and tasks. ``tree``: a temporary checkout, whose suite files are
    recorded relative to it (its path is gone after the run). ``strict=False``: a ``--model``
    may match on one side only."""
    suites = load_suites(sources, python=python, code=code)
    jobs = plan_jobs(suites, device=measuring.device, models=models, modes=modes,
                     dtypes=dtypes, dynamics=dynamics, tasks=measuring.tasks, strict=strict,
                     training_builtin_only=measuring.training_builtin_only)
    shown = sources if tree is None else [
        os.path.relpath(s, tree) if s.startswith(str(tree)) else s for s in sources]
    return Side(code, sources, suites, jobs, list(shown))


@dataclass(frozen=True)
class Checkout:
    """What ``measure_side`` measures: one checkout's suites, the models of them, and how its
    runs are recorded (``names``: one run each, all of the same code)."""

    repo: Path
    sources: list[str]
    python: str = sys.executable
    models: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    dynamics: tuple[str, ...] = ()
    allow_installed: tuple[str, ...] = ()
    project: ProjectConfig | None = None  # the checkout's configuration, read by the command
    names: tuple[str, ...] = ("run",)
    trigger: str = "local"
    allow_empty: bool = False  # --device cuda without a GPU records the skips
    shard: ShardOptions = field(default_factory=ShardOptions)
    db_url: str | None = None
    no_db: bool = False
    results_dir: Path | None = None
    remote_cache: str | None = None  # the shared cache's role, recorded in the results


@dataclass(frozen=True)
class Measured:
    """What ``measure_side`` measured, by run name: each run's results (its environment and
    host check among them) and its models' runs (the loop's, e.g. a nightly's artifacts)."""

    results: dict[str, RunResults]
    runs: dict[str, list[JobRun]]


# the run options a command adds (its caches, folders, warm cache), given the environment
# and the first run's id
RunExtra = Callable[[Environment, str], dict[str, Any]]
Checkpoint = Callable[[dict[str, RunResults], dict[str, list[JobRun]]], None]


def measure_side(checkout: Checkout, measuring: Measuring, *,
                 run_extra: RunExtra = lambda env, run_id: {},
                 checkpoint: Checkpoint | None = None, progress: OnProgress | None = None,
                 launcher: MakeWorkers = Launcher) -> Measured:
    """Plan the checkout, read its environment, refuse a GPU run without a GPU, check the host,
    measure every job through the one loop (the longest first, by the stored durations), and
    build each run's results. ``checkpoint`` gets the runs so far after every model (finished
    false), so a job killed after hours keeps what it measured."""
    c = checkout
    code = side_code(c.repo, allow_installed=c.allow_installed, project=c.project)
    side = plan_side(c.sources, code, measuring, python=c.python, models=c.models,
                     modes=c.modes, dtypes=c.dtypes, dynamics=c.dynamics)
    git = gitutil.head_info(c.repo)
    shard = plan_shard(c.shard, [side.jobs], db_url=c.db_url, no_db=c.no_db,
                       group_parts=(str(git.get("commit")),))
    if shard is not None:
        side = side.keep(shard.keep(side.jobs))
    env = collect_environment(c.python)
    started, ids = now(), {name: uuid.uuid4().hex for name in c.names}
    check_device_available(env, measuring.device, c.allow_empty, c.python)
    host, measuring = preflight(measuring, env, c.python)
    opts = measuring.run_options(c.python, code=side.code, **run_extra(env, ids[c.names[0]]))

    def results_of(done: dict[str, list[JobRun]], finished: bool) -> dict[str, RunResults]:
        return {name: stamped(shard, side.results(
            [j.result for j in done.get(name, [])], env=env, git=git, options=measuring,
            started=started, trigger=c.trigger, run_id=ids[name], host=host,
            finished=finished, results_dir=c.results_dir, remote_cache=c.remote_cache))
            for name in c.names}

    def on_done(done: dict[str, list[JobRun]]) -> None:
        if checkpoint is not None:
            checkpoint(results_of(done, finished=False), done)

    runs = measure_sides([SideJobs(name, side.jobs, opts) for name in c.names], measuring,
                         progress=progress, on_done=on_done, launcher=launcher,
                         durations=loop_durations(c.shard.durations, c.db_url,
                                                  env.fingerprint))
    return Measured(results_of(runs, finished=True), runs)
