"""One job measured on its own, one artifact verified, or what models read: the loop of
``compiler/schedule.py`` for a single (model, config), or its processes on their own, for tests
and benchmarks."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterable
from pathlib import Path

from compilewatch.compiler import artifacts
from compilewatch.compiler.job import JobRun, RunOptions, WarmCache
from compilewatch.compiler.plan import Job
from compilewatch.compiler.processes import Isolation, Launch, Launcher, worker_env
from compilewatch.compiler.protocol import Reads, WorkerOutput, WorkerSpec
from compilewatch.compiler.schedule import LoopSettings, OnEvent, SideJobs, measure_jobs
from compilewatch.core.schema import Config, ModelResult
from compilewatch.suites.imports import SideCode

__all__ = ["JobRun", "RunOptions", "WarmCache", "profile_job", "run_job", "run_job_full",
           "scan_reads", "verify_artifact"]


def run_job_full(job: Job, opts: RunOptions, on_event: OnEvent = lambda _: None,
                 isolation: Isolation = "fork", compile_slots: int = 1) -> JobRun:
    """Measure one (model, config) with ``opts``: its result, and its artifact when asked."""
    side = SideJobs("run", [job], opts)
    settings = LoopSettings(isolation=isolation, compile_slots=compile_slots)
    return measure_jobs([side], settings, on_event)["run"][0]


def run_job(job: Job, opts: RunOptions, isolation: Isolation = "fork") -> ModelResult:
    return run_job_full(job, opts, isolation=isolation).result


def verify_artifact(job: Job, artifact: Path, opts: RunOptions,
                    isolation: Isolation = "fork") -> tuple[WorkerOutput, str | None]:
    """Load ``artifact`` for ``job`` in a fresh process on an empty cache dir; the outcome and
    why the artifact is refused (``artifacts.judge``; None: verified). The nightly makes the
    same check on each artifact it saves."""
    with Launcher(isolation, needs_cuda=job.config.device == "cuda") as launcher:
        cache = launcher.workdir("verify") / "inductor-cache"
        spec = WorkerSpec(suite=job.suite.source, model=job.spec.name, config=job.config,
                          phase="warm_start", large=job.config.device == "cuda",
                          rounds=opts.rounds, block_ms=opts.block_ms, check_accuracy=True,
                          load_artifact=str(artifact), out="", status_file="")
        python = opts.python or sys.executable
        output, _ = launcher.run(Launch(spec, worker_env(cache, opts.extra_env), opts.timeout_s,
                                        python, "verify"), lambda _: None)
    return output, artifacts.judge(output)


def scan_reads(suite: str, models: Iterable[str], code: SideCode, launcher: Launcher
               ) -> dict[str, Reads]:
    """What each of ``models`` reads of ``code``'s checkout: a real scan process each, as
    ``pr`` runs them before anything is compiled. Raises where a scan fails."""
    found = {}
    for model in models:
        spec = WorkerSpec(suite=suite, model=model, config=Config(), phase="scan", large=False,
                          rounds=1, block_ms=1.0, watch_root=code.root, home_root=code.home,
                          code=code, out="", status_file="")
        name = f"scan-{uuid.uuid4().hex[:8]}-{model}"
        output, _ = launcher.run(Launch(spec, worker_env(launcher.workdir(name)), 120,
                                        sys.executable, name), lambda _: None)
        assert output.ok and output.reads is not None, output.error
        found[model] = output.reads
    return found


def profile_job(job: Job, cache: Path, trace: Path, isolation: Isolation = "fork",
                timeout_s: float = 600.0, extra_env: dict[str, str] | None = None
                ) -> WorkerOutput:
    """``job``'s profile process alone, on ``cache`` (empty: it compiles; a cold compile's:
    it loads), its chrome trace written to ``trace``."""
    with Launcher(isolation, needs_cuda=job.config.device == "cuda") as launcher:
        spec = WorkerSpec(suite=job.suite.source, model=job.spec.name, config=job.config,
                          phase="profile", large=job.config.device == "cuda", rounds=1,
                          block_ms=1.0, kernel_trace=str(trace), out="", status_file="")
        output, _ = launcher.run(Launch(spec, worker_env(cache, extra_env or {}), timeout_s,
                                        sys.executable,
                                        f"profile-{job.spec.name}"), lambda _: None)
    return output
