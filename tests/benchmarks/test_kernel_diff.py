"""benchmarks/kernel_diff.py without a GPU: its repository (a block whose head changes one
kernel, each scenario a branch of one file, every variant a model that runs), and how it
scores a comparison against each target."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from compilewatch.suites.loader import load_suite
from compilewatch.suites.registry import BuildContext
from tests.benchmark_scripts import load

kernel_diff = load("kernel_diff")


@pytest.mark.parametrize("scenario", ["heavier", "split", "aa"])
def test_each_scenario_is_a_head_commit_of_one_file_whose_model_runs(
        tmp_path: Path, scenario: str) -> None:
    repo = kernel_diff.repository(tmp_path, scenario)
    changed = subprocess.run(["git", "-C", str(repo), "diff", "--name-only", "main", "head"],
                             capture_output=True, text=True, check=True).stdout.split()
    assert changed == (["README.md"] if scenario == "aa" else ["kernels.py"])
    subprocess.run(["git", "-C", str(repo), "checkout", "-q", "head"], check=True)
    (block,) = load_suite(str(repo / "kernels.py")).models.values()
    fn, inputs = block.build(BuildContext(device="cpu", dtype="float32", large=False))
    with torch.no_grad():
        assert fn(*inputs).shape == inputs[0].shape


def _comparison(lines: list[dict], finding: str | None = None, verdict: str = "regression"
                ) -> dict:
    return {"rows": [{"model": "block", "verdict": verdict,
                      "kernels": {"lines": lines, "host": {"finding": finding}}}]}


def _line(status: str, fuses: list[str], base: float, head: float, beyond: bool) -> dict:
    return {"status": status, "fuses": fuses, "base_us": base, "head_us": head,
            "beyond_noise": beyond, "head": ["triton_poi_fused_gelu_tanh_3"]}


def test_the_heavier_target_needs_the_tanh_kernel_first_and_beyond_noise() -> None:
    hit = _comparison([_line("changed", ["gelu", "tanh", "mul"], 40.0, 90.0, True),
                       _line("same", ["add"], 10.0, 11.0, False)])
    assert kernel_diff.heavier_first(hit)[0]
    second = _comparison([_line("same", ["add"], 10.0, 60.0, True),
                          _line("changed", ["gelu", "tanh"], 40.0, 80.0, True)])
    assert not kernel_diff.heavier_first(second)[0]
    ok, why = kernel_diff.heavier_first({"rows": [{"model": "block", "verdict": "within_noise",
                                                   "kernels": None}]})
    assert not ok and "within_noise" in why


def test_split_and_aa_targets() -> None:
    split = _comparison([_line("split", ["gelu"], 40.0, 44.0, False)],
                        finding="more kernel launches a step: 9 → 10, from 1 kernel split "
                                "(a lost fusion)")
    assert kernel_diff.split_named(split)[0]
    assert not kernel_diff.split_named(_comparison([_line("same", ["gelu"], 1, 1, False)]))[0]
    aa = _comparison([_line("same", ["gelu"], 40.0, 40.5, False),
                      _line("same", ["add"], 10.0, 30.0, True)])
    assert kernel_diff.beyond_noise(aa) == (1, 2)
