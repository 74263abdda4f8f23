"""The training task: one call is a whole training step, as PyTorch's own harness runs one
(``benchmarks/dynamo/common.py``): ``zero_grad`` -> forward under autocast (bfloat16 AMP on
cuda, or with dtype ``amp``) -> loss -> backward -> ``optimizer.step()``.

``TrainingModel`` wraps the built ``Model`` with the interface the worker uses for inference
(``fn``, ``call``, ``compile``, ``inputs``, ``sweep``...), so compile, timing, memory, graph
breaks, recompiles and cache keys are measured by the same code for both tasks: ``fn`` is the
eager step and ``compile`` returns the compiled one (``torch.compile`` of the model with its
compile kwargs, the step around it; the backward compiles lazily inside the first call, so the
timed first call includes it). Each step owns a copy of the model's initial weights and its
own optimizer, so the first compiled step and the first eager step start from the same state
and their results (loss, gradients, updated parameters) can be compared.

The model trains in train mode, as the harness trains it (batch norm uses the batch's
statistics and updates its running ones), with every dropout probability at zero: a random
step could not be compared with eager's (the harness resets the RNG and falls back to eager's
random ops for that; here the step is deterministic instead, and eager's determinism is
checked before the compiler is blamed).
"""

from __future__ import annotations

import contextlib
import copy
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from compilewatch.compiler import accuracy
from compilewatch.compiler.model import (
    Failure,
    Model,
    Reference,
    allocated,
    classify,
    clone,
    sync,
    to_device,
)
from compilewatch.compiler.protocol import tail
from compilewatch.core.schema import Accuracy, Category

ADAM_LR = 1e-3
SGD_LR = 1e-2


@contextlib.contextmanager
def autocast(device: str, amp: bool) -> Iterator[None]:
    import torch

    if amp:
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            yield
    else:
        yield


def default_loss(out: Any, inputs: tuple[Any, ...]) -> Any:
    """The output's own loss (an HF model given labels), else the sum of the means (in
    float32) of its floating tensors."""
    import torch
    from torch.utils import _pytree

    own = out.get("loss") if isinstance(out, dict) else getattr(out, "loss", None)
    if isinstance(own, torch.Tensor):
        return own
    if hasattr(out, "to_tuple"):  # an HF ModelOutput that no pytree knows
        out = out.to_tuple()
    parts = [t.float().mean() for t in _pytree.tree_leaves(out)
             if isinstance(t, torch.Tensor) and t.is_floating_point() and t.requires_grad]
    if not parts:
        raise ValueError("the output holds no floating tensor that requires grad: "
                         "give the model a loss= on @model")
    return torch.stack(parts).sum()


def train_mode(module: Any) -> int:
    """``module.train()`` with dropout off: every ``nn.Dropout``'s ``p``, and every float
    attribute of a submodule or of its ``config`` whose name says dropout (Hugging Face
    attention reads ``attention_dropout``, ``dropout_prob`` or ``attn_pdrop`` as floats in
    train mode), set to zero. Returns how many it zeroed."""
    import torch

    module.train()
    zeroed = 0
    for sub in module.modules():
        if isinstance(sub, torch.nn.modules.dropout._DropoutNd) and sub.p:
            sub.p, zeroed = 0.0, zeroed + 1
        for holder in (sub, getattr(sub, "config", None)):
            if holder is None or isinstance(holder, torch.nn.modules.dropout._DropoutNd):
                continue
            for name, value in list(vars(holder).items()):
                if isinstance(value, float) and value and _says_dropout(name):
                    setattr(holder, name, 0.0)
                    zeroed += 1
    return zeroed


def _says_dropout(name: str) -> bool:
    low = name.lower()
    return "dropout" in low or "pdrop" in low


def make_optimizer(kind: str, params: list[Any], device: str) -> Any:
    """Adam (``foreach``, ``capturable`` on cuda) unless the model asks for SGD."""
    import torch

    if kind == "sgd":
        return torch.optim.SGD(params, lr=SGD_LR, foreach=True)
    return torch.optim.Adam(params, lr=ADAM_LR, foreach=True, capturable=device == "cuda")


