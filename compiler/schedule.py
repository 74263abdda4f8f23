"""The one measuring loop: jobs of one or two sides in, ``JobRun``s out. ``run``, ``nightly``
and ``pr`` all measure through ``measure``.

Per (model, config) and side it runs ``cold_processes`` cold compiles (each a fresh process on an
empty cache dir; the first one also records breaks, recompiles, cache keys and accuracy), then
``timing_processes`` timing processes, each on a warm cache dir left by a cold compile (timing
process k on cold compile ((k - 1) mod cold_processes) + 1's, so each times its own compile's
kernels: what a cold compile picked, such as each Triton kernel's autotuned config, varies
between processes the interval sees, not one a whole side shares), each timing steady state and
giving a warm compile sample; and, where asked, a warm start from a cache artifact. With two
sides the processes interleave: base and head alternate (ABBA...), the cold compiles of a pair
run side by side, so host drift hits both alike.

Two lanes: compile-only processes run in a pool of ``compile_slots``; timing processes run one at
a time (the device lock). With ``overlap`` (a GPU run) the lanes run at once: the GPU times one
model while the spare cores compile the next; timing processes are pinned to their own cores and
compiles kept off them, and the other workers' GPU work (builds, eager calls, autotuning
benchmarks) waits while a timing section runs (``compiler/quiet.py``). Without it (a CPU
run, where timing is on the CPU itself) nothing runs beside a timing process, and models are
done one after another.

A model whose compiled code is the same on both sides by construction (one frame, one graph, no
break, equal FX and AOT keys, same environment) is not timed: its result says why
(``timing_skipped``), unless ``measure_all``. Where the loop knows what changed between the sides
(``changed``: a pull request's diff), a cheap scan process per side first records which files of
its checkout the model reads (``compiler/reads.py``); a model that reads none of the changed
files is not measured at all (``compile_skipped``).
"""

from __future__ import annotations

import bisect
import gzip
import heapq
import itertools
import os
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from compilewatch.compiler import artifacts, cpus, unchanged
from compilewatch.compiler.assemble import Outputs, assemble
from compilewatch.compiler.plan import Job
from compilewatch.compiler.processes import Isolation, Launch, Launcher, worker_env
from compilewatch.compiler.protocol import Phase, WorkerOutput, WorkerSpec
from compilewatch.compiler.reads import ChangedFiles
from compilewatch.compiler.worker import COMPILE_PATH
from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.schema import STATUS_OF, Category, ModelResult
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

    rounds: int = 30
    block_ms: float = 20.0
    timeout_s: float = 900.0
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
    preload_compile_path: bool = False  # worker.COMPILE_PATH imported before any compile
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


# (base's result so far, head's) -> why more processes (timing processes, or cold compiles)
# would settle it, or None
FollowUp = Callable[[ModelResult, ModelResult], str | None]


@dataclass(frozen=True)
class LoopSettings:
    """How the loop runs its processes, for all sides alike."""

    isolation: Isolation = "fork"
    compile_slots: int = 1
    overlap: bool = False
    # with overlap: timing processes started at once; each builds and compiles off the timing
    # cores, then waits for the device lock, so the GPU never waits for a process to start
    timing_ahead: int = 2
    # with overlap: each compile slot on cores of its own (``cpus.CoreGroups``), so a cold
    # compile's time does not depend on the compiles beside it
    split_cores: bool = True
    measure_all: bool = False  # time models that are unchanged by construction too
    same_environment: bool = True  # both sides in one interpreter and environment
    changed: ChangedFiles | None = None  # what differs between the two sides' checkouts
    # with two sides: once both sides' timing processes are in, ``follow_up(base, head)`` says
    # why the model needs ``extra_timing`` more timing processes a side (None: it does not)
    follow_up: FollowUp | None = None
    extra_timing: int = 0
    # the same for the cold-compile verdict: once both sides' cold compiles are in,
    # ``cold_follow_up(base, head)`` says why ``extra_cold`` more cold compiles a side would
    # settle it (each on an empty cache, paired as the first ones)
    cold_follow_up: FollowUp | None = None
    extra_cold: int = 0


@dataclass(frozen=True)
class JobRun:
    """A job's result, plus the cache artifact its cold compile saved and the verdict on it."""

    result: ModelResult
    artifact: Path | None = None
    artifact_info: dict[str, Any] = field(default_factory=dict)
    rejected: str | None = None  # why the artifact may not be published; None: verified


@dataclass(frozen=True)
class Side:
    name: str  # "run", "base" or "head"
    jobs: list[Job]
    opts: RunOptions


@dataclass(frozen=True)
class Event:
    """What the loop tells its caller: a process started or changed phase, a model ended, or
    a note about the whole run (``job`` is None: e.g. workers are spawned, not forked)."""

    kind: Literal["phase", "done", "note"]
    side: str
    job: Job | None
    text: str = ""
    run: JobRun | None = None
    finished: int = 0
    total: int = 0


