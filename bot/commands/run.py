"""``compilewatch run``: resolve suites, measure, write the results file, store the run."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.bot.cache.fetch import (
    WARM_PREFIX,
    WarmCacheOptions,
    fetch_handoff,
    resolve_warm_cache,
)
from compilewatch.bot.judge.project import load_project_config
from compilewatch.bot.measure.harness import (
    MeasureOptions,
    OnProgress,
    collect_environment,
    suite_sources,
)
from compilewatch.bot.measure.outcome import SHORT_ID, check_own_code, check_something_measured
from compilewatch.bot.measure.remote import RemoteCacheOptions
from compilewatch.bot.measure.remote import setup as remote_setup
from compilewatch.bot.measure.side import Checkout, measure_side
from compilewatch.bot.shards.plan import ShardOptions
from compilewatch.bot.shards.select import empty_shard
from compilewatch.compiler.processes import Launcher
from compilewatch.compiler.schedule import MakeWorkers
from compilewatch.compiler.tempdirs import owned_temporary
from compilewatch.core.results_file import save_results
from compilewatch.core.schema import Environment, RunResults
from compilewatch.db import store_runs


@dataclass(frozen=True)
class RunRequest:
    """What ``compilewatch run`` was asked to do."""

    out: Path = Path("results.json")
    suites: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    modes: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    dynamics: tuple[str, ...] = ()
    cache_dir: Path | None = None
    db_url: str | None = None
    no_db: bool = False
    diagnostics: bool = True  # keep each cold compile's trace beside the results file
    allow_empty: bool = False  # a run in which nothing was measured is not an error
    repo: Path = Path(".")
    python: str = sys.executable
    measure: MeasureOptions = field(default_factory=MeasureOptions)
    warm_cache: WarmCacheOptions = field(default_factory=WarmCacheOptions)
    shard: ShardOptions = field(default_factory=ShardOptions)  # --shard I/N, --group
    # the shared compile cache: read by each model's remote phase; ``write``: a trusted run
    remote_cache: RemoteCacheOptions = field(default_factory=RemoteCacheOptions)


def fetch_before_letting_go(req: RunRequest) -> dict[str, str]:
    """What needs the job's credentials, done before ``let_go``: ``--warm-cache release``
    downloaded (verified with the project's keys), handed over by folder."""
    if req.warm_cache.source != "release":
        return {}
    return fetch_handoff(req.warm_cache, [collect_environment(req.python).fingerprint],
                         load_project_config(req.repo).cache_public_keys)


def run_command(req: RunRequest, *, progress: OnProgress | None = None,
                launcher: MakeWorkers = Launcher) -> RunResults:
    """Measure, write ``req.out`` (after every model, then finished) and store the run
    (``db_url`` or the embedded SQLite default). ``progress`` hears how measuring goes; the
    summary is the caller's to print."""
    project = load_project_config(req.repo)  # read once: tasks, keys, suites, import paths
    measuring = req.measure.resolve(tuple(project.tasks))
    keys = project.cache_public_keys
    shared = remote_setup(req.remote_cache, trusted_keys=(*keys, *req.warm_cache.public_keys),
                          runs_pr_code=False)
    checkout = Checkout(
        req.repo, suite_sources(req.suites, req.repo, project), python=req.python,
        models=req.models, project=project,
        modes=req.modes, dtypes=req.dtypes, dynamics=req.dynamics,
        allow_installed=req.measure.allow_installed, allow_empty=req.allow_empty,
        shard=req.shard, db_url=req.db_url, no_db=req.no_db, results_dir=req.out.parent,
        remote_cache=shared.role if shared else None)
    with owned_temporary(WARM_PREFIX) as dl:
        def run_extra(env: Environment, run_id: str) -> dict[str, object]:
            # a folder per run: the next run with the same --out keeps this one's traces
            kept = req.out.parent / f"{req.out.stem}.diagnostics" / run_id[:SHORT_ID] \
                if req.diagnostics else None
            return {"cache_root": req.cache_dir, "diagnostics_dir": kept,
                    "diagnostics_base": req.out.parent, "remote": shared,
                    "warm_cache": resolve_warm_cache(req.warm_cache, env, dest=dl,
                                                     trusted_keys=keys)}
        measured = measure_side(
            checkout, measuring, run_extra=run_extra, progress=progress, launcher=launcher,
            checkpoint=lambda runs, _: save_results(runs["run"], req.out))
    results = measured.results["run"]
    save_results(results, req.out)
    check_own_code(results)
    # an empty run is never stored, so the message names its file, not its id
    check_something_measured(results, req.allow_empty or empty_shard(results),
                             written_to=req.out)
    if not req.no_db:
        store_runs(req.db_url, results)
    return results
