"""Worker helpers that need no compile."""

from __future__ import annotations

from typing import NamedTuple

import torch

from compilewatch.compiler.worker import _clone


class Out(NamedTuple):
    logits: torch.Tensor
    aux: tuple[torch.Tensor, ...]


def test_clone_copies_every_tensor_and_keeps_the_container_types():
    t = torch.ones(3)
    out = Out(t, (t, [t]))
    copy = _clone(out)
    assert isinstance(copy, Out) and isinstance(copy.aux, tuple) and isinstance(copy.aux[1], list)
    t.add_(1)  # a CUDA-graph replay would overwrite its output buffer like this
    assert torch.equal(copy.logits, torch.ones(3)) and torch.equal(copy.aux[1][0], torch.ones(3))
    assert _clone({"a": t})["a"] is not t
