"""Is the compiled output right? Compared against eager, with an fp64 reference where cheap.

A compiled result within (atol, rtol) of eager passes. One outside it still passes when it is
no further from an fp64 reference than eager itself is (times a margin): low-precision eager is
not ground truth either. Outputs may be tensors or nested tuples/lists/dicts of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

FP64_MARGIN = 2.0


def flatten(out: Any) -> list[Any]:
    """Tensors of a (nested) output in a stable order."""
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for k in sorted(out, key=str) for t in flatten(out[k])]
    if isinstance(out, (list, tuple)):
        return [t for x in out for t in flatten(x)]
    if hasattr(out, "to_tuple"):  # transformers' ModelOutput
        return flatten(out.to_tuple())
    return []


def _pair64(x: Any, y: Any, on_cpu: bool = False) -> tuple[Any, Any]:
    """Both in float64 where they are: on a GPU the comparison runs there and only scalars come
    back (copying a 100M-element output to the host and comparing it there took seconds of
    every GPU model's first cold process). On the CPU, or where the two differ, on the host."""
    if on_cpu or x.device != y.device:  # copied first: the float64 copies live on the host
        return x.detach().cpu().double(), y.detach().cpu().double()
    return x.detach().double(), y.detach().double()


def _on_device_or_host(fn: Callable[[bool], Any]) -> Any:
    """``fn(on_cpu=False)``, or on the host when the device has no room for the float64
    copies (a model that nearly fills the GPU). The retry runs after the ``except`` block:
    inside it the failed try's frames, and their device tensors, are still alive."""
    import torch

    try:
        return fn(False)
    except torch.cuda.OutOfMemoryError:
        pass
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    return fn(True)


Errors = tuple[float, float, bool]  # max absolute error, max relative error, within tolerance


def _errors(a: list[Any], b: list[Any], tol: tuple[float, float] = (0.0, 0.0)) -> Errors:
    """The largest absolute and relative errors of ``a`` against ``b``, and whether every
    element is within ``tol`` (atol, rtol): one pass over one float64 copy of each output."""
    return _on_device_or_host(lambda on_cpu: _errors_on(a, b, tol, on_cpu))


def _errors_on(a: list[Any], b: list[Any], tol: tuple[float, float], on_cpu: bool) -> Errors:
    import torch

    max_abs = max_rel = 0.0
    within = True
    for x, y in zip(a, b, strict=True):
        x64, y64 = _pair64(x, y, on_cpu)
        if x64.shape != y64.shape:
            return float("inf"), float("inf"), False
        if x64.numel() == 0:
            continue
        within = within and torch.allclose(x64, y64, atol=tol[0], rtol=tol[1], equal_nan=True)
        # in place where the tensor is this function's own: on a GPU every float64 copy of a
        # 100M-element output is 0.8 GB (``.double()`` of a float64 tensor is the output itself,
        # so only ``diff`` and ``|y|`` are changed in place)
        diff = x64.sub(y64).abs_()
        finite = torch.isfinite(diff)
        if not bool(finite.all()):  # nan/inf must match exactly (allclose said no already)
            same = (x64.isnan() & y64.isnan()) | (x64 == y64)
            if not bool(same[~finite].all()):
                return float("inf"), float("inf"), False
            diff.masked_fill_(~finite, 0.0)
        del finite, x64
        max_abs = max(max_abs, float(diff.max()))
        max_rel = max(max_rel, float(diff.div_(y64.abs().clamp_min_(1e-12)).max()))
    return max_abs, max_rel, within


@dataclass
class Verdict:
    passed: bool
    max_abs_err: float
    max_rel_err: float
    reference: str
    fp64_max_abs_err: float | None

    def as_dict(self, atol: float, rtol: float, deterministic: bool | None) -> dict[str, Any]:
        def fin(x: float | None) -> float | None:
            return None if x is None or x != x or x == float("inf") else x

        return {"passed": self.passed, "max_abs_err": fin(self.max_abs_err),
                "max_rel_err": fin(self.max_rel_err), "atol": atol, "rtol": rtol,
                "reference": self.reference, "fp64_max_abs_err": fin(self.fp64_max_abs_err),
                "eager_deterministic": deterministic}


def compare(compiled: Any, eager: Any, atol: float, rtol: float,
            fp64: Callable[[], Any | None] | None = None) -> Verdict:
    """Judge compiled output against eager, then against the fp64 reference that ``fp64``
    computes (only called when eager's tolerance is not met: it runs the model in float64)."""
    c, e = flatten(compiled), flatten(eager)
    if len(c) != len(e):
        return Verdict(False, float("inf"), float("inf"), "eager", None)
    max_abs, max_rel, within = _errors(c, e, (atol, rtol))
    if within:
        return Verdict(True, max_abs, max_rel, "eager", None)
    reference = fp64() if fp64 is not None else None
    if reference is None:
        return Verdict(False, max_abs, max_rel, "eager", None)
    ref = flatten(reference)
    if len(ref) != len(c):
        return Verdict(False, max_abs, max_rel, "eager", None)
    c_err, *_ = _errors(c, ref)
    e_err, *_ = _errors(e, ref)
    passed = c_err <= FP64_MARGIN * e_err + atol
    return Verdict(passed, max_abs, max_rel, "fp64", c_err)


def deterministic(first: Any, second: Any, atol: float = 0.0, rtol: float = 0.0) -> bool:
    """Eager run twice on the same inputs agrees within the model's tolerance (else its output
    cannot be judged against the compiler: random output is not a pass). Bit-level differences
    inside the tolerance (atomics on a GPU) still count as deterministic."""
    a, b = flatten(first), flatten(second)
    return len(a) == len(b) and _errors(a, b, (atol, rtol))[2]
