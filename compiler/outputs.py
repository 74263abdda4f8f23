"""A model's output walked part by part, each part paired with eager's and named by where it is.

torch.compile must reproduce the whole output, not only the tensors found in it: a dataclass, a
Python number from ``.item()``, the imaginary half of a complex tensor or a string are outputs
too. So the walk knows every kind a model returns (tensors, complex, sparse and nested ones
included; Python numbers; None and strings; dicts, HF ``ModelOutput``, named tuples,
dataclasses, lists and tuples) and turns anything else into a named problem, never into
nothing to compare. Copying outputs (``copy_tensors``) walks the same kinds, so what is
compared is what the model returned. The rules follow PyTorch's own harness
(``torch._dynamo.utils.same``): the same dtype and layout on both sides, sparse tensors
densified, integers and strings equal, dict keys equal, sequence lengths equal.
"""

from __future__ import annotations

import copy
import dataclasses
import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

ROOT = "out"
MAX_DEPTH = 64  # containers inside containers; deeper (or a cycle) is not compared
_REPR_CHARS = 60

Kind = Literal["values", "structure", "uncomparable"]


@dataclass(frozen=True)
class Leaf:
    """Two tensors to compare number by number: a complex tensor as its real and imaginary
    parts, a sparse one densified, a Python float or complex as a float64 tensor."""

    path: str
    got: Any
    want: Any


@dataclass(frozen=True)
class Problem:
    """Why two outputs differ without a tolerance to judge them by (or cannot be compared)."""

    path: str
    kind: Kind
    reason: str
    abs_err: float = float("inf")
    rel_err: float = float("inf")


@dataclass
class Walk:
    leaves: list[Leaf] = field(default_factory=list)
    problem: Problem | None = None


class _Stop(Exception):
    def __init__(self, problem: Problem) -> None:
        self.problem = problem


def short_repr(x: Any) -> str:
    """A value as it may appear in a path or a reason: the repr of a plain value, cut, and
    the type's name for anything else (a user's ``__repr__`` may raise or run long)."""
    import torch

    if isinstance(x, enum.Enum):
        return f"{type(x).__qualname__}.{short_repr(x.name)}"
    if isinstance(x, (str, bytes, int, float, complex, bool, type(None), torch.device,
                      torch.dtype)):
        text = repr(x)
        return text if len(text) <= _REPR_CHARS else text[:_REPR_CHARS - 3] + "..."
    return f"<{type(x).__qualname__}>"


def _is_model_output(x: Any) -> bool:
    """transformers' ``ModelOutput``: an OrderedDict of its non-None fields, with to_tuple."""
    return isinstance(x, dict) and callable(getattr(type(x), "to_tuple", None))


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and isinstance(getattr(type(x), "_fields", None), tuple)


def _is_dataclass(x: Any) -> bool:
    return dataclasses.is_dataclass(x) and not isinstance(x, type)


def _is_numpy(x: Any) -> bool:
    return type(x).__module__ == "numpy" and hasattr(x, "__array__")


def _atom(x: Any) -> bool:
    """Compared by equality: no tolerance applies."""
    import torch

    return x is None or isinstance(x, (str, bytes, torch.device, torch.dtype, enum.Enum))


def _number(x: Any) -> str | None:
    """The kind of a Python number; a bool is not an int here (True == 1 hides a bug)."""
    for kind in (bool, int, float, complex):
        if isinstance(x, kind):
            return kind.__name__
    return None


def _key_path(path: str, key: Any, attribute: bool) -> str:
    if attribute and isinstance(key, str) and key.isidentifier():
        return f"{path}.{key}"
    return f"{path}[{short_repr(key)}]"


def _what(x: Any) -> str:
    import torch

    if isinstance(x, torch.Tensor):
        return "a tensor"
    return f"{type(x).__qualname__} {short_repr(x)}" if _atom(x) or _number(x) else \
        type(x).__qualname__


