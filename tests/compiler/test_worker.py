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


class _Counted:
    """What ``run_eager`` needs of a model, counting the eager calls."""

    device = "cpu"
    tolerance = (1e-5, 1e-5)

    def __init__(self, random: bool = False) -> None:
        self.calls, self.random = 0, random

    def fn(self) -> torch.Tensor:
        self.calls += 1
        return torch.randn(4) if self.random else torch.ones(4)

    def call(self, fn):  # type: ignore[no-untyped-def]
        return fn()


def test_eager_runs_twice_only_where_accuracy_is_checked() -> None:
    from compilewatch.compiler.worker import run_eager

    checked, plain = _Counted(), _Counted()
    assert run_eager(checked, check=True)[1] is True and checked.calls == 2  # type: ignore[arg-type]
    assert run_eager(plain, check=False)[1] is True and plain.calls == 1  # type: ignore[arg-type]
    random = _Counted(random=True)
    assert run_eager(random, check=True)[1] is False  # type: ignore[arg-type]
