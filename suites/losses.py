"""Training losses the built-in suites give their models (``loss=`` on ``@model``)."""

from __future__ import annotations

from typing import Any


def cross_entropy_random_labels(out: Any, inputs: tuple[Any, ...]) -> Any:
    """Cross-entropy of a classifier's logits (batch, classes) over random labels, the same
    labels at every step (seeded), as PyTorch's harness trains vision models."""
    import torch

    gen = torch.Generator().manual_seed(0)
    labels = torch.randint(0, out.shape[-1], (out.shape[0],), generator=gen)
    return torch.nn.functional.cross_entropy(out.float(), labels.to(out.device))
