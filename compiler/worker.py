"""One (model, config, phase) measured in its own process: ``python -m ...worker SPEC.json``.

The parent (``runner``) sets ``TORCHINDUCTOR_CACHE_DIR`` (empty for a cold compile, reused for
a warm one), enforces the timeout and survives crashes. This process catches what Python can
catch, classifies it (eager error, compile error, OOM, accuracy...) and always writes its
outcome atomically to ``spec["out"]``; a missing outcome file means the process died.
"""

from __future__ import annotations

import contextlib
import copy
import json
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from compilewatch.compiler import accuracy, artifacts, probes, timing
from compilewatch.core.errors import CacheArtifactError
from compilewatch.core.files import write_atomic

ERROR_TAIL = 4000


class Failure(Exception):
    """A classified failure: ``category`` is a schema Category value."""

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category


def tail(text: str, limit: int = ERROR_TAIL) -> str:
    """The end of an error text, without NULs (databases refuse them in text columns)."""
    text = text.replace("\x00", "")
    return text if len(text) <= limit else "..." + text[-limit:]


def _status(spec: dict[str, Any], phase: str) -> None:
    path = spec.get("status_file")
    if path:
        with contextlib.suppress(OSError):
            Path(path).write_text(phase, encoding="utf-8")


def _classify(exc: BaseException, default: str) -> str:
    import torch

    text = str(exc).lower()
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or any(
            m in text for m in ("out of memory", "not enough memory", "can't allocate memory")):
        return "oom"
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
    """Copy outputs at once: CUDA-graph replays reuse their output buffers."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.detach().clone()
    if isinstance(out, tuple) and hasattr(out, "_fields"):  # a named tuple takes fields
        return type(out)(*(_clone(x) for x in out))
    if isinstance(out, (tuple, list)):
        return type(out)(_clone(x) for x in out)
    if isinstance(out, dict):
        return {k: _clone(v) for k, v in out.items()}
    if hasattr(out, "to_tuple"):
        return _clone(out.to_tuple())
    return out


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


def build(spec: dict[str, Any]) -> tuple[Any, Any, tuple[Any, ...], list[tuple[Any, ...]]]:
    """Import the suite, build the model and its inputs on the device, in the dtype."""
    import torch

    from compilewatch.suites.loader import load_suite
    from compilewatch.suites.registry import BuildContext

    cfg = spec["config"]
    suite = load_suite(spec["suite"])
    mspec = suite.models[spec["model"]]
    ctx = BuildContext(device=cfg["device"], dtype=cfg["dtype"], large=spec["large"])
    torch.manual_seed(0)
    try:
        fn, inputs = mspec.build(ctx)
        sweep = mspec.sweep_inputs(ctx)
    except Exception as e:
        raise Failure(_classify(e, "build_error"), tail(traceback.format_exc())) from e
    dtype = torch.bfloat16 if cfg["dtype"] == "bfloat16" else None
    fn = _cast(fn, cfg["device"], dtype)
    if isinstance(fn, torch.nn.Module):
        fn.eval()
    inputs = _cast(tuple(inputs), cfg["device"], dtype)
    sweep = [_cast(tuple(s), cfg["device"], dtype) for s in sweep]
    return mspec, fn, inputs, sweep


def run_eager(fn: Any, inputs: tuple[Any, ...], cfg: dict[str, Any]) -> tuple[Any, bool]:
    try:
        with _precision(cfg["device"], cfg["dtype"]):
            first = _clone(fn(*inputs))
            second = _clone(fn(*inputs))
        _sync(cfg["device"])
    except Exception as e:
        raise Failure(_classify(e, "eager_error"), tail(traceback.format_exc())) from e
    return first, accuracy.deterministic(first, second)


def run_compile(fn: Any, inputs: tuple[Any, ...], sweep: list[tuple[Any, ...]],
                cfg: dict[str, Any], compile_kwargs: dict[str, Any],
                result: dict[str, Any], probe: probes.CompileProbe) -> tuple[Any, Any]:
    """First compiled call (timed: the compile), then the shape sweep (recompiles)."""
    import torch

    kwargs = dict(compile_kwargs)
    kwargs.setdefault("mode", cfg["mode"])
    kwargs.setdefault("dynamic", cfg["dynamic"])
    counter = _instruction_counter()
    try:
        compiled = torch.compile(fn, **kwargs)
        handle = counter[0]() if counter else None
        t0 = time.perf_counter()
        with _precision(cfg["device"], cfg["dtype"]):
            out = _clone(compiled(*inputs))
        _sync(cfg["device"])
        result["compile_s"] = time.perf_counter() - t0 - probe.overhead_s
        result["probe_overhead_s"] = probe.overhead_s
        if counter and handle is not None:
            result["instructions"] = int(counter[1](handle))
        with _precision(cfg["device"], cfg["dtype"]):
            for args in sweep:
                compiled(*args)
        _sync(cfg["device"])
    except Exception as e:
        default = "compile_error" if _is_compile_error(e) else "runtime_error"
        raise Failure(_classify(e, default), tail(traceback.format_exc())) from e
    return compiled, out


def peak_memory(fn: Callable[[], Any], device: str) -> int | None:
    import torch

    if device != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def measure_steady_state(spec: dict[str, Any], fn: Any, compiled: Any, inputs: tuple[Any, ...],
                         result: dict[str, Any]) -> None:
    cfg = spec["config"]

    def eager_call() -> Any:
        with _precision(cfg["device"], cfg["dtype"]):
            return fn(*inputs)

    def compiled_call() -> Any:
        with _precision(cfg["device"], cfg["dtype"]):
            return compiled(*inputs)

    _status(spec, f"{spec['phase']}: memory")
    result["memory"] = {
        "eager_peak_bytes": peak_memory(eager_call, cfg["device"]),
        "compiled_peak_bytes": peak_memory(compiled_call, cfg["device"]),
        "unknown_reason": None if cfg["device"] == "cuda" else "peak memory is measured on cuda",
    }
    _status(spec, f"{spec['phase']}: timing")
    timed = timing.measure(eager_call, compiled_call, cfg["device"], spec["rounds"],
                           spec["block_ms"])
    result["latency"] = {"method": "interleaved-blocks", "timer": timed.timer,
                         "calls_per_block": timed.calls_per_block,
                         "eager_us": timed.eager_us, "compiled_us": timed.compiled_us}


def _save_artifact(path: str) -> dict[str, Any]:
    """Save the portable cache; a failure to save is a note, never a failed measurement."""
    try:
        return artifacts.save(path)
    except Exception as e:
        return {"unsupported": tail(f"saving the cache artifact failed: {type(e).__name__}: "
                                    f"{e}", 1000)}


def check_accuracy(fn: Any, compiled: Any, out: Any, eager_out: Any, inputs: tuple[Any, ...],
                   sweep: list[tuple[Any, ...]], tol: tuple[float, float], det: bool,
                   cfg: dict[str, Any]) -> dict[str, Any]:
    """Compiled vs eager on the example inputs, then on every sweep input: each recompiled
    graph (or each hot-loaded one, when verifying a cache artifact) must be right too."""
    atol, rtol = tol
    ok = accuracy.compare(out, eager_out, atol, rtol,
                          fp64=lambda: _fp64_reference(fn, inputs, cfg["device"]))
    for args in sweep if ok.passed else []:
        with _precision(cfg["device"], cfg["dtype"]):
            want, got = _clone(fn(*args)), _clone(compiled(*args))
        ok = accuracy.compare(got, want, atol, rtol,
                              fp64=lambda a=args: _fp64_reference(fn, a, cfg["device"]))
        if not ok.passed:
            break
    return ok.as_dict(atol, rtol, det)


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    """Everything one worker process measures; raises ``Failure`` on a classified failure."""
    import torch

    cfg = spec["config"]
    result: dict[str, Any] = {"phase": spec["phase"]}
    if cfg["device"] == "cuda" and not torch.cuda.is_available():
        raise Failure("unsupported", "device cuda requested but torch.cuda.is_available() is "
                      "False on this machine")
    probe = probes.CompileProbe()
    probe.install()
    _status(spec, f"{spec['phase']}: build")
    mspec, fn, inputs, sweep = build(spec)
    _status(spec, f"{spec['phase']}: eager")
    eager_out, det = run_eager(fn, inputs, cfg)
    if spec.get("load_artifact"):
        _status(spec, f"{spec['phase']}: load artifact")
        try:
            result["artifact_loaded"] = artifacts.load(spec["load_artifact"])
        except CacheArtifactError as e:
            raise Failure("infra", str(e)) from e
    _status(spec, f"{spec['phase']}: compile")
    compiled, out = run_compile(fn, inputs, sweep, cfg, dict(mspec.compile_kwargs), result,
                                probe)
    if spec.get("save_artifact"):
        _status(spec, f"{spec['phase']}: save artifact")
        result["artifact"] = _save_artifact(spec["save_artifact"])
    result.update(probes.frame_stats())
    result["graph_breaks"] = probes.graph_breaks()
    result["recompiles"] = probes.recompiles()
    result["cache"] = probe.cache_keys(spec["phase"])
    result["counters"] = probes.counters_now()
    result["cache_unknown"] = "; ".join(probe.unknown) or None
    if spec.get("measure", True) or spec.get("accuracy"):
        _status(spec, f"{spec['phase']}: accuracy")
        result["accuracy"] = check_accuracy(fn, compiled, out, eager_out, inputs, sweep,
                                            mspec.tolerance(cfg["dtype"]), det, cfg)
    if spec.get("measure", True):
        measure_steady_state(spec, fn, compiled, inputs, result)
    return result


def main(argv: list[str]) -> int:
    spec = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    try:
        outcome = {"ok": True, **measure(spec)}
    except Failure as f:
        outcome = {"ok": False, "category": f.category, "error": str(f)}
    except Exception:
        outcome = {"ok": False, "category": "infra", "error": tail(traceback.format_exc())}
    write_atomic(spec["out"], json.dumps(outcome, allow_nan=False, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
