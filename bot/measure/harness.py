"""What ``run``, ``pr``, ``nightly`` and ``calibrate`` share around measuring: suites,
environment, the loop with the progress it reports, and turning measurements into one results
file."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import math
import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from compilewatch.bot.judge.project import ProjectConfig, load_project_config
from compilewatch.compiler import schedule
from compilewatch.compiler.children import run_module
from compilewatch.compiler.cpus import available as available_cpus
from compilewatch.compiler.cpus import timing_cores
from compilewatch.compiler.lanes import Ident
from compilewatch.compiler.processes import Isolation, Launcher, allowed_env, base_env
from compilewatch.compiler.reads import ChangedFiles
from compilewatch.compiler.schedule import (
    JobRun,
    LoopEvent,
    LoopSettings,
    MakeWorkers,
    RunOptions,
    SideJobs,
)
from compilewatch.core.errors import UsageError
from compilewatch.core.followup import FollowUp
from compilewatch.core.runinfo import DEFAULT_BLOCK_MS, DEFAULT_ROUNDS, DEFAULT_TIMEOUT_S
from compilewatch.core.schema import (
    MAX_MODEL_SAMPLES,
    MAX_ORIGINS,
    MAX_SHORT_CHARS,
    SCHEMA_VERSION,
    TASKS,
    Code,
    Environment,
    GitInfo,
    HostCheck,
    ModelResult,
    ModuleOrigin,
    RunResults,
    RunSettings,
)
from compilewatch.suites.imports import SideCode, on_paths


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def suite_sources(suites: Iterable[str], repo: Path = Path("."),
                  project: ProjectConfig | None = None) -> list[str]:
    """CLI suites, else the repository's ``[tool.compilewatch] suites``, else ``micro``
    (``project``: the repository's configuration, where the command has read it)."""
    chosen = list(suites)
    if chosen:
        return chosen
    project = project or load_project_config(repo)
    return [str(repo / s) if s.endswith(".py") else s for s in project.suites] or ["micro"]


def project_tasks(repo: Path = Path(".")) -> tuple[str, ...]:
    """The repository's ``[tool.compilewatch] tasks`` (empty: the device's default)."""
    return tuple(load_project_config(repo).tasks)


def side_code(tree: Path, *, home: Path | None = None,
              allow_installed: Iterable[str] = (),
              project: ProjectConfig | None = None) -> SideCode:
    """One side's own code, from its checkout's pyproject (``project``, where the command has
    read it): the folders its processes put first on ``sys.path`` and the project's
    distribution name (``suites/imports.py``). ``home``: the user's own checkout, when the
    side is another one (a ``pr`` worktree)."""
    root = tree.resolve()
    project = load_project_config(root) if project is None else \
        project.model_copy(update={"root": root})
    return SideCode(root=str(root), paths=tuple(str(p) for p in project.import_paths()),
                    home=str(home.resolve()) if home is not None else None,
                    distribution=project.distribution,
                    allow_installed=tuple(sorted(set(allow_installed))))


def code_record(code: SideCode, modules: dict[str, ModuleOrigin],
                results: Iterable[ModelResult] = ()) -> Code:
    """What a run records of its code: its import folders relative to the checkout, and
    where its suites' and models' imports came from."""
    found = dict(modules)
    for r in results:
        for name, origin in r.modules.items():
            found.setdefault(name, origin)
    paths = [Path(os.path.relpath(p, code.root)).as_posix() for p in code.paths]
    return Code(paths=paths, allow_installed=list(code.allow_installed),
                modules=dict(sorted(found.items())[:MAX_ORIGINS]))


def collect_environment(python: str = sys.executable) -> Environment:
    """Ask the interpreter under test (it may be another torch build) where it runs."""
    try:
        out = run_module(python, "compilewatch.compiler.environment", env=allowed_env(),
                         timeout=300, check=True)
    except (OSError, subprocess.SubprocessError) as e:
        detail = getattr(e, "stderr", "") or str(e)
        raise UsageError(f"cannot query the environment of {python}: {detail[-2000:]}") from None
    return Environment.model_validate(json.loads(out.stdout))


@dataclass(frozen=True)
class MeasureOptions:
    """How ``run``, ``pr``, ``nightly`` and ``calibrate`` measure, as asked: the command line's
    flags as one object. ``None`` means the device's default; ``resolve`` fills those in and
    checks every value, once, into the ``Measuring`` that everything below reads.
    """

    device: str = "cpu"
    rounds: int = DEFAULT_ROUNDS
    block_ms: float = DEFAULT_BLOCK_MS
    timeout_s: float = DEFAULT_TIMEOUT_S
    cold_processes: int | None = None
    timing_processes: int | None = None  # 0: the cold process times itself (--no-warm)
    isolation: Isolation = "fork"
    compile_slots: int | None = None
    ready_compile_workers: bool = False
    preload_compile_path: bool = False
    pin_cpus: tuple[int, ...] | None = None
    measure_all: bool = False
    quiet: bool = False  # the CLI shows no progress or summary (display only)
    # timing processes a side added to a model whose first verdict is undecided but past its
    # threshold (``bot/judge/followup.py``); None: the device's default
    extra_processes: int | None = None
    # cold compiles a side added to a model whose cold-compile verdict is undecided near its
    # threshold, or called on the first ones, to confirm it (``bot/judge/followup.py``);
    # None: the device's default
    extra_cold_processes: int | None = None
    # top-level modules the repository provides that may come from an installed copy
    allow_installed: tuple[str, ...] = ()
    # what each model is measured for (``--task``); empty: both on cuda, inference on cpu
    tasks: tuple[str, ...] = ()
    # the GPUs to time on, one timing lane each (``--gpus``); None: every one torch sees
    gpus: tuple[int, ...] | None = None
    # a profile process a side for every timed model (``--profile-kernels``), not only for
    # those whose compiled time changed (``compiler/kernels.py``)
    profile_kernels: bool = False

    def resolve(self, project_tasks: tuple[str, ...] = ()) -> Measuring:
        """Every ``None`` replaced by the device's default: on a GPU three cold and three
        timing processes per side, three more of each a follow-up may add, compile slots for
        a quarter of the cores (2..8) overlapping GPU timing, timing pinned to the last core
        (a core of its own for each GPU timing lane, ``lane_cores``);
        on a CPU one cold and two timing processes, no follow-ups, one process at a time
        (timing runs on the CPU itself). Tasks: ``--task``, else the repository's
        ``project_tasks`` (``[tool.compilewatch] tasks``), else on a GPU inference and
        training for the built-in suites (a repository's own models are measured for
        inference until it asks for training), on a CPU inference. Refuses, before minutes
        of measuring, values the loop cannot use."""
        gpu = self.device == "cuda"
        cpus = sorted(available_cpus())
        asked = tuple(dict.fromkeys(self.tasks or project_tasks))
        m = Measuring(
            device=self.device, rounds=self.rounds, block_ms=self.block_ms,
            timeout_s=self.timeout_s,
            cold_processes=_default(self.cold_processes, 3 if gpu else 1),
            timing_processes=_default(self.timing_processes, 3 if gpu else 2),
            isolation=self.isolation,
            compile_slots=_default(self.compile_slots,
                                   max(2, min(8, len(cpus) // 4)) if gpu else 1),
            ready_compile_workers=self.ready_compile_workers,
            preload_compile_path=self.preload_compile_path,
            pin_cpus=self.pin_cpus if self.pin_cpus is not None else (
                (cpus[-1],) if gpu and len(cpus) > 1 else ()),
            pin_default=self.pin_cpus is None,
            measure_all=self.measure_all,
            extra_processes=_default(self.extra_processes, 3 if gpu else 0),
            extra_cold_processes=_default(self.extra_cold_processes, 3 if gpu else 0),
            allow_installed=self.allow_installed,
            tasks=asked or (TASKS if gpu else ("inference",)),
            training_builtin_only=not asked and gpu,
            gpus=self.gpus, profile_kernels=self.profile_kernels)
        m.check(set(cpus))
        return m


def _default(value: int | None, default: int) -> int:
    return default if value is None else value


@dataclass(frozen=True)
class Measuring:
    """The measuring options resolved (``MeasureOptions.resolve``): no default left to choose,
    every value checked. The loop reads it (``run_options``, ``loop_settings``), and so do the
    results' settings (``run_settings``)."""

    device: str
    rounds: int
    block_ms: float
    timeout_s: float
    cold_processes: int
    timing_processes: int  # 0: the first cold process times steady state (--no-warm)
    isolation: Isolation
    compile_slots: int
    ready_compile_workers: bool
    preload_compile_path: bool
    pin_cpus: tuple[int, ...]
    measure_all: bool
    extra_processes: int
    extra_cold_processes: int
    allow_installed: tuple[str, ...]
    tasks: tuple[str, ...] = ("inference",)
    # the tasks are the device's default: only the built-in suites train (``plan_jobs``)
    training_builtin_only: bool = False
    # the GPUs asked for (None: all), then, after the preflight (``preflight``), the timing
    # lanes: () for the one current device
    gpus: tuple[int, ...] | None = None
    # ``pin_cpus`` is the device's default, not asked for: with several lanes, one core each
    pin_default: bool = False
    profile_kernels: bool = False  # every timed model gets a profile process

    def check(self, cpus: set[int]) -> None:
        # ``not x > 0``, not ``x <= 0``: nan passes every comparison (the CLI refuses it too)
        finite = all(math.isfinite(x) for x in (self.block_ms, self.timeout_s))
        if self.rounds < 1 or not finite or not self.block_ms > 0 or not self.timeout_s > 0:
            raise UsageError("--rounds must be >= 1, --block-ms and --timeout finite and > 0")
        self._check_samples()
        for flag, value, least in (("--cold-processes", self.cold_processes, 1),
                                   ("--processes", self.timing_processes, 0),
                                   ("--compile-slots", self.compile_slots, 1),
                                   ("--extra-processes", self.extra_processes, 0),
                                   ("--extra-cold-processes", self.extra_cold_processes, 0)):
            if value < least:
                raise UsageError(f"{flag} must be >= {least}")
        if set(self.tasks) - set(TASKS):
            raise UsageError(f"--task must be among {list(TASKS)}, not {list(self.tasks)}")
        bad = sorted(set(self.pin_cpus) - cpus)
        if bad:
            raise UsageError(f"--pin-cpus {bad} not among this process's CPUs {sorted(cpus)}")
        if self.gpus is not None and not self.gpu:
            raise UsageError("--gpus needs --device cuda")
        if self.gpus is not None and (not self.gpus or len(set(self.gpus)) < len(self.gpus)):
            raise UsageError(f"--gpus must name each GPU once, not {list(self.gpus)}")

    def _check_samples(self) -> None:
        """A model's timing samples must fit one result (``MAX_MODEL_SAMPLES``): past them the
        run would measure for hours and then write a file no reader accepts."""
        per_round = 3 if self.gpu else 2  # eager, compiled, and on a GPU the reference
        processes = max(self.timing_processes, 1) + self.extra_processes
        samples = per_round * self.rounds * processes
        if samples > MAX_MODEL_SAMPLES:
            raise UsageError(f"--rounds {self.rounds} over {processes} timing process(es) "
                             f"(--processes, --extra-processes) make up to {samples} timing "
                             f"samples a model, more than the {MAX_MODEL_SAMPLES} a result "
                             "holds: lower --rounds or the processes")

    def check_gpus(self, visible: int) -> None:
        """``--gpus`` against what the interpreter under test sees, and ``--pin-cpus``
        against the lanes asked for (before the preflight: whether a run is refused must not
        depend on which GPU it finds noisy)."""
        missing = sorted(set(self.gpus or ()) - set(range(visible)))
        if missing:
            seen = f"GPUs 0-{visible - 1}" if visible > 1 else \
                ("GPU 0" if visible else "no GPU")
            raise UsageError(f"--gpus {missing}: torch sees {seen} here")
        if self.gpu and not self.pin_default and self.pin_cpus:
            asked = len(self.gpus) if self.gpus is not None else visible
            if asked > 1:
                self.lane_cores(asked)

    def lanes(self, host: HostCheck | None, visible: int) -> Measuring:
        """The GPUs to time on, one lane each, after the preflight: those asked for (all by
        default) but any it left out; () where one GPU is all there is (the current device,
        as ever)."""
        if not self.gpu:
            return dataclasses.replace(self, gpus=())
        asked = self.gpus if self.gpus is not None else tuple(range(visible))
        kept = host.timing_gpus() if host is not None and host.gpus else asked
        lanes = tuple(g for g in asked if g in kept) or asked
        if self.gpus is None and visible <= 1:
            lanes = ()
        return dataclasses.replace(self, gpus=lanes, pin_cpus=self.lane_cores(len(lanes)))

    def lane_cores(self, lanes: int) -> tuple[int, ...]:
        """The timing cores for ``lanes`` timing lanes: each lane's timing processes on cores
        of their own (``cpus.per_lane`` cuts them in order), or one GPU's timing would slow
        another's on a launch-bound model. By default a core each, on different physical
        cores; ``--pin-cpus`` must name at least one a lane."""
        if lanes <= 1 or not self.pin_cpus:
            return self.pin_cpus
        if self.pin_default:
            return timing_cores(available_cpus(), lanes)
        if len(self.pin_cpus) < lanes:
            raise UsageError(f"--pin-cpus names {len(self.pin_cpus)} core(s) for {lanes} "
                             "GPU timing lanes: each lane times on cores of its own; name at "
                             "least one a lane, or fewer GPUs with --gpus")
        return self.pin_cpus

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"

    def run_options(self, python: str = sys.executable, **extra: Any) -> RunOptions:
        return RunOptions(rounds=self.rounds, block_ms=self.block_ms, timeout_s=self.timeout_s,
                          cold_processes=self.cold_processes,
                          timing_processes=self.timing_processes, python=python,
                          pin_cpus=self.pin_cpus,
                          ready_compile_workers=self.ready_compile_workers,
                          preload_compile_path=self.preload_compile_path,
                          gpu_warmup_s=0.5 if self.gpu else 0.0, **extra)

    def loop_settings(self, same_environment: bool = True,
                      changed: ChangedFiles | None = None,
                      follow_up: FollowUp | None = None,
                      cold_follow_up: FollowUp | None = None,
                      durations: Mapping[Ident, float] | None = None,
                      profile: FollowUp | None = None) -> LoopSettings:
        return LoopSettings(isolation=self.isolation, compile_slots=self.compile_slots,
                            overlap=self.gpu, measure_all=self.measure_all,
                            same_environment=same_environment, changed=changed,
                            follow_up=follow_up, extra_timing=self.extra_processes,
                            cold_follow_up=cold_follow_up, extra_cold=self.extra_cold_processes,
                            gpus=self.gpus or (), durations=dict(durations or {}),
                            profile=profile, profile_kernels=self.profile_kernels)

    def run_settings(self, *, suites: list[str], trigger: str = "local",
                     side: str | None = None, results_dir: str | None = None,
                     remote_cache: str | None = None) -> RunSettings:
        """What a results file records of how it was measured; a pr's follow-ups only in a
        pr."""
        pr = trigger == "pr"
        return RunSettings(suites=suites, timeout_s=self.timeout_s, rounds=self.rounds,
                           block_ms=self.block_ms, trigger=trigger, side=side,
                           cold_processes=self.cold_processes,
                           timing_processes=self.timing_processes,
                           isolation=self.isolation,
                           ready_compile_workers=self.ready_compile_workers,
                           preload_compile_path=self.preload_compile_path,
                           extra_processes=self.extra_processes if pr else 0,
                           extra_cold_processes=self.extra_cold_processes if pr else 0,
                           results_dir=results_dir, remote_cache=remote_cache,
                           profile_kernels=self.profile_kernels)


def preload_of(sides: list[SideJobs]) -> list[str]:
    """What the fork server imports beside the compiler stack: the models' own packages, but
    none a side's checkout provides (each side imports its own copy)."""
    own = {name for s in sides if s.opts.code is not None for name in on_paths(s.opts.code)}
    return sorted({p for s in sides for j in s.jobs for p in j.spec.requires
                   if p.partition(".")[0] not in own})


@dataclass(frozen=True)
class MeasureProgress:
    """What measuring tells whoever shows its progress (the CLI draws a bar, or a line per
    model in a log): a process changed phase, a model is done, or a note on the whole run."""

    kind: Literal["phase", "done", "note"]
    label: str = ""  # "[base] suite/model [config]"; empty for a note
    text: str = ""  # the phase, or the note
    status: str = ""  # a done model's status
    duration_s: float = 0.0  # a done model's time
    finished: int = 0
    total: int = 0


OnProgress = Callable[[MeasureProgress], None]


def measure_sides(sides: list[SideJobs], options: Measuring, *, same_environment: bool = True,
                  changed: ChangedFiles | None = None, progress: OnProgress | None = None,
                  on_done: Callable[[dict[str, list[JobRun]]], None] | None = None,
                  follow_up: FollowUp | None = None,
                  cold_follow_up: FollowUp | None = None,
                  durations: Mapping[Ident, float] | None = None,
                  profile: FollowUp | None = None,
                  launcher: MakeWorkers = Launcher) -> dict[str, list[JobRun]]:
    """Measure through the one loop, telling ``progress`` how it goes; ``on_done`` gets the
    runs so far of every side after each model, so callers checkpoint and a job killed after
    hours keeps what it measured. ``durations``: each model's stored duration, the longest
    started first. ``profile``: with two sides, why a model gets a profile process a side
    (``bot/judge/followup.py`` ``profile_asker``). ``launcher``: what starts the processes
    (tests pass one that starts none)."""
    tell = progress or (lambda _: None)
    total = sum(len(s.jobs) for s in sides)
    done: dict[str, list[JobRun]] = {s.name: [] for s in sides}

    def on_event(ev: LoopEvent) -> None:
        if ev.job is None:
            tell(MeasureProgress("note", text=ev.text, total=total))
            return
        label = f"{ev.job.suite.name}/{ev.job.spec.name} [{ev.job.config.slug}]"
        if len(sides) > 1:
            label = f"[{ev.side}] {label}"
        if ev.kind == "phase":
            tell(MeasureProgress("phase", label, ev.text, total=total))
            return
        assert ev.run is not None
        done[ev.side].append(ev.run)
        r = ev.run.result
        tell(MeasureProgress("done", label, status=r.status.value, duration_s=r.duration_s,
                             finished=ev.finished, total=ev.total))
        if on_done is not None:
            on_done(done)

    return schedule.measure_jobs(
        sides, options.loop_settings(same_environment, changed, follow_up, cold_follow_up,
                                     durations, profile),
        on_event, preload_of(sides), launcher)


def build_results(model_results: list[Any], *, env: Environment, git: dict[str, Any] | None,
                  sources: list[str], options: Measuring, started: str,
                  trigger: str = "local", side: str | None = None, run_id: str | None = None,
                  host: HostCheck | None = None, finished: bool = True,
                  code: Code | None = None, results_dir: Path | None = None,
                  remote_cache: str | None = None) -> RunResults:
    """One place that turns measurements into a results file, for ``run``, ``pr`` and
    ``nightly`` alike. ``finished=False``: a checkpoint of a run still going (``finished_at``
    stays null). ``remote_cache``: the shared cache's role, "read" or "write"."""
    return RunResults(
        schema_version=SCHEMA_VERSION, run_id=run_id or uuid.uuid4().hex, created_at=started,
        finished_at=now() if finished else None, environment=env, git=GitInfo(**(git or {})),
        settings=options.run_settings(suites=sources, trigger=trigger, side=side,
                                      results_dir=_recordable(results_dir),
                                      remote_cache=remote_cache),
        results=model_results, host=host, code=code)


def preflight(measuring: Measuring, env: Environment, python: str = sys.executable,
              visible: int | None = None) -> tuple[HostCheck | None, Measuring]:
    """The host preflight, and the measuring options with the GPUs it leaves to time on.
    ``visible``: the GPUs every interpreter of the run sees (a ``pr``'s two may differ),
    else ``env``'s."""
    visible = env.gpu_count if visible is None else visible
    measuring.check_gpus(visible)
    host = host_check(measuring.device, python, measuring.gpus)
    return host, measuring.lanes(host, visible)


def _recordable(folder: Path | None) -> str | None:
    """A results file's folder, absolute, where the schema can hold it (256 characters)."""
    text = None if folder is None else str(folder.resolve())
    return text if text is not None and len(text) <= MAX_SHORT_CHARS else None


def host_check(device: str, python: str = sys.executable,
               gpus: tuple[int, ...] | None = None) -> HostCheck | None:
    """The host's own noise before measuring (``compiler/hostcheck.py``, in the interpreter
    under test; ``gpus``: read these, else every GPU it sees); None when it cannot run (the
    run goes on, unchecked)."""
    args = [device, *(["--gpus", ",".join(map(str, gpus))] if gpus is not None else [])]
    try:
        out = run_module(python, "compilewatch.compiler.hostcheck", *args, env=base_env(),
                         timeout=300, check=True)
        return HostCheck.model_validate_json(out.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
