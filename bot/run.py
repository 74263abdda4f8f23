"""``compilewatch run``: resolve suites, measure, write the results file, store the run."""

from __future__ import annotations

import functools
import sys
import tempfile
import uuid
from pathlib import Path

from compilewatch.bot.cache.fetch import resolve_warm_cache
from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.judge.project import load_project_config
from compilewatch.bot.measuring import (
    build_results,
    check_measure_options,
    collect_environment,
    measure_jobs,
    now,
    suite_sources,
)
from compilewatch.bot.render.run_table import log_console, summary_table
from compilewatch.compiler.plan import plan_jobs
from compilewatch.compiler.runner import RunOptions
from compilewatch.core.schema import RunResults, save_results
from compilewatch.suites.loader import resolve_suites


def run_command(*, suites: tuple[str, ...], models: tuple[str, ...], device: str,
                modes: tuple[str, ...], dtypes: tuple[str, ...], dynamics: tuple[str, ...],
                out: Path, timeout_s: float, rounds: int, block_ms: float,
                cache_dir: Path | None, no_warm: bool, db_url: str | None, quiet: bool,
                no_db: bool = False,
                python: str = sys.executable, repo: Path = Path("."),
                warm_cache: str | None = None,
                warm_cache_repo: str | None = None,
                token_env: str = "GITHUB_TOKEN", github_url: str | None = None,
                cache_public_keys: tuple[str, ...] = ()) -> RunResults:
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
        keys = (*cache_public_keys, *load_project_config(repo).cache_public_keys)
        wc = resolve_warm_cache(warm_cache, env, dest=Path(dl), trusted_keys=keys,
                                repo=warm_cache_repo, token_env=token_env, github_url=github_url)
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
