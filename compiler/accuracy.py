"""Is the compiled output right? Compared against eager, with an fp64 reference where cheap.

Every part of the output is judged (``compiler/outputs.py`` walks it: tensors, Python numbers,
strings, containers, dataclasses, ``ModelOutput``); a part that cannot be compared fails, with
where it is. A tensor within (atol, rtol) of eager passes. One outside it still passes when it
is a float tensor no further from an fp64 reference than eager itself is (times a margin):
low-precision eager is not ground truth either. Each part is judged on its own, as PyTorch's
harness does (``torch._dynamo.utils.same``), so a noisy part cannot excuse a wrong one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from compilewatch.compiler import outputs
from compilewatch.compiler.outputs import Kind, Leaf

FP64_MARGIN = 2.0
MAX_WHERE_CHARS = 256  # the schema's Short
MAX_REASON_CHARS = 1000


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


def _errors(pairs: list[tuple[Any, Any]], tol: tuple[float, float] = (0.0, 0.0)) -> list[Errors]:
    """For each pair, the largest absolute and relative errors of the first against the
    second, and whether every element is within ``tol`` (atol, rtol): one pass over one
    float64 copy of each."""
    return _on_device_or_host(lambda on_cpu: [_errors_on(x, y, tol, on_cpu) for x, y in pairs])


def _errors_on(x: Any, y: Any, tol: tuple[float, float], on_cpu: bool) -> Errors:
    import torch

    x64, y64 = _pair64(x, y, on_cpu)
    if x64.shape != y64.shape:
        return float("inf"), float("inf"), False
    if x64.numel() == 0:
        return 0.0, 0.0, True
    within = torch.allclose(x64, y64, atol=tol[0], rtol=tol[1], equal_nan=True)
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
    max_abs = float(diff.max())
    return max_abs, float(diff.div_(y64.abs().clamp_min_(1e-12)).max()), within


@dataclass
class AccuracyVerdict:
    passed: bool
    max_abs_err: float
    max_rel_err: float
    reference: str
    fp64_max_abs_err: float | None
    where: str | None = None  # the part that failed, as a path (``out.logits[0]``)
    failure: Kind | None = None
    reason: str | None = None

    def as_dict(self, atol: float, rtol: float, deterministic: bool | None) -> dict[str, Any]:
        def fin(x: float | None) -> float | None:
            return None if x is None or x != x or x == float("inf") else x

        return {"passed": self.passed, "max_abs_err": fin(self.max_abs_err),
                "max_rel_err": fin(self.max_rel_err), "atol": atol, "rtol": rtol,
                "reference": self.reference, "fp64_max_abs_err": fin(self.fp64_max_abs_err),
                "eager_deterministic": deterministic,
                "where": None if self.where is None else _cut(self.where, MAX_WHERE_CHARS),
                "failure": self.failure,
                "reason": None if self.reason is None else _cut(self.reason, MAX_REASON_CHARS)}


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def compare(compiled: Any, eager: Any, atol: float, rtol: float,
            fp64: Callable[[], Any | None] | None = None) -> AccuracyVerdict:
    """Judge compiled output against eager part by part, then each part outside the tolerance
    against the fp64 reference that ``fp64`` computes (only called when a part needs it: it
    runs the model in float64)."""
    walk = outputs.pair(compiled, eager)
    if walk.problem is not None:
        p = walk.problem
        return AccuracyVerdict(False, p.abs_err, p.rel_err, "eager", None, p.path, p.kind, p.reason)
    errors = _errors([(leaf.got, leaf.want) for leaf in walk.leaves], (atol, rtol))
    max_abs = max((e[0] for e in errors), default=0.0)
    max_rel = max((e[1] for e in errors), default=0.0)
    off = [(leaf, e) for leaf, e in zip(walk.leaves, errors, strict=True) if not e[2]]
    if not off:
        return AccuracyVerdict(True, max_abs, max_rel, "eager", None)
    reference = fp64() if fp64 is not None else None
    refs = _reference_leaves(reference, eager) if reference is not None else None
    if refs is None:
        return _off(off, max_abs, max_rel, atol, rtol, "eager", None)
    worst = 0.0
    for leaf, err in off:
        rescued, c_err = _against_fp64(leaf, refs.get(leaf.path), atol)
        if not rescued:
            return _off([(leaf, err)], max_abs, max_rel, atol, rtol, "fp64", c_err)
        worst = max(worst, c_err or 0.0)
    return AccuracyVerdict(True, max_abs, max_rel, "fp64", worst)


def _reference_leaves(reference: Any, eager: Any) -> dict[str, Any] | None:
    """The fp64 reference's float64 parts by path (None: it has another shape than eager's).
    Only a float64 part is a reference (PyTorch's rule): a part the float64 run left in
    another dtype is not more precise than eager's."""
    import torch

    walk = outputs.pair(reference, eager, exact_dtype=False)
    if walk.problem is not None:
        return None
    return {leaf.path: leaf.got for leaf in walk.leaves if leaf.got.dtype == torch.float64}


def _against_fp64(leaf: Leaf, ref: Any | None, atol: float) -> tuple[bool, float | None]:
    """Whether the compiled part is as close to the fp64 reference as eager's is (within the
    margin), and its distance; a part without a float64 reference is not rescued."""
    if ref is None:
        return False, None
    (c_err, *_), (e_err, *_) = _errors([(leaf.got, ref), (leaf.want, ref)])
    return c_err <= FP64_MARGIN * e_err + atol, c_err


def _off(off: list[tuple[Leaf, Errors]], max_abs: float, max_rel: float, atol: float,
         rtol: float, reference: str, fp64_err: float | None) -> AccuracyVerdict:
    """A failed verdict naming the part furthest from eager among those outside tolerance."""
    leaf, (abs_err, rel_err, _) = max(off, key=lambda le: le[1][0])
    reason = (f"max abs err {abs_err:.3g} at {leaf.path} (max rel err {rel_err:.3g}; "
              f"atol {atol:g}, rtol {rtol:g})")
    if fp64_err is not None:
        reason += f"; {fp64_err:.3g} from the fp64 reference, more than {FP64_MARGIN:g}x eager's"
    return AccuracyVerdict(False, max_abs, max_rel, reference, fp64_err, leaf.path, "values",
                           reason)


def deterministic(first: Any, second: Any, atol: float = 0.0, rtol: float = 0.0) -> bool | None:
    """Eager run twice on the same inputs agrees within the model's tolerance (else its output
    cannot be judged against the compiler: random output is not a pass). Bit-level differences
    inside the tolerance (atomics on a GPU) still count as deterministic. None: the output
    holds a part that cannot be compared (``compare`` fails it by name)."""
    walk = outputs.pair(second, first)
    if walk.problem is not None:
        return None if walk.problem.kind == "uncomparable" else False
    return all(e[2] for e in _errors([(leaf.got, leaf.want) for leaf in walk.leaves],
                                     (atol, rtol)))
