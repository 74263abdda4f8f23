"""One job measured on its own, or one artifact verified: the loop of ``compiler/schedule.py``
for a single (model, config), for tests and benchmarks."""

from __future__ import annotations

import sys
from pathlib import Path

from compilewatch.compiler import artifacts
from compilewatch.compiler.job import JobRun, RunOptions, WarmCache
from compilewatch.compiler.plan import Job
from compilewatch.compiler.processes import Isolation, Launch, Launcher, worker_env
from compilewatch.compiler.protocol import WorkerOutput, WorkerSpec
from compilewatch.compiler.schedule import LoopSettings, OnEvent, SideJobs, measure_jobs
from compilewatch.core.schema import ModelResult

__all__ = ["JobRun", "RunOptions", "WarmCache", "profile_job", "run_job", "run_job_full",
           "verify_artifact"]


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