OnEvent = Callable[[Event], None]
Ident = tuple[str, str, str]

# process kinds: a compile-only process, or a timing one (runs in the device lane)
Kind = Literal["scan", "cold", "timing", "warm_start"]


def ident(job: Job) -> Ident:
    return job.suite.name, job.spec.name, job.config.slug


def precheck(job: Job, opts: RunOptions) -> tuple[Category, str] | None:
    """Skips we can decide without a process: wrong device, missing packages."""
    if job.config.device not in job.spec.devices:
        return Category.UNSUPPORTED, f"skipped: {job.spec.name} does not run on " \
                                     f"{job.config.device}"
    if not opts.python or os.path.realpath(opts.python) == os.path.realpath(_executable()):
        missing = job.spec.missing_packages()
        if missing:
            return Category.PACKAGE_MISSING, f"skipped: package not installed: " \
                                             f"{', '.join(missing)}"
    return None


def _executable() -> str:
    import sys

    return sys.executable


@dataclass(order=True)
class _Task:
    priority: tuple[int, ...]
    side: str = field(compare=False)
    job: Job = field(compare=False)
    kind: Kind = field(compare=False)
    index: int = field(compare=False)
    timing: bool = field(compare=False, default=False)  # in the timing lane (the device lock)


@dataclass
class _JobState:
    """One (side, job) in flight."""

    side: Side
    job: Job
    order: int
    outputs: Outputs = field(default_factory=Outputs)
    cache_dir: Path = Path()
    was_empty: bool = True
    pending: int = 0  # tasks submitted or planned, not finished
    planned: bool = False  # the tasks after the first cold compile are planned
    artifact: Path | None = None
    rejected: str | None = None
    done: bool = False
    result: JobRun | None = None
    followed_up: bool = False  # asked once whether more processes would settle it
    # the suite whose eager model this job's timing processes also time (``Loop._reference``)
    reference: str | None = None
    cold_dirs: dict[int, Path] = field(default_factory=dict)  # kept caches of cold compiles 2..
    cold_order: list[int] = field(default_factory=list)  # the index of each of outputs.cold
    held: dict[int, list[int]] = field(default_factory=dict)  # cold index -> timing waiting on it


