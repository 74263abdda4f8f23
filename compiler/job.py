"""One side's job in the measuring loop: one (model, config) of one side, its processes, their
cache dirs and outputs, and what is still to run (``SideJob.pending``).

Per job it runs ``cold_processes`` cold compiles (each a fresh process on an empty cache dir;
the first one also records breaks, recompiles, cache keys and accuracy), then
``timing_processes`` timing processes, each on a warm cache dir left by a cold compile (timing
process k on cold compile ((k - 1) mod cold_processes) + 1's, so each times its own compile's
kernels: what a cold compile picked, such as each Triton kernel's autotuned config, varies
between processes the interval sees, not one a whole side shares), each timing steady state and
giving a warm compile sample; where asked, a warm start from a cache artifact; and with a shared
compile cache, a remote phase on an empty cache dir that reads it (``compiler/remotecache.py``),
after a trusted run stored the first cold compile's graphs there.
"""

from __future__ import annotations

import bisect
import gzip
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compilewatch.compiler import artifacts, remotecache, remotestore
from compilewatch.compiler.assemble import Outputs, assemble
from compilewatch.compiler.lanes import Kind, Task
from compilewatch.compiler.plan import Job
from compilewatch.compiler.protocol import Phase, WorkerOutput, WorkerSpec
from compilewatch.core.errors import CacheArtifactError, CompilewatchError
from compilewatch.core.runinfo import DEFAULT_BLOCK_MS, DEFAULT_ROUNDS, DEFAULT_TIMEOUT_S
from compilewatch.core.schema import (
    STATUS_OF,
    CacheCounters,
    Category,
    ModelResult,
)
from compilewatch.suites.imports import SideCode


@dataclass(frozen=True)
class WarmCache:
    """Where to look for published cache artifacts, and the environment they must match."""

    root: Path
    fingerprint: str
    torch_version: str
    trusted_keys: tuple[str, ...] = ()  # public keys whose signed manifests may be loaded


@dataclass(frozen=True)
class RunOptions:
    """How to measure one side; one object handed down instead of loose flags."""

    rounds: int = DEFAULT_ROUNDS
    block_ms: float = DEFAULT_BLOCK_MS
    timeout_s: float = DEFAULT_TIMEOUT_S
    cold_processes: int = 1
    timing_processes: int = 1  # 0: the first cold process times steady state itself
    measure: bool = True  # time steady state at all (False: compile and check only)
    cache_root: Path | None = None  # reuse (not cold) when set
    python: str = ""
    extra_env: dict[str, str] = field(default_factory=dict)
    artifact_dir: Path | None = None  # save each first cold compile's artifact here, verify it
    warm_cache: WarmCache | None = None  # load a published artifact for a warm-start compile
    pin_cpus: tuple[int, ...] = ()  # timing processes run on these cores
    gpu_warmup_s: float = 0.0
    ready_compile_workers: bool = False  # compile workers ready before a compile's clock
    preload_compile_path: bool = False  # protocol.COMPILE_PATH imported before any compile
    # keep each first cold compile's structured trace (gzip) in this folder; results name it
    # relative to ``diagnostics_base``
    diagnostics_dir: Path | None = None
    diagnostics_base: Path | None = None
    # this side's checkout (scans record what a model reads under it) and the user's own
    # (reads from there mean an installed copy of the project is measured on both sides)
    watch_root: Path | None = None
    home_root: Path | None = None
    # this side's own code: its folders first on sys.path in every worker, and a refusal of
    # the repository's modules imported from elsewhere (``suites/imports.py``)
    code: SideCode | None = None
    # the shared compile cache: a remote phase per model reads it; with a writer (a trusted
    # run) the first cold compile's graphs are stored there first
    remote: remotestore.SharedCache | None = None

    @property
    def executable(self) -> str:
        return self.python or sys.executable

    def times_in_cold(self, kind: Kind, index: int) -> bool:
        """With no timing process (``--no-warm``) the first cold process times steady state."""
        return kind == "cold" and index == 1 and self.measure and self.timing_processes == 0

    def own(self, kind: Kind) -> int:
        """How many cold or timing processes a side runs before any follow-up: a follow-up's
        processes are numbered after them."""
        return self.cold_processes if kind == "cold" else self.timing_processes


