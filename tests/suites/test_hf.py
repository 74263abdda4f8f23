"""The hf suite builds every model from a config (no download) and runs it eagerly."""

from __future__ import annotations

import pytest
import torch

from compilewatch.suites.loader import load_suite
from compilewatch.suites.registry import BuildContext

pytest.importorskip("transformers", reason="the hf suite needs transformers")


@pytest.mark.parametrize("name", ["gpt2", "bert", "t5", "llama"])
def test_small_configs_build_and_run_on_cpu(name, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # a download attempt fails instead of hanging
    spec = load_suite("hf").models[name]
    fn, inputs = spec.build(BuildContext(device="cpu", dtype="float32", large=False))
    with torch.no_grad():
        out = fn(*inputs)
    assert isinstance(out, torch.Tensor)
    batch, seq = inputs[0].shape
    assert out.shape == (batch, seq, 1024)  # logits over the small vocabulary
    assert torch.isfinite(out).all()
    assert sum(p.numel() for p in fn.parameters()) < 1_000_000  # small on CPU