class Step:
    """One training step on its own copy of the module and its own optimizer; calling it runs
    a step and returns the loss. With ``record``, ``first`` holds loss, gradients and updated
    parameters after the first step, for the accuracy check (a copy of every parameter and
    gradient, which a process that does not check accuracy does not make)."""

    def __init__(self, tm: TrainingModel, module: Any, forward: Callable[..., Any],
                 record: bool = False) -> None:
        self.tm, self.module, self.forward, self.record = tm, module, forward, record
        self.params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        self.optimizer = make_optimizer(tm.mspec.optimizer, [p for _, p in self.params],
                                        tm.device)
        self.optimizer_step: Callable[[], Any] = self.optimizer.step
        # what the backward runs under (compiled autograd, where the model asks for it)
        self.backward: Callable[[], contextlib.AbstractContextManager[Any]] = \
            contextlib.nullcontext
        self.first: dict[str, Any] | None = None
        # with ``watch`` (cuda), the device's peak allocation when the backward ended
        self.watch = False
        self.fwd_bwd_peak: int | None = None

    def __call__(self, *inputs: Any) -> Any:
        self.optimizer.zero_grad(set_to_none=True)
        with autocast(self.tm.device, self.tm.amp):
            out = self.forward(*inputs)
            loss = self.tm.loss(out, inputs)
        with self.backward():
            loss.backward()
        if self.watch:
            import torch

            self.fwd_bwd_peak = int(torch.cuda.max_memory_allocated())
        self.optimizer_step()
        if self.record and self.first is None:
            self.first = self.state(loss)
        return loss.detach()

    def state(self, loss: Any) -> dict[str, Any]:
        """Loss, gradients and parameters now, copied, each named by its parameter."""
        return clone({"loss": loss.detach(),
                      "grad": {n: p.grad for n, p in self.params},
                      "param": {n: p.detach() for n, p in self.params}})


class TrainingModel:
    """The model under test with a training step as its call (see the module docstring)."""

    def __init__(self, m: Model, record: bool = True) -> None:
        import torch

        if not isinstance(m.fn, torch.nn.Module) or not any(
                p.requires_grad for p in m.fn.parameters()):
            raise Failure(Category.UNSUPPORTED, "training: no parameters (the model is not an "
                          "nn.Module with trainable parameters)")
        self.base = m
        self.device, self.dtype, self.mspec = m.device, m.dtype, m.mspec
        # AMP in bfloat16 on cuda (the harness's ``--amp``), and wherever the dtype asks for it
        self.amp = m.device == "cuda" or m.dtype == "amp"
        self.inputs, self.sweep = m.inputs, m.sweep
        self.tolerance = step_tolerance(m, self.amp)
        self.initial = copy.deepcopy(m.fn)
        self.dropouts_zeroed = train_mode(self.initial)
        self.loss = m.mspec.loss or default_loss
        self.record = record  # whether the compiled step keeps its first state (accuracy)
        self.fn = self.fresh_step()

    def fresh_step(self, wrap: Callable[[Any], Any] | None = None,
                   record: bool = False) -> Step:
        module = copy.deepcopy(self.initial)
        return Step(self, module, wrap(module) if wrap is not None else module, record)

    def compile(self, kwargs: dict[str, Any]) -> Step:
        """The step around the compiled model; with the model's ``compile_optimizer``, its
        ``optimizer.step()`` compiled too, with the same kwargs; with ``compiled_autograd``,
        its backward captured by compiled autograd and compiled with them (torch's
        ``compiled_autograd._enable``: the one entry point from torch 2.8 on that needs no
        ``backward()`` inside a compiled function)."""
        import torch

        step = self.fresh_step(lambda module: torch.compile(module, **kwargs), self.record)
        if self.mspec.compile_optimizer:
            step.optimizer_step = torch.compile(step.optimizer.step, **kwargs)
        if self.mspec.compiled_autograd:
            from torch._dynamo import compiled_autograd

            compiler = torch.compile(**kwargs)
            step.backward = lambda: compiled_autograd._enable(compiler)
        return step

    def call(self, fn: Any, args: tuple[Any, ...] | None = None) -> Any:
        return fn(*(self.inputs if args is None else args))

    def own_code(self) -> Any:
        return self.base.own_code()


