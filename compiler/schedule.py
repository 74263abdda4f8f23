"""The one measuring loop: jobs of one or two sides in, ``JobRun``s out. ``run``, ``nightly``
and ``pr`` all measure through ``measure_jobs``, which composes three rooms:

- the lanes (``compiler/lanes.py``): queues, priorities, compile slots and their cores, the
  device lock; they know nothing of base and head;
- a job (``compiler/job.py``): one side's (model, config), its processes, cache dirs and held
  timing processes, and what is still to run;
- the pairing (``compiler/pairing.py``): with two sides ABBA order, scans, the
  unchanged-by-construction skips, the eager reference and follow-ups (``Pairing``); with one,
  none of them (``Alone``).

The loop is handed its launcher and its pairing; it hands itself to the pairing's calls that
queue or finish work.
"""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from compilewatch.compiler import cpus
from compilewatch.compiler.job import JobRun, RunOptions, SideJob, Where, precheck
from compilewatch.compiler.lanes import Ident, Kind, Lanes, Task, ident
from compilewatch.compiler.pairing import Alone, Pairing, PairRules
from compilewatch.compiler.plan import Job
from compilewatch.compiler.processes import Isolation, Launch, Launcher, worker_env
from compilewatch.compiler.protocol import COMPILE_PATH, WorkerOutput
from compilewatch.compiler.reads import ChangedFiles
from compilewatch.core.followup import FollowUp


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
    # with overlap: the GPUs to time on, one timing lane each (``compiler/lanes.py``); empty:
    # the one current device
    gpus: tuple[int, ...] = ()
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
    # once a model's processes are all in: with two sides, ``profile(base, head)`` says why
    # each side gets a profile process (``compiler/kernels.py``; None: it does not), and with
    # ``profile_kernels`` every timed model gets one, on one side or two
    profile: FollowUp | None = None
    profile_kernels: bool = False
    # seconds each (suite, model, config) took before (the stored runs): the loop starts the
    # longest first (``longest_first``)
    durations: Mapping[Ident, float] = field(default_factory=dict)

    def pair_rules(self) -> PairRules:
        return PairRules(measure_all=self.measure_all, same_environment=self.same_environment,
                         changed=self.changed, follow_up=self.follow_up,
                         extra_timing=self.extra_timing, cold_follow_up=self.cold_follow_up,
                         extra_cold=self.extra_cold, cold_concurrent=self.compile_slots > 1,
                         profile=self.profile, profile_kernels=self.profile_kernels)


@dataclass(frozen=True)
class SideJobs:
    """One side's jobs and how to measure them."""

    name: str  # "run", "base" or "head"
    jobs: list[Job]
    opts: RunOptions


@dataclass(frozen=True)
class LoopEvent:
    """What the loop tells its caller: a process started or changed phase, a model ended, or
    a note about the whole run (``job`` is None: e.g. workers are spawned, not forked)."""

    kind: Literal["phase", "done", "note"]
    side: str
    job: Job | None
    text: str = ""
    run: JobRun | None = None
    finished: int = 0
    total: int = 0


class Workers(Protocol):
    """What the loop needs of a launcher (``compiler/processes.py`` ``Launcher``): a folder
    per process, a process run, and an abort that kills what still runs."""

    root: Path

    def workdir(self, name: str) -> Path: ...

    def run(self, launch: Launch, on_phase: Callable[[str], None]
            ) -> tuple[WorkerOutput, float]: ...

    def abort(self) -> None: ...

    def prepare(self, python: str, env: dict[str, str]) -> None: ...

    def __enter__(self) -> Workers: ...

    def __exit__(self, *exc: object) -> None: ...


# how ``measure_jobs`` makes its launcher: ``Launcher``'s arguments (isolation, preload,
# on_note, needs_cuda); tests pass one that starts no process
MakeWorkers = Callable[..., Workers]

OnEvent = Callable[[LoopEvent], None]
Ran = tuple[Task, WorkerOutput | None, float]
STAGE = {"scan": -1, "cold": 0, "timing": 1, "warm_start": 2, "remote": 3, "profile": 4}