class Loop:
    """One ``measure`` call's state; see the module docstring for what it does."""

    def __init__(self, sides: Sequence[Side], settings: LoopSettings, on_event: OnEvent,
                 launcher: Launcher, groups: cpus.CoreGroups | None = None) -> None:
        self.sides = {s.name: s for s in sides}
        self.settings = settings
        # with overlap: each compile slot's cores, and the rest for timing processes' preparation
        self.groups = groups
        self.on_event = on_event
        self.launcher = launcher
        self.states: dict[tuple[str, Ident], _JobState] = {}
        self.order: list[Ident] = []
        self.compile_queue: list[_Task] = []
        self.timing_queue: list[_Task] = []
        self.running_compiles = 0
        self.running_timing = 0
        self.finished = 0
        self.results: dict[str, list[JobRun]] = {s.name: [] for s in sides}
        self._seq = itertools.count()
        # removes a done model's kept cold caches off the loop's thread (a large cache takes
        # long enough to delete to hold up the next process, and the GPU with it)
        self._cleaner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cleanup")

    # --- planning ------------------------------------------------------------------------

    def plan(self) -> None:
        idents: dict[Ident, None] = {}
        for side in self.sides.values():
            for job in side.jobs:
                idents.setdefault(ident(job))
        self.order = list(idents)
        for n, key in enumerate(self.order):
            jobs = {side.name: job for side in self._sides_in_order(n)
                    if (job := next((j for j in side.jobs if ident(j) == key), None))}
            scans = self._scans(jobs) and not any(precheck(job, self.sides[name].opts)
                                                   for name, job in jobs.items())
            for name, job in jobs.items():
                side = self.sides[name]
                st = _JobState(side, job, n)
                self.states[(side.name, key)] = st
                skip = precheck(job, side.opts)
                if skip:
                    self._finish_skipped(st, *skip)
                    continue
                self._prepare_dir(st)
                self._push(st, "scan" if scans else "cold", 1)

    def _scans(self, jobs: dict[str, Job]) -> bool:
        """Whether to ask first what the model reads: only with a diff between two sides in one
        environment, and not where the diff touches the suite file itself (its models all
        read it)."""
        changed = self.settings.changed
        if changed is None or self.settings.measure_all or not self.settings.same_environment \
                or len(jobs) != 2 or len(self.sides) != 2:
            return False
        for name, job in jobs.items():
            root = self.sides[name].opts.watch_root
            if root is None:
                return False
            source = Path(job.suite.source)
            if source.is_absolute() and source.is_relative_to(root) \
                    and source.relative_to(root).as_posix() in changed.paths:
                return False
        return True

    def _sides_in_order(self, n: int, k: int = 0) -> list[Side]:
        """Base, head for even rounds, head, base for odd ones (ABBA...)."""
        sides = list(self.sides.values())
        return sides if (n + k) % 2 == 0 else sides[::-1]

    def _prepare_dir(self, st: _JobState) -> None:
        opts, job = st.side.opts, st.job
        stem = artifacts.job_stem(job.suite.name, job.spec.name, job.config.slug)
        if opts.cache_root is not None:
            st.cache_dir = opts.cache_root / stem
        else:
            st.cache_dir = self.launcher.workdir(f"{st.side.name}-{stem}") / "inductor-cache"
        st.was_empty = not st.cache_dir.exists() or not any(st.cache_dir.iterdir())
        st.cache_dir.mkdir(parents=True, exist_ok=True)

    def _push(self, st: _JobState, kind: Kind, index: int) -> None:
        """Queue a task. Its priority orders the lanes: without overlap, model by model (cold
        compiles, then timing, then the warm start); with it, the first cold compile of the
        next model before the extra cold compiles of this one, so the timing lane is fed. Among
        the sides, timing processes alternate base/head as ABBA..., and so do the two cold
        compiles of a pair in the order they start (the one started first no longer always
        base's)."""
        timing = kind == "timing" or self._times_in_cold(st.side.name, kind, index)
        stage = {"scan": -1, "cold": 0, "timing": 1, "warm_start": 2}[kind]
        names = list(self.sides)
        pos = names.index(st.side.name)
        rank = 0 if not (timing or kind == "cold") or len(names) == 1 else (
            pos if (st.order + index) % 2 == 1 else len(names) - 1 - pos)
        if kind == "scan":  # every scan first: each may save a model's whole measurement
            priority: tuple[int, ...] = (-1, st.order, next(self._seq))
        elif self.settings.overlap and not timing:
            priority = (st.order + index - 1, stage, index, rank if kind == "cold" else 0,
                        next(self._seq))
        else:
            priority = (st.order, stage, index, rank, next(self._seq))
        task = _Task(priority, st.side.name, st.job, kind, index, timing)
        heapq.heappush(self.timing_queue if timing else self.compile_queue, task)
        st.pending += 1

    def _times_in_cold(self, side: str, kind: Kind, index: int) -> bool:
        """With no timing process (``--no-warm``) the first cold process times steady state."""
        opts = self.sides[side].opts
        return kind == "cold" and index == 1 and opts.measure and opts.timing_processes == 0

    def _plan_rest(self, st: _JobState) -> None:
        """After the first cold compile: the other cold compiles, the timing processes, and
        a warm start."""
        st.planned = True
        opts = st.side.opts
        first = st.outputs.cold[0]
        if not first.ok:
            if opts.artifact_dir is not None:
                st.rejected = "the cold compile failed; nothing to save"
            return
        for i in range(2, opts.cold_processes + 1):
            self._push(st, "cold", i)
        if opts.measure:
            for k in range(1, opts.timing_processes + 1):
                c = self._timing_cache(st, k)
                if c == 1:
                    self._push(st, "timing", k)
                else:  # its cache is not compiled yet: queued when cold compile c ends
                    st.held.setdefault(c, []).append(k)
                    st.pending += 1
        if opts.artifact_dir is not None and first.artifact and first.artifact.sha256:
            st.artifact = self._artifact_path(st)
            self._push(st, "warm_start", 1)
        elif opts.artifact_dir is not None:
            st.rejected = (first.artifact.unsupported if first.artifact else None) \
                or "the cold compile saved no artifact"
        elif opts.warm_cache is not None:
            self._push(st, "warm_start", 1)

    def _keeps(self, st: _JobState, index: int) -> bool:
        """Whether cold compile ``index``'s cache is kept for timing processes: only if one (a
        follow-up's included) will run on it, and not with a reused cache root, whose
        compiles are not cold."""
        opts, s = st.side.opts, self.settings
        most = opts.timing_processes + (
            s.extra_timing if s.follow_up is not None and len(self.sides) == 2 else 0)
        return opts.measure and opts.timing_processes > 0 and opts.cache_root is None \
            and index <= min(most, opts.cold_processes)

    def _timing_cache(self, st: _JobState, k: int) -> int:
        """Which cold compile's cache timing process ``k`` runs on (``c <= k``, so a kept
        one)."""
        c = (k - 1) % st.side.opts.cold_processes + 1
        return c if self._keeps(st, c) else 1

    def _cold_dir(self, st: _JobState, index: int) -> Path:
        """The cache dir of cold compile ``index`` > 1 (the first one's is ``st.cache_dir``): a
        folder of its own, not the process's folder (``Launcher.run`` writes the spec and the
        log there, which an empty cache must not hold)."""
        return self._workdir(st, f"cold{index}") / "inductor-cache"

    def _workdir(self, st: _JobState, what: str) -> Path:
        """A folder of this (side, job) only: named for its suite, model and config, so two
        configs of one model never share one."""
        j = st.job
        stem = artifacts.job_stem(j.suite.name, j.spec.name, j.config.slug)
        return self.launcher.workdir(f"{st.side.name}-{stem}-{what}")

    def _release(self, st: _JobState, cold: int) -> None:
        """Cold compile ``cold`` ended: queue the timing processes that wait for its cache (on
        the first cold compile's cache if it failed)."""
        for k in st.held.pop(cold, []):
            st.pending -= 1
            self._push(st, "timing", k)

    def _artifact_path(self, st: _JobState) -> Path:
        assert st.side.opts.artifact_dir is not None
        j = st.job
        return st.side.opts.artifact_dir / artifacts.artifact_name(j.suite.name, j.spec.name,
                                                                   j.config.slug)

    # --- the unchanged-by-construction rules -----------------------------------------------

    def _scan_done(self, key: Ident) -> None:
        """With both sides' scans in: a model that reads nothing the change touches is done;
        any other (or one whose scan failed) goes on to its first cold compile."""
        sts = [st for s in self.sides if (st := self.states.get((s, key))) is not None]
        if any(st.outputs.scan is None for st in sts):
            return
        scans = [st.outputs.scan.reads if st.outputs.scan and st.outputs.scan.ok else None
                 for st in sts]
        assert self.settings.changed is not None
        reason = unchanged.by_files(scans[0], scans[1], self.settings.changed) \
            if len(scans) == 2 and scans[0] is not None and scans[1] is not None else None
        for st, found in zip(sts, scans, strict=True):
            if found is not None and found.home_files:
                st.outputs.notes.append(
                    f"it read {found.home_files} files from the repository's own checkout, "
                    "not from this side's worktree: an installed copy of the project is "
                    "measured on both sides, and the change to those files is not")
            if reason is None:
                self._push(st, "cold", 1)
                continue
            st.outputs.timing_skipped, st.outputs.compile_skipped = reason, True
            st.planned = True
            self._finish(st)

    def _first_cold_done(self, key: Ident) -> None:
        """Plan the rest of a model once each side's first cold compile is in. With two sides
        (and not ``measure_all``, or on a GPU) a side waits for its partner's, so that nothing
        more is spent on a model found unchanged by construction, and so that its timing
        processes know whether the model changed; the pair's first cold compiles run side by
        side, so the wait is short."""
        sts = [st for s in self.sides if (st := self.states.get((s, key))) is not None
               and not st.done]
        # with measure_all nothing is skipped, but a GPU model's timing processes still need
        # both sides' keys to know whether to time base's model beside their own
        pairs = len(self.sides) == 2 and (not self.settings.measure_all or any(
            self._may_reference(st.job) for st in sts))
        if pairs and any(not st.outputs.cold for st in sts):
            return
        reference = self._reference(key)
        for st in sts:
            if st.outputs.cold and not st.planned:
                st.reference = reference
                self._plan_rest(st)
        self._maybe_skip_timing(key)
        for st in sts:  # the partner that waited may have nothing more to run
            self._settle(st)

    def _maybe_skip_timing(self, key: Ident) -> None:
        """With both sides' first cold compile done: skip what cannot differ."""
        if self.settings.measure_all or len(self.sides) != 2:
            return
        sts = [self.states.get((s, key)) for s in self.sides]
        if any(st is None or st.done or not st.outputs.cold for st in sts):
            return
        reason = unchanged.by_keys(*(st.outputs.cold[0] for st in sts),  # type: ignore[union-attr]
                                   same_environment=self.settings.same_environment)
        if reason is None:
            return
        for st in sts:
            assert st is not None
            st.outputs.timing_skipped = reason
            st.pending -= sum(len(ks) for ks in st.held.values())
            st.held.clear()
            for queue in (self.compile_queue, self.timing_queue):
                dropped = [t for t in queue if (t.side, ident(t.job)) == (st.side.name, key)
                           and t.kind != "warm_start"]
                for t in dropped:
                    queue.remove(t)
                    st.pending -= 1
                heapq.heapify(queue)
            self._settle(st)

    # --- running ---------------------------------------------------------------------------

    def _spec(self, st: _JobState, task: _Task, cores: tuple[int, ...] = ()
              ) -> tuple[WorkerSpec, Path]:
        """The worker's task; ``cores``: the compile slot's group it runs on (none: every
        compile core)."""
        opts, job, kind, index, times = st.side.opts, st.job, task.kind, task.index, task.timing
        phase: Phase = "warm" if kind == "timing" else kind
        scan = kind == "scan"
        first_timing = (kind == "timing" and index == 1) or (times and kind == "cold")
        compile_cpus = self._compile_cpus(opts)
        if compile_cpus and self.groups is not None:
            compile_cpus = cores if cores else self.groups.rest
        pin = opts.pin_cpus if times else compile_cpus
        lock = str(self.launcher.root / "device.lock") if self.settings.overlap else None
        cache_dir = st.cache_dir
        if kind == "cold" and index > 1:
            cache_dir = self._cold_dir(st, index)
        elif kind in ("warm_start", "scan"):
            cache_dir = self._workdir(st, kind)
        elif kind == "timing":
            cache_dir = st.cold_dirs.get(self._timing_cache(st, index), st.cache_dir)
        save = str(self._artifact_path(st)) if (kind == "cold" and index == 1
                                                and opts.artifact_dir is not None) else None
        trace = str(self._workdir(st, "trace")) \
            if kind == "cold" and index == 1 and opts.diagnostics_dir is not None else None
        spec = WorkerSpec(
            suite=job.suite.source, model=job.spec.name, config=job.config, phase=phase,
            trace_dir=trace,
            large=job.config.device == "cuda", rounds=opts.rounds, block_ms=opts.block_ms,
            time_steady_state=times, measure_memory=first_timing,
            check_accuracy=(kind == "cold" and index == 1) or kind == "warm_start",
            save_artifact=save, pin_cpus=pin, device_lock=lock,
            prepare_cpus=compile_cpus if times else (),
            compile_threads=len(compile_cpus) if compile_cpus and self.groups is not None
            else None,
            ready_compile_workers=opts.ready_compile_workers,
            preload_compile_path=opts.preload_compile_path,
            gpu_warmup_s=opts.gpu_warmup_s if times else 0.0,
            watch_root=str(opts.watch_root) if scan and opts.watch_root else None,
            home_root=str(opts.home_root) if scan and opts.home_root else None,
            reference_suite=st.reference if kind == "timing" else None,
            reference_code=self._reference_code() if kind == "timing" and st.reference
            else None,
            code=opts.code, out="", status_file="")
        return spec, cache_dir

    def _reference_code(self) -> SideCode | None:
        """The first side's code: its reference is built from its own checkout, and what
        importing it brought from there is undone."""
        opts = next(iter(self.sides.values())).opts
        if opts.code is not None:
            return opts.code
        return SideCode(root=str(opts.watch_root)) if opts.watch_root is not None else None

    def _may_reference(self, job: Job) -> bool:
        """Whether this job's timing processes may time the first side's model beside their
        own (``_reference`` decides, once both first cold compiles are in)."""
        return len(self.sides) == 2 and job.config.device == "cuda" \
            and self.settings.same_environment

    def _reference(self, key: Ident) -> str | None:
        """The suite whose eager model a job's timing processes also time: the first side's,
        for a GPU model whose graph or inputs differ between two sides run in one environment
        (None: neither). Launch-bound models run up to 1.6x slower in one process than
        another on the H200, eager and compiled alike, so their compiled time is judged over
        a model that is the same code on both sides, timed in the same rounds; their own
        eager moved with the change. Asked once both sides' first cold compiles are in."""
        pair = [self.states.get((name, key)) for name in self.sides]
        if len(pair) != 2 or any(st is None or not st.outputs.cold for st in pair):
            return None  # not two sides, or the model on one side only
        base, head = (st.outputs.cold[0] for st in pair)  # type: ignore[union-attr]
        first = pair[0]
        assert first is not None
        if not (self._may_reference(first.job) and base.ok and head.ok) \
                or unchanged.same_model(base.cache.fx, head.cache.fx):
            return None
        return first.job.suite.source

    def _compile_cpus(self, opts: RunOptions) -> tuple[int, ...]:
        """Compiles beside a pinned timing process keep off its cores and their SMT
        siblings."""
        if not (self.settings.overlap and opts.pin_cpus):
            return ()
        return cpus.others(opts.pin_cpus)

    def _run(self, task: _Task, cores: tuple[int, ...] = ()
             ) -> tuple[_Task, WorkerOutput | None, float]:
        st = self.states[(task.side, ident(task.job))]
        spec, cache_dir = self._spec(st, task, cores)
        name = f"{task.side}-{task.job.suite.name}-{task.job.spec.name}-{task.job.config.slug}" \
               f"-{task.kind}{task.index}"
        if task.kind == "warm_start":
            loaded = self._artifact_for(st, cache_dir)
            if loaded is None:
                return task, None, 0.0  # refused: a note already says why
            spec = spec.model_copy(update={"load_artifact": str(loaded)})
        env = worker_env(cache_dir, st.side.opts.extra_env)
        launch = Launch(spec, env, st.side.opts.timeout_s, st.side.opts.python or _executable(),
                        name)

        def on_phase(text: str) -> None:
            self.on_event(Event("phase", task.side, task.job, text))

        output, seconds = self.launcher.run(launch, on_phase)
        if task.kind == "cold" and task.index > 1 \
                and not (output.ok and self._keeps(st, task.index)):
            shutil.rmtree(cache_dir, ignore_errors=True)
        return task, output, seconds

    def _artifact_for(self, st: _JobState, private: Path) -> Path | None:
        """The artifact a warm start loads: the one just saved (nightly), or a published one,
        checked; a refused one is a note and the run stays cold."""
        if st.artifact is not None:
            return st.artifact
        wc = st.side.opts.warm_cache
        assert wc is not None
        try:
            return artifacts.select(wc.root, suite=st.job.suite.name, model=st.job.spec.name,
                                    slug=st.job.config.slug, fingerprint=wc.fingerprint,
                                    torch_version=wc.torch_version,
                                    trusted_keys=wc.trusted_keys, private=private)
        except CacheArtifactError as e:
            st.outputs.notes.append(f"warm cache refused: {e}")
            return None

    def _record(self, task: _Task, output: WorkerOutput | None, seconds: float) -> None:
        key = ident(task.job)
        st = self.states[(task.side, key)]
        st.pending -= 1
        st.outputs.seconds += seconds
        if task.kind == "scan":
            assert output is not None
            st.outputs.scan = output
            self._scan_done(key)
            return
        if task.kind in ("cold", "timing") and self._followed_up_failure(st, task, output):
            self._settle(st)
            return
        if task.kind == "cold":
            assert output is not None
            # in index order (the first one always ends first), so that base's and head's
            # cold compile i pair up however the ones beside each other finished
            at = bisect.bisect(st.cold_order, task.index)
            st.cold_order.insert(at, task.index)
            st.outputs.cold.insert(at, output)
            if task.index == 1:
                st.outputs.trace = self._keep_trace(st)
                self._first_cold_done(key)
            else:
                if output.ok and self._keeps(st, task.index):  # timing processes run on it
                    st.cold_dirs[task.index] = self._cold_dir(st, task.index)
                self._release(st, task.index)
        elif task.kind == "timing":
            assert output is not None
            st.outputs.timing.append(output)
        elif output is not None:
            self._record_warm_start(st, output)
        self._settle(st)

    def _followed_up_failure(self, st: _JobState, task: _Task,
                             output: WorkerOutput | None) -> bool:
        """A follow-up's process (past the side's own cold or timing processes) that failed:
        a note, not the model's status; the model passed with the processes its first
        verdict had, and a follow-up only adds evidence. True: left out."""
        if output is None or output.ok or task.index <= self._own(st, task.kind):
            return False
        what = "cold compile" if task.kind == "cold" else "timing process"
        st.outputs.notes.append(f"follow-up {what} {task.index} failed ({output.category.value}), "
                                f"left out: {(output.error or '')[-300:]}")
        return True

    def _settle(self, st: _JobState) -> None:
        """Finish a (side, job) with nothing left to run, unless it waits for its partner or
        for the timing processes a follow-up just queued."""
        if st.planned and st.pending == 0 and not st.done and not self._follow_up(st):
            self._finish(st)

    def _follow_up(self, st: _JobState) -> bool:
        """With two sides and a follow-up asker: once both sides have run everything, ask (once)
        whether more processes would settle the model: ``extra_timing`` more timing processes
        (``follow_up``, where both sides timed) and ``extra_cold`` more cold compiles
        (``cold_follow_up``, where both sides have two or more), queued interleaved and paired
        as before. True: ``st`` is not finished yet (it waits for its partner, or for those
        processes)."""
        if len(self.sides) != 2 or st.followed_up:
            return False
        key = ident(st.job)
        sts = [self.states.get((name, key)) for name in self.sides]
        other = next((o for o in sts if o is not None and o is not st), None)
        if other is None or other.done:
            return False
        if not self._askers(st):
            # nothing to ask of this side, so nothing of the pair: a partner that waited
            # for it to decide is finished too
            if other.planned and other.pending == 0 and not other.followed_up:
                self._finish(other)
            return False
        if not (other.planned and other.pending == 0):
            return True  # its partner is still measuring: decide when both are in
        pair = [o for o in sts if o is not None]
        for o in pair:
            o.followed_up = True
        so_far = [self._so_far(o) for o in pair]
        queued = False
        for kind, ask, extra in self._askers(st):
            if not all(self._askers(o, kind) for o in pair):
                continue
            why = self._ask(ask, pair, so_far)
            if why is None:
                continue
            queued = True
            what = "timing processes" if kind == "timing" else "cold compiles"
            for o in pair:
                o.outputs.notes.append(f"{extra} more {what} a side: {why}")
                own = self._own(o, kind)
                for k in range(own + 1, own + extra + 1):
                    self._push(o, kind, k)
        if not queued:
            self._finish(other)
        return queued

    def _askers(self, st: _JobState, only: Kind | None = None
                ) -> list[tuple[Kind, FollowUp, int]]:
        """The follow-up questions that apply to ``st`` now: timing, where it timed; cold, where
        it has two or more cold compiles (one alone is shown, not judged)."""
        s, out = self.settings, st.outputs
        asks: list[tuple[Kind, FollowUp, int]] = []
        if s.follow_up is not None and s.extra_timing > 0 and out.timing:
            asks.append(("timing", s.follow_up, s.extra_timing))
        if s.cold_follow_up is not None and s.extra_cold > 0 \
                and sum(1 for c in out.cold if c.ok) >= 2:
            asks.append(("cold", s.cold_follow_up, s.extra_cold))
        return [a for a in asks if only is None or a[0] == only]

    @staticmethod
    def _own(st: _JobState, kind: Kind) -> int:
        """How many cold or timing processes a side runs before any follow-up: a follow-up's
        processes are numbered after them."""
        opts = st.side.opts
        return opts.cold_processes if kind == "cold" else opts.timing_processes

    @staticmethod
    def _ask(ask: FollowUp, pair: list[_JobState], so_far: list[ModelResult]) -> str | None:
        """One asker's answer on the pair's results so far; a judging bug must not stop the
        measuring: it is a note, and no follow-up."""
        try:
            return ask(*so_far)
        except Exception as e:
            for o in pair:
                o.outputs.notes.append(f"no follow-up: asking failed ({type(e).__name__}: {e})")
            return None

    def _so_far(self, st: _JobState) -> ModelResult:
        """The (side, job)'s result from the processes so far (its final one at the end)."""
        job = st.job
        base = {"model": job.spec.name, "suite": job.suite.name, "config": job.config,
                "tags": list(job.spec.tags)}
        st.outputs.cold_concurrent = self.settings.compile_slots > 1
        return assemble(base, st.outputs, st.was_empty)

    def _keep_trace(self, st: _JobState) -> str | None:
        """The first cold compile's trace, gzipped into the diagnostics folder; its path relative
        to ``diagnostics_base`` (None: nothing was asked for, or torch wrote none)."""
        opts, job = st.side.opts, st.job
        if opts.diagnostics_dir is None:
            return None
        src = self._workdir(st, "trace")
        logs = sorted(p for p in src.iterdir() if p.is_file())
        if not logs:
            return None
        stem = artifacts.job_stem(job.suite.name, job.spec.name, job.config.slug)
        dest = opts.diagnostics_dir / stem / "cold.trace.gz"
        dest.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(dest, "wb") as out:
            for log in logs:
                with open(log, "rb") as f:
                    shutil.copyfileobj(f, out)
        base = opts.diagnostics_base or opts.diagnostics_dir
        return os.path.relpath(dest, base)

    def _record_warm_start(self, st: _JobState, output: WorkerOutput) -> None:
        st.outputs.warm_start = output
        problem = artifacts.judge(output)
        if st.artifact is not None:
            st.rejected = problem
        elif problem:
            st.outputs.notes.append(f"warm start from the published artifact: {problem}")

    def _finish(self, st: _JobState) -> None:
        result = self._so_far(st)
        saved = st.artifact if st.artifact is not None and st.artifact.is_file() else None
        info = st.outputs.cold[0].artifact.model_dump(exclude_none=True) \
            if st.outputs.cold and st.outputs.cold[0].artifact else {}
        rejected = st.rejected if st.side.opts.artifact_dir is not None else None
        self._done(st, JobRun(result, saved, info, rejected))

    def _finish_skipped(self, st: _JobState, category: Category, why: str) -> None:
        job = st.job
        result = ModelResult(model=job.spec.name, suite=job.suite.name, config=job.config,
                             tags=list(job.spec.tags), status=STATUS_OF[category],
                             category=category, error=why)
        st.planned = True
        self._done(st, JobRun(result))

    def _done(self, st: _JobState, run: JobRun) -> None:
        st.done, st.result = True, run
        kept, st.cold_dirs = list(st.cold_dirs.values()), {}
        for path in kept:
            self._cleaner.submit(shutil.rmtree, path, ignore_errors=True)
        self.finished += 1
        self.results[st.side.name].append(run)
        self.on_event(Event("done", st.side.name, st.job, run=run, finished=self.finished,
                            total=len(self.states)))

    # --- the lanes ---------------------------------------------------------------------------

    def _can_start(self, timing: bool) -> bool:
        if self.settings.overlap:
            if timing:
                return self.running_timing < self.settings.timing_ahead
            return self.running_compiles < self.settings.compile_slots
        if self.running_timing:
            return False
        if timing:
            return self.running_compiles == 0
        return self.running_compiles < self.settings.compile_slots

    def _next(self) -> _Task | None:
        """The next task to start, or None. Without overlap, a model's tasks wait for the
        models before it, and nothing starts beside a timing process."""
        head = min(self.compile_queue + self.timing_queue, default=None,
                   key=lambda t: t.priority)
        if head is None:
            return None
        if not self.settings.overlap:
            if not self._can_start(head.timing):
                return None
            queue = self.timing_queue if head.timing else self.compile_queue
            queue.remove(head)
            heapq.heapify(queue)
            return head
        if self.timing_queue and self._can_start(True):
            return heapq.heappop(self.timing_queue)
        if self.compile_queue and self._can_start(False):
            return heapq.heappop(self.compile_queue)
        return None

    def _first_group(self, task: _Task) -> bool:
        """Which end of the free compile groups a compile takes. A model's cold compiles
        alternate by side and pair (base the first group in odd pairs, head in even ones):
        were the groups' speeds to differ (a core's neighbours, its memory), a side that
        kept one group over its pairs would carry that difference into every pair, where
        the paired interval cannot see it. On the H200 one side's cold compiles of an
        untouched model ran 7-8% apart from the other's in all three pairs of a run (the
        median over the models of two repeats), against a 2.5% median in a third."""
        if task.kind != "cold":
            return True
        return (list(self.sides).index(task.side) + task.index) % 2 == 1

    def run(self) -> dict[str, list[JobRun]]:
        self.plan()
        # each running process: whether it is in the timing lane, and its compile slot's cores
        running: dict[Future[tuple[_Task, WorkerOutput | None, float]],
                      tuple[bool, tuple[int, ...]]] = {}
        slots = max(1, self.settings.compile_slots) + max(1, self.settings.timing_ahead)
        with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="measure") as pool:
            try:
                while self.compile_queue or self.timing_queue or running:
                    while (task := self._next()) is not None:
                        cores: tuple[int, ...] = ()
                        if task.timing:
                            self.running_timing += 1
                        else:
                            self.running_compiles += 1
                            if self.groups is not None:  # never more compiles than slots
                                cores = self.groups.take(self._first_group(task))
                        running[pool.submit(self._run, task, cores)] = (task.timing, cores)
                    if not running:
                        break
                    done, _ = wait(list(running), return_when=FIRST_COMPLETED)
                    for fut in done:
                        timing, cores = running.pop(fut)
                        if timing:
                            self.running_timing -= 1
                        else:
                            self.running_compiles -= 1
                        if cores and self.groups is not None:
                            self.groups.give(cores)
                        self._record(*fut.result())
            except BaseException:
                # Stopped (Ctrl-C, SIGTERM, a bug): kill the workers, or the pool would wait for
                # them to finish on their own, for as long as a hung model hangs.
                self.launcher.abort()
                for fut in running:
                    fut.cancel()
                raise
            finally:
                self._cleaner.shutdown(wait=True)
        return self.results