def witness(ref: Reference) -> tuple[Reference | None, str | None]:
    """The reference model's own eager training step, timed beside this side's as inference
    times the other side's eager model: the witness a changed launch-bound model's compiled
    step is judged against. Its first step runs here: Adam's state is allocated by it, and an
    out-of-memory there must leave this side to time alone, not fail it inside timing; what
    the step keeps (its copy of the weights, the optimizer's state) is held memory. (None,
    why) where base's model does not train or its step fails: the caller lets go of ``ref``
    and then gives its memory back (``released``)."""
    before = allocated(ref.model.device)
    try:
        step = TrainingModel(ref.model, record=False)
    except Exception as e:
        return None, f"base's model does not train ({type(e).__name__}: {str(e)[:200]})"
    try:
        step.call(step.fn)
        sync(step.device)
    except Exception as e:
        del step
        return None, f"base's model failed its first training step " \
            f"({type(e).__name__}: {str(e)[:200]})"
    return Reference(step, ref.held_bytes + allocated(step.device) - before), None


def step_tolerance(m: Model, amp: bool) -> tuple[float, float]:
    """The model's tolerance for its dtype; under autocast (float32 weights on cuda), its
    tolerance for amp: a bfloat16 forward is not held to float32's."""
    return m.mspec.tolerance("amp") if amp and m.dtype == "float32" else m.tolerance


def settings(tm: TrainingModel) -> dict[str, Any]:
    """How the step was set up, recorded with the result."""
    return {"optimizer": tm.mspec.optimizer, "optimizer_compiled": tm.mspec.compile_optimizer,
            "compiled_autograd": tm.mspec.compiled_autograd,
            "loss": "suite" if tm.mspec.loss is not None else "default",
            "autocast": "bfloat16" if tm.amp else None, "mode": "train",
            "dropouts_zeroed": tm.dropouts_zeroed}


def run_eager(tm: TrainingModel, check: bool = True) -> tuple[Any, bool | None]:
    """The first eager step's state, and (with ``check``) whether a second eager step from the
    same initial weights repeats it within the tolerance: eager that does not repeat itself
    cannot blame the compiler."""
    try:
        first = _first_state(tm.fresh_step(record=check), tm.inputs)
        second = _first_state(tm.fresh_step(record=True), tm.inputs) if check else first
        sync(tm.device)
    except Exception as e:
        raise Failure(classify(e, Category.EAGER_ERROR), tail(traceback.format_exc())) from e
    det = accuracy.deterministic(first, second, *tm.tolerance) if check else True
    return first, det


def _first_state(step: Step, inputs: tuple[Any, ...]) -> Any:
    loss = step(*inputs)
    return step.first if step.record else loss


def fp64_state(tm: TrainingModel) -> dict[str, Any] | None:
    """One eager step in float64 (no autocast) from the same initial weights, when possible."""
    import torch

    try:
        module = copy.deepcopy(tm.initial).double()
        inputs = to_device(tm.inputs, tm.device, torch.float64)
        ref = copy.copy(tm)
        ref.amp = False
        return _first_state(Step(ref, module, module, record=True), inputs)
    except Exception:
        return None


def check_accuracy(tm: TrainingModel, compiled: Step, eager_state: Any,
                   det: bool | None) -> Accuracy:
    """Loss, gradients and updated parameters of the first compiled step against eager's,
    with the fp64 fallback and tolerances of inference; a failure names the part
    (``out['grad']['up.weight']``: the gradient of parameter ``up.weight``)."""
    atol, rtol = tm.tolerance
    got = compiled.first
    if got is None:
        raise Failure(Category.INFRA, "the compiled training step never ran")
    ok = accuracy.compare(got, eager_state, atol, rtol, fp64=lambda: fp64_state(tm))
    return Accuracy(**ok.as_dict(atol, rtol, det))
