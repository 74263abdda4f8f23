"""The training task on real Inductor (CPU): a whole step compiled and judged against eager."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from compilewatch.compiler import training
from compilewatch.compiler.plan import plan_jobs
from compilewatch.compiler.protocol import WorkerOutput, WorkerSpec
from compilewatch.core.errors import SuiteError, UsageError
from compilewatch.core.schema import Category, Config
from compilewatch.suites.loader import load_suite
from compilewatch.suites.registry import model

SUITE = '''
import torch
from torch import nn
from compilewatch.suites import model

SUITE_NAME = "train"


class Doubled(torch.autograd.Function):
    """Right forward; a backward that doubles the gradient, only while compiling."""

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        return grad * 2.0 if torch.compiler.is_compiling() else grad


class BreaksInBackward(torch.autograd.Function):
    """A graph break in the backward only: Dynamo cannot trace it."""

    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        torch._dynamo.graph_break()
        return grad


class Net(nn.Module):
    def __init__(self, fn=None):
        super().__init__()
        self.up, self.down, self.fn = nn.Linear(8, 16), nn.Linear(16, 4), fn

    def forward(self, x):
        h = self.up(x)
        if self.fn is not None:
            h = self.fn.apply(h)
        return self.down(torch.relu(h))


def _batches():
    return [(torch.randn(3, 8),)]


@model("mlp", sweep=_batches)
def mlp():
    return Net(), (torch.randn(5, 8),)


class Sized(Net):
    """Its backward needs the batch size the forward saw (a symbolic size, dynamic)."""

    def forward(self, x):
        return super().forward(x).mean(0) * x.shape[0]


@model("mlp_dynamic", dynamic=True)
def mlp_dynamic():
    return Sized(), (torch.randn(5, 8),)


@model("wrong_grad")
def wrong_grad():
    return Net(Doubled), (torch.randn(5, 8),)


@model("bw_break")
def bw_break():
    return Net(BreaksInBackward), (torch.randn(5, 8),)


@model("mlp_compiled_adam", compile_optimizer=True)
def mlp_compiled_adam():
    return Net(), (torch.randn(5, 8),)


@model("mlp_compiled_autograd", compiled_autograd=True)
def mlp_compiled_autograd():
    return Net(), (torch.randn(5, 8),)


@model("bw_break_compiled_autograd", compiled_autograd=True)
def bw_break_compiled_autograd():
    return Net(BreaksInBackward), (torch.randn(5, 8),)


@model("no_params")
def no_params():
    return (lambda x: x.sin()), (torch.randn(5, 8),)
'''


def _worker(tmp: Path, name: str, dynamic: bool | None = None) -> WorkerOutput:
    """One cold training process of ``name``, in a fresh interpreter and cache dir."""
    suite = tmp / "train_suite.py"
    suite.write_text(SUITE)
    spec = WorkerSpec(suite=str(suite), model=name,
                      config=Config(task="training", dynamic=dynamic), phase="cold",
                      large=False, rounds=2, block_ms=1.0, check_accuracy=True, measure_memory=True,
                      out=str(tmp / f"{name}.json"), status_file=str(tmp / "status"))
    (tmp / "spec.json").write_text(spec.model_dump_json())
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp / f"inductor-{name}")}
    subprocess.run([sys.executable, "-m", "compilewatch.compiler.worker", str(tmp / "spec.json")],
                   check=True, timeout=900, env=env)
    return WorkerOutput.model_validate_json((tmp / f"{name}.json").read_text())


@pytest.fixture(scope="module")
def mlp_step(tmp_path_factory: pytest.TempPathFactory) -> WorkerOutput:
    """One cold training process of ``mlp``, shared by the tests that read it."""
    return _worker(tmp_path_factory.mktemp("mlp"), "mlp")


@pytest.mark.slow
def test_a_training_step_compiles_forward_and_backward_and_records_both_keys(
        mlp_step: WorkerOutput) -> None:
    out = mlp_step
    assert out.ok, out.error
    backward = {k.components.get("fx_kwargs[is_backward]") for k in out.cache.fx}
    assert len(out.cache.fx) == 4 and len(backward) == 2  # fw + bw, then again after the sweep
    assert out.cache.aot
    assert out.accuracy is not None and out.accuracy.passed
    assert out.accuracy.eager_deterministic is True
    assert out.training is not None and out.training.optimizer == "adam"
    assert not out.training.optimizer_compiled and out.training.autocast is None
    assert out.compile is not None and out.compile.wall_s > 0
    phases = out.compile.phases  # the backward, compiled at the first backward(), is counted
    assert phases["backward"] > 0
    # the partitioner, apart: inside AOTAutograd's own time
    assert 0 < phases["partitioner"] <= phases["aot_autograd"]
    exclusive = sum(phases[k] for k in ("dynamo", "aot_autograd", "inductor", "codegen"))
    assert exclusive == pytest.approx(phases["total"], rel=1e-3)
    assert [r.reason for r in out.recompiles], "the sweep's batch of 3 recompiles"
    assert out.memory is not None and out.memory.compiled_peak_bytes is None
    assert out.memory.unknown_reason == "peak memory is measured on cuda only"


@pytest.mark.slow
def test_a_backward_compiled_inside_the_forward_s_compile_is_still_timed(tmp_path) -> None:
    """With dynamic shapes AOTAutograd compiles the backward at once, inside the forward's
    compile (it needs sizes the forward saves): no lazy backward compile is recorded, yet the
    backward's compile time is there, and counted once in the total."""
    out = _worker(tmp_path, "mlp_dynamic", dynamic=True)
    assert out.ok, out.error
    assert out.compile is not None
    phases = out.compile.phases
    assert 0 < phases["backward"] < phases["total"]
    exclusive = sum(phases[k] for k in ("dynamo", "aot_autograd", "inductor", "codegen"))
    assert exclusive == pytest.approx(phases["total"], rel=1e-3)
    backward = {k.components.get("fx_kwargs[is_backward]") for k in out.cache.fx}
    assert len(backward) == 2