def _differs(path: str, got: Any, want: Any) -> _Stop:
    return _Stop(Problem(path, "structure",
                         f"compiled gives {_what(got)} where eager gives {_what(want)} at {path}"))


class _Pairing:
    def __init__(self, exact_dtype: bool) -> None:
        self.exact_dtype = exact_dtype
        self.leaves: list[Leaf] = []

    def visit(self, got: Any, want: Any, path: str, depth: int) -> None:
        import torch

        if depth > MAX_DEPTH:
            raise _Stop(Problem(path, "uncomparable", f"the output at {path} is nested deeper "
                                f"than {MAX_DEPTH} containers (or contains itself)"))
        if isinstance(want, torch.Tensor):
            self.tensor(got, want, path, depth)
        elif _number(want):
            self.number(got, want, path)
        elif _atom(want):
            if type(got) is not type(want) or got != want:
                raise _Stop(Problem(path, "values", f"compiled gives {_what(got)} where eager "
                                    f"gives {_what(want)} at {path}"))
        elif isinstance(want, dict):
            self.mapping(got, want, path, depth)
        elif _is_namedtuple(want) or _is_dataclass(want):
            self.fields(got, want, path, depth)
        elif isinstance(want, (list, tuple)):
            self.sequence(got, want, path, depth)
        elif _is_numpy(want):
            if not _is_numpy(got):
                raise _differs(path, got, want)
            self.tensor(torch.as_tensor(got), torch.as_tensor(want), path, depth)
        else:
            raise _Stop(Problem(path, "uncomparable", f"output type {type(want).__qualname__} "
                                f"at {path} cannot be compared"))

    def number(self, got: Any, want: Any, path: str) -> None:
        import torch

        kind = _number(want)
        if _number(got) != kind:
            raise _differs(path, got, want)
        if kind in ("bool", "int"):
            if got != want:
                try:
                    err = float(abs(got - want))
                    rel = err / max(float(abs(want)), 1e-12)
                except OverflowError:
                    err = rel = float("inf")
                raise _Stop(Problem(path, "values", f"compiled gives {short_repr(got)} where "
                                    f"eager gives {short_repr(want)} at {path}", err, rel))
            return
        dtype = torch.float64 if kind == "float" else torch.complex128
        self.tensor(torch.tensor(got, dtype=dtype), torch.tensor(want, dtype=dtype), path, 0)

    def mapping(self, got: Any, want: dict[Any, Any], path: str, depth: int) -> None:
        if not isinstance(got, dict):
            raise _differs(path, got, want)
        if got.keys() != want.keys():
            missing = [short_repr(k) for k in want if k not in got][:5]
            extra = [short_repr(k) for k in got if k not in want][:5]
            raise _Stop(Problem(path, "structure", f"the keys at {path} differ: compiled lacks "
                                f"{missing or 'none'}, has {extra or 'none'} that eager has not"))
        attribute = _is_model_output(want)
        for k in want:
            self.visit(got[k], want[k], _key_path(path, k, attribute), depth + 1)

    def fields(self, got: Any, want: Any, path: str, depth: int) -> None:
        if type(got) is not type(want):
            raise _differs(path, got, want)
        names = want._fields if _is_namedtuple(want) else \
            [f.name for f in dataclasses.fields(want)]
        for name in names:
            self.visit(getattr(got, name), getattr(want, name), f"{path}.{name}", depth + 1)

    def sequence(self, got: Any, want: list[Any] | tuple[Any, ...], path: str,
                 depth: int) -> None:
        if not isinstance(got, (list, tuple)) or _is_namedtuple(got):
            raise _differs(path, got, want)
        if len(got) != len(want):
            raise _Stop(Problem(path, "structure", f"compiled gives {len(got)} items where "
                                f"eager gives {len(want)} at {path}"))
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            self.visit(g, w, f"{path}[{i}]", depth + 1)

    def tensor(self, got: Any, want: Any, path: str, depth: int) -> None:
        import torch

        if not isinstance(got, torch.Tensor):
            raise _differs(path, got, want)
        if got.is_nested != want.is_nested:
            raise self._tensors_differ(path, "nested" if want.is_nested else "plain", got)
        if want.is_nested:  # a list of tensors of their own shapes
            self.sequence(got.unbind(), want.unbind(), path, depth)
            return
        if got.layout != want.layout:
            raise self._tensors_differ(path, f"layout {want.layout}", got)
        if want.layout != torch.strided:  # sparse (COO, CSR, CSC, BSR, BSC)
            got, want = got.to_dense(), want.to_dense()
        if got.is_quantized or want.is_quantized:
            got, want = _dequantized(got), _dequantized(want)
        if self.exact_dtype and got.dtype != want.dtype:
            raise self._tensors_differ(path, f"dtype {want.dtype}", got)
        if got.is_complex() != want.is_complex():
            raise self._tensors_differ(path, f"dtype {want.dtype}", got)
        if got.shape != want.shape:
            raise _Stop(Problem(path, "structure", f"compiled gives shape {list(got.shape)} "
                                f"where eager gives {list(want.shape)} at {path}"))
        if want.is_complex():
            got, want = _real_pairs(got), _real_pairs(want)
        self.leaves.append(Leaf(path, got, want))

    @staticmethod
    def _tensors_differ(path: str, wanted: str, got: Any) -> _Stop:
        return _Stop(Problem(path, "structure", f"compiled gives a tensor of layout "
                             f"{got.layout}, dtype {got.dtype}{', nested' if got.is_nested else ''}"
                             f" where eager gives {wanted} at {path}"))


