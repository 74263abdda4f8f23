"""Accuracy verdicts: tolerance first, then an fp64 reference for low precision."""

import torch

from compilewatch.compiler import accuracy


def test_within_tolerance_passes_and_reports_error():
    e = torch.ones(4)
    v = accuracy.compare(e + 1e-6, e, atol=1e-4, rtol=1e-4)
    assert v.passed and 0 < v.max_abs_err < 2e-6


def test_outside_tolerance_fails_without_reference():
    e = torch.ones(4)
    v = accuracy.compare(e + 0.5, e, atol=1e-4, rtol=1e-4)
    assert not v.passed and abs(v.max_abs_err - 0.5) < 1e-6


def test_fp64_reference_rescues_low_precision_noise():
    ref = torch.linspace(0, 1, 100, dtype=torch.float64)
    eager = ref.to(torch.bfloat16)
    compiled = (ref + 1e-3).to(torch.bfloat16)  # as close to fp64 as eager is
    assert accuracy.compare(compiled, eager, 0.0, 0.0, fp64=lambda: ref).passed
    wrong = (ref + 0.3).to(torch.bfloat16)
    assert not accuracy.compare(wrong, eager, 1e-3, 1e-3, fp64=lambda: ref).passed
    # the float64 reference is computed only when eager's tolerance is not met
    assert accuracy.compare(eager, eager, 0.0, 0.0, fp64=lambda: 1 / 0).passed


def test_nested_outputs_shape_and_nan_mismatch():
    a = {"logits": torch.zeros(2, 3), "aux": (torch.ones(1),)}
    assert accuracy.compare(a, a, 0, 0).passed
    assert not accuracy.compare({"logits": torch.zeros(3, 2), "aux": (torch.ones(1),)}, a,
                                1, 1).passed
    nan = torch.tensor([float("nan"), 1.0])
    assert accuracy.compare(nan, nan.clone(), 0, 0).passed
    assert not accuracy.compare(torch.tensor([1.0, 1.0]), nan, 1, 1).passed


def test_determinism():
    x = torch.randn(5)
    assert accuracy.deterministic(x, x.clone())
    assert not accuracy.deterministic(x, x + 1e-7)
