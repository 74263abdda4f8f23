"""Peak memory accounting: what the harness holds beside a measured call, counted from real
tensors, modules and optimizers (on the CPU: the arithmetic is the device's)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from compilewatch.compiler import memory, peaks, training
from compilewatch.compiler.model import Model
from compilewatch.compiler.protocol import WorkerSpec
from compilewatch.core.schema import Config

SUITE = '''
import torch
from compilewatch.suites import model


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up, self.down = torch.nn.Linear(64, 128), torch.nn.Linear(128, 64)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


@model("net")
def net():
    return Net(), (torch.randn(8, 64),)
'''


def _bytes(*ts: torch.Tensor) -> int:
    return sum(-(-t.untyped_storage().nbytes() // memory.BLOCK) * memory.BLOCK for t in ts)


def _params_bytes(module: torch.nn.Module) -> int:
    return _bytes(*module.parameters())


def test_a_copy_of_the_model_is_held_and_the_model_itself_is_not() -> None:
    net = torch.nn.Linear(100, 100)
    twin = copy.deepcopy(net)
    assert memory.held_bytes([twin], [net], "cpu") == _params_bytes(twin) > 0
    assert memory.held_bytes([net], [net], "cpu") == 0
    assert memory.held_bytes([twin], [net], "cuda") == 0  # other devices do not count


def test_tied_weights_and_views_count_once_and_blocks_round_up() -> None:
    emb = torch.nn.Embedding(10, 3)
    head = torch.nn.Linear(3, 10, bias=False)
    head.weight = emb.weight
    tied = torch.nn.ModuleDict({"emb": emb, "head": head})
    assert memory.held_bytes([tied, emb.weight[2:5]], [], "cpu") == memory.BLOCK  # 120 B
    assert memory.own_peak(10_000, 4_000) == 6_000 and memory.own_peak(None, 1) is None
    assert memory.own_peak(100, 4_000) == 0


def test_gradients_and_optimizer_state_belong_to_their_step() -> None:
    net = torch.nn.Linear(64, 64)
    opt = torch.optim.Adam(net.parameters(), foreach=True)
    net(torch.randn(2, 64)).sum().backward()
    opt.step()
    state = [t for s in opt.state.values() for t in s.values()]
    weights = _params_bytes(net)
    grads = _bytes(*(p.grad for p in net.parameters()))
    assert memory.held_bytes([net, opt], [], "cpu") == weights + grads + _bytes(*state)
    assert memory.held_bytes([net, opt], [net, opt], "cpu") == 0


@pytest.fixture
def tm(tmp_path: Path) -> training.TrainingModel:
    (tmp_path / "suite.py").write_text(SUITE)
    spec = WorkerSpec(suite=str(tmp_path / "suite.py"), model="net",
                      config=Config(task="training"), phase="warm", large=False, rounds=1,
                      block_ms=1.0, out="", status_file="")
    return training.TrainingModel(Model(spec))


def test_a_training_step_s_peak_leaves_out_every_copy_the_harness_keeps(
        tm: training.TrainingModel) -> None:
    """Beside the compiled step, a timing process holds the model as built, the copy each step
    starts from, the eager step with its gradients and Adam's state, and the first states the
    accuracy check copied: all of it is the harness's, none of it the step's."""
    compiled = tm.fresh_step(record=True)
    eager_state, _ = training.run_eager(tm, check=False)
    for step in (compiled, tm.fn):
        step(*tm.inputs)
    weights = _params_bytes(tm.initial)
    eager = tm.fn
    adam = _bytes(*(t for s in eager.optimizer.state.values() for t in s.values()))
    grads = _bytes(*(p.grad for p in eager.module.parameters()))
    first = _bytes(*(t for part in ("grad", "param") for t in compiled.first[part].values()),
                   compiled.first["loss"])
    expected = (2 * weights  # the model as built, the copy steps start from
                + weights + grads + adam  # the eager step
                + first)  # the compiled step's first state, copied for the accuracy check
    harness = peaks._harness(tm, compiled, eager, ())
    assert memory.held_bytes(harness, peaks._own(tm, compiled), "cpu") == expected
    # the compiled step's own weights, gradients and optimizer state are not the harness's
    own = peaks._own(tm, compiled)
    assert memory.held_bytes(own, [], "cpu") >= _params_bytes(compiled.module) + grads + adam
    # a state kept elsewhere (the eager step's first state) is the harness's too
    assert memory.held_bytes([*harness, eager_state], own, "cpu") > expected


def test_an_inference_call_keeps_its_own_weights_and_inputs(tmp_path: Path) -> None:
    (tmp_path / "suite.py").write_text(SUITE)
    spec = WorkerSpec(suite=str(tmp_path / "suite.py"), model="net", config=Config(),
                      phase="warm", large=False, rounds=1, block_ms=1.0, out="",
                      status_file="")
    m = Model(spec)
    out = m.call(m.fn)
    assert memory.held_bytes(peaks._harness(m, m.fn, None, (out,)), peaks._own(m, m.fn),
                             "cpu") == _bytes(out)