@pytest.mark.slow
def test_wrong_gradients_from_the_compiled_step_fail_accuracy_naming_the_gradient(
        tmp_path) -> None:
    out = _worker(tmp_path, "wrong_grad")
    assert out.ok, out.error  # the worker measured; assemble calls it an accuracy failure
    assert out.accuracy is not None and not out.accuracy.passed
    assert out.accuracy.eager_deterministic is True  # eager repeats itself: the compiler's
    assert out.accuracy.where is not None and out.accuracy.where.startswith("out['grad']['up.")


@pytest.mark.slow
def test_a_graph_break_in_the_backward_only_is_counted(tmp_path) -> None:
    out = _worker(tmp_path, "bw_break")
    assert out.ok, out.error
    assert out.graph_breaks and sum(b.count for b in out.graph_breaks) >= 1
    assert out.accuracy is not None and out.accuracy.passed


def test_a_model_without_parameters_does_not_train(tmp_path) -> None:
    suite = tmp_path / "train_suite.py"
    suite.write_text(SUITE)
    spec = WorkerSpec(suite=str(suite), model="no_params", config=Config(task="training"),
                      phase="cold", large=False, rounds=1, block_ms=1.0, out="",
                      status_file=str(tmp_path / "status"))
    from compilewatch.compiler import worker

    out = worker.run_spec(spec, None)
    assert not out.ok and out.category is Category.UNSUPPORTED
    assert out.error is not None and out.error.startswith("training: no parameters")


def test_the_default_loss_is_the_output_s_own_else_a_reduction_of_its_floats() -> None:
    w = torch.ones(3, requires_grad=True)
    own = (w * 2).sum()
    assert training.default_loss({"loss": own, "logits": w * 3}, ()) is own
    reduced = training.default_loss((w * 2, torch.arange(3), {"h": w * 4}), ())
    assert reduced.item() == pytest.approx(6.0)  # mean(2w) + mean(4w); integers left out
    with pytest.raises(ValueError, match="loss="):
        training.default_loss(torch.ones(3), ())


