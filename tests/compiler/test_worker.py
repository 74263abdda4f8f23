"""Worker helpers that need no compile."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import pytest
import torch

from compilewatch.compiler import worker
from compilewatch.compiler.model import clone
from compilewatch.core.schema import Config
from compilewatch.suites.imports import SideCode


class Out(NamedTuple):
    logits: torch.Tensor
    aux: tuple[torch.Tensor, ...]


def test_clone_copies_every_tensor_and_keeps_the_container_types():
    t = torch.ones(3)
    out = Out(t, (t, [t]))
    copy = clone(out)
    assert isinstance(copy, Out) and isinstance(copy.aux, tuple) and isinstance(copy.aux[1], list)
    t.add_(1)  # a CUDA-graph replay would overwrite its output buffer like this
    assert torch.equal(copy.logits, torch.ones(3)) and torch.equal(copy.aux[1][0], torch.ones(3))
    assert clone({"a": t})["a"] is not t


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
    from compilewatch.compiler.model import run_eager

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


def _timed(tmp, suite, reference, root=None, task="inference"):  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys

    from compilewatch.compiler.protocol import WorkerOutput, WorkerSpec
    from compilewatch.core.schema import Config

    spec = WorkerSpec(suite=str(suite), model="mm", config=Config(task=task), phase="warm",
                      large=False, rounds=4, block_ms=2.0, time_steady_state=True,
                      reference_suite=str(reference),
                      reference_code=SideCode(root=root) if root else None,
                      out=str(tmp / "out.json"),
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
    assert any(n.startswith("no reference: base's mm did not build") for n in out.notes)


TRAIN_SUITE = '''
import torch
from compilewatch.suites import model
from helpers import SIZE

SUITE_NAME = "user"


@model(name="mm")
def mm(ctx):
    net = torch.nn.Sequential(*[torch.nn.Linear(SIZE, SIZE) for _ in range(3)])
    return net, (torch.randn(SIZE, SIZE),)
'''


@pytest.mark.slow
def test_a_training_process_times_base_s_training_step_as_its_reference(tmp_path) -> None:
    """Head's training process times base's eager training step beside its own (the witness
    of a changed launch-bound model); base's model that cannot train is a note."""
    base = _checkout(tmp_path / "base", 512, models=TRAIN_SUITE)
    head = _checkout(tmp_path / "head", 8, models=TRAIN_SUITE)
    out = _timed(tmp_path, head, base, task="training")
    assert out.ok, out.error
    lat = out.latency
    assert lat is not None and len(lat.reference_us) == len(lat.eager_us) == 4
    assert min(lat.reference_us) > 4 * min(lat.eager_us)  # base's 512-wide layers, head's 8
    assert not [n for n in out.notes if n.startswith("no reference")]

    (tmp_path / "run2").mkdir()
    flat = _checkout(tmp_path / "flat", 8)  # base's mm: a lambda, no parameters to train
    out = _timed(tmp_path / "run2", head, flat, task="training")
    assert out.ok, out.error
    assert out.latency is not None and out.latency.reference_us == []
    assert any(n.startswith("no reference: base's model does not train") for n in out.notes)

    (tmp_path / "run3").mkdir()  # base's model builds and has parameters, its step fails
    broken = _checkout(tmp_path / "broken", 8, models=TRAIN_SUITE.replace(
        "return net,", "return torch.nn.Sequential(net, Detach()),").replace(
        "@model(", "class Detach(torch.nn.Module):\n    def forward(self, x):\n"
        "        return x.detach()\n\n\n@model("))
    out = _timed(tmp_path / "run3", head, broken, task="training")
    assert out.ok, out.error
    assert out.latency is not None and out.latency.reference_us == [] and out.latency.eager_us
    assert any(n.startswith("no reference: base's model failed its first training step")
               for n in out.notes), out.notes


PACKAGE_SUITE = '''
import sys
from pathlib import Path

import torch
from compilewatch.suites import model

sys.path.insert(0, str(Path(__file__).parents[1]))  # the checkout's root: its own package
from proj.layers import SIZE

SUITE_NAME = "user"


@model(name="mm")
def mm(ctx):
    return (lambda x: x + 1), (torch.zeros(SIZE),)
'''


def _package_checkout(root, size: int):  # type: ignore[no-untyped-def]
    (root / "proj").mkdir(parents=True)
    (root / "proj" / "__init__.py").write_text("")
    (root / "proj" / "layers.py").write_text(f"SIZE = {size}\n")
    (root / "bench").mkdir()
    (root / "bench" / "suite.py").write_text(PACKAGE_SUITE)
    return root / "bench" / "suite.py"


