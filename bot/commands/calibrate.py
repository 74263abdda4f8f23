"""``compilewatch calibrate``: learn each model's noise on this runner.

The same code is measured with many processes (``--processes``, ``--cold-processes``), and per
model the spread between processes is kept as a noise band: the standard deviation of the log
of each timing process's median compiled time (raw, and as compiled/eager per round, which is
what unchanged launch-bound models are judged on), of each cold compile and of each warm
compile, with its degrees of freedom. With several ``--sides`` (each its own cold compiles and
warm cache, as a pr's base and head) the process bands are pooled over the sides, and how much
more the sides differ than their processes predict is kept too (``compiled_time_shared``):
noise every process of one side shares, which a verdict's interval then carries. The bands
are stored for this environment (fingerprint)
and every later ``compare``/``pr``/``post`` with the same database judges that model with them
instead of the defaults (``bot/judge/stats.py``): a noisy model needs a larger change before a
verdict, a quiet one gets a tighter band.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.bot.judge.project import load_project_config
from compilewatch.bot.measure.harness import (
    MeasureOptions,
    OnProgress,
    suite_sources,
)
from compilewatch.bot.measure.outcome import check_own_code
from compilewatch.bot.measure.side import Checkout, measure_side
from compilewatch.compiler.processes import Launcher
from compilewatch.compiler.schedule import MakeWorkers
from compilewatch.core import estimates
from compilewatch.core.errors import UsageError
from compilewatch.core.estimates import Prior
from compilewatch.core.schema import Latency, ModelResult, RunResults, Status
from compilewatch.db import connect, save_noise_bands, store_runs

Ident = tuple[str, str, str]
DEFAULT_PROCESSES = {"cuda": 8, "cpu": 4}
# Independent measurements of the same code, each with its own cold compiles and caches, as a
# pr's two sides are: what a side's processes share varies only between them, and has been seen
# only on the GPU (docs/verdict-quality.md, "The measurements behind the judging rules").
DEFAULT_SIDES = {"cuda": 3, "cpu": 1}


@dataclass(frozen=True)
class CalibrateRequest:
    """What ``compilewatch calibrate`` was asked to do."""

    suites: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    db_url: str | None = None
    repo: Path = Path(".")
    python: str = sys.executable
    measure: MeasureOptions = field(default_factory=MeasureOptions)
    sides: int | None = None  # None: DEFAULT_SIDES for the device


def _timing_groups(lat: Latency) -> dict[str, list[list[float]]]:
    """Each timing process's samples, per metric whose noise is learned from them."""
    return {"compiled_time": [c for _, c in lat.per_process()],
            "compiled_time_normalised": lat.normalised_per_process()}


def bands_of(result: ModelResult) -> dict[str, Prior]:
    """The noise bands one result's processes show (metrics with fewer than two processes are
    left out)."""
    if result.status is not Status.PASS:
        return {}
    out: dict[str, Prior | None] = {}
    if result.latency is not None:
        out.update({m: estimates.spread(g) for m, g in _timing_groups(result.latency).items()})
    # one compile sample a process
    out["cold_compile"] = estimates.spread([[x] for x in result.compile.cold_samples_s])
    out["warm_compile"] = estimates.spread([[x] for x in result.compile.warm_samples_s])
    return {k: v for k, v in out.items() if v is not None}


def shared_bands(results: list[ModelResult]) -> dict[str, Prior]:
    """The noise a side's timing processes share, from one model's result on each side
    (``estimates.shared_spread``), for compiled time raw and eager-normalised."""
    sides = [_timing_groups(r.latency) for r in results
             if r.status is Status.PASS and r.latency is not None]
    if len(sides) < 2:
        return {}
    out = {f"{metric}_shared": estimates.shared_spread([side[metric] for side in sides])
           for metric in sides[0]}
    return {k: v for k, v in out.items() if v is not None}


def model_bands(results: list[ModelResult]) -> dict[str, Prior]:
    """A model's bands from its result on every side: each metric's process spread pooled over
    the sides, and with two sides or more what a side's processes share."""
    per_side = [bands_of(r) for r in results]
    metrics = sorted({m for b in per_side for m in b})
    out = {m: p for m in metrics
           if (p := estimates.pooled([b[m] for b in per_side if m in b]))}
    return {**out, **shared_bands(results)} if out else {}


def calibrate_command(req: CalibrateRequest, *, progress: OnProgress | None = None,
                      launcher: MakeWorkers = Launcher
                      ) -> tuple[list[RunResults], dict[Ident, dict[str, Prior]]]:
    """Measure the checkout on ``sides`` independent sides of many processes each, store the
    runs (one a side) and the noise bands."""
    device = req.measure.device
    sides = req.sides or DEFAULT_SIDES.get(device, 1)
    if sides < 1:
        raise UsageError(f"--sides must be at least 1, not {sides}")
    n = max(2, math.ceil(DEFAULT_PROCESSES.get(device, 4) / sides))
    # measure_all: two sides of the same code are not a base and a head, whose equal keys
    # would let the loop skip the timing calibration exists for; no profile process: a noise
    # band is learned from timing alone; an explicit count stands, 0 timing processes (cold
    # compiles' bands only) included
    asked = req.measure
    project = load_project_config(req.repo)  # read once: tasks, suites, import paths
    options = MeasureOptions(**{
        **asked.__dict__,
        "timing_processes": n if asked.timing_processes is None else asked.timing_processes,
        "cold_processes": n if asked.cold_processes is None else asked.cold_processes,
        "measure_all": True, "profile_kernels": False}).resolve(tuple(project.tasks))
    names = tuple(f"run{i + 1}" for i in range(sides)) if sides > 1 else ("run",)
    measured = measure_side(
        Checkout(req.repo, suite_sources(req.suites, req.repo, project), python=req.python,
                 models=req.models, allow_installed=options.allow_installed, names=names,
                 project=project, db_url=req.db_url),
        options, progress=progress, launcher=launcher)
    runs = [measured.results[name] for name in names]
    check_own_code(*runs)
    by_model: dict[Ident, list[ModelResult]] = {}
    for run in runs:
        for r in run.results:
            by_model.setdefault(r.ident, []).append(r)
    bands = {ident: b for ident, rs in by_model.items() if (b := model_bands(rs))}
    store_runs(req.db_url, *runs)
    with connect(req.db_url) as db:
        save_noise_bands(db, fingerprint=runs[0].environment.fingerprint,
                         run_id=runs[0].run_id, bands=bands)
    return runs, bands