def test_adam_by_default_sgd_where_a_model_asks() -> None:
    p = [torch.nn.Parameter(torch.ones(2))]
    adam = training.make_optimizer("adam", p, "cpu")
    assert isinstance(adam, torch.optim.Adam) and adam.defaults["foreach"]
    assert not adam.defaults["capturable"]  # capturable on cuda only
    assert isinstance(training.make_optimizer("sgd", p, "cpu"), torch.optim.SGD)


def test_plan_expands_each_model_per_task_it_takes() -> None:
    suite = load_suite("micro")
    jobs = plan_jobs([suite], device="cpu", models=["ln_mlp_block", "pointwise"],
                     tasks=("inference", "training"))
    slugs = sorted((j.spec.name, j.config.slug) for j in jobs)
    assert slugs == [("ln_mlp_block", "cpu-default-float32-auto"),
                     ("ln_mlp_block", "cpu-default-float32-auto-training"),
                     ("pointwise", "cpu-default-float32-auto")]  # a function: inference only
    assert [j.config.task for j in plan_jobs([suite], device="cpu", models=["linear32"])] \
        == ["inference"]
    with pytest.raises(UsageError, match=r"no model asked for takes it \(pointwise\)"):
        plan_jobs([suite], device="cpu", models=["pointwise"], tasks=("training",))


def test_model_refuses_an_unknown_task_or_optimizer() -> None:
    with pytest.raises(SuiteError, match="task"):
        model("x", tasks=("serving",))
    with pytest.raises(SuiteError, match="optimizer"):
        model("x", optimizer="lamb")


def test_an_hf_model_built_for_training_returns_its_own_loss() -> None:
    pytest.importorskip("transformers")
    from compilewatch.suites.registry import BuildContext

    spec = load_suite("hf").models["gpt2"]
    net, inputs = spec.build(BuildContext(device="cpu", dtype="float32", large=False,
                                          task="training"))
    out = net(*inputs)
    assert training.default_loss(out, inputs) is out.loss
    inference, _ = spec.build(BuildContext(device="cpu", dtype="float32", large=False))
    assert isinstance(inference(*inputs), torch.Tensor)  # logits, as before


def test_vision_models_train_on_cross_entropy_over_fixed_random_labels() -> None:
    from compilewatch.suites.losses import cross_entropy_random_labels

    logits = torch.randn(4, 10, requires_grad=True)
    first = cross_entropy_random_labels(logits, ())
    assert first.item() == cross_entropy_random_labels(logits, ()).item()  # same labels
    first.backward()
    assert logits.grad is not None


NOISY = '''
import torch
from torch import nn
from compilewatch.suites import model

SUITE_NAME = "noisy"


class Noisy(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x) * torch.rand(1)  # a different step every time


@model("noisy")
def noisy():
    return Noisy(), (torch.randn(2, 4),)


@model("steady", optimizer="sgd")
def steady():
    return nn.Linear(4, 4), (torch.randn(2, 4),)


class Config:
    def __init__(self):  # as a Hugging Face config: attention reads it in train mode
        self.attention_dropout, self.hidden_size = 0.3, 4


class Dropping(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.bn, self.drop = nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5)
        self.config, self.attn_pdrop = Config(), 0.1

    def forward(self, x):
        x = self.drop(self.bn(self.lin(x)))
        p = self.config.attention_dropout if self.training else 0.0
        return nn.functional.dropout(x, p=p + self.attn_pdrop, training=self.training)


@model("dropping")
def dropping():
    return Dropping().eval(), (torch.randn(6, 4),)
'''


def _built(tmp: Path, name: str) -> training.TrainingModel:
    from compilewatch.compiler.model import Model

    suite = tmp / "noisy_suite.py"
    suite.write_text(NOISY)
    spec = WorkerSpec(suite=str(suite), model=name, config=Config(task="training"),
                      phase="cold", large=False, rounds=1, block_ms=1.0, out="",
                      status_file="")
    return training.TrainingModel(Model(spec))


