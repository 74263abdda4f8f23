"""Accuracy verdicts: tolerance first, then an fp64 reference for low precision."""

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import torch

from compilewatch.compiler import accuracy
from compilewatch.core.schema import Accuracy


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


# --- every kind of output a model returns, walked part by part ---------------------------

@dataclasses.dataclass
class Pred:
    logits: torch.Tensor
    score: float


@dataclasses.dataclass(frozen=True)
class Frozen:
    hidden: torch.Tensor


class Pair(NamedTuple):
    logits: torch.Tensor
    steps: int


def _model_output(t: torch.Tensor) -> Any:
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=t)


BASE = torch.tensor([0.25, -0.5, 0.75])
# kind -> (what a model returns built from a tensor, where a +1.0 on that tensor shows)
KINDS: dict[str, tuple[Callable[[torch.Tensor], Any], str]] = {
    "tensor": (lambda t: t, "out"),
    "complex tensor": (lambda t: torch.complex(t, t.flip(0)), "out"),
    "complex tensor, imaginary part only": (lambda t: torch.complex(torch.ones_like(t), t), "out"),
    "sparse COO tensor": (lambda t: t.to_sparse(), "out"),
    "sparse CSR tensor": (lambda t: t.reshape(1, 3).to_sparse_csr(), "out"),
    "nested tensor": (lambda t: torch.nested.nested_tensor([t[:2] * 0, t]), "out[1]"),
    "jagged nested tensor": (lambda t: torch.nested.nested_tensor(
        [t[:2] * 0, t], layout=torch.jagged), "out[1]"),
    "python float from .item()": (lambda t: t.sum().item(), "out"),
    "python int": (lambda t: int(t.sum().item() * 1e6), "out"),
    "python complex": (lambda t: complex(t[0].item(), t[2].item()), "out"),
    "python bool": (lambda t: bool(t.sum() > 1.0), "out"),
    "string": (lambda t: f"{t.sum().item():.6f}", "out"),
    "dataclass": (lambda t: Pred(torch.zeros(2), t.sum().item()), "out.score"),
    "dataclass, tensor field": (lambda t: Pred(t, 0.5), "out.logits"),
    "frozen dataclass": (lambda t: Frozen(t), "out.hidden"),
    "named tuple": (lambda t: Pair(t, 3), "out.logits"),
    "dict": (lambda t: {"aux": None, "logits": t}, "out['logits']"),
    "list": (lambda t: [torch.zeros(1), t], "out[1]"),
    "tuple": (lambda t: (t, "label"), "out[0]"),
    "HF ModelOutput": (_model_output, "out.last_hidden_state"),
    "containers in containers": (lambda t: {"a": [Pred(torch.zeros(1), 0.0), {"b": (t,)}]},
                                 "out['a'][1]['b'][0]"),
}


