"""``compilewatch run`` and ``compilewatch suites``: resolve suites, measure, write results.

This module composes: suites (what) + compiler.runner (how) + schema (the file). It owns the
terminal experience (progress bar, summary table) and nothing else.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import functools
import itertools
import json
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from compilewatch.bot import git as gitutil
from compilewatch.bot.project import load_project_config
from compilewatch.bot.summary import log_console, summary_table
from compilewatch.compiler.errors import UsageError
from compilewatch.compiler.runner import Job, JobRun, RunOptions, run_job_full
from compilewatch.compiler.schema import (
    SCHEMA_VERSION,
    Config,
    Environment,
    GitInfo,
    RunResults,
    RunSettings,
    save_results,
)
from compilewatch.suites.loader import BUILTIN, Suite, resolve_suites

DYNAMIC = {"auto": None, "true": True, "false": False}


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def suite_sources(suites: Iterable[str], repo: Path = Path(".")) -> list[str]:
    """CLI suites, else the repository's ``[tool.compilewatch] suites``, else ``micro``."""
    chosen = list(suites)
    if chosen:
        return chosen
    project = load_project_config(repo)
    return [str(repo / s) if s.endswith(".py") else s for s in project.suites] or ["micro"]


def collect_environment(python: str = sys.executable) -> Environment:
    """Ask the interpreter under test (it may be another torch build) where it runs."""
    try:
        out = subprocess.run([python, "-m", "compilewatch.compiler.environment"],
                             capture_output=True, text=True, check=True, timeout=300)
    except (OSError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        raise UsageError(f"cannot query the environment of {python}: {detail[-2000:]}") from None
    return Environment.model_validate(json.loads(out.stdout))


def check_measure_options(*, rounds: int, block_ms: float, timeout_s: float) -> None:
    """Refuse, before minutes of measuring, options the timing loop cannot use."""
    if rounds < 1 or block_ms <= 0 or timeout_s <= 0:
        raise UsageError("--rounds must be >= 1, --block-ms and --timeout > 0")


def plan_jobs(suites: list[Suite], *, device: str, models: Iterable[str] = (),
              modes: Iterable[str] = (), dtypes: Iterable[str] = (),
              dynamics: Iterable[str] = (), strict: bool = True) -> list[Job]:
    """Expand suites x models x configs; empty sweeps mean each model's own default.

    ``strict``: a ``models`` pattern that matches nothing is an error (``pr`` checks the union
    of its two sides instead: a model the change adds exists on one side only).
    """
    patterns = list(models)
    jobs: list[Job] = []
    matched: set[str] = set()
    for suite in suites:
        for spec in suite.models.values():
            if patterns and not any(fnmatch.fnmatchcase(spec.name, p) for p in patterns):
                continue
            matched.add(spec.name)
            combos = itertools.product(
                list(modes) or [spec.default_mode(device)],
                list(dtypes) or [spec.dtype or "float32"],
                [DYNAMIC[d] for d in dynamics] or [spec.dynamic])
            seen: set[str] = set()
            for mode, dtype, dynamic in combos:
                cfg = Config(device=device, mode=mode, dtype=dtype, dynamic=dynamic)
                if cfg.slug not in seen:
                    seen.add(cfg.slug)
                    jobs.append(Job(suite, spec, cfg))
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(m, p) for m in matched)]
    if unmatched and strict:
        raise UsageError(f"--model {', '.join(unmatched)} matches no model in "
                         f"{', '.join(s.name for s in suites)}")
    return jobs


def measure_jobs(jobs: list[Job], opts: RunOptions, *, quiet: bool = False,
                 console: Console | None = None,
                 on_done: Callable[[list[JobRun]], None] | None = None) -> list[JobRun]:
    """Run every job with a progress bar showing the model and its phase. ``on_done`` gets
    the runs so far after each job: callers checkpoint them, so a job killed after hours keeps
    what it measured."""
    console = console or log_console()
    results: list[JobRun] = []
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[phase]}"))
    with Progress(*columns, console=console, disable=quiet, transient=False) as progress:
        task = progress.add_task("measuring", total=len(jobs), phase="")
        for job in jobs:
            label = f"{job.suite.name}/{job.spec.name} [{job.config.slug}]"
            progress.update(task, description=label, phase="starting")
            results.append(run_job_full(job, opts, lambda p: progress.update(task, phase=p)))
            progress.advance(task)
            if not console.is_terminal and not quiet:
                # Logs get no live bar: one line per model, so a long job shows its progress.
                done = results[-1].result
                console.print(f"[{len(results)}/{len(jobs)}] {label}: {done.status.value} "
                              f"({done.duration_s:.0f} s)", markup=False, highlight=False)
            if on_done is not None:
                on_done(results)
        progress.update(task, description="done", phase="")
    return results