def test_an_eager_step_that_does_not_repeat_itself_is_caught_before_the_compiler(
        tmp_path) -> None:
    _, det = training.run_eager(_built(tmp_path, "noisy"))
    assert det is False


def test_a_step_trains_in_train_mode_with_every_dropout_at_zero(tmp_path) -> None:
    """Batch norm in train mode (its running statistics move), dropout off wherever it is
    named (a module, a float attribute, a Hugging Face config), so the step repeats."""
    tm = _built(tmp_path, "dropping")
    assert tm.initial.training and tm.initial.bn.training
    assert tm.dropouts_zeroed == 3
    assert (tm.initial.drop.p, tm.initial.attn_pdrop,
            tm.initial.config.attention_dropout) == (0.0, 0.0, 0.0)
    assert training.settings(tm)["mode"] == "train"
    step = tm.fresh_step()
    before = step.module.bn.running_mean.clone()
    step(*tm.inputs)
    assert not torch.equal(step.module.bn.running_mean, before)
    _, det = training.run_eager(tm)
    assert det is True


def test_a_step_s_state_is_judged_part_by_part_and_names_the_parameter(tmp_path) -> None:
    tm = _built(tmp_path, "steady")
    eager, det = training.run_eager(tm)
    assert det is True and set(eager) == {"loss", "grad", "param"}
    assert isinstance(tm.fn.optimizer, torch.optim.SGD)
    same = tm.fresh_step(record=True)
    same(*tm.inputs)
    assert training.check_accuracy(tm, same, eager, det).passed
    wrong = tm.fresh_step(record=True)
    wrong(*tm.inputs)
    assert wrong.first is not None
    wrong.first["param"]["bias"] += 1.0  # as if the compiled step updated it wrongly
    verdict = training.check_accuracy(tm, wrong, eager, det)
    assert not verdict.passed and verdict.where == "out['param']['bias']"


BACKWARD_READS = '''
import torch
from torch import nn
from compilewatch.suites import model

SUITE_NAME = "reads"


class Scaled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1.0

    @staticmethod
    def backward(ctx, grad):
        from pathlib import Path
        scale = float((Path(__file__).parent / "backward_scale.txt").read_text())
        return grad * scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return Scaled.apply(self.lin(x))


@model("net")
def net():
    return Net(), (torch.randn(2, 4),)
'''


@pytest.mark.parametrize(("task", "seen"), [("inference", False), ("training", True)])
def test_a_training_scan_runs_whole_steps_and_sees_what_only_the_backward_reads(
        tmp_path, task: str, seen: bool) -> None:
    """``pr`` skips a model whose code did not change by what its scan read: a file only the
    backward reads must count for training."""
    from compilewatch.compiler import worker

    (tmp_path / "suite.py").write_text(BACKWARD_READS)
    (tmp_path / "backward_scale.txt").write_text("1.0")
    spec = WorkerSpec(suite=str(tmp_path / "suite.py"), model="net",
                      config=Config(task=task), phase="scan", large=False, rounds=1,
                      block_ms=1.0, watch_root=str(tmp_path), out="",
                      status_file=str(tmp_path / "status"))
    out = worker.run_spec(spec, None)
    assert out.ok, out.error
    assert out.reads is not None
    assert ("backward_scale.txt" in out.reads.files) is seen


def test_a_step_under_autocast_is_held_to_the_amp_tolerance() -> None:
    from types import SimpleNamespace

    spec = load_suite("micro").models["ln_mlp_block"]
    fp32 = SimpleNamespace(mspec=spec, dtype="float32", tolerance=spec.tolerance("float32"))
    assert training.step_tolerance(fp32, amp=False) == spec.tolerance("float32")  # type: ignore[arg-type]
    assert training.step_tolerance(fp32, amp=True) == spec.tolerance("amp")  # type: ignore[arg-type]
    bf16 = SimpleNamespace(mspec=spec, dtype="bfloat16", tolerance=spec.tolerance("bfloat16"))
    assert training.step_tolerance(bf16, amp=True) == spec.tolerance("bfloat16")  # type: ignore[arg-type]



