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
import copy
import faulthandler
import gc
import json
import logging
import os
import signal
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, NoReturn

from compilewatch.compiler import (
    accuracy,
    artifacts,
    compileworkers,
    cpus,
    outputs,
    probes,
    proctree,
    reads,
    remotecache,
    timing,
)
from compilewatch.compiler.protocol import (
    CompileSample,
    LatencySample,
    SavedArtifact,
    WorkerOutput,
    WorkerSpec,
)
from compilewatch.compiler.quiet import QuietLock, guard_benchmarks
from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.files import write_atomic
from compilewatch.core.schema import Accuracy, Category, Config, Memory, ModuleOrigin
from compilewatch.suites import imports
from compilewatch.suites.imports import SideCode

ERROR_TAIL = 4000
STACKS = "stacks"  # where a worker asked for its stacks writes them
_kept: list[Any] = []
COMPILER_STACK = ("torch._dynamo", "torch._inductor.compile_fx",
                  "torch._functorch._aot_autograd.autograd_cache", "torch._inductor.codecache")
# What a first compile still imports past COMPILER_STACK: of the 221 modules a first CPU
# compile imported with torch 2.13, the 125 of torch and sympy (0.3 s to import once torch is
# in). ``--preload-compile-path`` imports these before any compile's clock (in the fork
# server, or in a spawned worker's import), so a cold compile's time is more of the compile's
# own work: on the H200 that took 0.6-1.2 s (11-34%) off a micro model's cold compile and did
# not narrow how much cold compiles disagree, and users' first compiles pay these imports, so
# it is off by default (docs/verdict-quality.md, repeats 22-29). Names this torch lacks are
# skipped.
_PATTERNS = "torch._inductor.fx_passes.serialized_patterns"
COMPILE_PATH = (
    "sympy.combinatorics", "sympy.tensor.tensor",
    "torch._dynamo.backends.cudagraphs", "torch._dynamo.backends.distributed",
    "torch._dynamo.backends.inductor", "torch._dynamo.backends.onnxrt",
    "torch._dynamo.backends.tensorrt", "torch._dynamo.backends.torchxla",
    "torch._dynamo.backends.tvm", "torch._dynamo.dce_extra_outputs",
    "torch._dynamo.repro.after_dynamo",
    "torch._export.db", "torch._export.passes.add_runtime_assertions_for_constraints_pass",
    "torch._export.passes.collect_tracepoints_pass",
    "torch._functorch._activation_checkpointing.remat_using_tags_for_fwd_loss_bwd_graph_pass",
    "torch._functorch._aot_autograd.subclass_codegen",
    "torch._higher_order_ops.passes.inline_invoke_subgraph",
    "torch._inductor.bounds", "torch._inductor.compiler_bisector",
    "torch._inductor.extern_node_serializer", "torch._inductor.hooks",
    "torch._inductor.codegen.cpu_device_op_overrides",
    "torch._inductor.codegen.cuda.device_op_overrides",
    "torch._inductor.codegen.cuda_combined_scheduling", "torch._inductor.codegen.halide",
    "torch._inductor.codegen.memory_planning", "torch._inductor.codegen.mps",
    "torch._inductor.codegen.mps_device_op_overrides",
    "torch._inductor.codegen.mtia.device_op_overrides", "torch._inductor.codegen.pallas",
    "torch._inductor.codegen.python_wrapper_mtia", "torch._inductor.codegen.segmented_tree",
    "torch._inductor.codegen.wrapper_fxir", "torch._inductor.codegen.xpu.device_op_overrides",
    "torch._inductor.codegen.xpu.xpu_combined_scheduling",
    "torch._inductor.fx_passes.apply_gumbel_max_trick",
    "torch._inductor.fx_passes.efficient_conv_bn_eval",
    "torch._inductor.fx_passes.freezing_patterns", "torch._inductor.fx_passes.fuse_attention",
    "torch._inductor.fx_passes.mkldnn_fusion", "torch._inductor.fx_passes.pad_mm",
    "torch._inductor.fx_passes.quantization", _PATTERNS,
    *(f"{_PATTERNS}._sfdp_pattern_{i}" for i in range(1, 31)),
    *(f"{_PATTERNS}.{op}_pattern" for op in ("addmm", "bmm", "mm")),
    "torch._inductor.runtime.caching", "torch._subclasses.schema_check_mode",
    "torch.distributed.tensor.experimental", "torch.export._trace", "torch.export._unlift",
    "torch.fx.experimental.validator",
)