class Loop:
    """One ``measure_jobs`` call: the jobs of each side through the lanes, paired where there
    are two sides."""

    def __init__(self, sides: Sequence[SideJobs], settings: LoopSettings, on_event: OnEvent,
                 launcher: Workers, pairing: Alone,
                 groups: cpus.CoreGroups | None = None) -> None:
        self.sides = {s.name: s for s in sides}
        self.settings = settings
        self.on_event = on_event
        self.launcher = launcher
        self.lanes = Lanes(compile_slots=settings.compile_slots, overlap=settings.overlap,
                           timing_ahead=settings.timing_ahead, groups=groups,
                           gpus=settings.gpus, fixed_gpus=len(sides) == 1)
        self.pairing = pairing
        # every (side, model) in flight: the pairing looks at the same ones
        self.jobs = pairing.jobs
        self.finished = 0
        self.results: dict[str, list[JobRun]] = {s.name: [] for s in sides}
        self._seq = itertools.count()
        # removes a done model's kept cold caches off the loop's thread (a large cache takes
        # long enough to delete to hold up the next process, and the GPU with it)
        self._cleaner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cleanup")

    # --- planning ------------------------------------------------------------------------

    def plan(self) -> None:
        every = [job for side in self.sides.values() for job in side.jobs]
        order = longest_first(every, self.settings.durations)
        for n, key in enumerate(order):
            names = self.pairing.in_order(n)
            jobs = {name: job for name in names
                    if (job := next((j for j in self.sides[name].jobs if ident(j) == key),
                                    None))}
            scans = self.pairing.scans(jobs) and not any(
                precheck(job, self.sides[name].opts) for name, job in jobs.items())
            for name, job in jobs.items():
                self._plan_job(self._side_job(self.sides[name], job, n), scans)

    def _side_job(self, side: SideJobs, job: Job, order: int) -> SideJob:
        sj = SideJob(side.name, job, side.opts, order, self.launcher.workdir,
                     self.pairing.most_timing(side.opts))
        self.jobs[(side.name, ident(job))] = sj
        return sj

    def _plan_job(self, sj: SideJob, scans: bool) -> None:
        skip = precheck(sj.job, sj.opts)
        if skip:
            self._done(sj, sj.skipped(*skip))
            return
        sj.prepare_dir()
        self.push(sj, "scan" if scans else "cold", 1)

    def push(self, sj: SideJob, kind: Kind, index: int) -> None:
        """Queue a task. Its priority orders the lanes: without overlap, model by model (cold
        compiles, then timing, then the warm start); with it, the first cold compile of the
        next model before the extra cold compiles of this one, so the timing lane is fed. Every
        scan goes first: each may save a model's whole measurement. Among two sides, the
        pairing ranks a pair's cold compiles and timing processes."""
        timing = kind in ("timing", "profile") or sj.opts.times_in_cold(kind, index)
        rank = self.pairing.rank(sj.side, sj.order, index) if timing or kind == "cold" else 0
        if kind == "scan":
            priority: tuple[int, ...] = (-1, sj.order, next(self._seq))
        elif self.settings.overlap and not timing:
            priority = (sj.order + index - 1, STAGE[kind], index, rank if kind == "cold" else 0,
                        next(self._seq))
        else:
            priority = (sj.order, STAGE[kind], index, rank, next(self._seq))
        self.lanes.push(Task(priority, sj.side, sj.job, kind, index, timing,
                             self._first_group(sj.side, kind, index)))
        sj.queued()

    def _first_group(self, side: str, kind: Kind, index: int) -> bool:
        """Which end of the free compile groups a compile takes. A model's cold compiles
        alternate by side and pair (base the first group in odd pairs, head in even ones):
        were the groups' speeds to differ (a core's neighbours, its memory), a side that kept
        one group over its pairs would carry that difference into every pair, where the
        paired interval cannot see it (docs/verdict-quality.md, "Compile slots on cores of
        their own")."""
        if kind != "cold":
            return True
        return (list(self.sides).index(side) + index) % 2 == 1

    def drop(self, which: Callable[[Task], bool]) -> int:
        return self.lanes.drop(which)

    # --- what a finished process leads to ----------------------------------------------------

    def _record(self, ran: Ran) -> None:
        task, output, seconds = ran
        key = ident(task.job)
        sj = self.jobs[(task.side, key)]
        sj.ended()
        sj.outputs.seconds += seconds
        if task.kind == "scan":
            assert output is not None
            sj.outputs.scan = output
            self.pairing.scan_done(key, self)
            return
        if task.kind in ("cold", "timing") and sj.follow_up_failed(task, output):
            self.settle(sj)
            return
        if task.kind == "cold":
            assert output is not None
            sj.record_cold(task.index, output)
            if task.index == 1:
                self._first_cold_done(key)
            for k in sj.release(task.index):
                self.push(sj, "timing", k)
        elif task.kind == "timing":
            assert output is not None
            sj.outputs.timing.append(output)
        elif task.kind == "remote":
            assert output is not None
            sj.record_remote(output)
        elif task.kind == "profile":
            assert output is not None
            sj.record_profile(output, seconds)
        elif output is not None:
            sj.record_warm_start(output)
        self.settle(sj)

    def _first_cold_done(self, key: Ident) -> None:
        """Plan the rest of a model once each side's first cold compile is in (with two sides,
        a side may wait for its partner's: ``Pairing.waits``)."""
        sjs = [sj for name in self.sides if (sj := self.jobs.get((name, key))) is not None
               and not sj.done]
        if self.pairing.waits(key):
            return
        reference = self.pairing.reference(key)
        for sj in sjs:
            if sj.outputs.cold and not sj.planned:
                sj.reference = reference
                for kind, index in sj.plan_rest():
                    self.push(sj, kind, index)
        self.pairing.skip_timing(key, self)
        for sj in sjs:  # the partner that waited may have nothing more to run
            self.settle(sj)

    def settle(self, sj: SideJob) -> None:
        """Finish a job with nothing left to run, unless it waits for its partner or for the
        processes a follow-up just queued."""
        if not sj.idle or sj.done:
            return
        if self.pairing.follow_up(sj, ident(sj.job), self):
            return
        self.finish(sj)

    def finish(self, sj: SideJob) -> None:
        """Finish a job whose processes are all in, unless a profile process is still to run
        (or, with two sides, to be decided with its partner). Once: deciding a profile for a
        pair may finish the partner that asked."""
        if sj.done or self.pairing.profile(sj, ident(sj.job), self):
            return
        self._done(sj, sj.finished(self.settings.compile_slots > 1))

    def _done(self, sj: SideJob, run: JobRun) -> None:
        sj.done, sj.result = True, run
        for path in sj.drop_cold_dirs():
            self._cleaner.submit(shutil.rmtree, path, ignore_errors=True)
        self.finished += 1
        self.results[sj.side].append(run)
        self.on_event(LoopEvent("done", sj.side, sj.job, run=run, finished=self.finished,
                                total=len(self.jobs)))

    # --- running -------------------------------------------------------------------------

    def _where(self, sj: SideJob, cores: tuple[int, ...], gpu: int | None = None) -> Where:
        compile_cpus = self.lanes.compile_cpus(sj.opts.pin_cpus, cores)
        threads = len(compile_cpus) if compile_cpus and self.lanes.groups is not None else None
        return Where(compile_cpus, threads,
                     Lanes.device_lock(self.launcher.root, self.settings.overlap, gpu), gpu,
                     self.lanes.timing_cpus(sj.opts.pin_cpus, gpu))

    def _run(self, task: Task, cores: tuple[int, ...] = ()) -> Ran:
        """One process, on a thread of the lanes' pool."""
        sj = self.jobs[(task.side, ident(task.job))]
        spec = sj.spec(task, self._where(sj, cores, task.gpu), self.pairing.reference_code())
        cache_dir = sj.profile_cache() if task.kind == "profile" else sj.task_cache(task)
        name = f"{task.side}-{task.job.suite.name}-{task.job.spec.name}-{task.job.config.slug}" \
               f"-{task.kind}{task.index}"
        if task.kind == "warm_start":
            loaded = sj.artifact_for(cache_dir)
            if loaded is None:
                return task, None, 0.0  # refused: a note already says why
            spec = spec.model_copy(update={"load_artifact": str(loaded)})
        env = worker_env(cache_dir, sj.opts.extra_env)
        launch = Launch(spec, env, sj.opts.timeout_s, sj.opts.executable, name)

        def on_phase(text: str) -> None:
            self.on_event(LoopEvent("phase", task.side, task.job, text))

        output, seconds = self.launcher.run(launch, on_phase)
        if spec.remote_outbox is not None:  # before the remote phase is queued: it reads these
            output = sj.stored(output, Path(spec.remote_outbox))
        if task.kind == "cold" and task.index > 1 \
                and not (output.ok and sj.keeps(task.index)):
            shutil.rmtree(cache_dir, ignore_errors=True)
        return task, output, seconds

    def run(self) -> dict[str, list[JobRun]]:
        self.plan()
        try:
            self.lanes.drive(self._run, self._record, self.launcher.abort)
        finally:
            self._cleaner.shutdown(wait=True)
        return self.results


