"""The ``micro`` suite: small seed workloads, each exercising one part of the compiler.

Sizes: small on CPU (so a laptop finishes in minutes), the sizes of MEASUREMENT.md on GPU.
"""

from __future__ import annotations

import torch
from torch import nn

from compilewatch.suites.registry import BuildContext, model

SUITE_NAME = "micro"


@model("pointwise", tasks=("inference",), tags=("fusion",))
def pointwise(ctx: BuildContext):
    """sin·cos + tanh chain: one fused kernel instead of four."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.sin(x) * torch.cos(x) + torch.tanh(x)

    n = 64 * 2**20 if ctx.large else 2**16
    return fn, (torch.randn(n, device=ctx.device),)


@model("gelu_mm", tasks=("inference",), tags=("matmul",))
def gelu_mm(ctx: BuildContext):
    """gelu(x @ y + 1).sum(1): a matmul with a fused epilogue and reduction."""

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ y + 1).sum(1)

    n = 2048 if ctx.large else 128
    return fn, (torch.randn(n, n, device=ctx.device), torch.randn(n, n, device=ctx.device))


@model("linear32", tags=("launch-bound",), mode={"cuda": "reduce-overhead"})
def linear32(ctx: BuildContext):
    """32 tiny Linear layers at batch 8: launch-bound, where CUDA graphs pay off."""
    layers = nn.Sequential(*[nn.Linear(64, 64) for _ in range(32)])
    return layers.to(ctx.device), (torch.randn(8, 64, device=ctx.device),)


class Block(nn.Module):
    """Pre-norm transformer MLP block: LayerNorm -> Linear -> GELU -> Linear, residual."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim)
        self.down = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


@model("ln_mlp_block", tags=("transformer",))
def ln_mlp_block(ctx: BuildContext):
    b, s, d = (32, 512, 1024) if ctx.large else (4, 32, 64)
    return Block(d).to(ctx.device), (torch.randn(b, s, d, device=ctx.device),)


@model("graph_break", tasks=("inference",), tags=("graph-break",))
def graph_break(ctx: BuildContext):
    """``.item()`` forces Dynamo to split the graph and resume in Python."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(x) * 2
        scale = y.mean().item()
        return torch.tanh(y) * scale

    n = 2**20 if ctx.large else 4096
    return fn, (torch.randn(n, device=ctx.device),)


def _branchy_sweep(ctx: BuildContext):
    return [(torch.randn(n, 32, device=ctx.device),) for n in (4, 16, 64)]


@model("shape_branch", tags=("recompile",), sweep=_branchy_sweep, tasks=("inference",))
def shape_branch(ctx: BuildContext):
    """A Python branch on the batch size: each new side of it is a guard failure."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] > 8:
            return torch.softmax(x, dim=-1) * 2
        return torch.sigmoid(x) + 1

    return fn, (torch.randn(8, 32, device=ctx.device),)


@model("bf16_block_dynamic", tags=("bfloat16", "dynamic"), dtype="bfloat16", dynamic=True)
def bf16_block_dynamic(ctx: BuildContext):
    b, s, d = (32, 512, 1024) if ctx.large else (4, 32, 64)
    return Block(d).to(ctx.device), (torch.randn(b, s, d, device=ctx.device),)