class Failure(Exception):
    """A classified failure."""

    def __init__(self, category: Category, message: str) -> None:
        super().__init__(message)
        self.category = category


def tail(text: str, limit: int = ERROR_TAIL) -> str:
    """The end of an error text, without NULs (databases refuse them in text columns)."""
    text = text.replace("\x00", "")
    return text if len(text) <= limit else "..." + text[-limit:]


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


def _classify(exc: BaseException, default: Category) -> Category:
    import torch

    text = str(exc).lower()
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or any(
            m in text for m in ("out of memory", "not enough memory", "can't allocate memory")):
        return Category.OOM
    return default


def _is_compile_error(exc: BaseException) -> bool:
    from torch._dynamo import exc as dexc

    return isinstance(exc, (dexc.TorchDynamoException, dexc.BackendCompilerFailed))


def _cast(obj: Any, device: str, dtype: Any) -> Any:
    """Move tensors (and modules) to the device; cast floating ones to dtype when given."""
    import torch

    if isinstance(obj, torch.nn.Module):
        obj = obj.to(device)
        return obj.to(dtype) if dtype is not None else obj
    if isinstance(obj, torch.Tensor):
        obj = obj.to(device)
        return obj.to(dtype) if dtype is not None and obj.is_floating_point() else obj
    if isinstance(obj, (tuple, list)):
        return type(obj)(_cast(x, device, dtype) for x in obj)
    return obj


def _sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _clone(out: Any) -> Any:
    """Copy outputs at once: CUDA-graph replays reuse their output buffers. Every part the
    accuracy check walks is copied, in containers of the same types (``compiler/outputs.py``)."""
    return outputs.copy_tensors(out)


@contextlib.contextmanager
def _precision(device: str, dtype: str) -> Iterator[None]:
    import torch

    with torch.no_grad():
        if dtype == "amp":
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                yield
        else:
            yield


def _instruction_counter() -> tuple[Callable[[], int], Callable[[int], int]] | None:
    """PyTorch's compile-time gate counts instructions; not every host has perf events."""
    import torch

    counter = getattr(torch._C, "_instruction_counter", None)
    if counter is None:
        return None
    try:
        handle = counter.start()
        if handle < 0:
            return None
        counter.end(handle)
    except Exception:
        return None
    return counter.start, counter.end


def _fp64_reference(fn: Any, inputs: tuple[Any, ...], device: str) -> Any | None:
    """The model in float64 on the same inputs, when that is cheap and possible."""
    import torch

    try:
        ref_fn = copy.deepcopy(fn).double() if isinstance(fn, torch.nn.Module) else fn
        with torch.no_grad():
            return _clone(ref_fn(*_cast(inputs, device, torch.float64)))
    except Exception:
        return None


GpuSection = Callable[[], contextlib.AbstractContextManager[Any]]


