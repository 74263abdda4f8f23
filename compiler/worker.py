"""One (model, config, phase) measured in its own process.

Started as ``python -m compilewatch.compiler.worker SPEC.json`` (spawn) or forked from the fork
server (``compiler/forkserver.py``) that imported the compiler stack once. The parent
(``runner``) chooses the Inductor cache dir (empty for a cold compile, a cold process's dir for a
warm one), enforces the timeout and survives crashes. This process catches what Python can catch,
classifies it (eager error, compile error, OOM, accuracy...) and always writes its
``WorkerOutput`` atomically to ``spec.out``; a missing output means the process died.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import gc
import json
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

from compilewatch.compiler import (
    accuracy,
    artifacts,
    compileworkers,
    cpus,
    gpus,
    kernels,
    overrides,
    peaks,
    probes,
    proctree,
    reads,
    remotecache,
    timing,
    training,
)
from compilewatch.compiler.model import (
    Failure,
    GpuSection,
    Model,
    Reference,
    build,
    classify,
    clone,
    fp64_reference,
    instruction_counter,
    is_compile_error,
    released,
    run_eager,
    sync,
)
from compilewatch.compiler.protocol import (
    COMPILE_PATH,
    COMPILER_STACK,
    STACKS,
    CompileSample,
    LatencySample,
    SavedArtifact,
    WorkerOutput,
    WorkerSpec,
    tail,
)
from compilewatch.compiler.quiet import QuietLock, guard_benchmarks
from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.files import write_atomic
from compilewatch.core.schema import Accuracy, Category, Config

_kept: list[Any] = []


def import_compiler_stack(compile_path: bool = False) -> float:
    """Import torch and what a first ``torch.compile`` imports (with ``compile_path``, also
    ``COMPILE_PATH``); the seconds it took. The fork server pays this once; a spawned worker
    pays it every time (reported as ``import_s``)."""
    import importlib

    t0 = time.perf_counter()
    import torch  # noqa: F401

    for name in COMPILER_STACK:
        importlib.import_module(name)
    if compile_path:
        import_compile_path()
    return time.perf_counter() - t0


def import_compile_path() -> list[str]:
    """Import what of ``COMPILE_PATH`` this torch has, as the fork server imports it with its
    preload; the names it could not import."""
    return import_each(COMPILE_PATH)


def import_each(names: Iterable[str]) -> list[str]:
    """Import each module; the ones that could not be imported, each with why (another torch's
    module, a missing extra): whatever a module's import raises, it is skipped."""
    import importlib

    skipped: list[str] = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception as e:
            skipped.append(f"{name}: {type(e).__name__}")
    return skipped