@dataclass(frozen=True)
class JobRun:
    """A job's result, plus the cache artifact its cold compile saved and the verdict on it."""

    result: ModelResult
    artifact: Path | None = None
    artifact_info: dict[str, Any] = field(default_factory=dict)
    rejected: str | None = None  # why the artifact may not be published; None: verified


def precheck(job: Job, opts: RunOptions) -> tuple[Category, str] | None:
    """Skips we can decide without a process: wrong device, missing packages."""
    if job.config.device not in job.spec.devices:
        return Category.UNSUPPORTED, f"skipped: {job.spec.name} does not run on " \
                                     f"{job.config.device}"
    if not opts.python or os.path.realpath(opts.python) == os.path.realpath(sys.executable):
        missing = job.spec.missing_packages()
        if missing:
            return Category.PACKAGE_MISSING, f"skipped: package not installed: " \
                                             f"{', '.join(missing)}"
    return None


@dataclass(frozen=True)
class Where:
    """Where the loop runs a job's process: its cores and the device lock."""

    compile_cpus: tuple[int, ...] = ()  # where it compiles (timing: where it prepares)
    compile_threads: int | None = None
    device_lock: str | None = None
    gpu: int | None = None  # the GPU lane it runs in (None: the one device)
    pin_cpus: tuple[int, ...] = ()  # where a timing process times: its lane's cores