class Model:
    """The model built for this process: callable, inputs, the shape sweep, its spec."""

    def __init__(self, spec: WorkerSpec, suite: str | None = None,
                 code: SideCode | None = None) -> None:
        import torch

        # the suite (the user's code) is imported in the process that builds its model only
        from compilewatch.suites.loader import load_suite
        from compilewatch.suites.registry import BuildContext

        cfg = spec.config
        self.device, self.dtype = cfg.device, cfg.dtype
        self.code = code if suite is not None else spec.code
        if self.code is not None:
            imports.activate(self.code)
        self.before = imports.top_levels()
        self.mspec = load_suite(suite or spec.suite).models[spec.model]
        ctx = BuildContext(device=cfg.device, dtype=cfg.dtype, large=spec.large)
        torch.manual_seed(0)
        try:
            fn, inputs = self.mspec.build(ctx)
            sweep = self.mspec.sweep_inputs(ctx)
        except Exception as e:
            raise Failure(_classify(e, Category.BUILD_ERROR), tail(traceback.format_exc())) \
                from e
        cast = torch.bfloat16 if cfg.dtype == "bfloat16" else None
        self.fn = _cast(fn, cfg.device, cast)
        if isinstance(self.fn, torch.nn.Module):
            self.fn.eval()
        self.inputs = _cast(tuple(inputs), cfg.device, cast)
        self.sweep = [_cast(tuple(s), cfg.device, cast) for s in sweep]
        self.tolerance = self.mspec.tolerance(cfg.dtype)
        self.modules = self.own_code()

    def own_code(self) -> dict[str, ModuleOrigin]:
        """Where what building (and, asked again later, running) the model imported came
        from; a module the repository provides from outside this side's checkout is a
        ``FOREIGN_CODE`` failure (``suites/imports.py``)."""
        if self.code is None:
            return {}
        try:
            return imports.check(self.code, imports.top_levels() - self.before)
        except imports.ForeignCode as e:
            raise Failure(Category.FOREIGN_CODE, str(e)) from e

    def call(self, fn: Any, args: tuple[Any, ...] | None = None) -> Any:
        with _precision(self.device, self.dtype):
            return fn(*(self.inputs if args is None else args))


class Reference:
    """The other side's model of the same name, built from its own checkout's suite, timed
    eagerly beside this one's (``spec.reference_suite``), and the device memory it holds
    (weights and inputs), which this process's peak-memory numbers leave out."""

    def __init__(self, model: Model, held_bytes: int) -> None:
        self.model, self.held_bytes = model, held_bytes


def _allocated(device: str) -> int:
    import torch

    return int(torch.cuda.memory_allocated()) if device == "cuda" else 0


def reference_model(spec: WorkerSpec, notes: list[str]) -> Reference | None:
    """Build the reference before this side's own suite is imported; then forget the modules
    it brought from its checkout (``spec.reference_code``'s root, else its suite file's folder) and
    restore the import path, so that this side's suite imports its own helpers, not the other
    side's of the same name. What it cannot undo is global state its import set (a flag, a
    registered op): docs/measurement.md says so. None, and a note, where it does not build:
    the process then times its own model alone."""
    src = spec.reference_suite
    if not src or src == spec.suite:
        return None
    own = spec.reference_code
    root = own.root if own is not None else (str(Path(src).parent) if src.endswith(".py")
                                             else None)
    folder = Path(root).resolve() if root else None  # a module suite has no folder of its own
    before, path = set(sys.modules), list(sys.path)
    held = _allocated(spec.config.device)
    try:
        model = Model(spec, suite=src, code=own)
        return Reference(model, _allocated(spec.config.device) - held)
    except Exception as e:  # the other side may fail to build it, or not have it at all
        notes.append(f"no reference: base's {spec.model} did not build "
                     f"({type(e).__name__}: {str(e)[:200]})")
        return None
    finally:
        sys.path[:] = path
        for name in set(sys.modules) - before if folder is not None else ():
            file = getattr(sys.modules[name], "__file__", None)
            if file and Path(file).resolve().is_relative_to(folder):
                del sys.modules[name]


def _released(notes: list[str], why: str, held_bytes: int) -> None:
    """After the caller let go of a reference that stood in the way of this side's own
    measurement: say so, and give its device memory back."""
    notes.append(f"no reference: {why}; this process timed its own model alone")
    gc.collect()
    if held_bytes:
        import torch

        torch.cuda.empty_cache()