def test_what_base_suite_imported_from_its_checkout_is_forgotten_before_head_builds(
        tmp_path, monkeypatch) -> None:
    """Base's suite imports a package from its checkout's root, outside its own folder, and
    puts that root on the import path: head's suite, built next, must get its own package."""
    import sys

    from compilewatch.compiler.model import build
    from compilewatch.compiler.protocol import WorkerSpec
    from compilewatch.core.schema import Config

    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    base = _package_checkout(tmp_path / "base", 384)
    head = _package_checkout(tmp_path / "head", 8)
    spec = WorkerSpec(suite=str(head), model="mm", config=Config(), phase="warm", large=False,
                      rounds=1, block_ms=1.0, time_steady_state=True,
                      reference_suite=str(base),
                      reference_code=SideCode(root=str(tmp_path / "base")),
                      out="", status_file="")
    notes: list[str] = []
    m, ref = build(spec, notes)
    assert ref is not None and ref.model.inputs[0].shape == (384,)
    assert m.inputs[0].shape == (8,), "head built with base's package"
    assert sys.modules["proj.layers"].__file__.startswith(str(tmp_path / "head"))
    assert notes == []


def test_a_model_that_does_not_fit_beside_the_reference_is_built_alone(
        tmp_path, monkeypatch) -> None:
    """Head's model raises an out-of-memory error while base's model is held: the process
    drops the reference and builds its own model alone, with a note; any other failure is
    head's own."""
    import sys

    from compilewatch.compiler import model as worker_model
    from compilewatch.compiler.protocol import WorkerSpec
    from compilewatch.core.schema import Category, Config

    monkeypatch.setattr(sys, "modules", dict(sys.modules))
    base = _checkout(tmp_path / "base", 8)
    head = _checkout(tmp_path / "head", 8)
    spec = WorkerSpec(suite=str(head), model="mm", config=Config(), phase="warm", large=False,
                      rounds=1, block_ms=1.0, time_steady_state=True,
                      reference_suite=str(base), out="", status_file="")
    real = worker_model.Model
    calls: list[str | None] = []

    def model(spec, suite=None, code=None):  # type: ignore[no-untyped-def]
        calls.append(suite)
        if suite is None and len(calls) == 2:  # head's first build, beside the reference
            raise worker_model.Failure(Category.OOM, "CUDA out of memory")
        return real(spec, suite, code)

    monkeypatch.setattr(worker_model, "Model", model)
    notes: list[str] = []
    m, ref = worker_model.build(spec, notes)
    assert m.inputs[0].shape == (8, 8)
    assert ref is None and calls == [str(base), None, None]
    assert notes == ["no reference: this side's model did not fit the device beside it; this "
                     "process timed its own model alone"]

    calls.clear()

    def broken(spec, suite=None, code=None):  # type: ignore[no-untyped-def]
        calls.append(suite)
        if suite is None:
            raise worker_model.Failure(Category.BUILD_ERROR, "head's own bug")
        return real(spec, suite, code)

    monkeypatch.setattr(worker_model, "Model", broken)
    with pytest.raises(worker_model.Failure) as e:
        worker_model.build(spec, [])
    assert e.value.category is Category.BUILD_ERROR and calls == [str(base), None]


def test_peak_memory_leaves_out_what_the_reference_holds(monkeypatch) -> None:
    from compilewatch.compiler import peaks as peaks_mod

    peaks = iter([5_000, 9_000])
    monkeypatch.setattr(peaks_mod, "peak_memory", lambda fn, device: next(peaks))

    class Cuda:
        device, fn, inputs = "cuda", None, ()

        def call(self, fn):  # type: ignore[no-untyped-def]
            return None

    mem = peaks_mod.measure_memory(Cuda(), None, ref_bytes=3_000)  # type: ignore[arg-type]
    assert (mem.eager_peak_bytes, mem.compiled_peak_bytes) == (2_000, 6_000)
    assert mem.harness_bytes == 3_000


@pytest.mark.slow
def test_a_reference_that_fails_in_eager_is_dropped_and_never_head_s_failure(tmp_path) -> None:
    failing = SUITE_FILE.replace("return (lambda x: x @ w @ w @ w)",
                                 "return (lambda x: x.no_such_method())")
    base = _checkout(tmp_path / "base", 8, models=failing)
    head = _checkout(tmp_path / "head", 8)
    out = _timed(tmp_path, head, base)
    assert out.ok, out.error
    assert out.latency is not None and out.latency.reference_us == [] and out.latency.eager_us
    assert any(n.startswith("no reference: base's mm failed in eager (eager_error)")
               for n in out.notes), out.notes


@pytest.mark.parametrize(("own", "config", "want"), [
    ({}, Config(), {"dynamic": None}),
    ({}, Config(mode="reduce-overhead"), {"dynamic": None, "mode": "reduce-overhead"}),
    ({"options": {"cpp.simdlen": 1}}, Config(), {"dynamic": None,
                                                  "options": {"cpp.simdlen": 1}}),
    ({"fullgraph": True, "dynamic": False}, Config(dynamic=True),
     {"fullgraph": True, "dynamic": False}),
    ({"mode": "max-autotune"}, Config(), {"dynamic": None, "mode": "max-autotune"}),
])
def test_compile_kwargs_leave_the_default_mode_out(own: dict, config: Config,
                                                   want: dict) -> None:
    assert worker.compile_kwargs(own, config) == want


