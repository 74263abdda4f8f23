"""One small model and the changes a kernel diff must tell apart, on Inductor's C++ kernels.

``base`` compiles to two generated kernels with an extern matmul between them (so neither can
fuse into the other): ``cpp_fused_add_cos_mul_sin_0`` (lines A, B) and ``cpp_fused_mul_tanh_1``
(line Z). Every variant keeps every line where it is, so that only the change differs:

- ``heavier``: the second kernel does 200 times its work (the same ops: the same name);
- ``added``: ``relu(x) @ w`` first: a kernel of its own before the others (their numbers move)
  and a second matmul of the same shapes;
- ``fenced``: a custom op (opaque to Inductor) between lines A and B: the first kernel split
  in two around a new extern op, in one graph;
- ``broken``: a graph break between lines A and B: two graphs, the first kernel split.
"""

from __future__ import annotations

import torch

from compilewatch.suites import model

N = 128


@torch.library.custom_op("kernels_suite::fence", mutates_args=())
def fence(a: torch.Tensor) -> torch.Tensor:
    return a.clone()


@fence.register_fake
def _(a: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(a)


def make(extra: int = 0, brk: bool = False, added: bool = False, fenced: bool = False):
    def fn(x: torch.Tensor, w: torch.Tensor):
        if added: x = torch.relu(x) @ w  # noqa: E701
        a = torch.sin(x * 2 + 1)  # line A
        if brk: torch._dynamo.graph_break()  # noqa: E701
        if fenced: a = fence(a)  # noqa: E701
        b = torch.cos(a) * 3  # line B
        y = b @ w
        z = torch.tanh(y) * 3  # line Z
        for _ in range(extra): z = torch.tanh(z) * 3  # noqa: E701
        return z

    return fn


def inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(2 * N, N, generator=g), torch.randn(N, N, generator=g) / N


@model("base", tasks=("inference",))
def base():
    return make(), inputs()


@model("heavier", tasks=("inference",))
def heavier():
    return make(extra=200), inputs()


@model("added", tasks=("inference",))
def added():
    return make(added=True), inputs()


@model("fenced", tasks=("inference",))
def fenced():
    return make(fenced=True), inputs()


@model("broken", tasks=("inference",))
def broken():
    return make(brk=True), inputs()
