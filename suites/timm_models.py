"""The ``timm`` suite: timm models with random weights (``pretrained=False``, no download).

Without timm installed, each model is recorded as skipped (package not installed).
"""

from __future__ import annotations

import torch

from compilewatch.suites.losses import cross_entropy_random_labels
from compilewatch.suites.registry import BuildContext, model

SUITE_NAME = "timm"
REQUIRES = ("timm",)


def _build(name: str, ctx: BuildContext, size: int = 224):
    import timm

    net = timm.create_model(name, pretrained=False).eval().to(ctx.device)
    batch, size = (32, size) if ctx.large else (1, min(size, 64))
    return net, (torch.randn(batch, 3, size, size, device=ctx.device),)


@model("resnet50", requires=REQUIRES,
       loss=cross_entropy_random_labels, tags=("cnn",))
def resnet50(ctx: BuildContext):
    return _build("resnet50", ctx)


@model("convnext_tiny", requires=REQUIRES,
       loss=cross_entropy_random_labels, tags=("cnn",))
def convnext_tiny(ctx: BuildContext):
    return _build("convnext_tiny", ctx)


@model("deit_tiny_patch16_224", requires=REQUIRES,
       loss=cross_entropy_random_labels, tags=("transformer",))
def deit_tiny(ctx: BuildContext):
    import timm

    net = timm.create_model("deit_tiny_patch16_224", pretrained=False).eval().to(ctx.device)
    batch = 32 if ctx.large else 1
    return net, (torch.randn(batch, 3, 224, 224, device=ctx.device),)