def build_results(model_results: list[Any], *, env: Environment, git: dict[str, Any] | None,
                  sources: list[str], opts: RunOptions, started: str, trigger: str = "local",
                  side: str | None = None, run_id: str | None = None,
                  finished: bool = True) -> RunResults:
    """One place that turns measurements into a results file, for ``run`` and ``pr`` alike.
    ``finished=False``: a checkpoint of a run still going (``finished_at`` stays null)."""
    return RunResults(
        schema_version=SCHEMA_VERSION, run_id=run_id or uuid.uuid4().hex, created_at=started,
        finished_at=now() if finished else None, environment=env, git=GitInfo(**(git or {})),
        settings=RunSettings(suites=sources, timeout_s=opts.timeout_s, rounds=opts.rounds,
                             block_ms=opts.block_ms, trigger=trigger, side=side),
        results=model_results)


def run_command(*, suites: tuple[str, ...], models: tuple[str, ...], device: str,
                modes: tuple[str, ...], dtypes: tuple[str, ...], dynamics: tuple[str, ...],
                out: Path, timeout_s: float, rounds: int, block_ms: float,
                cache_dir: Path | None, no_warm: bool, db_url: str | None, quiet: bool,
                no_db: bool = False,
                python: str = sys.executable, repo: Path = Path("."),
                warm_cache: str | None = None,
                warm_cache_repo: str | None = None,
                token_env: str = "GITHUB_TOKEN", github_url: str | None = None) -> RunResults:
    """Measure, write ``out`` and store the run (``db_url`` or the embedded SQLite default)."""
    check_measure_options(rounds=rounds, block_ms=block_ms, timeout_s=timeout_s)
    sources = suite_sources(suites, repo)
    resolved = resolve_suites(sources)
    jobs = plan_jobs(resolved, device=device, models=models, modes=modes, dtypes=dtypes,
                     dynamics=dynamics)
    started, run_id = now(), uuid.uuid4().hex
    env = collect_environment(python)
    console = log_console()
    git = gitutil.head_info(repo)
    with tempfile.TemporaryDirectory(prefix="compilewatch-warm-cache-") as dl:
        from compilewatch.bot.nightly import resolve_warm_cache

        wc = resolve_warm_cache(warm_cache, env, dest=Path(dl), repo=warm_cache_repo,
                                token_env=token_env, github_url=github_url)
        opts = RunOptions(rounds=rounds, block_ms=block_ms, timeout_s=timeout_s,
                          warm=not no_warm, cache_root=cache_dir, python=python, warm_cache=wc)

        results_of = functools.partial(build_results, env=env, git=git, sources=sources,
                                       opts=opts, started=started, run_id=run_id)
        runs = measure_jobs(jobs, opts, quiet=quiet, console=console, on_done=lambda done: (
            save_results(results_of([j.result for j in done], finished=False), out)))
    results = results_of([j.result for j in runs])
    save_results(results, out)
    if not no_db:
        from compilewatch.db import store_runs

        store_runs(db_url, results)
    if not quiet:
        console.print(summary_table(results))
        console.print(f"results: {out}")
    return results


def suites_command(*, suites: list[str]) -> None:
    """Print every suite and its models (with the packages they need)."""
    console = Console()
    names = suites or list(BUILTIN)
    for suite in resolve_suites(suite_sources(names)):
        console.print(f"[bold]{suite.name}[/bold]  ({suite.source})")
        for spec in suite.models.values():
            extra = []
            if spec.tags:
                extra.append(", ".join(spec.tags))
            if spec.requires:
                extra.append("needs " + ", ".join(spec.requires)
                             + (" (not installed: will be skipped)"
                                if spec.missing_packages() else ""))
            console.print(f"  {spec.name}" + (f"  [dim]{'; '.join(extra)}[/dim]" if extra
                                               else ""))
