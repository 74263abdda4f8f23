"""``compilewatch calibrate``: learn each model's noise on this runner.

The same code is measured with many processes (``--processes``, ``--cold-processes``), and per
model the spread between processes is kept as a noise band: the standard deviation of the log
of each timing process's median compiled time (raw, and as compiled/eager per round, which is
what unchanged launch-bound models are judged on), of each cold compile and of each warm
compile, with its degrees of freedom. The bands are stored for this environment (fingerprint)
and every later ``compare``/``pr``/``post`` with the same database judges that model with them
instead of the defaults (``bot/judge/stats.py``): a noisy model needs a larger change before a
verdict, a quiet one gets a tighter band.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from compilewatch.bot.checkout import git as gitutil
from compilewatch.bot.measuring import (
    MeasureOptions,
    build_results,
    collect_environment,
    host_check,
    measure_sides,
    now,
    suite_sources,
)
from compilewatch.compiler.plan import plan_jobs
from compilewatch.compiler.schedule import Side
from compilewatch.core import estimates
from compilewatch.core.estimates import Prior
from compilewatch.core.schema import ModelResult, RunResults, Status
from compilewatch.db import connect, save_noise_bands, store_runs
from compilewatch.suites.loader import resolve_suites

Ident = tuple[str, str, str]
DEFAULT_PROCESSES = {"cuda": 8, "cpu": 4}


@dataclass(frozen=True)
class CalibrateRequest:
    """What ``compilewatch calibrate`` was asked to do."""

    suites: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    db_url: str | None = None
    repo: Path = Path(".")
    python: str = sys.executable
    measure: MeasureOptions = field(default_factory=MeasureOptions)


def bands_of(result: ModelResult) -> dict[str, Prior]:
    """The noise bands one result's processes show (metrics with fewer than two processes are
    left out)."""
    if result.status is not Status.PASS:
        return {}
    out: dict[str, Prior | None] = {}
    if result.latency is not None:
        per = result.latency.per_process()
        out["compiled_time"] = estimates.spread([c for _, c in per])
        out["compiled_time_normalised"] = estimates.spread([
            [c / e for e, c in zip(eager, comp, strict=False) if e > 0] for eager, comp in per])
    # one compile sample a process
    out["cold_compile"] = estimates.spread([[x] for x in result.compile.cold_samples_s])
    out["warm_compile"] = estimates.spread([[x] for x in result.compile.warm_samples_s])
    return {k: v for k, v in out.items() if v is not None}


def calibrate_command(req: CalibrateRequest) -> tuple[RunResults, dict[Ident, dict[str, Prior]]]:
    """Measure the checkout with many processes, store the run and its noise bands."""
    n = DEFAULT_PROCESSES.get(req.measure.device, 4)
    options = MeasureOptions(**{**req.measure.__dict__,
                                "timing_processes": req.measure.timing_processes or n,
                                "cold_processes": req.measure.cold_processes or n})
    options.check()
    sources = suite_sources(req.suites, req.repo)
    jobs = plan_jobs(resolve_suites(sources), device=options.device, models=req.models)
    env = collect_environment(req.python)
    started = now()
    measured = measure_sides([Side("run", jobs, options.run_options(req.python))], options)
    results = build_results([j.result for j in measured["run"]], env=env,
                            git=gitutil.head_info(req.repo), sources=sources, options=options,
                            started=started, run_id=uuid.uuid4().hex,
                            host=host_check(options.device, req.python))
    bands = {r.ident: b for r in results.results if (b := bands_of(r))}
    store_runs(req.db_url, results)
    with connect(req.db_url) as db:
        save_noise_bands(db, fingerprint=env.fingerprint, run_id=results.run_id, bands=bands)
    return results, bands