def _compile_path(sides: Sequence[Side]) -> tuple[str, ...]:
    """What the fork server imports for ``--preload-compile-path`` (a spawned worker imports
    the same itself, ``worker.pin_early``)."""
    return COMPILE_PATH if any(side.opts.preload_compile_path for side in sides) else ()


def _core_groups(sides: Sequence[Side], settings: LoopSettings, pinned: Sequence[int],
                 note: Callable[[str], None]) -> cpus.CoreGroups | None:
    """Each compile slot's cores (``cpus.CoreGroups``), where compiles overlap timing. Not
    with ``--no-warm``: a first cold compile that times itself is in the timing lane and would
    prepare on the shared rest while the other cold compiles had cores of their own."""
    if not (pinned and settings.split_cores):
        return None
    if any(side.opts.timing_processes == 0 for side in sides):
        note("compile slots share the compile cores: with --no-warm the first cold compile "
             "times itself in the timing lane, so no slot gets cores of its own")
        return None
    compile_cores = cpus.others(pinned)
    groups = cpus.CoreGroups.of(compile_cores, settings.compile_slots)
    if groups is None:
        note(f"compile slots share the compile cores: {len(compile_cores)} cannot give "
             f"{settings.compile_slots} slots a core each and keep one for the rest")
    return groups