@dataclass
class SideJob:
    """One (side, job) in flight. ``pending`` counts its tasks queued or held, not finished;
    only its methods change it."""

    side: str
    job: Job
    opts: RunOptions
    order: int
    workdirs: Callable[[str], Path]  # a folder of the run's, by name (``Launcher.workdir``)
    # timing processes it may run, a follow-up's included: which cold caches are kept
    most_timing: int = 0
    outputs: Outputs = field(default_factory=Outputs)
    cache_dir: Path = Path()
    was_empty: bool = True
    planned: bool = False  # the tasks after the first cold compile are planned
    artifact: Path | None = None
    rejected: str | None = None
    done: bool = False
    result: JobRun | None = None
    followed_up: bool = False  # asked once whether more processes would settle it
    profile_asked: bool = False  # asked once whether a profile process should run
    # the suite whose eager model this job's timing processes also time (``Pairing.reference``)
    reference: str | None = None
    cold_dirs: dict[int, Path] = field(default_factory=dict)  # kept caches of cold compiles 2..
    cold_order: list[int] = field(default_factory=list)  # the index of each of outputs.cold
    held: dict[int, list[int]] = field(default_factory=dict)  # cold index -> timing waiting on it
    _pending: int = 0

    # --- what is still to run ----------------------------------------------------------

    @property
    def pending(self) -> int:
        return self._pending

    @property
    def idle(self) -> bool:
        """Planned, and nothing queued or held."""
        return self.planned and self._pending == 0

    def queued(self) -> None:
        self._pending += 1

    def ended(self) -> None:
        self._pending -= 1

    def dropped(self, n: int) -> None:
        self._pending -= n

    def hold(self, cold: int, k: int) -> None:
        """Timing process ``k`` waits for cold compile ``cold``'s cache."""
        self.held.setdefault(cold, []).append(k)
        self._pending += 1

    def release(self, cold: int) -> list[int]:
        """Cold compile ``cold`` ended: the timing processes that waited for its cache, to
        queue now (on the first cold compile's cache if it failed)."""
        ks = self.held.pop(cold, [])
        self._pending -= len(ks)
        return ks

    def drop_held(self) -> None:
        self._pending -= sum(len(ks) for ks in self.held.values())
        self.held.clear()

    def plan_rest(self) -> list[tuple[Kind, int]]:
        """After the first cold compile: the other cold compiles, the timing processes (those
        whose cache is not compiled yet held until it is), and a warm start; what to queue."""
        self.planned = True
        opts, first = self.opts, self.outputs.cold[0]
        if not first.ok:
            if opts.artifact_dir is not None:
                self.rejected = "the cold compile failed; nothing to save"
            return []
        tasks: list[tuple[Kind, int]] = [("cold", i) for i in range(2, opts.cold_processes + 1)]
        if opts.measure:
            for k in range(1, opts.timing_processes + 1):
                c = self.timing_cache(k)
                if c == 1:
                    tasks.append(("timing", k))
                else:  # its cache is not compiled yet: queued when cold compile c ends
                    self.hold(c, k)
        if opts.artifact_dir is not None and first.artifact and first.artifact.sha256:
            self.artifact = self.artifact_path()
            tasks.append(("warm_start", 1))
        elif opts.artifact_dir is not None:
            self.rejected = (first.artifact.unsupported if first.artifact else None) \
                or "the cold compile saved no artifact"
        elif opts.warm_cache is not None:
            tasks.append(("warm_start", 1))
        if opts.remote is not None:
            tasks.append(("remote", 1))
        return tasks

    # --- cache dirs and folders ------------------------------------------------------------

    @property
    def stem(self) -> str:
        j = self.job
        return artifacts.job_stem(j.suite.name, j.spec.name, j.config.slug)

    def prepare_dir(self) -> None:
        if self.opts.cache_root is not None:
            self.cache_dir = self.opts.cache_root / self.stem
        else:
            self.cache_dir = self.workdirs(f"{self.side}-{self.stem}") / "inductor-cache"
        self.was_empty = not self.cache_dir.exists() or not any(self.cache_dir.iterdir())
        self.cache_dir.mkdir(parents=True, exist_ok=True)

    def keeps(self, index: int) -> bool:
        """Whether cold compile ``index``'s cache is kept for timing processes: only if one (a
        follow-up's included) will run on it, and not with a reused cache root, whose
        compiles are not cold."""
        opts = self.opts
        return opts.measure and opts.timing_processes > 0 and opts.cache_root is None \
            and index <= min(self.most_timing, opts.cold_processes)

    def timing_cache(self, k: int) -> int:
        """Which cold compile's cache timing process ``k`` runs on (``c <= k``, so a kept
        one)."""
        c = (k - 1) % self.opts.cold_processes + 1
        return c if self.keeps(c) else 1

    def cold_dir(self, index: int) -> Path:
        """The cache dir of cold compile ``index`` > 1 (the first one's is ``cache_dir``): a
        folder of its own, not the process's folder (``Launcher.run`` writes the spec and the
        log there, which an empty cache must not hold)."""
        return self.workdir(f"cold{index}") / "inductor-cache"

    def workdir(self, what: str) -> Path:
        """A folder of this (side, job) only: named for its suite, model and config, so two
        configs of one model never share one."""
        return self.workdirs(f"{self.side}-{self.stem}-{what}")

    def artifact_path(self) -> Path:
        assert self.opts.artifact_dir is not None
        j = self.job
        return self.opts.artifact_dir / artifacts.artifact_name(j.suite.name, j.spec.name,
                                                                j.config.slug)

    def task_cache(self, task: Task) -> Path:
        kind, index = task.kind, task.index
        if kind == "cold" and index > 1:
            return self.cold_dir(index)
        if kind in ("warm_start", "scan", "remote"):
            return self.workdir(kind)
        if kind == "profile":
            return self.workdir("profile") / "inductor-cache"
        if kind == "timing":
            return self.cold_dirs.get(self.timing_cache(index), self.cache_dir)
        return self.cache_dir

    def profile_cache(self) -> Path:
        """A copy of the first cold compile's warm cache (timing process 1's) for the profile
        process: on a CPU it compiles graphs of its own (``compiler/kernels.py``), and what it
        writes must reach no cache another process reads (a reused ``cache_root`` outlives
        the run)."""
        dest = self.task_cache(Task((), self.side, self.job, "profile", 1))
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(self.cache_dir, dest, symlinks=True)
        return dest

    def drop_cold_dirs(self) -> list[Path]:
        """The kept cold caches, to remove: the job is done."""
        kept, self.cold_dirs = list(self.cold_dirs.values()), {}
        return kept

    # --- its processes ----------------------------------------------------------------------

    def spec(self, task: Task, where: Where, reference_code: SideCode | None) -> WorkerSpec:
        """The worker's task."""
        opts, job, kind, index, times = self.opts, self.job, task.kind, task.index, task.timing
        phase: Phase = "warm" if kind == "timing" else kind
        scan = kind == "scan"
        first_cold = kind == "cold" and index == 1
        first_timing = (kind == "timing" and index == 1) or (times and kind == "cold")
        save = str(self.artifact_path()) if first_cold and opts.artifact_dir is not None \
            else None
        trace = str(self.workdir("trace")) if first_cold and opts.diagnostics_dir is not None \
            else None
        referenced = kind == "timing" and self.reference is not None
        shared = opts.remote
        kernel_trace = str(self.workdir("profile") / "kernels.json") if kind == "profile" \
            else None
        return WorkerSpec(
            suite=job.suite.source, model=job.spec.name, config=job.config, phase=phase,
            trace_dir=trace, kernel_trace=kernel_trace,
            large=job.config.device == "cuda", rounds=opts.rounds, block_ms=opts.block_ms,
            time_steady_state=times and kind != "profile", measure_memory=first_timing,
            check_accuracy=first_cold or kind in ("warm_start", "remote"),
            save_artifact=save, pin_cpus=where.pin_cpus if times else where.compile_cpus,
            device_lock=where.device_lock, gpu=where.gpu,
            prepare_cpus=where.compile_cpus if times else (),
            compile_threads=where.compile_threads,
            ready_compile_workers=opts.ready_compile_workers,
            preload_compile_path=opts.preload_compile_path,
            gpu_warmup_s=opts.gpu_warmup_s if times else 0.0,
            watch_root=str(opts.watch_root) if scan and opts.watch_root else None,
            home_root=str(opts.home_root) if scan and opts.home_root else None,
            reference_suite=self.reference if kind == "timing" else None,
            reference_code=reference_code if referenced else None,
            remote_read=shared.read if shared is not None and kind == "remote" else None,
            remote_outbox=str(self.workdir("outbox"))
            if first_cold and shared is not None and shared.writer is not None else None,
            code=opts.code, out="", status_file="")

    def artifact_for(self, private: Path) -> Path | None:
        """The artifact a warm start loads: the one just saved (nightly), or a published one,
        checked; a refused one is a note and the run stays cold."""
        if self.artifact is not None:
            return self.artifact
        wc = self.opts.warm_cache
        assert wc is not None
        try:
            return artifacts.select(wc.root, suite=self.job.suite.name,
                                    model=self.job.spec.name, slug=self.job.config.slug,
                                    fingerprint=wc.fingerprint, torch_version=wc.torch_version,
                                    trusted_keys=wc.trusted_keys, private=private)
        except CacheArtifactError as e:
            self.outputs.notes.append(f"warm cache refused: {e}")
            return None

    def record_cold(self, index: int, output: WorkerOutput) -> None:
        """In index order (the first one always ends first), so that base's and head's cold
        compile i pair up however the ones beside each other finished."""
        at = bisect.bisect(self.cold_order, index)
        self.cold_order.insert(at, index)
        self.outputs.cold.insert(at, output)
        if index == 1:
            self.outputs.trace = self.keep_trace()
        elif output.ok and self.keeps(index):  # timing processes run on it
            self.cold_dirs[index] = self.cold_dir(index)

    def record_warm_start(self, output: WorkerOutput) -> None:
        self.outputs.warm_start = output
        problem = artifacts.judge(output)
        if self.artifact is not None:
            self.rejected = problem
        elif problem:
            self.outputs.notes.append(f"warm start from the published artifact: {problem}")

    def record_remote(self, output: WorkerOutput) -> None:
        """The remote phase: its compile is a measurement of the shared cache, never the
        model's status; what went wrong is a note."""
        if not output.ok:
            self.outputs.notes.append(f"the shared compile cache's phase failed "
                                      f"({output.category.value}): {(output.error or '')[-300:]}")
        elif output.accuracy is not None and output.accuracy.passed is False:
            self.outputs.notes.append("compiled from the shared compile cache, the output "
                                      f"differs from eager: {output.accuracy.reason or ''}")
        self.outputs.notes.extend(n for n in output.notes if n.startswith(remotecache.NOTE))
        self.outputs.remote = output

    def stored(self, output: WorkerOutput, outbox: Path) -> WorkerOutput:
        """A trusted run's first cold compile, its graphs signed and stored in the shared
        cache (``fx_remote_put``); a cache that fails is a note, never the model's failure."""
        writer = self.opts.remote.writer if self.opts.remote is not None else None
        try:
            if writer is None or not output.ok:
                return output
            n = remotestore.store(outbox, writer)
        except (CompilewatchError, OSError) as e:
            return output.model_copy(update={"notes": [*output.notes,
                                                       f"the shared compile cache: {e}"][:64]})
        finally:
            shutil.rmtree(outbox, ignore_errors=True)
        counters = (output.counters or CacheCounters()).model_copy(update={"fx_remote_put": n})
        return output.model_copy(update={"counters": counters})

    def timed(self) -> bool:
        """Steady state was timed (a timing process, or a cold one with ``--no-warm``), and
        not skipped: a profile process has compiled code to profile."""
        if self.outputs.timing_skipped or self.outputs.compile_skipped:
            return False
        return any(o.ok and o.latency is not None
                   for o in [*self.outputs.cold, *self.outputs.timing])

    def record_profile(self, output: WorkerOutput, seconds: float) -> None:
        """The profile process's output (with its wall time, what it added to the run), its
        chrome trace gzipped into the diagnostics folder (``kernels.trace.json.gz``, which
        Perfetto opens); a failed one is a note, as a follow-up's is: the model was measured
        without it."""
        if output.kernels is not None:
            output = output.model_copy(update={"kernels": output.kernels.model_copy(
                update={"process_s": seconds})})
        self.outputs.profile = output
        if not output.ok:
            self.outputs.notes.append(f"kernel profile failed ({output.category.value}): "
                                      f"{(output.error or '')[-300:]}")
            return
        self.outputs.kernel_trace = self.keep(self.workdir("profile") / "kernels.json",
                                              name="kernels.trace.json.gz")

    def follow_up_failed(self, task: Task, output: WorkerOutput | None) -> bool:
        """A follow-up's process (past the side's own cold or timing processes) that failed:
        a note, not the model's status; the model passed with the processes its first
        verdict had, and a follow-up only adds evidence. True: left out."""
        if output is None or output.ok or task.index <= self.opts.own(task.kind):
            return False
        what = "cold compile" if task.kind == "cold" else "timing process"
        self.outputs.notes.append(f"follow-up {what} {task.index} failed "
                                  f"({output.category.value}), left out: "
                                  f"{(output.error or '')[-300:]}")
        return True

    def keep_trace(self) -> str | None:
        """The first cold compile's trace, gzipped into the diagnostics folder; its path relative
        to ``diagnostics_base`` (None: nothing was asked for, or torch wrote none)."""
        trace = self.workdir("trace")
        return self.keep(*sorted(p for p in trace.iterdir() if p.is_file()),
                         name="cold.trace.gz")

    def keep(self, *files: Path, name: str) -> str | None:
        """``files`` gzipped, one after the other, into the diagnostics folder as ``name``; its
        path relative to ``diagnostics_base`` (None: nothing was asked for, or no file)."""
        opts = self.opts
        files = tuple(f for f in files if f.is_file())
        if opts.diagnostics_dir is None or not files:
            return None
        dest = opts.diagnostics_dir / self.stem / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(dest, "wb") as out:
            for log in files:
                with open(log, "rb") as f:
                    shutil.copyfileobj(f, out)
        return os.path.relpath(dest, opts.diagnostics_base or opts.diagnostics_dir)

    # --- its result ----------------------------------------------------------------------

    def so_far(self, cold_concurrent: bool) -> ModelResult:
        """The job's result from the processes so far (its final one at the end)."""
        job = self.job
        base = {"model": job.spec.name, "suite": job.suite.name, "config": job.config,
                "tags": list(job.spec.tags)}
        self.outputs.cold_concurrent = cold_concurrent
        return assemble(base, self.outputs, self.was_empty)

    def finished(self, cold_concurrent: bool) -> JobRun:
        result = self.so_far(cold_concurrent)
        saved = self.artifact if self.artifact is not None and self.artifact.is_file() else None
        first = self.outputs.cold[0] if self.outputs.cold else None
        info = first.artifact.model_dump(exclude_none=True) if first and first.artifact else {}
        rejected = self.rejected if self.opts.artifact_dir is not None else None
        return JobRun(result, saved, info, rejected)

    def skipped(self, category: Category, why: str) -> JobRun:
        job = self.job
        result = ModelResult(model=job.spec.name, suite=job.suite.name, config=job.config,
                             tags=list(job.spec.tags), status=STATUS_OF[category],
                             category=category, error=why)
        self.planned = True
        return JobRun(result)
