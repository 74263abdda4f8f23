"""What ``run``, ``pr`` and ``nightly`` share around measuring: suites, environment, the loop
with its progress display, and turning measurements into one results file."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from compilewatch.bot.judge.project import load_project_config
from compilewatch.bot.render.run_table import log_console
from compilewatch.compiler.plan import Job
from compilewatch.compiler.runner import JobRun, RunOptions, run_job_full
from compilewatch.core.errors import UsageError
from compilewatch.core.schema import (
    SCHEMA_VERSION,
    Environment,
    GitInfo,
    RunResults,
    RunSettings,
)


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