def _random(seed: int) -> torch.Tensor:
    return BASE + torch.randn(3, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_equal_output_passes(kind: str) -> None:
    make, _ = KINDS[kind]
    v = accuracy.compare(make(BASE.clone()), make(BASE.clone()), 1e-4, 1e-4)
    assert v.passed and v.where is None and v.failure is None, v
    assert accuracy.deterministic(make(BASE.clone()), make(BASE.clone()), 1e-4, 1e-4) is True


@pytest.mark.parametrize("kind", list(KINDS))
def test_random_output_is_never_a_pass(kind: str) -> None:
    """Two eager calls that disagree: the determinism check says so, and the comparison of
    one against the other fails (before, several kinds passed with a max error of 0.0)."""
    make, _ = KINDS[kind]
    first, second = make(_random(0)), make(_random(1))
    assert accuracy.deterministic(first, second, 1e-4, 1e-4) is False
    assert not accuracy.compare(second, first, 1e-4, 1e-4).passed


@pytest.mark.parametrize("kind", list(KINDS))
def test_a_compiled_only_error_fails_and_says_where(kind: str) -> None:
    make, where = KINDS[kind]
    v = accuracy.compare(make(BASE + 1.0), make(BASE.clone()), 1e-4, 1e-4)
    assert not v.passed and v.where == where and v.failure == "values", v
    assert where in (v.reason or "")
    # the float64 reference does not rescue a wrong output
    ref = make(BASE.double())
    assert not accuracy.compare(make(BASE + 1.0), make(BASE.clone()), 1e-4, 1e-4,
                                fp64=lambda: ref).passed


class Opaque:
    def __init__(self, t: torch.Tensor) -> None:
        self.t = t


def _cycle() -> list[Any]:
    out: list[Any] = [torch.ones(1)]
    out.append(out)
    return out


# an output type no rule compares -> the path the reason names
UNCOMPARABLE: dict[str, tuple[Callable[[], Any], str]] = {
    "a plain object": (lambda: Opaque(torch.ones(2)), "output type Opaque at out cannot"),
    "an object in a dict": (lambda: {"y": torch.ones(1), "bar": Opaque(torch.ones(1))},
                            "output type Opaque at out['bar'] cannot"),
    "an object in a dataclass": (lambda: Pred(torch.ones(1), Opaque(torch.ones(1))),
                                 "output type Opaque at out.score cannot"),
    "a set": (lambda: {1, 2}, "output type set at out cannot"),
    "a module": (lambda: torch.nn.Linear(2, 2), "output type Linear at out cannot"),
    "a function": (lambda: (torch.ones(1), len), "at out[1] cannot"),
    "a list that contains itself": (_cycle, "nested deeper than"),
}


@pytest.mark.parametrize("case", list(UNCOMPARABLE))
def test_an_output_it_cannot_compare_is_a_named_failure(case: str) -> None:
    make, phrase = UNCOMPARABLE[case]
    v = accuracy.compare(make(), make(), 1e-4, 1e-4)
    assert not v.passed and v.failure == "uncomparable" and phrase in (v.reason or ""), v
    # not called random either: the determinism check cannot judge it (None), the comparison
    # fails it by name
    assert accuracy.deterministic(make(), make()) is None


# compiled, eager -> where the structures part
STRUCTURE: dict[str, tuple[Any, Any, str]] = {
    "a dict key missing": ({"a": BASE}, {"a": BASE, "b": BASE}, "out"),
    "a dict key added": ({"a": BASE, "c": BASE}, {"a": BASE}, "out"),
    "a shorter list": ([BASE], [BASE, BASE], "out"),
    "a longer tuple": ((BASE, BASE), (BASE,), "out"),
    "another dtype": ({"x": BASE.double()}, {"x": BASE}, "out['x']"),
    "another shape": ([BASE.reshape(3, 1)], [BASE], "out[0]"),
    "dense where eager is sparse": (BASE, BASE.to_sparse(), "out"),
    "complex where eager is real": (BASE.to(torch.complex64), BASE, "out"),
    "a plain tensor where eager is nested": (BASE, torch.nested.nested_tensor([BASE]), "out"),
    "None where eager has a tensor": (Pred(None, 1.0), Pred(BASE, 1.0), "out.logits"),  # type: ignore[arg-type]
    "a tensor where eager has None": ({"a": BASE}, {"a": None}, "out['a']"),
    "a float where eager has an int": (1.0, 1, "out"),
    "an int where eager has a bool": (1, True, "out"),
    "a tuple where eager has a named tuple": ((BASE, 3), Pair(BASE, 3), "out"),
    "another dataclass": (Frozen(BASE), Pred(BASE, 1.0), "out"),
    "a dict where eager has a dataclass": ({"logits": BASE, "score": 1.0}, Pred(BASE, 1.0),
                                           "out"),
    "a ModelOutput with another field": (None, None, "out"),  # built below
}


@pytest.mark.parametrize("case", list(STRUCTURE))
def test_a_compiled_output_of_another_structure_fails(case: str) -> None:
    compiled, eager, where = STRUCTURE[case]
    if case == "a ModelOutput with another field":
        from transformers.modeling_outputs import BaseModelOutput

        compiled = BaseModelOutput(last_hidden_state=BASE, hidden_states=(BASE,))
        eager = BaseModelOutput(last_hidden_state=BASE)
    v = accuracy.compare(compiled, eager, 1.0, 1.0)  # a tolerance that would pass any numbers
    assert not v.passed and v.where == where and v.failure in ("structure", "values"), v
    assert where in (v.reason or "")


def test_each_part_is_judged_against_the_fp64_reference_on_its_own() -> None:
    """A part whose eager is far from fp64 (low precision) cannot excuse another part that
    is wrong: judged together, the largest eager error would cover both."""
    ref = {"noisy": torch.linspace(100, 200, 64, dtype=torch.float64),
           "small": torch.linspace(0, 1, 64, dtype=torch.float64)}
    eager = {k: v.to(torch.bfloat16) for k, v in ref.items()}
    compiled = {"noisy": (ref["noisy"] + 0.5).to(torch.bfloat16),
                "small": (ref["small"] + 0.3).to(torch.bfloat16)}
    v = accuracy.compare(compiled, eager, 1e-3, 1e-3, fp64=lambda: ref)
    assert not v.passed and v.where == "out['small']" and v.reference == "fp64", v
    fine = {"noisy": compiled["noisy"], "small": eager["small"]}
    assert accuracy.compare(fine, eager, 1e-3, 1e-3, fp64=lambda: ref).passed


def test_only_a_float64_part_of_the_reference_rescues() -> None:
    """PyTorch's rule: an integer part, or one the float64 run left in float32, is no more
    precise than eager's, so it cannot excuse a difference."""
    eager = {"ids": torch.tensor([1, 2, 3]), "x": torch.ones(3)}
    compiled = {"ids": torch.tensor([1, 2, 4]), "x": torch.ones(3) + 0.1}
    assert not accuracy.compare(compiled, eager, 1e-4, 1e-4, fp64=lambda: compiled).passed
    assert not accuracy.compare({"x": compiled["x"]}, {"x": eager["x"]}, 1e-4, 1e-4,
                                fp64=lambda: {"x": compiled["x"]}).passed


def test_a_reference_of_another_structure_rescues_nothing() -> None:
    v = accuracy.compare(BASE + 0.1, BASE, 1e-4, 1e-4, fp64=lambda: [BASE.double()])
    assert not v.passed and v.reference == "eager"


def test_the_verdict_is_what_the_schema_stores() -> None:
    """``where`` and ``reason`` are bounded like every text of a results file."""
    deep: Any = BASE
    for _ in range(60):
        deep = {"a_rather_long_key_name": deep}
    wrong: Any = BASE + 1
    for _ in range(60):
        wrong = {"a_rather_long_key_name": wrong}
    v = accuracy.compare(wrong, deep, 1e-4, 1e-4)
    stored = Accuracy(**v.as_dict(1e-4, 1e-4, True))
    assert stored.failure == "values" and stored.where and len(stored.where) <= 256
    assert stored.where.startswith("out['a_rather_long_key_name']")
    assert Accuracy(**accuracy.compare(BASE, BASE, 0, 0).as_dict(0, 0, True)).where is None


def test_a_key_or_value_from_the_output_is_quoted_short() -> None:
    long_key = "k" * 500 + "\x00"
    v = accuracy.compare({long_key: "a"}, {long_key: "b"}, 0, 0)
    assert v.where is not None and len(v.where) < 80 and "\\x00" not in v.where
    stored = Accuracy(**v.as_dict(0, 0, True))  # storable: no NUL reaches the results
    assert stored.reason is not None and "\x00" not in stored.reason


@pytest.mark.slow
def test_real_compiles_are_judged_on_every_part_of_their_output(
        harness_suite: str, shared_cache: Path) -> None:
    """Through the worker with real Inductor: a dataclass whose one field only the compiled
    code shifts by +1.0 is an accuracy failure named by that field (it passed before, with a
    max error of 0.0), and an output holding an object of a plain class is not a pass."""
    from compilewatch.compiler.plan import Job
    from compilewatch.compiler.schedule import LoopSettings, RunOptions, SideJobs, measure_jobs
    from compilewatch.core.schema import Category, Config, Status
    from compilewatch.suites.loader import load_suite

    suite = load_suite(harness_suite)
    jobs = [Job(suite, suite.models[name], Config()) for name in
            ("wrong_dataclass", "opaque_output")]
    opts = RunOptions(rounds=3, block_ms=2.0, timing_processes=0, measure=False,
                      cache_root=shared_cache / "accuracy")
    sides = measure_jobs([SideJobs("run", jobs, opts)],
                         LoopSettings(isolation="fork", compile_slots=2))
    got = {r.result.model: r.result for r in sides["run"]}
    wrong, opaque = got["wrong_dataclass"], got["opaque_output"]
    assert (wrong.status, wrong.category) == (Status.FAIL, Category.ACCURACY), wrong.error
    assert wrong.accuracy is not None and wrong.accuracy.where == "out.shifted"
    assert wrong.accuracy.eager_deterministic is True and wrong.accuracy.max_abs_err == 2.0
    assert "differs from eager" in (wrong.error or "") and "out.shifted" in (wrong.error or "")
    assert (opaque.status, opaque.category) == (Status.FAIL, Category.ACCURACY_UNCOMPARABLE)
    assert opaque.accuracy is not None and opaque.accuracy.failure == "uncomparable"
    assert "output type Opaque at out['extra'] cannot be compared" in (opaque.error or "")
