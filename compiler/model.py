"""The model under test in a worker process: built from its suite on the spec's device and
dtype, called eagerly, and the other side's model of the same name built beside it (the
reference); failures classified as they happen (``Failure``)."""

from __future__ import annotations

import contextlib
import copy
import gc
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from compilewatch.compiler import accuracy, outputs
from compilewatch.compiler.protocol import WorkerSpec, tail
from compilewatch.core.schema import Category, ModuleOrigin
from compilewatch.suites import imports
from compilewatch.suites.imports import SideCode


class Failure(Exception):
    """A classified failure."""

    def __init__(self, category: Category, message: str) -> None:
        super().__init__(message)
        self.category = category


def classify(exc: BaseException, default: Category) -> Category:
    import torch

    text = str(exc).lower()
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or any(
            m in text for m in ("out of memory", "not enough memory", "can't allocate memory")):
        return Category.OOM
    return default


def is_compile_error(exc: BaseException) -> bool:
    from torch._dynamo import exc as dexc

    return isinstance(exc, (dexc.TorchDynamoException, dexc.BackendCompilerFailed))


def to_device(obj: Any, device: str, dtype: Any) -> Any:
    """Move tensors (and modules) to the device; cast floating ones to dtype when given."""
    import torch

    if isinstance(obj, torch.nn.Module):
        obj = obj.to(device)
        return obj.to(dtype) if dtype is not None else obj
    if isinstance(obj, torch.Tensor):
        obj = obj.to(device)
        return obj.to(dtype) if dtype is not None and obj.is_floating_point() else obj
    if isinstance(obj, (tuple, list)):
        return type(obj)(to_device(x, device, dtype) for x in obj)
    return obj


def sync(device: str) -> None:
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def clone(out: Any) -> Any:
    """Copy outputs at once: CUDA-graph replays reuse their output buffers. Every part the
    accuracy check walks is copied, in containers of the same types (``compiler/outputs.py``)."""
    return outputs.copy_tensors(out)


@contextlib.contextmanager
def precision(device: str, dtype: str) -> Iterator[None]:
    import torch

    with torch.no_grad():
        if dtype == "amp":
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                yield
        else:
            yield


def instruction_counter() -> tuple[Callable[[], int], Callable[[int], int]] | None:
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


def fp64_reference(fn: Any, inputs: tuple[Any, ...], device: str) -> Any | None:
    """The model in float64 on the same inputs, when that is cheap and possible."""
    import torch

    try:
        ref_fn = copy.deepcopy(fn).double() if isinstance(fn, torch.nn.Module) else fn
        with torch.no_grad():
            return clone(ref_fn(*to_device(inputs, device, torch.float64)))
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
        ctx = BuildContext(device=cfg.device, dtype=cfg.dtype, large=spec.large, task=cfg.task)
        torch.manual_seed(0)
        try:
            fn, inputs = self.mspec.build(ctx)
            sweep = self.mspec.sweep_inputs(ctx)
        except Exception as e:
            raise Failure(classify(e, Category.BUILD_ERROR), tail(traceback.format_exc())) \
                from e
        cast = torch.bfloat16 if cfg.dtype == "bfloat16" else None
        self.fn = to_device(fn, cfg.device, cast)
        if isinstance(self.fn, torch.nn.Module):
            self.fn.eval()
        self.inputs = to_device(tuple(inputs), cfg.device, cast)
        self.sweep = [to_device(tuple(s), cfg.device, cast) for s in sweep]
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

    def compile(self, kwargs: dict[str, Any]) -> Any:
        import torch

        return torch.compile(self.fn, **kwargs)

    def call(self, fn: Any, args: tuple[Any, ...] | None = None) -> Any:
        with precision(self.device, self.dtype):
            return fn(*(self.inputs if args is None else args))


class Runnable(Protocol):
    """What timing calls: a model (or the training step around one) and its eager call."""

    device: str
    fn: Any

    def call(self, fn: Any, args: tuple[Any, ...] | None = None) -> Any: ...


class Reference:
    """The other side's model of the same name, built from its own checkout's suite, timed
    eagerly beside this one's (``spec.reference_suite``), and the device memory it holds
    (weights and inputs), which this process's peak-memory numbers leave out."""

    def __init__(self, model: Runnable, held_bytes: int) -> None:
        self.model, self.held_bytes = model, held_bytes

    def let_go(self) -> None:
        """Drop the model, so that its device memory can be given back while a caller still
        holds this object (``released``)."""
        del self.model


def allocated(device: str) -> int:
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
    held = allocated(spec.config.device)
    try:
        model = Model(spec, suite=src, code=own)
        return Reference(model, allocated(spec.config.device) - held)
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


def released(notes: list[str], why: str, held_bytes: int) -> None:
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
    released(notes, "this side's model did not fit the device beside it", held)
    return Model(spec), None


def run_eager(m: Model, check: bool = True) -> tuple[Any, bool | None]:
    """Eager on the inputs: its output, and whether it repeats within the model's tolerance
    (random output cannot be judged against the compiler). Only a process that checks
    accuracy runs it twice; the others run it once, which is all the warm-up the compile and
    the timing after it need (docs/verdict-quality.md, "Eager once")."""
    try:
        first = clone(m.call(m.fn))
        second = clone(m.call(m.fn)) if check else first
        sync(m.device)
    except Exception as e:
        raise Failure(classify(e, Category.EAGER_ERROR), tail(traceback.format_exc())) from e
    return first, accuracy.deterministic(first, second, *m.tolerance) if check else True
