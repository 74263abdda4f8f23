"""A call's peak device memory, measured in the worker: one eager and one compiled call (a
training step: also its peak when the backward ended), each its own, what the harness holds
beside it left out (the accounting is ``compiler/memory.py``)."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from compilewatch.compiler import memory, training
from compilewatch.compiler.model import Model
from compilewatch.core.schema import Memory


def peak_memory(fn: Callable[[], Any], device: str) -> int | None:
    import torch

    if device != "cuda":
        return None
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    fn()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated())


def measure_memory(m: Model | training.TrainingModel, compiled: Any, ref_bytes: int = 0,
                   kept: tuple[Any, ...] = ()) -> Memory:
    """Peak allocated bytes of one eager and one compiled call (a training step: also its
    peak when the backward ended), each its own: what the harness holds beside it (the
    reference's ``ref_bytes``, the other callable and its step's state, copies of the model,
    the outputs and states ``kept`` for the accuracy check) is left out (``compiler/memory.py``).
    """
    if m.device != "cuda":
        return Memory(unknown_reason="peak memory is measured on cuda only")
    # what earlier steps left in reference cycles (an optimizer's state held by a frame) is
    # freed now, not counted in a peak
    gc.collect()

    def peaks(fn: Any, other: Any, pools: int) -> tuple[int | None, int | None, int]:
        held = ref_bytes + pools + memory.held_bytes(
            _harness(m, fn, other, kept), _own(m, fn), m.device)
        step = fn if isinstance(fn, training.Step) else None
        if step is None:
            return memory.own_peak(peak_memory(lambda: m.call(fn), m.device), held), None, held
        step.watch = True
        try:
            whole = peak_memory(lambda: m.call(fn), m.device)
        finally:
            step.watch = False
        return memory.own_peak(whole, held), memory.own_peak(step.fwd_bwd_peak, held), held

    # CUDA graphs' pools are the compiled callable's: beside eager they are the harness's
    eager, eager_fb, _ = peaks(m.fn, compiled, memory.private_pool_bytes())
    comp, comp_fb, held = peaks(compiled, m.fn, 0)
    return Memory(eager_peak_bytes=eager, compiled_peak_bytes=comp,
                  eager_fwd_bwd_peak_bytes=eager_fb, compiled_fwd_bwd_peak_bytes=comp_fb,
                  harness_bytes=held)


def _own(m: Model | training.TrainingModel, fn: Any) -> list[Any]:
    """What the measured callable holds that a user's own loop holds too."""
    if isinstance(fn, training.Step):
        return [fn.module, fn.optimizer, m.inputs]
    return [m.base.fn if isinstance(m, training.TrainingModel) else m.fn, m.inputs]


def _harness(m: Model | training.TrainingModel, fn: Any, other: Any,
             kept: tuple[Any, ...]) -> list[Any]:
    """What this process holds beside the measured callable: for a training step, the model as
    built, the copy every step starts from, the other step with its gradients and optimizer
    state, and the first states copied for the accuracy check."""
    held: list[Any] = list(kept)
    if isinstance(m, training.TrainingModel):
        held += [m.base.fn, m.initial]
        for step in (fn, other):
            if isinstance(step, training.Step):
                held.append(step.first)
        if isinstance(other, training.Step):
            held += [other.module, other.optimizer]
    return held