class Harness:
    """Where this process's time goes, by phase, and the status file the parent shows. Time
    spent waiting for another process's timing section to end (``quiet``) is its own phase,
    ``wait_gpu``, not the phase it interrupted."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.seconds: dict[str, float] = {}
        self.quiet = QuietLock(spec.device_lock) if spec.device_lock else None

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        with contextlib.suppress(OSError):
            Path(self.spec.status_file).write_text(f"{self.spec.phase}: {name}", encoding="utf-8")
        t0 = time.perf_counter()
        w0 = self.quiet.waited_s if self.quiet else 0.0
        try:
            yield
        finally:
            waited = (self.quiet.waited_s if self.quiet else 0.0) - w0
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0 - waited
            if waited:
                self.seconds["wait_gpu"] = self.seconds.get("wait_gpu", 0.0) + waited


def compile_kwargs(own: Mapping[str, Any], config: Config) -> dict[str, Any]:
    """``torch.compile``'s arguments: the model's own, then the config's mode and dynamic. The
    default mode is left out: torch refuses a mode beside ``options`` (a model that sets
    Inductor options failed every compile), and mode "default" sets nothing."""
    kwargs = dict(own)
    kwargs.setdefault("dynamic", config.dynamic)
    if kwargs.setdefault("mode", config.mode) == "default":
        del kwargs["mode"]
    return kwargs


def run_compile(m: Model, spec: WorkerSpec, probe: probes.CompileProbe,
                quiet: QuietLock | None = None) -> tuple[Any, Any, CompileSample]:
    """First compiled call (timed: the compile, wall and process-tree CPU; minus what its
    autotuning waited for a quiet GPU), then the shape sweep (recompiles)."""

    kwargs = compile_kwargs(m.mspec.compile_kwargs, spec.config)
    counter = instruction_counter()
    try:
        compiled = m.compile(kwargs)
        handle = counter[0]() if counter else None
        waited0 = quiet.waited_s if quiet else 0.0
        cpu0, t0 = proctree.tree_cpu_seconds(), time.perf_counter()
        out = clone(m.call(compiled))
        sync(m.device)
        waited = (quiet.waited_s if quiet else 0.0) - waited0
        wall = time.perf_counter() - t0 - probe.overhead_s - waited
        cpu = proctree.tree_cpu_seconds() - cpu0 - probe.overhead_s
        instructions = int(counter[1](handle)) if counter and handle is not None else None
        for args in m.sweep:
            m.call(compiled, args)
        sync(m.device)
    except Exception as e:
        raise _failure(e) from e
    stats = probes.frame_stats()
    sample = CompileSample(wall_s=max(wall, 0.0), cpu_s=max(cpu, 0.0),
                           instructions=instructions, **stats)
    return compiled, out, sample


def _failure(e: Exception) -> Failure:
    """A compile's (or its first call's) exception, classified."""
    default = Category.COMPILE_ERROR if is_compile_error(e) else Category.RUNTIME_ERROR
    return Failure(classify(e, default), tail(traceback.format_exc()))


def _compiled(m: Model | training.TrainingModel, kwargs: dict[str, Any]) -> Any:
    """The compiled model after its first call (the compile, or the cache's load)."""
    try:
        compiled = m.compile(kwargs)
        m.call(compiled)
        sync(m.device)
    except Exception as e:
        raise _failure(e) from e
    return compiled


def measure_latency(m: Model, compiled: Any, spec: WorkerSpec, idle_s: float | None = None,
                    reference: Reference | None = None) -> LatencySample:
    """Steady state of eager and compiled; with a reference suite, also the reference model's
    eager (the other side's model; this one's own where the suite is this side's own)."""
    timing.warm_up(lambda: m.call(compiled), m.device, timing.warmup_s(spec.gpu_warmup_s, idle_s))
    own = spec.reference_suite is not None and spec.reference_suite == spec.suite
    witness = m if own else (reference.model if reference is not None else None)
    ref = None if witness is None else (lambda: witness.call(witness.fn))
    gc.collect()
    gc.disable()  # as timeit does: a collection inside a block is not the model's time
    try:
        timed = timing.time_interleaved(lambda: m.call(m.fn), lambda: m.call(compiled), m.device,
                                        spec.rounds, spec.block_ms, reference=ref)
    finally:
        gc.enable()
    return LatencySample(timer=timed.timer, calls_per_block=timed.calls_per_block,
                         eager_us=timed.eager_us, compiled_us=timed.compiled_us,
                         host_fraction=timed.host_fraction, host_us=timed.host_us,
                         cpus=spec.pin_cpus,
                         reference_us=timed.reference_us)


def _save_artifact(path: str) -> SavedArtifact:
    """Save the portable cache; a failure to save is a note, never a failed measurement."""
    try:
        return SavedArtifact(**artifacts.save(path))
    except Exception as e:
        return SavedArtifact(unsupported=tail(f"saving the cache artifact failed: "
                                              f"{type(e).__name__}: {e}", 1000))


def check_accuracy(m: Model, compiled: Any, out: Any, eager_out: Any,
                   det: bool | None) -> Accuracy:
    """Compiled vs eager on the example inputs, then on every sweep input: each recompiled
    graph (or each hot-loaded one, when verifying a cache artifact) must be right too."""
    atol, rtol = m.tolerance
    ok = accuracy.compare(out, eager_out, atol, rtol,
                          fp64=lambda: fp64_reference(m.fn, m.inputs, m.device))
    for i, args in enumerate(m.sweep if ok.passed else [], 1):
        want, got = clone(m.call(m.fn, args)), clone(m.call(compiled, args))
        ok = accuracy.compare(got, want, atol, rtol,
                              fp64=lambda a=args: fp64_reference(m.fn, a, m.device))
        if not ok.passed:
            ok.reason = f"on shape-sweep input {i}: {ok.reason}"
            break
    return Accuracy(**ok.as_dict(atol, rtol, det))


def scan(spec: WorkerSpec, h: Harness, gpu: GpuSection) -> dict[str, Any]:
    """What the model reads of its checkout, without compiling it: built, run eagerly and under
    Dynamo with the eager backend (code that runs only while tracing, such as an import behind
    ``torch.compiler.is_compiling()``, runs too), on its inputs and its shape sweep. For
    training, whole steps: the loss, the backward and the optimizer read code too."""
    assert spec.watch_root is not None
    recorder = reads.Recorder(spec.watch_root, spec.home_root)
    recorder.start()
    cuda_context(spec, h, gpu)
    with h.phase("build"), gpu():
        m: Model | training.TrainingModel = Model(spec)
        if spec.config.task == "training":
            m = training.TrainingModel(m, record=False)
    with h.phase("eager"), gpu():
        for args in [m.inputs, *m.sweep]:
            m.call(m.fn, args)
    kwargs = {k: v for k, v in m.mspec.compile_kwargs.items() if k in ("dynamic", "fullgraph")}
    kwargs.setdefault("dynamic", spec.config.dynamic)
    with h.phase("trace"), gpu():
        traced = m.compile({**kwargs, "backend": "eager"})
        for args in [m.inputs, *m.sweep]:
            m.call(traced, args)
        sync(m.device)
    return {"reads": recorder.stop(), "modules": m.own_code()}


def profile(spec: WorkerSpec, h: Harness, gpu: GpuSection) -> dict[str, Any]:
    """The profile process (``compiler/kernels.py``): built and compiled as a timing process
    is (no eager check, no shape sweep), then profiled in the device's timing section."""
    assert spec.kernel_trace is not None
    notes = kernels.configure(spec.config.device)
    capture = kernels.Capture.start()
    cuda_context(spec, h, gpu)
    try:
        with h.phase("build"), gpu():
            m: Model | training.TrainingModel = Model(spec)
            if spec.config.task == "training":
                m = training.TrainingModel(m, record=False)
        with h.phase("compile"), gpu():
            compiled = _compiled(m, compile_kwargs(m.mspec.compile_kwargs, spec.config))
        with device(spec, h), h.phase("profile"):
            data = kernels.record(lambda: m.call(compiled), m.device, spec.kernel_trace)
        with h.phase("probes"):
            found = kernels.profile_of(data, capture, activity=m.device, notes=notes,
                                       shorten=functools.partial(probes.user_path,
                                                                 suite=spec.suite))
    finally:
        capture.close()
    return {"kernels": found, "modules": m.own_code()}


def cuda_context(spec: WorkerSpec, h: Harness, gpu: GpuSection) -> None:
    """Create this process's CUDA context up front, as a phase of its own: every worker needs
    one (a context cannot be forked), and inside ``build`` it hid how much of a GPU worker's
    harness time is the context and how much the model."""
    if spec.config.device != "cuda":
        return
    import torch

    if spec.gpu is not None:  # this process's GPU lane: "cuda" means this device from now on
        try:
            torch.cuda.set_device(spec.gpu)
        except Exception as e:
            raise Failure(Category.INFRA, f"GPU {spec.gpu} is not usable here "
                          f"({type(e).__name__}: {e})") from e
    with h.phase("cuda_context"), gpu():
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()


def eager_reference(ref: Reference, spec: WorkerSpec, notes: list[str]) -> Reference | None:
    """The reference run once eagerly (for training, made the witness step, its first step
    run), so it fails here, never inside timing; None, a note, and its memory given back where
    it fails: base's model is not this side's, its failure never this side's."""
    held = ref.held_bytes
    if spec.config.task == "training":
        witness, why = training.witness(ref)
    else:
        try:
            run_eager(ref.model, check=False)
            witness, why = ref, None
        except Failure as f:
            witness, why = None, f"base's {spec.model} failed in eager ({f.category})"
    if witness is None:
        ref.let_go()  # first: its memory can only be given back after
        released(notes, why or "", held)
    return witness


def _noted(notes: list[str], note: str | None) -> None:
    if note:
        notes.append(note)


def compile_threads(spec: WorkerSpec) -> None:
    """As many Inductor compile workers as this process has cores (``spec.compile_threads``),
    not one per core of the machine, which torch decides once at import (a fork server's
    import, for every child). A user's ``TORCHINDUCTOR_COMPILE_THREADS`` stands. The setting
    is outside the FX cache key (torch ignores it there), so it changes no key."""
    if spec.compile_threads is None or "TORCHINDUCTOR_COMPILE_THREADS" in os.environ:
        return
    import torch._inductor.config as inductor_config

    inductor_config.compile_threads = spec.compile_threads


def measure_process(spec: WorkerSpec, h: Harness) -> dict[str, Any]:
    """Everything one worker process measures; raises ``Failure`` on a classified failure."""
    import torch

    if spec.config.device == "cuda" and not torch.cuda.is_available():
        raise Failure(Category.UNSUPPORTED, "device cuda requested but "
                      "torch.cuda.is_available() is False on this machine")
    quiet = h.quiet
    gpu: GpuSection = quiet.shared if quiet else contextlib.nullcontext
    if spec.phase == "scan":
        return scan(spec, h, gpu)
    compile_threads(spec)
    shared = remotecache.prepare(spec)  # torch's own remote caches off; ours where asked
    if shared is not None and spec.phase == "remote":
        raise Failure(Category.UNSUPPORTED, f"the shared compile cache: {shared}")
    if spec.phase == "profile":
        return profile(spec, h, gpu)
    probe = probes.CompileProbe(trace_dir=spec.trace_dir, suite=spec.suite)
    probe.install()
    _noted(probe.notes, shared and f"the shared compile cache: {shared}")
    # a cold compile (and a warm start, a remote one) waits for Inductor's compile workers:
    # they start while the model builds and runs eager
    workers = spec.ready_compile_workers and spec.phase in ("cold", "warm_start", "remote")
    if workers:
        _noted(probe.notes, compileworkers.start())
    if quiet is not None:
        try:
            guarded = guard_benchmarks(quiet)
        except Exception as e:  # a torch that moved its benchmarker: compile unguarded
            guarded = f"not guarded ({type(e).__name__}: {e})"
        if guarded.startswith("not guarded"):
            probe.notes.append(f"Inductor's GPU benchmarks are {guarded}: autotuning may "
                               "have run beside another model's timing")
    cuda_context(spec, h, gpu)
    result: dict[str, Any] = {}
    with h.phase("build"), gpu():
        m, ref = build(spec, probe.notes)
        if spec.config.task == "training":
            m = training.TrainingModel(m, record=spec.check_accuracy)
            result["training"] = training.settings(m)
    with h.phase("eager"), gpu():
        eager = training.run_eager if isinstance(m, training.TrainingModel) else run_eager
        eager_out, det = eager(m, check=spec.check_accuracy)
        if ref is not None:
            ref = eager_reference(ref, spec, probe.notes)
    if spec.load_artifact:
        with h.phase("load_artifact"):
            try:
                artifacts.load(spec.load_artifact)
            except CacheArtifactError as e:
                raise Failure(Category.INFRA, str(e)) from e
    if workers:
        with h.phase("compile_workers"):
            _noted(probe.notes, compileworkers.wait())
    with h.phase("compile"):
        compiled, out, result["compile"] = run_compile(m, spec, probe, quiet)
    if spec.save_artifact:
        with h.phase("save_artifact"):
            result["artifact"] = _save_artifact(spec.save_artifact)
    with h.phase("probes"):
        result.update(graph_breaks=probe.graph_breaks(), recompiles=probe.recompiles(),
                      cache=probe.cache_keys(spec.phase),
                      counters={**probe.counters(), **remotecache.counted()},
                      cache_unknown=probe.unknown_text(),
                      notes=[*probe.notes, *remotecache.TALLY.notes][:64])
    if spec.check_accuracy:
        with h.phase("accuracy"), gpu():
            result["accuracy"] = (
                training.check_accuracy(m, compiled, eager_out, det)
                if isinstance(m, training.TrainingModel)
                else check_accuracy(m, compiled, out, eager_out, det))
    if not (spec.measure_memory or spec.time_steady_state):
        return {**result, "modules": m.own_code()}
    with device(spec, h) as idle_s:
        if spec.measure_memory:
            with h.phase("memory"):
                result["memory"] = peaks.measure_memory(
                    m, compiled, ref.held_bytes if ref is not None else 0, (eager_out, out))
        if spec.time_steady_state:
            with h.phase("timing"):
                result["latency"] = measure_latency(m, compiled, spec, idle_s, ref)
    if "latency" in result:  # after the device lock: asking nvidia-smi holds up no other timing
        result["latency"] = result["latency"].model_copy(
            update={"gpu": gpus.identity(m.device)})
    return {**result, "modules": m.own_code()}  # again: compiling may import more


@contextlib.contextmanager
def device(spec: WorkerSpec, h: Harness) -> Iterator[float | None]:
    """The measuring section: wait for the device lock (one timing section at a time, and the
    other workers' GPU sections ended; they build and compile meanwhile), then move to the
    timing cores. Yields how long the device has been idle since the last section ended
    (None: unknown), so a section that follows another at once needs no long warm-up."""
    import torch

    with contextlib.ExitStack() as stack:
        idle = None
        if h.quiet is not None:
            with h.phase("wait_device"):
                idle = stack.enter_context(h.quiet.exclusive())
        if spec.pin_cpus:
            cpus.pin_all(spec.pin_cpus)
            if spec.config.device == "cpu":
                torch.set_num_threads(len(spec.pin_cpus))
        yield idle


def run_spec(spec: WorkerSpec, import_s: float | None, paid_import: bool = True
             ) -> WorkerOutput:
    """Measure and classify; never raises (a bug in here is an ``infra`` failure).
    ``paid_import``: this process imported the compiler stack itself (spawned), so the import
    is part of its harness time; a forked one reports the server's import, paid once."""
    h = Harness(spec)
    if import_s is not None and paid_import:
        h.seconds["import"] = import_s
    try:
        overrides.apply()  # the Inductor config a bisection's step tries (docs/bisect.md)
        data = measure_process(spec, h)
        return WorkerOutput(ok=True, phase=spec.phase, import_s=import_s,
                            harness_s=h.seconds, **data)
    except Failure as f:
        return WorkerOutput(ok=False, phase=spec.phase, category=f.category, error=str(f),
                            import_s=import_s, harness_s=h.seconds)
    except Exception:
        return WorkerOutput(ok=False, phase=spec.phase, category=Category.INFRA,
                            error=tail(traceback.format_exc()), import_s=import_s,
                            harness_s=h.seconds)


def write_output(spec: WorkerSpec, output: WorkerOutput) -> None:
    t0 = time.perf_counter()
    output.model_dump_json()
    harness = {**output.harness_s, "write": time.perf_counter() - t0}
    write_atomic(spec.out, output.model_copy(update={"harness_s": harness}).model_dump_json())


def dump_stacks_on_request(spec: WorkerSpec) -> None:
    """On ``SIGUSR1`` write every thread's Python stack beside the output (``STACKS``): the
    parent asks before killing a worker that ran out of time, so a timeout says where the
    worker was (a lock, a compile pool, the model's own code) instead of only its phase.
    faulthandler writes from the signal handler itself, so a thread stuck in C is seen too."""
    if not spec.out:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        stacks = open(Path(spec.out).with_name(STACKS), "w", encoding="utf-8")  # noqa: SIM115
        faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
        _kept.append(stacks)  # the handler writes to its descriptor until the process ends


def start(spec_path: str, import_s: float | None, paid_import: bool = True) -> int:
    """The process side: pin, read the spec, measure, write the output."""
    spec = WorkerSpec.model_validate(json.loads(Path(spec_path).read_text(encoding="utf-8")))
    dump_stacks_on_request(spec)
    where = spec.prepare_cpus or spec.pin_cpus
    if where:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, where)
    write_output(spec, run_spec(spec, import_s, paid_import))
    return 0


