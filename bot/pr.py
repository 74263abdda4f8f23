"""``compilewatch pr``: measure a pull request's merge-base and head, then compare.

A composition of ``run`` (plan, measure, results) and ``compare`` (compare, render): the base
side is measured at the merge-base, like PyTorch HUD and asv, so the comparison shows only what
the PR changed. Both sides run from their own detached worktree, and their jobs are interleaved
(base, head, then head, base for the next job) so that machine drift hits both sides alike.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import click

from compilewatch.bot.cache.fetch import resolve_warm_cache
from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.checkout.worktrees import worktrees
from compilewatch.bot.judge.comparison import Comparison
from compilewatch.bot.judge.project import compare_with_project, load_project_config
from compilewatch.bot.judge.verdicts import raise_on_gating
from compilewatch.bot.measuring import (
    build_results,
    check_measure_options,
    collect_environment,
    now,
    suite_sources,
)
from compilewatch.bot.outdir import OUT_FILES
from compilewatch.bot.render.formats import render
from compilewatch.compiler.plan import Job, plan_jobs
from compilewatch.compiler.runner import RunOptions, run_job
from compilewatch.core.errors import UsageError
from compilewatch.core.schema import Environment, ModelResult, RunResults, dumps_results
from compilewatch.suites.loader import Suite, load_suite

SideName = Literal["base", "head"]
SIDES: tuple[SideName, SideName] = ("base", "head")

Measure = Callable[[SideName, Job, RunOptions], ModelResult]
Collect = Callable[[str], Environment]


@dataclass(frozen=True)
class Refs:
    """What is compared: commits resolved once, before any worktree exists."""

    base_ref: str
    head_ref: str
    base: str  # the merge-base commit: what the base side measures
    head: str
    pr: int | None = None


@dataclass(frozen=True)
class SidePlan:
    sources: list[str]
    jobs: list[Job]


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
    return Refs(base_ref=base, head_ref=head_ref, base=fork, head=head_commit, pr=pr)


def side_sources(suites: Iterable[str], tree: Path) -> list[str]:
    """Suites of one side: suite files are read from that side's own worktree."""
    chosen = [str(tree / s) if s.endswith(".py") and not Path(s).is_absolute() else s
              for s in suites]
    return suite_sources(chosen, tree)


def plan_side(sources: list[str], *, device: str, models: Iterable[str]) -> SidePlan:
    """Load each suite by its worktree path (a distinct module per side) and expand jobs."""
    suites: list[Suite] = [load_suite(s) for s in sources]
    return SidePlan(sources, plan_jobs(suites, device=device, models=models, strict=False))


def check_models_matched(plans: Iterable[SidePlan], models: Iterable[str]) -> None:
    """Every ``--model`` pattern must match a model on at least one side."""
    names = {j.spec.name for plan in plans for j in plan.jobs}
    unmatched = [p for p in models if not any(fnmatch.fnmatchcase(n, p) for n in names)]
    if unmatched:
        raise UsageError(f"--model {', '.join(unmatched)} matches no model on either side")


def _ident(job: Job) -> tuple[str, str, str]:
    return job.suite.name, job.spec.name, job.config.slug


def interleave(base: list[Job], head: list[Job]) -> list[tuple[SideName, Job]]:
    """Base then head, then head then base for the next job; one-sided jobs run alone."""
    by_side = {"base": {_ident(j): j for j in base}, "head": {_ident(j): j for j in head}}
    order = list(dict.fromkeys([_ident(j) for j in base] + [_ident(j) for j in head]))
    plan: list[tuple[SideName, Job]] = []
    for i, ident in enumerate(order):
        for side in (SIDES if i % 2 == 0 else SIDES[::-1]):
            if ident in by_side[side]:
                plan.append((side, by_side[side][ident]))
    return plan


def measure_with_run_job(side: SideName, job: Job, opts: RunOptions) -> ModelResult:
    """The real measurement: ``run_job``'s cold and warm worker processes."""
    click.echo(f"[{side}] {job.suite.name}/{job.spec.name} [{job.config.slug}]", err=True)
    return run_job(job, opts)


def measure_sides(plan: list[tuple[SideName, Job]], opts: dict[SideName, RunOptions],
                  measure: Measure) -> dict[SideName, list[ModelResult]]:
    results: dict[SideName, list[ModelResult]] = {"base": [], "head": []}
    for side, job in plan:
        results[side].append(measure(side, job, opts[side]))
    return results


def write_outdir(out: Path, files: dict[str, str]) -> None:
    """Write all files into a sibling temp dir, then move them in: no half-written outdir."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        if not out.exists():
            os.replace(tmp, out)
            return
        for name in files:
            os.replace(tmp / name, out / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check_outdir(out: Path) -> None:
    """Refuse early (before minutes of measuring) an outdir that ``post`` would refuse."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    extra = sorted(p.name for p in out.iterdir() if p.name not in OUT_FILES) if out.is_dir() \
        else []
    if extra:
        raise UsageError(f"--out {out} holds other files ({', '.join(extra)}); choose an empty "
                         "or new directory")