def build(spec: WorkerSpec, notes: list[str]) -> tuple[Model, Reference | None]:
    """This side's model, and the reference where the spec asks for one. A model that fits the
    device alone but not beside the reference is built alone: the reference is a witness,
    never a reason for this side to fail."""
    ref = reference_model(spec, notes) if spec.time_steady_state else None
    try:
        return Model(spec), ref
    except Failure as f:
        if ref is None or f.category is not Category.OOM:
            raise
    held, ref = ref.held_bytes, None
    _released(notes, "this side's model did not fit the device beside it", held)
    return Model(spec), None


def run_eager(m: Model, check: bool = True) -> tuple[Any, bool | None]:
    """Eager on the inputs: its output, and whether it repeats within the model's tolerance
    (random output cannot be judged against the compiler). Only a process that checks
    accuracy runs it twice; the others run it once, which is all the warm-up the compile and
    the timing after it need (on the H200 eager was 12% of a PR's process-seconds)."""
    try:
        first = _clone(m.call(m.fn))
        second = _clone(m.call(m.fn)) if check else first
        _sync(m.device)
    except Exception as e:
        raise Failure(_classify(e, Category.EAGER_ERROR), tail(traceback.format_exc())) from e
    return first, accuracy.deterministic(first, second, *m.tolerance) if check else True


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
    import torch

    kwargs = compile_kwargs(m.mspec.compile_kwargs, spec.config)
    counter = _instruction_counter()
    try:
        compiled = torch.compile(m.fn, **kwargs)
        handle = counter[0]() if counter else None
        waited0 = quiet.waited_s if quiet else 0.0
        cpu0, t0 = proctree.tree_cpu_seconds(), time.perf_counter()
        out = _clone(m.call(compiled))
        _sync(m.device)
        waited = (quiet.waited_s if quiet else 0.0) - waited0
        wall = time.perf_counter() - t0 - probe.overhead_s - waited
        cpu = proctree.tree_cpu_seconds() - cpu0 - probe.overhead_s
        instructions = int(counter[1](handle)) if counter and handle is not None else None
        for args in m.sweep:
            m.call(compiled, args)
        _sync(m.device)
    except Exception as e:
        default = Category.COMPILE_ERROR if _is_compile_error(e) else Category.RUNTIME_ERROR
        raise Failure(_classify(e, default), tail(traceback.format_exc())) from e
    stats = probes.frame_stats()
    sample = CompileSample(wall_s=max(wall, 0.0), cpu_s=max(cpu, 0.0),
                           instructions=instructions, **stats)
    return compiled, out, sample


def peak_memory(fn: Callable[[], Any], device: str) -> int | None:
    import torch

    if device != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def measure_memory(m: Model, compiled: Any, held_bytes: int = 0) -> Memory:
    """Peak allocated bytes of one eager and one compiled call; ``held_bytes`` (a reference
    model's weights and inputs, allocated throughout) is not this model's and is left out."""
    if m.device != "cuda":
        return Memory(unknown_reason="peak memory is measured on cuda only")

    def peak(fn: Callable[[], Any]) -> int | None:
        got = peak_memory(fn, m.device)
        return None if got is None else max(got - held_bytes, 0)

    return Memory(eager_peak_bytes=peak(lambda: m.call(m.fn)),
                  compiled_peak_bytes=peak(lambda: m.call(compiled)))


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
        timed = timing.measure(lambda: m.call(m.fn), lambda: m.call(compiled), m.device,
                               spec.rounds, spec.block_ms, reference=ref)
    finally:
        gc.enable()
    return LatencySample(timer=timed.timer, calls_per_block=timed.calls_per_block,
                         eager_us=timed.eager_us, compiled_us=timed.compiled_us,
                         host_fraction=timed.host_fraction, cpus=spec.pin_cpus,
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
                          fp64=lambda: _fp64_reference(m.fn, m.inputs, m.device))
    for i, args in enumerate(m.sweep if ok.passed else [], 1):
        want, got = _clone(m.call(m.fn, args)), _clone(m.call(compiled, args))
        ok = accuracy.compare(got, want, atol, rtol,
                              fp64=lambda a=args: _fp64_reference(m.fn, a, m.device))
        if not ok.passed:
            ok.reason = f"on shape-sweep input {i}: {ok.reason}"
            break
    return Accuracy(**ok.as_dict(atol, rtol, det))


