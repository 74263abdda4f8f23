"""The model registry: the ``@model`` decorator users write suites with.

A suite is a Python module (built-in, a file, or an importable module); every ``@model`` in it
belongs to it. The registry stores factories only: nothing is built (no weights allocated, no
torch import cost beyond the module's own) until a worker process asks for one model.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from compilewatch.core.errors import SuiteError
from compilewatch.core.schema import DEVICES, DTYPES, MODES, TASKS

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")

# Compiled vs eager tolerances by dtype (atol, rtol); a result that misses them still passes
# when it is no further from an fp64 reference than eager is (PyTorch's dynamo harness does this).
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1e-4, 1e-4),
    "bfloat16": (2e-2, 2e-2),
    "amp": (2e-2, 2e-2),
}


@dataclass(frozen=True)
class BuildContext:
    """What a factory may ask for: where the model will run and how big it should be."""

    device: str
    dtype: str
    large: bool  # real sizes on GPU runners, small configs on CPU
    task: str = "inference"  # "training": e.g. an HF model is given labels to return its loss


Factory = Callable[..., tuple[Callable[..., Any], tuple[Any, ...]]]
Sweep = Callable[..., Iterable[tuple[Any, ...]]]
# the training loss from the model's output and its inputs (``compiler/training.py``)
Loss = Callable[[Any, tuple[Any, ...]], Any]
OPTIMIZERS = ("adam", "sgd")


@dataclass(frozen=True)
class ModelSpec:
    """A registered model: a factory returning ``(callable, example_inputs)`` plus extras."""

    name: str
    factory: Factory
    module: str
    sweep: Sweep | None = None
    tolerances: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    tags: tuple[str, ...] = ()
    compile_kwargs: Mapping[str, Any] = field(default_factory=dict)
    mode: str | Mapping[str, str] | None = None
    dtype: str | None = None
    dynamic: bool | None = None
    devices: tuple[str, ...] = DEVICES
    requires: tuple[str, ...] = ()
    tasks: tuple[str, ...] = TASKS
    loss: Loss | None = None  # None: the output's own loss, else a reduction of its outputs
    optimizer: str = "adam"
    compile_optimizer: bool = False  # optimizer.step() compiled too in the compiled step
    compiled_autograd: bool = False  # the compiled step's backward through compiled autograd

    def missing_packages(self) -> list[str]:
        """The ``requires`` this interpreter cannot import (the model is then skipped)."""
        import importlib.util

        return [p for p in self.requires if importlib.util.find_spec(p) is None]

    def build(self, ctx: BuildContext) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return _call_with_ctx(self.factory, ctx)

    def sweep_inputs(self, ctx: BuildContext) -> list[tuple[Any, ...]]:
        return [] if self.sweep is None else [tuple(x) for x in _call_with_ctx(self.sweep, ctx)]

    def tolerance(self, dtype: str) -> tuple[float, float]:
        return tuple(self.tolerances.get(dtype, DEFAULT_TOLERANCES[dtype]))  # type: ignore[return-value]

    def default_mode(self, device: str) -> str:
        if isinstance(self.mode, Mapping):
            return self.mode.get(device, "default")
        return self.mode or "default"


def _call_with_ctx(fn: Callable[..., Any], ctx: BuildContext) -> Any:
    """Factories may take no argument or one (the context): keep simple suites simple."""
    params = inspect.signature(fn).parameters
    return fn(ctx) if params else fn()


# module name -> model name -> spec. Filled as suite modules are imported.
_REGISTRY: dict[str, dict[str, ModelSpec]] = {}


def _check(name: str, value: Any, allowed: Iterable[str], what: str) -> None:
    if value not in allowed:
        raise SuiteError(f"model {name!r}: {what} {value!r} is not one of {sorted(allowed)}")


def model(
    name: str,
    *,
    sweep: Sweep | None = None,
    tolerances: Mapping[str, tuple[float, float]] | None = None,
    tags: Iterable[str] = (),
    compile_kwargs: Mapping[str, Any] | None = None,
    mode: str | Mapping[str, str] | None = None,
    dtype: str | None = None,
    dynamic: bool | None = None,
    devices: Iterable[str] = DEVICES,
    requires: Iterable[str] = (),
    tasks: Iterable[str] = TASKS,
    loss: Loss | None = None,
    optimizer: str = "adam",
    compile_optimizer: bool = False,
    compiled_autograd: bool = False,
) -> Callable[[Factory], Factory]:
    """Register ``factory`` as model ``name`` of the suite (module) that defines it.

    ``sweep`` returns further input tuples to call the compiled model with (to provoke
    recompiles); ``mode`` may be a dict by device (e.g. reduce-overhead on cuda only).
    ``tasks``: what the model is measured for (a function without parameters: inference only);
    ``loss(output, inputs)`` the training loss (default: the output's own ``loss``, else the
    sum of its floating outputs' means); ``optimizer``: "adam" (default) or "sgd";
    ``compile_optimizer``: the compiled step compiles ``optimizer.step()`` too (with the
    model's compile kwargs; default: it runs eagerly around the compiled model);
    ``compiled_autograd``: the compiled step's backward runs under compiled autograd (Dynamo
    captures the whole backward at run time and compiles it with the same kwargs).
    """
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise SuiteError(
            f"model name {name!r} is invalid: use 1-128 letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    modes = mode.values() if isinstance(mode, Mapping) else ([mode] if mode else [])
    for m in modes:
        _check(name, m, MODES, "mode")
    if dtype is not None:
        _check(name, dtype, DTYPES, "dtype")
    for d in devices:
        _check(name, d, DEVICES, "device")
    for t in tasks:
        _check(name, t, TASKS, "task")
    _check(name, optimizer, OPTIMIZERS, "optimizer")
    if loss is not None and not callable(loss):
        raise SuiteError(f"model {name!r}: loss must be a function (output, inputs) -> loss")
    for t in tags:
        if not NAME_RE.match(t):
            raise SuiteError(f"model {name!r}: tag {t!r} is invalid")
    for k, tol in (tolerances or {}).items():
        _check(name, k, DTYPES, "tolerance dtype")
        if len(tol) != 2 or any(not (isinstance(v, (int, float)) and v >= 0) for v in tol):
            raise SuiteError(f"model {name!r}: tolerance for {k} must be (atol, rtol) >= 0")

    def register(factory: Factory) -> Factory:
        if not callable(factory):
            raise SuiteError(f"model {name!r}: @model must decorate a function")
        module = factory.__module__
        models = _REGISTRY.setdefault(module, {})
        if name in models and models[name].factory.__qualname__ != factory.__qualname__:
            raise SuiteError(f"model {name!r} is registered twice in {module}")
        models[name] = ModelSpec(
            name=name, factory=factory, module=module, sweep=sweep,
            tolerances=dict(tolerances or {}), tags=tuple(tags),
            compile_kwargs=dict(compile_kwargs or {}), mode=mode, dtype=dtype,
            dynamic=dynamic, devices=tuple(devices), requires=tuple(requires),
            tasks=tuple(tasks), loss=loss, optimizer=optimizer,
            compile_optimizer=bool(compile_optimizer),
            compiled_autograd=bool(compiled_autograd),
        )
        return factory

    return register


def models_of(module: str) -> dict[str, ModelSpec]:
    return dict(_REGISTRY.get(module, {}))