def longest_first(jobs: Sequence[Job], durations: Mapping[Ident, float]) -> list[Ident]:
    """The order models start in: the longest first, so that the last to finish is a short
    one, not a model of minutes started behind every other (a run's wall time is its longest
    model's chain of cold compiles and timing processes, after it started). A job's length is
    its stored duration; one that has none goes before those that have (it may be the long
    one), and among those a training step (two graphs and an optimizer to compile) before an
    inference, each kind in the suites' order."""
    keys = list(dict.fromkeys(ident(job) for job in jobs))
    task = {ident(job): job.config.task for job in jobs}
    pos = {key: n for n, key in enumerate(keys)}

    def rank(key: Ident) -> tuple[int, float, int]:
        if key in durations:
            return 1, -durations[key], pos[key]
        return 0, 0.0 if task[key] == "training" else 1.0, pos[key]

    return sorted(keys, key=rank)


def _compile_path(sides: Sequence[SideJobs]) -> tuple[str, ...]:
    """What the fork server imports for ``--preload-compile-path`` (a spawned worker imports
    the same itself, ``worker.pin_early``)."""
    return COMPILE_PATH if any(side.opts.preload_compile_path for side in sides) else ()


def _core_groups(sides: Sequence[SideJobs], settings: LoopSettings, pinned: Sequence[int],
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


def pairing_of(sides: Sequence[SideJobs], settings: LoopSettings) -> Alone:
    """Two sides are paired; one is alone."""
    if len(sides) == 2:
        return Pairing((sides[0].name, sides[1].name), (sides[0].opts, sides[1].opts),
                       settings.pair_rules())
    return Alone(tuple(s.name for s in sides), settings.pair_rules())


def measure_jobs(sides: Sequence[SideJobs], settings: LoopSettings = LoopSettings(),
                 on_event: OnEvent = lambda _: None, preload: Sequence[str] = (),
                 launcher: MakeWorkers = Launcher) -> dict[str, list[JobRun]]:
    """Measure every side's jobs; results per side in the jobs' own order."""
    def note(text: str) -> None:
        on_event(LoopEvent("note", "", None, text))

    needs_cuda = any(j.config.device == "cuda" for side in sides for j in side.jobs)
    pinned = sorted({c for side in sides for c in side.opts.pin_cpus}) if settings.overlap \
        else []
    groups = _core_groups(sides, settings, pinned, note)
    lanes = len(settings.gpus) if settings.overlap else 0
    if pinned and lanes > 1 and len(pinned) < lanes:
        note(f"the {lanes} GPU timing lanes share the timing cores {pinned}: fewer cores than "
             "lanes, so one GPU's timing can slow another's on a launch-bound model")
    if pinned and not cpus.left(pinned):
        note(f"the timing cores {pinned} (with their hyperthread siblings) are every core this "
             "run may use: compiles run on them too, beside the timing processes, and a "
             "launch-bound model's time waits on them; name fewer with --pin-cpus or time on "
             "fewer GPUs with --gpus")
    with cpus.away(pinned, groups.rest if groups else ()), \
            launcher(settings.isolation, [*preload, *_compile_path(sides)], on_note=note,
                     needs_cuda=needs_cuda) as workers:
        for side in sides:
            workers.prepare(side.opts.executable, worker_env(Path(), side.opts.extra_env))
        results = Loop(sides, settings, on_event, workers, pairing_of(sides, settings),
                       groups).run()
    for side in sides:  # the jobs' own order, whatever order they finished in
        pos = {ident(j): i for i, j in enumerate(side.jobs)}
        results[side.name].sort(key=lambda r: pos.get(
            (r.result.suite, r.result.model, r.result.config.slug), 0))
    return results
