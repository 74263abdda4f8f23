"""Peak device memory of one call, as the user's own loop would see it.

A worker process holds more than the call it measures: the model as built, the copy a training
step starts from, the other step (eager beside compiled) with its gradients and optimizer
state, the first step's copied state for the accuracy check, the outputs it keeps, and the
other side's model (the reference). A user's loop holds none of them, so each is left out: the
peak reported is the device's peak over the call minus the bytes those objects hold when it
starts. What the call's own model, step, inputs and compiled code hold (weights, gradients,
optimizer state, CUDA graphs' pools, Inductor's constants) stays in, since a user's loop holds
them too. Objects are counted by their storages, each once (tied weights, views), rounded up as
the CUDA caching allocator rounds a block (docs/measurement.md, "Peak memory").
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

BLOCK = 512  # the CUDA caching allocator rounds every block up to a multiple of this
_MAX_DEPTH = 8


def tensors(obj: Any, _depth: int = 0) -> Iterator[Any]:
    """Every tensor ``obj`` holds: a tensor, a module's parameters, buffers and gradients, an
    optimizer's state, and those inside mappings, lists and tuples."""
    import torch

    if _depth > _MAX_DEPTH or obj is None:
        return
    if isinstance(obj, torch.Tensor):
        yield obj
        if obj.is_leaf and obj.grad is not None:
            yield obj.grad
    elif isinstance(obj, torch.nn.Module):
        for t in (*obj.parameters(), *obj.buffers()):
            yield from tensors(t, _depth + 1)
    elif isinstance(obj, torch.optim.Optimizer):
        for state in obj.state.values():
            yield from tensors(state, _depth + 1)
    elif isinstance(obj, Mapping):
        for value in obj.values():
            yield from tensors(value, _depth + 1)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from tensors(value, _depth + 1)


def _storages(objs: Iterable[Any], device: str) -> dict[int, int]:
    """Storage address -> bytes (rounded to the allocator's block) on ``device``'s type."""
    out: dict[int, int] = {}
    for obj in objs:
        for t in tensors(obj):
            if t.device.type != device:
                continue
            storage = t.untyped_storage()
            size = storage.nbytes()
            if size:
                out[storage.data_ptr()] = -(-size // BLOCK) * BLOCK
    return out


def held_bytes(harness: Iterable[Any], own: Iterable[Any], device: str) -> int:
    """Device bytes the harness's objects hold that the measured call's own objects do not
    share (a module copied from the measured one shares nothing; a step's own gradients and
    optimizer state are its own)."""
    mine = _storages(own, device)
    return sum(size for ptr, size in _storages(harness, device).items() if ptr not in mine)


def own_peak(peak: int | None, held: int) -> int | None:
    """The call's peak without what the harness held throughout it."""
    return None if peak is None else max(peak - held, 0)


def private_pool_bytes() -> int:
    """Bytes allocated in the CUDA caching allocator's private pools (CUDA graphs' memory):
    the compiled callable's own, which a peak of another callable must leave out. 0 where
    this torch has no snapshot or nothing is in such a pool."""
    try:
        import torch

        segments = torch.cuda.memory_snapshot()
    except Exception:
        return 0
    total = 0
    for seg in segments:
        pool = seg.get("segment_pool_id")
        if pool is not None and tuple(pool) != (0, 0):
            total += int(seg.get("allocated_size") or 0)
    return total