def pin_early(spec_path: str) -> bool:
    """A spawned worker moves to its cores before it imports torch: it starts on its parent's
    (the few no compile slot holds, ``cpus.CoreGroups``), where several importing at once take
    twice as long (docs/verdict-quality.md, "Timing cores away from compiles"). Returns
    whether the spec asks for ``COMPILE_PATH`` with the import. The spec is validated later,
    in ``start``; an unreadable one is its error to report, not this function's."""
    try:
        raw = json.loads(Path(spec_path).read_text(encoding="utf-8"))
        where = [int(c) for c in (raw.get("prepare_cpus") or raw.get("pin_cpus") or ())]
        compile_path = raw.get("preload_compile_path") is True
    except (OSError, ValueError, TypeError, AttributeError):
        return False
    if where:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(0, where)
    return compile_path


def main(argv: list[str]) -> int:
    # the parent as we find it: no child is told a pid (docs/security.md)
    proctree.die_with_parent(os.getppid())
    compile_path = pin_early(argv[1])
    return start(argv[1], import_compiler_stack(compile_path))


def exit_now(code: int) -> NoReturn:
    """Leave as soon as the output is written, as a forked worker does: a thread the model
    left behind (not a daemon) would otherwise hold the process at exit until the run's
    timeout killed it, minutes of wall time for a result already on disk."""
    with contextlib.suppress(Exception):
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        _code = main(sys.argv)
    except BaseException:
        traceback.print_exc()
        _code = 1
    exit_now(_code)