def pr_command(*, repo: Path = Path("."), base: str | None = None, head: str | None = None,
               pr: int | None = None, suites: tuple[str, ...] = (),
               models: tuple[str, ...] = (), device: str = "cpu",
               out: Path = Path("compilewatch-out"), rounds: int = 30, block_ms: float = 20.0,
               timeout_s: float = 900.0, base_python: str = sys.executable,
               head_python: str = sys.executable, db_url: str | None = None,
               report_url: str | None = None, fail_on_regression: bool = False,
               quiet: bool = False, no_warm: bool = False, warm_cache: str | None = None,
               warm_cache_repo: str | None = None, token_env: str = "GITHUB_TOKEN",
               github_url: str | None = None, cache_public_keys: tuple[str, ...] = (),
               measure: Measure = measure_with_run_job,
               environment: Collect = collect_environment) -> Comparison:
    """Measure merge-base and head interleaved, write the five output files, compare.

    ``measure`` and ``environment`` are parameters so tests can check the orchestration
    (order, worktrees, cleanup) without compiling anything.
    """
    check_measure_options(rounds=rounds, block_ms=block_ms, timeout_s=timeout_s)
    check_outdir(out)
    refs = resolve_refs(repo, base=base, head=head, pr=pr)
    if refs.base == refs.head and base_python == head_python:
        raise UsageError(f"base and head are the same commit ({refs.head[:12]}); pass "
                         "different --base-python and --head-python to compare interpreters")
    pythons: dict[SideName, str] = {"base": base_python, "head": head_python}
    envs = {p: environment(p) for p in dict.fromkeys(pythons.values())}
    started = now()
    with tempfile.TemporaryDirectory(prefix="compilewatch-warm-cache-") as dl, \
            worktrees(repo, {"base": refs.base, "head": refs.head}) as trees:
        # whose artifacts may be loaded: the base checkout says, never the PR's own files
        keys = (*cache_public_keys, *load_project_config(trees["base"]).cache_public_keys)
        opts = {s: RunOptions(rounds=rounds, block_ms=block_ms, timeout_s=timeout_s,
                              python=pythons[s], warm=not no_warm,
                              warm_cache=resolve_warm_cache(
                                  warm_cache, envs[pythons[s]], dest=Path(dl) / s,
                                  trusted_keys=keys, repo=warm_cache_repo,
                                  token_env=token_env, github_url=github_url))
                for s in SIDES}
        plans = {s: plan_side(side_sources(suites, trees[s]), device=device, models=models)
                 for s in SIDES}
        check_models_matched(plans.values(), models)
        measured = measure_sides(interleave(plans["base"].jobs, plans["head"].jobs), opts,
                                 measure)
        runs = {s: build_results(measured[s], env=envs[pythons[s]], git=_git(refs, s),
                                 sources=_display(plans[s].sources, trees[s]), opts=opts[s],
                                 started=started, trigger="pr", side=s) for s in SIDES}
        # the base checkout's thresholds and baseline: the PR cannot loosen its own gate
        comparison = compare_with_project(runs["base"], runs["head"], trees["base"])
    return _finish(comparison, runs, out=out, db_url=db_url, report_url=report_url,
                   fail_on_regression=fail_on_regression, quiet=quiet)


def _git(refs: Refs, side: SideName) -> dict[str, object]:
    commit = refs.base if side == "base" else refs.head
    ref = refs.base_ref if side == "base" else refs.head_ref
    return {"commit": commit, "ref": ref, "merge_base": refs.base, "pr": refs.pr, "dirty": False}


def _display(sources: list[str], tree: Path) -> list[str]:
    """Record suite files relative to the worktree: its temp path is gone after the run."""
    return [os.path.relpath(s, tree) if s.startswith(str(tree)) else s for s in sources]


def _finish(comparison: Comparison, runs: dict[SideName, RunResults], *, out: Path,
            db_url: str | None, report_url: str | None, fail_on_regression: bool,
            quiet: bool) -> Comparison:
    """Write, ingest, print; a gating regression is raised last so CI keeps every file."""
    write_outdir(out, {
        "base.json": dumps_results(runs["base"]), "head.json": dumps_results(runs["head"]),
        "comparison.json": render(comparison, "json"),
        "comment.md": render(comparison, "markdown", report_url),
        "report.html": render(comparison, "html")})
    if db_url:
        from compilewatch.db import store_runs

        store_runs(db_url, *(runs[s] for s in SIDES))
    if not quiet:
        click.echo(render(comparison, "table"))
        click.echo(f"wrote {', '.join(OUT_FILES)} to {out}")
    if fail_on_regression:
        raise_on_gating(comparison)
    return comparison
