"""The ``vision`` suite: torchvision classification models with random weights.

Without torchvision installed, each model is recorded as skipped (package not installed).
"""

from __future__ import annotations

import torch

from compilewatch.suites.losses import cross_entropy_random_labels
from compilewatch.suites.registry import BuildContext, model

SUITE_NAME = "vision"
REQUIRES = ("torchvision",)


def _build(name: str, ctx: BuildContext):
    import torchvision

    net = torchvision.models.get_model(name, weights=None).eval().to(ctx.device)
    batch, size = (32, 224) if ctx.large else (1, 64)
    return net, (torch.randn(batch, 3, size, size, device=ctx.device),)


@model("resnet18", requires=REQUIRES,
       loss=cross_entropy_random_labels, tags=("cnn",))
def resnet18(ctx: BuildContext):
    return _build("resnet18", ctx)


@model("mobilenet_v3_small", requires=REQUIRES,
       loss=cross_entropy_random_labels, tags=("cnn",))
def mobilenet_v3_small(ctx: BuildContext):
    return _build("mobilenet_v3_small", ctx)


@model("vit_b_16", requires=REQUIRES,
       loss=cross_entropy_random_labels, tags=("transformer",))
def vit_b_16(ctx: BuildContext):
    import torchvision

    net = torchvision.models.vit_b_16(weights=None, image_size=224).eval().to(ctx.device)
    batch = 16 if ctx.large else 1
    return net, (torch.randn(batch, 3, 224, 224, device=ctx.device),)
