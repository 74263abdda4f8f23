"""Accuracy verdicts: tolerance first, then an fp64 reference for low precision."""

import pytest
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


INF, NAN = float("inf"), float("nan")

# (compiled, eager, atol, rtol, passes): kinds of outputs a model returns
CASES = {
    "equal": (torch.ones(3), torch.ones(3), 0, 0, True),
    "within tolerance": (torch.ones(3) + 1e-6, torch.ones(3), 1e-4, 1e-4, True),
    "outside tolerance": (torch.ones(3) + 0.1, torch.ones(3), 1e-4, 1e-4, False),
    "nan where eager has nan": (torch.tensor([NAN, 1.0]), torch.tensor([NAN, 1.0]), 0, 0, True),
    "nan where eager has a number": (torch.tensor([NAN, 1.0]), torch.ones(2), 1, 1, False),
    "inf of the same sign": (torch.tensor([INF, 1.0]), torch.tensor([INF, 1.0]), 0, 0, True),
    "inf of the other sign": (torch.tensor([INF, 1.0]), torch.tensor([-INF, 1.0]), 1, 1, False),
    "shape differs": (torch.zeros(2, 3), torch.zeros(3, 2), 1, 1, False),
    "empty": (torch.zeros(0), torch.zeros(0), 0, 0, True),
    "integers": (torch.arange(4), torch.arange(4), 0, 0, True),
    "integers off by one": (torch.arange(4) + 1, torch.arange(4), 0, 0, False),
    "booleans": (torch.tensor([True, False]), torch.tensor([True, False]), 0, 0, True),
    "bfloat16": (torch.ones(8, dtype=torch.bfloat16), torch.ones(8, dtype=torch.bfloat16), 0,
                 0, True),
    "nested, one leaf off": ({"a": torch.ones(2), "b": (torch.zeros(2),)},
                             {"a": torch.ones(2), "b": (torch.ones(2),)}, 1e-3, 1e-3, False),
    "more tensors than eager": ((torch.ones(2), torch.ones(2)), (torch.ones(2),), 1, 1, False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_matrix_of_outputs(case: str) -> None:
    compiled, eager, atol, rtol, passes = CASES[case]
    assert accuracy.compare(compiled, eager, atol, rtol).passed is passes


def test_a_device_without_room_for_the_float64_copies_compares_on_the_host(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison runs where the outputs are; an out-of-memory there falls back to the
    host (outside the ``except`` block, so the failed try's tensors are gone), with the same
    answer."""
    calls: list[bool] = []
    real = accuracy._pair64

    def pair(x: torch.Tensor, y: torch.Tensor, on_cpu: bool = False):
        calls.append(on_cpu)
        if not on_cpu:
            raise torch.cuda.OutOfMemoryError("no room for the float64 copies")
        return real(x, y, on_cpu)

    monkeypatch.setattr(accuracy, "_pair64", pair)
    v = accuracy.compare(torch.ones(3) + 0.5, torch.ones(3), 1e-4, 1e-4)
    assert not v.passed and abs(v.max_abs_err - 0.5) < 1e-6
    assert calls[0] is False and True in calls
    assert accuracy.deterministic(torch.ones(2), torch.ones(2))


def test_the_host_path_copies_before_widening() -> None:
    """On the host path the float64 copies are made on the host: converting on the device
    first would need the room that just ran out."""
    from torch.overrides import TorchFunctionMode

    calls: list[str] = []

    class Record(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            calls.append(getattr(func, "__name__", str(func)))
            return func(*args, **(kwargs or {}))

    x = torch.ones(3, dtype=torch.float16)
    with Record():
        a, _ = accuracy._pair64(x, x, on_cpu=True)
    assert a.dtype == torch.float64 and a.device.type == "cpu"
    assert calls.index("cpu") < calls.index("double")


def test_comparing_does_not_change_a_float64_output() -> None:
    """``.double()`` of a float64 tensor is the tensor itself: in-place work must not touch it."""
    eager = torch.tensor([1.0, -2.0, float("inf")], dtype=torch.float64)
    compiled = torch.tensor([1.5, -2.0, float("inf")], dtype=torch.float64)
    before = (eager.clone(), compiled.clone())
    accuracy.compare(compiled, eager, 1e-4, 1e-4)
    assert torch.equal(eager, before[0]) and torch.equal(compiled, before[1])


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_gpu_the_comparison_runs_there() -> None:
    x = torch.ones(1000, device="cuda")
    a, b = accuracy._pair64(x, x + 1)
    assert a.device == b.device == x.device and a.dtype == torch.float64
    assert accuracy.compare(x + 1e-6, x, 1e-4, 1e-4).passed
    assert not accuracy.compare(x + 0.5, x, 1e-4, 1e-4).passed


def test_outputs_are_compared_in_float64_where_they_are() -> None:
    x = torch.ones(2, dtype=torch.bfloat16)
    a, b = accuracy._pair64(x, x)
    assert a.dtype == b.dtype == torch.float64 and a.device == b.device == x.device


def test_one_float64_copy_of_each_output_per_comparison(monkeypatch: pytest.MonkeyPatch) -> None:
    """The errors and the tolerance come from one pass: on a GPU each copy of a large output
    is most of the comparison's time and memory."""
    calls = []
    real = accuracy._pair64

    def pair(x: torch.Tensor, y: torch.Tensor, on_cpu: bool = False):
        calls.append(on_cpu)
        return real(x, y, on_cpu)

    monkeypatch.setattr(accuracy, "_pair64", pair)
    out = (torch.ones(4), torch.zeros(2))
    assert accuracy.compare(out, out, 1e-4, 1e-4).passed
    assert calls == [False, False]
