"""Worker helpers that need no compile."""

from __future__ import annotations

from typing import NamedTuple

import pytest
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


SUITE_FILE = '''
import torch
from compilewatch.suites import model
from helpers import SIZE  # a sibling helper of the same name in each checkout

SUITE_NAME = "user"


@model(name="mm")
def mm(ctx):
    w = torch.randn(SIZE, SIZE)
    return (lambda x: x @ w @ w @ w), (torch.randn(SIZE, SIZE),)
'''


def _checkout(root, size: int, models: str = SUITE_FILE):  # type: ignore[no-untyped-def]
    root.mkdir()
    (root / "helpers.py").write_text(f"SIZE = {size}\n")
    (root / "suite.py").write_text(models)
    return root / "suite.py"


def _timed(tmp, suite, reference):  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys

    from compilewatch.compiler.protocol import WorkerOutput, WorkerSpec
    from compilewatch.core.schema import Config

    spec = WorkerSpec(suite=str(suite), model="mm", config=Config(), phase="warm", large=False,
                      rounds=4, block_ms=2.0, time_steady_state=True,
                      reference_suite=str(reference), out=str(tmp / "out.json"),
                      status_file=str(tmp / "status"))
    (tmp / "spec.json").write_text(spec.model_dump_json())
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor")}
    subprocess.run([sys.executable, "-m", "compilewatch.compiler.worker", str(tmp / "spec.json")],
                   check=True, timeout=600, env=env)
    return WorkerOutput.model_validate_json((tmp / "out.json").read_text())


@pytest.mark.slow
def test_a_timing_process_times_the_other_sides_model_as_its_reference(tmp_path) -> None:
    """Head's process also times base's eager model of the same name, built from base's
    checkout, in every round; base's sibling helper must not stand in for head's own."""
    base = _checkout(tmp_path / "base", 384)
    head = _checkout(tmp_path / "head", 8)
    out = _timed(tmp_path, head, base)
    assert out.ok, out.error
    lat = out.latency
    assert lat is not None and len(lat.reference_us) == len(lat.eager_us) == 4
    # base's three 384x384 matmuls against head's own 8x8 ones (head imported its own helper)
    assert min(lat.reference_us) > 10 * max(lat.eager_us)


@pytest.mark.slow
def test_a_reference_that_does_not_build_is_a_note_and_the_process_times_its_own(
        tmp_path) -> None:
    base = _checkout(tmp_path / "base", 8, models=SUITE_FILE.replace('name="mm"', 'name="other"'))
    head = _checkout(tmp_path / "head", 8)
    out = _timed(tmp_path, head, base)
    assert out.ok, out.error
    assert out.latency is not None and out.latency.reference_us == [] and out.latency.eager_us
    assert any(n.startswith("no reference: the first side's mm did not build") for n in out.notes)