def measure(sides: Sequence[Side], settings: LoopSettings = LoopSettings(),
            on_event: OnEvent = lambda _: None, preload: Sequence[str] = ()
            ) -> dict[str, list[JobRun]]:
    """Measure every side's jobs; results per side in the order models finished."""
    def note(text: str) -> None:
        on_event(Event("note", "", None, text))

    needs_cuda = any(j.config.device == "cuda" for side in sides for j in side.jobs)
    pinned = sorted({c for side in sides for c in side.opts.pin_cpus}) if settings.overlap \
        else []
    groups = _core_groups(sides, settings, pinned, note)
    with cpus.away(pinned, groups.rest if groups else ()), \
            Launcher(settings.isolation, [*preload, *_compile_path(sides)], on_note=note,
                     needs_cuda=needs_cuda) as launcher:
        for side in sides:
            launcher.prepare(side.opts.python or _executable(),
                             worker_env(Path(), side.opts.extra_env))
        loop = Loop(sides, settings, on_event, launcher, groups)
        results = loop.run()
    for side in sides:  # the jobs' own order, whatever order they finished in
        pos = {ident(j): i for i, j in enumerate(side.jobs)}
        results[side.name].sort(key=lambda r: pos.get(
            (r.result.suite, r.result.model, r.result.config.slug), 0))
    return results

