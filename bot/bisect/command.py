"""``compilewatch bisect``: find the first commit (or torch build) where a model's metric
regressed, measuring as few candidates as the search needs.

A composition of what exists: the candidates from git (or a list of interpreters), each step
measured as a ``pr`` side is (``bisect/measure.py``), judged as ``compare`` judges
(``judge/bisect_metrics.py``), searched as ``git bisect`` searches (``bisect/search.py``),
written as ``pr`` writes (a staging folder moved into place) and stored as ``run`` stores.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.bot.bisect.candidates import commits_between, read_pythons, with_torch
from compilewatch.bot.bisect.compiler import compiler_bisect
from compilewatch.bot.bisect.flags import bisect_flags
from compilewatch.bot.bisect.measure import Setup, Side
from compilewatch.bot.bisect.runner import Judge, Runner
from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.commands.pr import staging, write_outdir
from compilewatch.bot.github.outdir import BISECT_FILES
from compilewatch.bot.history.noise import noise_bands_of
from compilewatch.bot.judge.bisect_metrics import Metric, parse_metric
from compilewatch.bot.judge.bisection import BisectReport, Candidate, CompilerFinding
from compilewatch.bot.judge.host import of_check
from compilewatch.bot.judge.project import load_project_config
from compilewatch.bot.measure.harness import (
    MeasureOptions,
    Measuring,
    OnProgress,
    now,
    preflight,
    project_tasks,
)
from compilewatch.bot.render import bisect as rendering
from compilewatch.bot.render.commands import bisect_line
from compilewatch.core.errors import CompilewatchError, UsageError


class NotReproduced(CompilewatchError):
    """The regression does not show between the ends: nothing was bisected (the report
    says what the ends measured)."""


@dataclass(frozen=True)
class BisectRequest:
    """What ``compilewatch bisect`` was asked to do."""

    metric: str
    models: tuple[str, ...]
    repo: Path = Path(".")
    good: str | None = None
    bad: str | None = None
    pythons: Path | None = None  # one interpreter a line, oldest build first
    commit: str | None = None  # the commit every build measures (--pythons); default HEAD
    python: str = sys.executable  # the interpreter of every commit (commits mode)
    suites: tuple[str, ...] = ()
    out: Path = Path("compilewatch-out/bisect")
    db_url: str | None = None
    no_db: bool = False
    max_steps: int = 32
    max_processes: int | None = None
    within: str | None = None  # both ends must be on this ref's history
    compiler_bisect: bool = True  # accuracy: torch's CompilerBisector in the first bad
    config_flags: bool = False  # timed: the Inductor flags that differ, tried one by one
    measure: MeasureOptions = field(default_factory=MeasureOptions)


def check_request(req: BisectRequest) -> Metric:
    """Everything that can be refused before a worktree exists."""
    metric = parse_metric(req.metric)
    if not req.models:
        raise UsageError("pass --model M (repeatable): the models to bisect")
    if req.pythons is None and (req.good is None or req.bad is None):
        raise UsageError("pass --good REF and --bad REF, or --pythons FILE")
    if req.pythons is not None and (req.good is not None or req.bad is not None):
        raise UsageError("--pythons bisects torch builds at one commit (--commit): pass it "
                         "instead of --good and --bad, not with them")
    if req.pythons is None and req.commit is not None:
        raise UsageError("--commit goes with --pythons (the commit every build measures)")
    if req.pythons is not None and req.within is not None:
        raise UsageError("--within goes with --good and --bad")
    if req.max_steps < 1:
        raise UsageError(f"--max-steps {req.max_steps}: must be at least 1")
    if req.max_processes is not None and req.max_processes < 1:
        raise UsageError(f"--max-processes {req.max_processes}: must be at least 1")
    if metric.kind == "memory" and req.measure.device != "cuda":
        raise UsageError("--metric peak-memory is measured on a GPU only: pass --device cuda")
    if req.config_flags and not metric.timed:
        raise UsageError(f"--config-flags tries Inductor flags against a timed regression; "
                         f"--metric {metric.name} is not timed")
    check_outdir(req.out)
    return metric


def check_outdir(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    extra = sorted(p.name for p in out.iterdir() if p.name not in BISECT_FILES) \
        if out.is_dir() else []
    if extra:
        raise UsageError(f"--out {out} holds other files ({', '.join(extra[:5])}); choose an "
                         "empty or new directory")


def _candidates(req: BisectRequest) -> tuple[list[Candidate], str]:
    """The candidates, and the commit of the builds (commits mode: '')."""
    if req.pythons is None:
        assert req.good is not None and req.bad is not None
        return commits_between(req.repo, req.good, req.bad, req.within), ""
    return read_pythons(req.pythons), gitutil.resolve_commit(req.repo, req.commit or "HEAD")


def _side_of(req: BisectRequest, fixed: str) -> Callable[[str, Candidate], Side]:
    def side(name: str, c: Candidate) -> Side:
        if c.python is not None:
            return Side(name, c, python=c.python, commit=fixed)
        return Side(name, c, python=req.python, commit=c.commit or "")

    return side


def bisect_command(req: BisectRequest, *, progress: OnProgress | None = None) -> BisectReport:
    """Measure the ends, bisect, write ``bisect.json``, ``bisect.md`` and ``bisect.html`` to
    ``req.out``, store every step's runs; a regression the ends do not show raises
    ``NotReproduced`` once its report is written."""
    metric = check_request(req)
    measuring = req.measure.resolve(project_tasks(req.repo))
    candidates, fixed = _candidates(req)
    side_of = _side_of(req, fixed)
    setup = Setup(repo=req.repo, models=req.models, suites=req.suites, db_url=req.db_url,
                  no_db=req.no_db, started=now(), repository=gitutil.repository_of(req.repo),
                  progress=progress, allow_installed=req.measure.allow_installed)
    good = side_of("good", candidates[0])
    env = setup.environment(good.python)
    host, measuring = preflight(measuring, env, good.python)
    setup = dataclasses.replace(setup, host=host)
    judge = Judge(metric, load_project_config(req.repo).threshold_policy(),
                  noise_bands_of(req.db_url, env.fingerprint), of_check(host))
    runner = Runner(setup, judge, candidates, measuring, side_of, max_steps=req.max_steps,
                    max_processes=req.max_processes or 4 * max(1, _first(metric, measuring)),
                    fixed=fixed)
    stage = staging(req.out)
    try:
        refusal = runner.ends()
        report = _report(req, metric, runner, measuring, refusal)
        _write(req.out, report, stage)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    if refusal is not None:
        raise NotReproduced(f"{refusal}; nothing bisected (the report is in {req.out})")
    return report


def _first(metric: Metric, m: Measuring) -> int:
    return m.cold_processes if metric.name == "cold-compile" else m.timing_processes


def _report(req: BisectRequest, metric: Metric, runner: Runner, measuring: Measuring,
            refusal: str | None) -> BisectReport:
    """Bisect (unless refused), look inside the first bad where asked, and say it all."""
    compiler = flags = None
    outcome = "not_reproduced"
    if refusal is None:
        complete = runner.bisect()
        search = runner.search
        outcome = "found" if search.found else ("range" if complete else "out_of_steps")
        if search.found and metric.kind == "accuracy" and req.compiler_bisect:
            compiler = _inside(req, runner, measuring, search.first_bad)
        if search.found and req.config_flags:
            flags = bisect_flags(runner, search.last_good, search.first_bad)
    search = runner.search
    done = refusal is None
    return BisectReport(
        mode="builds" if req.pythons is not None else "commits", metric=metric.name,
        metric_label=metric.label, models=list(req.models),
        repository=runner.setup.repository, device=measuring.device,
        good=req.good or runner.candidates[0].python or "",
        bad=req.bad or runner.candidates[-1].python or "",
        candidates=_labelled(runner), steps=runner.steps, outcome=outcome,
        first_bad=search.first_bad if done and search.found else None,
        last_good=search.last_good if done else None,
        suspects=search.suspects() if done else [],
        compiler=compiler, flags=flags,
        notes=[*runner.notes, *([refusal] if refusal else [])],
        command=_command(req, metric, measuring, runner.candidates, runner.fixed),
        started_at=runner.setup.started,
        finished_at=now())


def _inside(req: BisectRequest, runner: Runner, measuring: Measuring,
            first_bad: int) -> CompilerFinding:
    """torch's CompilerBisector on the first regressed model, in the first bad candidate."""
    side = runner.side_of("bisector", runner.candidates[first_bad])
    finding = compiler_bisect(runner.setup, side, runner.regressed[0], measuring)
    if len(runner.regressed) > 1:
        runner.notes.append(f"the compiler bisector ran on {finding.model} only, of "
                            f"{len(runner.regressed)} models that regressed")
    return finding


def _labelled(runner: Runner) -> list[Candidate]:
    """Builds named by the torch their interpreter said it has, where one was asked."""
    envs = runner.setup.environments
    return [with_torch(c, envs[c.python].torch) if c.python in envs else c
            for c in runner.candidates]


def _command(req: BisectRequest, metric: Metric, measuring: Measuring,
             candidates: list[Candidate], fixed: str) -> str:
    """The command that runs this bisection again: the ends as the commits they resolved to
    (``main`` moves), the builds' file as given."""
    return bisect_line(good=candidates[0].commit or "", bad=candidates[-1].commit or "",
                       models=req.models, metric=metric.name,
                       pythons=str(req.pythons) if req.pythons else None,
                       commit=fixed or None, suites=req.suites, device=measuring.device,
                       tasks=req.measure.tasks, repo=os.fspath(req.repo))


def _write(out: Path, report: BisectReport, stage: Path) -> None:
    write_outdir(out, {"bisect.json": rendering.render_json(report),
                       "bisect.md": rendering.render_markdown(report),
                       "bisect.html": rendering.render_html(report)}, stage)