def scan(spec: WorkerSpec, h: Harness, gpu: GpuSection) -> dict[str, Any]:
    """What the model reads of its checkout, without compiling it: built, run eagerly and under
    Dynamo with the eager backend (code that runs only while tracing, such as an import behind
    ``torch.compiler.is_compiling()``, runs too), on its inputs and its shape sweep."""
    import torch

    assert spec.watch_root is not None
    recorder = reads.Recorder(spec.watch_root, spec.home_root)
    recorder.start()
    cuda_context(spec, h, gpu)
    with h.phase("build"), gpu():
        m = Model(spec)
    with h.phase("eager"), gpu():
        for args in [m.inputs, *m.sweep]:
            m.call(m.fn, args)
    kwargs = {k: v for k, v in m.mspec.compile_kwargs.items() if k in ("dynamic", "fullgraph")}
    kwargs.setdefault("dynamic", spec.config.dynamic)
    with h.phase("trace"), gpu():
        traced = torch.compile(m.fn, backend="eager", **kwargs)
        for args in [m.inputs, *m.sweep]:
            m.call(traced, args)
        _sync(m.device)
    return {"reads": recorder.stop(), "modules": m.own_code()}


def cuda_context(spec: WorkerSpec, h: Harness, gpu: GpuSection) -> None:
    """Create this process's CUDA context up front, as a phase of its own: every worker needs
    one (a context cannot be forked), and inside ``build`` it hid how much of a GPU worker's
    harness time is the context and how much the model."""
    if spec.config.device != "cuda":
        return
    import torch

    with h.phase("cuda_context"), gpu():
        torch.empty(1, device="cuda")
        torch.cuda.synchronize()


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


def measure(spec: WorkerSpec, h: Harness) -> dict[str, Any]:
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
    remotecache.for_phase(spec.phase)  # a cold compile never reads a remote cache
    probe = probes.CompileProbe(trace_dir=spec.trace_dir, suite=spec.suite)
    probe.install()
    # a cold compile (and a warm start) waits for Inductor's compile workers: they start
    # while the model builds and runs eager
    workers = spec.ready_compile_workers and spec.phase in ("cold", "warm_start")
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
    with h.phase("build"), gpu():
        m, ref = build(spec, probe.notes)
    with h.phase("eager"), gpu():
        eager_out, det = run_eager(m, check=spec.check_accuracy)
        if ref is not None:
            try:
                run_eager(ref.model, check=False)
            except Failure as f:  # base's model, not this side's: never this side's failure
                held, ref, why = ref.held_bytes, None, f"base's {spec.model} failed in eager " \
                    f"({f.category})"
                _released(probe.notes, why, held)
    result: dict[str, Any] = {}
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
                      cache=probe.cache_keys(spec.phase), counters=probe.counters(),
                      cache_unknown=probe.unknown_text(), notes=probe.notes)
    if spec.check_accuracy:
        with h.phase("accuracy"), gpu():
            result["accuracy"] = check_accuracy(m, compiled, out, eager_out, det)
    if not (spec.measure_memory or spec.time_steady_state):
        return {**result, "modules": m.own_code()}
    with device(spec, h) as idle_s:
        if spec.measure_memory:
            with h.phase("memory"):
                result["memory"] = measure_memory(m, compiled,
                                                  ref.held_bytes if ref is not None else 0)
        if spec.time_steady_state:
            with h.phase("timing"):
                result["latency"] = measure_latency(m, compiled, spec, idle_s, ref)
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
        data = measure(spec, h)
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
    (the few no compile slot holds, ``cpus.CoreGroups``), and on the H200 six spawned workers
    importing there at once took 22-25 s each instead of 12. Returns whether the spec asks for
    ``COMPILE_PATH`` with the import. The spec is validated later, in ``start``; an unreadable
    one is its error to report, not this function's."""
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
