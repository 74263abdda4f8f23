"""``compilewatch run``: resolve suites, measure, write the results file, store the run."""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.bot.cache.fetch import (
    WARM_PREFIX,
    WarmCacheOptions,
    fetch_handoff,
    resolve_warm_cache,
)
from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.judge.project import load_project_config
from compilewatch.bot.measure.harness import (
    MeasureOptions,
    OnProgress,
    build_results,
    code_record,
    collect_environment,
    measure_sides,
    now,
    preflight,
    project_tasks,
    side_code,
    suite_sources,
)
from compilewatch.bot.measure.listing import load_suites, modules_of
from compilewatch.bot.measure.outcome import (
    SHORT_ID,
    check_device_available,
    check_own_code,
    check_something_measured,
)
from compilewatch.bot.measure.remote import RemoteCacheOptions
from compilewatch.bot.measure.remote import setup as remote_setup
from compilewatch.bot.shards.durations import loop_durations
from compilewatch.bot.shards.plan import ShardOptions
from compilewatch.bot.shards.select import plan_shard, stamped
from compilewatch.compiler.plan import plan_jobs
from compilewatch.compiler.schedule import SideJobs
from compilewatch.compiler.tempdirs import owned_temporary
from compilewatch.core.results_file import save_results
from compilewatch.core.schema import ModelResult, RunResults
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


def run_command(req: RunRequest, *, progress: OnProgress | None = None) -> RunResults:
    """Measure, write ``req.out`` (after every model, then finished) and store the run
    (``db_url`` or the embedded SQLite default). ``progress`` hears how measuring goes; the
    summary is the caller's to print."""
    measuring = req.measure.resolve(project_tasks(req.repo))
    keys = load_project_config(req.repo).cache_public_keys
    shared = remote_setup(req.remote_cache, trusted_keys=(*keys, *req.warm_cache.public_keys),
                          runs_pr_code=False)
    sources = suite_sources(req.suites, req.repo)
    code = side_code(req.repo, allow_installed=req.measure.allow_installed)
    suites = load_suites(sources, python=req.python, code=code)
    jobs = plan_jobs(suites, device=req.measure.device, models=req.models,
                     modes=req.modes, dtypes=req.dtypes, dynamics=req.dynamics,
                     tasks=measuring.tasks, training_builtin_only=measuring.training_builtin_only)
    git = gitutil.head_info(req.repo)
    shard = plan_shard(req.shard, [jobs], db_url=req.db_url, no_db=req.no_db,
                       group_parts=(str(git.get("commit")),))
    jobs = shard.keep(jobs) if shard is not None else jobs
    started, run_id = now(), uuid.uuid4().hex
    env = collect_environment(req.python)
    check_device_available(env, req.measure.device, req.allow_empty, req.python)
    host, measuring = preflight(measuring, env, req.python)

    def results_of(done: list[ModelResult], finished: bool = True) -> RunResults:
        return stamped(shard, build_results(done, env=env, git=git, sources=sources,
                             options=measuring, started=started, run_id=run_id, host=host,
                             finished=finished,
                             code=code_record(code, modules_of(suites), done),
                             results_dir=req.out.parent,
                             remote_cache=shared.role if shared else None))
    with owned_temporary(WARM_PREFIX) as dl:
        wc = resolve_warm_cache(req.warm_cache, env, dest=dl, trusted_keys=keys)
        # a folder per run: the next run with the same --out keeps this one's traces
        kept = req.out.parent / f"{req.out.stem}.diagnostics" / run_id[:SHORT_ID] \
            if req.diagnostics else None
        opts = measuring.run_options(req.python, cache_root=req.cache_dir, warm_cache=wc,
                                       diagnostics_dir=kept, diagnostics_base=req.out.parent,
                                       code=code, remote=shared)
        measured = measure_sides(
            [SideJobs("run", jobs, opts)], measuring, progress=progress,
            durations=loop_durations(req.shard.durations, req.db_url, env.fingerprint),
            on_done=lambda done: save_results(
                results_of([j.result for j in done["run"]], finished=False), req.out))
    results = results_of([j.result for j in measured["run"]])
    save_results(results, req.out)
    check_own_code(results)
    # an empty run is never stored, so the message names its file, not its id
    check_something_measured(results, req.allow_empty or (shard is not None and not jobs),
                             written_to=req.out)
    if not req.no_db:
            store_runs(req.db_url, results)
    return results