@pytest.mark.slow
def test_a_model_can_ask_for_its_optimizer_step_compiled_and_it_is_recorded(
        tmp_path, mlp_step: WorkerOutput) -> None:
    """``compile_optimizer=True``: the compiled step compiles Adam's step too (a frame of
    its own beside the model's), and its updated parameters still match eager's."""
    out = _worker(tmp_path, "mlp_compiled_adam")
    assert out.ok, out.error
    assert out.training is not None and out.training.optimizer_compiled
    plain = mlp_step
    assert out.compile is not None and plain.compile is not None
    assert out.compile.frames > plain.compile.frames
    assert out.accuracy is not None and out.accuracy.passed


@pytest.mark.slow
def test_compiled_autograd_captures_the_backward_as_frames_of_its_own(
        tmp_path, mlp_step: WorkerOutput) -> None:
    """The compiled step's backward under compiled autograd: Dynamo compiles its capture as a
    frame of its own, counted apart from the model's frames (not a graph break, not a
    recompile); the step stays right; the setting is recorded."""
    out = _worker(tmp_path, "mlp_compiled_autograd")
    assert out.ok, out.error
    assert out.training is not None and out.training.compiled_autograd
    assert not out.training.optimizer_compiled
    assert out.compile is not None and out.compile.frames == 1
    assert out.compile.compiled_autograd_frames >= 1
    assert not out.graph_breaks and not out.recompiles
    assert not [n for n in out.notes if "no graph break was found" in n]
    assert out.accuracy is not None and out.accuracy.passed
    plain = mlp_step
    assert plain.training is not None and not plain.training.compiled_autograd
    assert plain.compile is not None and plain.compile.compiled_autograd_frames == 0


@pytest.mark.slow
def test_a_break_in_the_backward_under_compiled_autograd_is_counted(tmp_path) -> None:
    """Compiled autograd traces the custom Function's backward too: its graph break is
    counted there as well as in the forward's trace, at the user's line."""
    out = _worker(tmp_path, "bw_break_compiled_autograd")
    assert out.ok, out.error
    assert out.compile is not None and out.compile.compiled_autograd_frames >= 1
    (brk,) = out.graph_breaks
    assert brk.count == 2 and brk.location is not None and brk.location.endswith(":30")
    assert out.accuracy is not None and out.accuracy.passed


@pytest.mark.slow
def test_a_training_artifact_is_saved_and_verified_by_a_hot_loaded_step(tmp_path) -> None:
    """The nightly's artifact of a training config holds the forward's and the backward's
    graphs: a fresh process on an empty cache hot-loads both (no FX miss) and its first
    step's loss, gradients and updated parameters match eager's."""
    from compilewatch.bot.cache.publish import build_manifest
    from compilewatch.bot.measure.harness import collect_environment
    from compilewatch.compiler.plan import Job
    from tests.one_job import RunOptions, run_job_full

    (tmp_path / "train_suite.py").write_text(SUITE)
    suite = load_suite(str(tmp_path / "train_suite.py"))
    job = Job(suite, suite.models["mlp"], Config(task="training"))
    opts = RunOptions(rounds=1, block_ms=1.0, timing_processes=0, measure=False,
                      artifact_dir=tmp_path / "artifacts", timeout_s=600)
    run = run_job_full(job, opts)
    # verified (``artifacts.judge``): no FX miss or bypass, and the hot-loaded step's
    # accuracy passed; a failing one names why here
    assert run.rejected is None, run.rejected
    assert run.artifact is not None and len(run.artifact_info["fx_keys"]) >= 2
    start = run.result.cache.counters["warm_start"]
    assert start.fx_miss == 0 and start.fx_hit >= 2  # forward and backward, both hot
    manifest = build_manifest([run], collect_environment(), None)
    assert [(e.model, e.config_slug, e.verified) for e in manifest.artifacts] == [
        ("mlp", "cpu-default-float32-auto-training", True)]
