"""``compilewatch pr``: measure a pull request's merge-base and head, then compare.

A composition of ``run`` (plan, measure, results) and ``compare`` (compare, render): the base
side is measured at the merge-base, like PyTorch HUD and asv, so the comparison shows only what
the PR changed. Both sides run from their own detached worktree, through the one measuring loop
(``compiler/schedule.py``), which interleaves their processes (base, head, head, base...) so
that machine drift hits both sides alike.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
import shutil
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from compilewatch.bot.cache.fetch import (
    WARM_PREFIX,
    WarmCacheOptions,
    fetch_handoff,
    resolve_warm_cache,
)
from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.checkout.worktrees import worktrees
from compilewatch.bot.github.outdir import DIAGNOSTICS, OUT_FILES, staging, write_outdir
from compilewatch.bot.history.nightly_values import nightly_values
from compilewatch.bot.history.noise import noise_bands_of
from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.followup import asker, cold_asker, profile_asker
from compilewatch.bot.judge.host import of_check
from compilewatch.bot.judge.project import (
    compare_with_project,
    load_project_config,
    measuring_settings,
)
from compilewatch.bot.measure.harness import (
    MeasureOptions,
    Measuring,
    OnProgress,
    collect_environment,
    measure_sides,
    now,
    preflight,
    project_tasks,
    side_code,
    suite_sources,
)
from compilewatch.bot.measure.outcome import check_own_code, check_something_measured
from compilewatch.bot.measure.remote import RemoteCacheOptions
from compilewatch.bot.measure.remote import setup as remote_setup
from compilewatch.bot.measure.side import Side, plan_side
from compilewatch.bot.render import diagnostics
from compilewatch.bot.render.formats import render
from compilewatch.bot.shards.durations import loop_durations
from compilewatch.bot.shards.plan import ShardOptions
from compilewatch.bot.shards.select import empty_shard, plan_shard, stamped
from compilewatch.compiler.processes import Launcher
from compilewatch.compiler.reads import ChangedFiles
from compilewatch.compiler.remotestore import SharedCache
from compilewatch.compiler.schedule import JobRun, MakeWorkers, SideJobs
from compilewatch.compiler.tempdirs import owned_temporary
from compilewatch.core.errors import GitError, SuiteError, UsageError
from compilewatch.core.names import unmatched_models
from compilewatch.core.results_file import dumps_results, save_results
from compilewatch.core.schema import Environment, RunResults
from compilewatch.db import store_runs

SideName = Literal["base", "head"]
SIDES: tuple[SideName, SideName] = ("base", "head")



@dataclass(frozen=True)
class Refs:
    """What is compared: commits resolved once, before any worktree exists."""

    base_ref: str
    head_ref: str
    base: str  # the merge-base commit: what the base side measures
    head: str
    pr: int | None = None
    base_tip: str = ""  # --base as given: its pinned keys are trusted, the merge-base's not


def resolve_refs(repo: Path, *, base: str | None, head: str | None, pr: int | None) -> Refs:
    """Refs to commits; ``--pr N`` fetches ``refs/pull/N/head`` and defaults base to origin."""
    if pr is not None:
        if head is not None:
            raise UsageError("pass --pr or --head, not both")
        head_ref, head_commit = f"pull/{pr}", gitutil.fetch_pr_head(repo, pr)
        base = base or "origin/HEAD"
    elif base is None or head is None:
        raise UsageError("pass --base REF and --head REF, or --pr N")
    else:
        head_ref, head_commit = head, gitutil.resolve_commit(repo, head)
    base_commit = gitutil.resolve_commit(repo, base)
    fork = gitutil.merge_base(repo, base_commit, head_commit)
    return Refs(base_ref=base, head_ref=head_ref, base=fork, head=head_commit, pr=pr,
                base_tip=base_commit)


def trusted_keys(repo: Path, commit: str) -> tuple[str, ...]:
    """The cache keys ``commit``'s pyproject pins. ``pr`` reads them at the base branch's tip:
    the PR picks its fork point, so a merge-base could bring back a retired key."""
    try:
        text = gitutil.git_bytes(repo, "show", f"{commit}:./pyproject.toml")
    except GitError:
        return ()  # no pyproject there: nothing pinned
    with owned_temporary("compilewatch-keys-") as tmp:
        (tmp / "pyproject.toml").write_bytes(text)
        try:
            return load_project_config(tmp).cache_public_keys
        except UsageError as e:
            raise UsageError(f"{commit[:12]}:pyproject.toml (the base branch's): "
                             f"{str(e).removeprefix(str(tmp / 'pyproject.toml') + ': ')}"
                             ) from None


def fetch_before_letting_go(req: PrRequest) -> dict[str, str]:
    """What needs the job's credentials, done before ``let_go``: the PR's head fetched
    (``--pr``) and ``--warm-cache release`` downloaded (verified with the base branch's keys)
    into a folder handed over to the command that runs the PR's code."""
    refs = resolve_refs(req.repo, base=req.base, head=req.head, pr=req.pr)
    if req.warm_cache.source != "release":
        return {}
    pythons = dict.fromkeys((req.base_python, req.head_python))
    return fetch_handoff(req.warm_cache, [collect_environment(p).fingerprint for p in pythons],
                         trusted_keys(req.repo, refs.base_tip))


def side_sources(suites: Iterable[str], tree: Path) -> list[str]:
    """Suites of one side: suite files are read from that side's own worktree."""
    chosen = [str(tree / s) if s.endswith(".py") and not Path(s).is_absolute() else s
              for s in suites]
    return suite_sources(chosen, tree)


def check_models_matched(plans: Iterable[Side], models: Iterable[str]) -> None:
    """Every ``--model`` pattern must match a model on at least one side."""
    names = {j.spec.name for plan in plans for j in plan.jobs}
    unmatched = [p for p in models if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unmatched:
        raise UsageError(unmatched_models(unmatched, names, "either side"))


def check_outdir(out: Path) -> None:
    """Refuse early (before minutes of measuring) an outdir that ``post`` would refuse."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    extra = sorted(p.name for p in out.iterdir() if p.name not in (*OUT_FILES, DIAGNOSTICS)) \
        if out.is_dir() \
        else []
    if extra:
        raise UsageError(f"--out {out} holds other files ({', '.join(extra)}); choose an empty "
                         "or new directory")


@dataclass(frozen=True)
class PrRequest:
    """What ``compilewatch pr`` was asked to do."""

    repo: Path = Path(".")
    base: str | None = None
    head: str | None = None
    pr: int | None = None
    suites: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    out: Path = Path("compilewatch-out")
    base_python: str = sys.executable
    head_python: str = sys.executable
    db_url: str | None = None
    no_db: bool = False
    allow_empty: bool = False
    report_url: str | None = None
    measure: MeasureOptions = field(default_factory=MeasureOptions)
    warm_cache: WarmCacheOptions = field(default_factory=WarmCacheOptions)
    shard: ShardOptions = field(default_factory=ShardOptions)  # --shard I/N, --group
    # the shared compile cache, read by each model's remote phase (a pr never stores there)
    remote_cache: RemoteCacheOptions = field(default_factory=RemoteCacheOptions)


Measure = Callable[..., dict[str, list[JobRun]]]
Collect = Callable[[str], Environment]


def pr_command(req: PrRequest, *, measure: Measure | None = None,
               environment: Collect = collect_environment,
               progress: OnProgress | None = None,
               launcher: MakeWorkers = Launcher) -> Comparison:
    """Measure merge-base and head through the one loop, interleaved, write the five output
    files, store both runs, compare.

    ``measure`` (default: ``measure_sides`` with ``launcher``) and ``environment`` are
    parameters so tests can check the orchestration (refs, worktrees, cleanup) without
    compiling anything; ``progress`` hears how measuring goes.
    """
    measure = measure or functools.partial(measure_sides, launcher=launcher)
    measuring = req.measure.resolve(project_tasks(req.repo))
    refs = resolve_refs(req.repo, base=req.base, head=req.head, pr=req.pr)
    check_outdir(req.out)
    # before anything runs: a credential that could let the PR's code write what trusted runs
    # read is refused here (bot/measure/remote.py)
    shared = remote_setup(req.remote_cache, runs_pr_code=True, trusted_keys=(
        *(trusted_keys(req.repo, refs.base_tip) if req.remote_cache.url else ()),
        *req.warm_cache.public_keys))
    if refs.base == refs.head and req.base_python == req.head_python:
        raise UsageError(f"base and head are the same commit ({refs.head[:12]}); pass "
                         "different --base-python and --head-python to compare interpreters")
    pythons: dict[SideName, str] = {"base": req.base_python, "head": req.head_python}
    started = now()
    stage = staging(req.out)
    try:
        # start-up overlaps: each interpreter's environment (a child that imports torch) is
        # read while the worktrees are made and both sides' suites are listed; the host
        # preflight then runs alone, on a quiet host (docs/performance.md)
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="environment") as pool:
            envs = {p: pool.submit(environment, p) for p in dict.fromkeys(pythons.values())}
            comparison, runs = _measure(req, measuring, refs, envs, pythons, started, stage,
                                        functools.partial(measure, progress=progress), shared)
        return _finish(comparison, runs, req, stage)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _environments(measuring: Measuring, pending: dict[str, Future[Environment]]
                  ) -> tuple[dict[str, Environment], int]:
    """Every interpreter's environment and the GPUs all of them see, ``--gpus`` checked
    against those (a usage error before anything is measured)."""
    envs = {p: f.result() for p, f in pending.items()}
    visible = min(env.gpu_count for env in envs.values())
    measuring.check_gpus(visible)
    return envs, visible


def _measure(req: PrRequest, measuring: Measuring, refs: Refs,
             pending: dict[str, Future[Environment]], pythons: dict[SideName, str],
             started: str, stage: Path, measure: Measure, shared: SharedCache | None = None
             ) -> tuple[Comparison, dict[SideName, RunResults]]:
    with owned_temporary(WARM_PREFIX) as dl, \
            worktrees(req.repo, {"base": refs.base, "head": refs.head}) as trees:
        project = load_project_config(trees["base"])
        # whose artifacts may be loaded: the base branch says, never the PR's own files
        keys = trusted_keys(req.repo, refs.base_tip)
        # both sides' pyprojects are read before any child starts: a bad one stops at once
        codes = {s: side_code(trees[s], home=req.repo, allow_installed=req.measure.allow_installed)
                 for s in SIDES}
        sources = {s: side_sources(req.suites, trees[s]) for s in SIDES}
        # each side's suites are listed by a child that imports torch (and the suites' own
        # packages): seconds each on a GPU runner, so both sides at once
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="listing") as pool:
            futures = {s: pool.submit(plan_side, sources[s], codes[s], measuring,
                                      python=pythons[s], models=req.models, strict=False,
                                      tree=trees[s])
                       for s in SIDES}
            envs, visible = _environments(measuring, pending)
            plans = {s: _planned(s, f) for s, f in futures.items()}
        same_env = envs[pythons["base"]].fingerprint == envs[pythons["head"]].fingerprint \
            and pythons["base"] == pythons["head"]
        # the host preflight runs alone, nothing else of the start-up beside it; --gpus and
        # the default lanes from what every side's interpreter sees
        host, measuring = preflight(measuring, envs[pythons["base"]], pythons["base"], visible)
        # one download per environment, however many sides share it
        warm = {p: resolve_warm_cache(req.warm_cache, envs[p], dest=dl / f"env-{i}",
                                      trusted_keys=keys)
                for i, p in enumerate(dict.fromkeys(pythons.values()))}
        check_models_matched(plans.values(), req.models)
        # one plan over both sides' jobs: a model the change adds lands in one shard too
        shard = plan_shard(req.shard, [plans[s].jobs for s in SIDES], db_url=req.db_url,
                           no_db=req.no_db, group_parts=(refs.base, refs.head))
        if shard is not None:
            plans = {s: p.keep(shard.keep(p.jobs)) for s, p in plans.items()}
        changed = changed_files(req.repo, refs, trees)
        sides = [SideJobs(s, plans[s].jobs, measuring.run_options(
            pythons[s], warm_cache=warm[pythons[s]],
            diagnostics_dir=stage / DIAGNOSTICS / s, diagnostics_base=stage,
            watch_root=trees[s], home_root=req.repo.resolve(), code=codes[s],
            remote=shared))
                 for s in SIDES]
        def results_of(done: dict[str, list[JobRun]], finished: bool = True
                       ) -> dict[SideName, RunResults]:
            out = {}
            for s in SIDES:
                models = [j.result for j in done.get(s, [])]
                out[s] = stamped(shard, plans[s].results(
                    models, env=envs[pythons[s]], git=_git(refs, s, req.repo),
                    options=measuring, started=started, trigger="pr", side=s, host=host,
                    finished=finished, remote_cache=shared.role if shared else None))
            return out

        def checkpoint(done: dict[str, list[JobRun]]) -> None:
            """After each model: both sides so far, so that a killed job keeps them."""
            req.out.mkdir(parents=True, exist_ok=True)
            for s, run in results_of(done, finished=False).items():
                save_results(run, req.out / f"{s}.json")

        # the base checkout's thresholds and baseline: the PR cannot loosen its own gate
        noise = noise_bands_of(req.db_url, envs[pythons["base"]].fingerprint)
        # a model whose timing the host preflight silences gets no more processes: more of
        # them on that host would not settle it (bot/judge/host.py)
        policy, steadiness = project.threshold_policy(), of_check(host)
        measured = measure(sides, measuring, same_environment=same_env, changed=changed,
                           on_done=checkpoint, follow_up=asker(policy, noise, steadiness),
                           cold_follow_up=cold_asker(policy, noise, steadiness),
                           durations=loop_durations(req.shard.durations, req.db_url,
                                                    envs[pythons["base"]].fingerprint),
                           profile=profile_asker(policy, noise, steadiness))
        runs = results_of(measured)
        comparison = compare_with_project(runs["base"], runs["head"], trees["base"], noise)
        if any(diagnostics.flagged(r) for r in comparison.rows):
            runs = diagnostics.attach(comparison, runs, stage)  # type: ignore[assignment]
            comparison = compare_with_project(runs["base"], runs["head"], trees["base"],
                                              noise)
    return comparison, runs


def _planned(side: SideName, future: Future[Side]) -> Side:
    """A side's plan; a suite that cannot be listed names the side it failed on."""
    try:
        return future.result()
    except SuiteError as e:
        raise SuiteError(f"{side}: {e}") from None


def changed_files(repo: Path, refs: Refs, trees: dict[str, Path]) -> ChangedFiles:
    """What the PR changed, for the loop's "reads none of it" rule; a pyproject change that
    changes what is measured (``measuring_settings``) reaches every model."""
    def on_both_sides(directory: str) -> bool:
        return all((trees[s] / directory).is_dir() for s in SIDES)

    changed = ChangedFiles.of(gitutil.changed_paths(repo, refs.base, refs.head), on_both_sides)
    if "pyproject.toml" not in changed.paths:
        return changed
    base, head = (measuring_settings(trees[s]) for s in SIDES)
    return dataclasses.replace(changed, settings=frozenset(k for k in base if base[k] != head[k]))


def _git(refs: Refs, side: SideName, repo: Path) -> dict[str, object]:
    commit = refs.base if side == "base" else refs.head
    ref = refs.base_ref if side == "base" else refs.head_ref
    return {"commit": commit, "ref": ref, "merge_base": refs.base, "pr": refs.pr, "dirty": False,
            "repository": gitutil.repository_of(repo)}


def _finish(comparison: Comparison, runs: dict[SideName, RunResults],
            req: PrRequest, stage: Path) -> Comparison:
    """Write the output folder and store both runs."""
    # A side without a model to measure (a --model the PR adds) is fine; a side whose models were
    # all skipped, or two empty sides, is not.
    # the checkpoints (base.json, head.json) show what was measured; nothing else is written
    check_own_code(*(runs[s] for s in SIDES))
    for s in SIDES:
        if runs[s].results or not any(runs[x].results for x in SIDES):
            check_something_measured(runs[s], req.allow_empty or empty_shard(runs[s]),
                                     label=s)
    write_outdir(req.out, {
        "base.json": dumps_results(runs["base"]), "head.json": dumps_results(runs["head"]),
        "comparison.json": render(comparison, "json"),
        "comment.md": render(comparison, "markdown", req.report_url, history=nightly_values(
            None if req.no_db else req.db_url, comparison)),
        "report.html": render(comparison, "html", sides=(runs["base"], runs["head"]))}, stage)
    if not req.no_db:
            store_runs(req.db_url, *(runs[s] for s in SIDES))
    return comparison  # the CLI prints it, then raises on a gating regression if asked