def test_a_model_with_inductor_options_compiles() -> None:
    """torch refuses ``mode`` beside ``options``: such a model failed every compile."""
    import torch

    kwargs = worker.compile_kwargs({"options": {"epilogue_fusion": False}}, Config())
    assert torch.compile(lambda x: x.sin() + 1, backend="inductor", **kwargs)(
        torch.ones(4)).sum().item() > 0


@pytest.mark.parametrize(("threads", "env", "want"), [
    (3, None, 3),      # the compile slot's cores
    (1, None, 1),      # one core: compiles in the process itself, no compile workers
    (None, None, 7),   # no group: torch's own choice stands
    (3, "5", 7),       # the user's TORCHINDUCTOR_COMPILE_THREADS stands (torch read it)
])
def test_a_worker_compiles_with_as_many_threads_as_its_cores(
        monkeypatch: pytest.MonkeyPatch, threads: int | None, env: str | None,
        want: int) -> None:
    import torch._inductor.config as inductor_config

    from compilewatch.compiler.protocol import WorkerSpec

    if env is None:
        monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS", raising=False)
    else:
        monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", env)
    spec = WorkerSpec(suite="micro", model="m", config=Config(), phase="cold", large=False,
                      rounds=1, block_ms=1.0, compile_threads=threads, out="", status_file="")
    with inductor_config.patch(compile_threads=7):
        worker.compile_threads(spec)
        assert inductor_config.compile_threads == want


def test_compile_threads_do_not_reach_the_fx_cache_key() -> None:
    """What lets a slot's compile set them: a timing process with other threads must hit the
    cache a cold compile filled (torch leaves the setting out of the key)."""
    import torch._inductor.config as inductor_config

    assert "compile_threads" in inductor_config._cache_config_ignore_prefix


# a spawned worker's entry point, with the import and the measuring replaced by a record of
# the cores the import would have run on and whether it was to import the compile path
_PIN = """
import json, os, sys
from compilewatch.compiler import proctree, worker
seen = {}
def imports(compile_path=False):
    seen.update(cores=sorted(os.sched_getaffinity(0)), compile_path=compile_path)
worker.import_compiler_stack = imports
worker.start = lambda spec, imported: 0
proctree.die_with_parent = lambda expected=None: None
worker.main(["worker", sys.argv[1]])
print(json.dumps(seen))
"""


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs two cores and sched_setaffinity")
@pytest.mark.parametrize(("spec", "moves"), [
    ({"prepare_cpus": ["FIRST"], "pin_cpus": ["LAST"]}, "first"),  # prepares off the timing core
    ({"pin_cpus": ["FIRST"]}, "first"),                            # a compile slot's group
    ({"pin_cpus": ["FIRST"], "preload_compile_path": True}, "first"),
    ({}, None),                                                    # nothing to pin: stays
    ("not json", None),                                            # start() reports it, not this
    ({"prepare_cpus": "x"}, None),
    ({"prepare_cpus": [9999]}, None),                              # no such core: stays
    (None, None),                                                  # no spec file at all
])
def test_a_spawned_worker_moves_to_its_cores_before_it_imports_torch(
        tmp_path: Path, spec: object, moves: str | None) -> None:
    import json
    import subprocess
    import sys

    cores = sorted(os.sched_getaffinity(0))
    first, last = cores[0], cores[-1]
    path = tmp_path / "spec.json"
    if isinstance(spec, dict):
        fixed = {k: [first if c == "FIRST" else last if c == "LAST" else c for c in v]
                 if isinstance(v, list) else v for k, v in spec.items()}
        path.write_text(json.dumps(fixed))
    elif isinstance(spec, str):
        path.write_text(spec)
    out = subprocess.run([sys.executable, "-c", _PIN, str(path)], capture_output=True,
                         text=True, check=True).stdout
    seen = json.loads(out)
    assert seen["cores"] == ([first] if moves == "first" else cores)
    assert seen["compile_path"] is (isinstance(spec, dict)
                                    and spec.get("preload_compile_path") is True)


@pytest.mark.parametrize(("text", "wanted"), [
    ('{"preload_compile_path": true}', True),
    ('{"preload_compile_path": false}', False),
    ('{"preload_compile_path": "yes"}', False),  # not a bool: the spec's validation says so
    ("{}", False),
    ("not json", False),
])
def test_a_spawned_worker_reads_whether_to_import_the_compile_path_before_torch(
        tmp_path: Path, text: str, wanted: bool) -> None:
    from compilewatch.compiler.worker import pin_early

    spec = tmp_path / "spec.json"
    spec.write_text(text)
    assert pin_early(str(spec)) is wanted
    assert pin_early(str(tmp_path / "missing.json")) is False