def _dequantized(t: Any) -> Any:
    return t.dequantize() if t.is_quantized else t


def _real_pairs(t: Any) -> Any:
    """A complex tensor as real numbers: each element's real and imaginary part, side by side."""
    import torch

    return torch.view_as_real(t.detach().resolve_conj())


def pair(got: Any, want: Any, root: str = ROOT, exact_dtype: bool = True) -> Walk:
    """Every comparable part of ``got`` beside the same part of ``want`` (eager's: its shape
    is what the other must have), or the first part where they cannot be judged by a
    tolerance. ``exact_dtype=False`` for the float64 reference, whose dtypes differ by design."""
    walker = _Pairing(exact_dtype)
    try:
        walker.visit(got, want, root, 0)
    except _Stop as stop:
        return Walk(walker.leaves, stop.problem)
    return Walk(walker.leaves)


def copy_tensors(out: Any, fn: Callable[[Any], Any] | None = None, depth: int = 0) -> Any:
    """``out`` with every tensor replaced by ``fn(tensor)`` (a detached copy by default), in
    containers of the same types: a CUDA-graph replay reuses its output buffers, so outputs
    are copied at once. What ``pair`` cannot walk is returned as it is (and judged there)."""
    import torch

    fn = fn or (lambda t: t.detach().clone())
    if isinstance(out, torch.Tensor):
        return fn(out)
    if depth > MAX_DEPTH or _atom(out) or _number(out):
        return out

    def again(x: Any) -> Any:
        return copy_tensors(x, fn, depth + 1)

    if isinstance(out, dict):
        try:
            new = copy.copy(out)  # its own type (OrderedDict, defaultdict, a ModelOutput)
        except Exception:  # a dict subclass that cannot be copied: compared as a dict
            new = dict(out)
        for k, v in out.items():
            new[k] = again(v)
        return new
    if _is_namedtuple(out):
        return type(out)(*(again(x) for x in out))
    if _is_dataclass(out):
        new = copy.copy(out)
        for f in dataclasses.fields(out):
            object.__setattr__(new, f.name, again(getattr(out, f.name)))  # frozen ones too
        return new
    if isinstance(out, (list, tuple)):
        items = [again(x) for x in out]
        try:
            return type(out)(items)
        except TypeError:  # a tuple subclass of another constructor: compared as a tuple
            return tuple(items)
    return out
