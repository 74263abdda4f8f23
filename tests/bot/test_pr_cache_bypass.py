"""A training PR that makes torch bypass a compile cache: the comment says so on the model's
row, with torch's own reason and what it costs, instead of listing every component of the
keyed side as gone (real ``pr``, real Inductor on CPU)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from tests.bot.test_pr import commit, repo, sh  # noqa: F401  (``repo`` is a fixture)

PYPROJECT = ('[project]\nname = "demo"\n\n[tool.compilewatch]\nsuites = ["models.py"]\n'
             'tasks = ["training"]\n')
MODELS = '''import functools

import torch
from torch.utils.checkpoint import CheckpointPolicy, checkpoint
from torch.utils.checkpoint import create_selective_checkpoint_contexts

from compilewatch.suites import model

CHECKPOINT = False


def keep_matmuls(ctx, op, *args, **kwargs):
    if op == torch.ops.aten.mm.default:
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


class Blocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU()) for _ in range(2))

    def forward(self, x):
        for block in self.blocks:
            if CHECKPOINT:
                x = checkpoint(block, x, use_reentrant=False, context_fn=functools.partial(
                    create_selective_checkpoint_contexts, keep_matmuls))
            else:
                x = block(x)
        return x


@model("mlp", tasks=("training",))
def mlp(ctx):
    return Blocks(), (torch.randn(4, 16),)
'''


@pytest.mark.slow
def test_a_pr_that_bypasses_the_aot_cache_says_so_with_torch_s_reason(
        repo: Path, tmp_path: Path) -> None:  # noqa: F811
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": MODELS}, "an mlp")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": MODELS.replace("CHECKPOINT = False", "CHECKPOINT = True")},
           "checkpoint every block")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "pr", "--repo", str(repo), "--base", "main", "--head", "feature", "--out", str(out),
        "--processes", "0", "--no-db"])
    assert result.exit_code == 0, result.output
    [row] = json.loads((out / "comparison.json").read_text())["rows"]
    bypassed = [c for c in row["cache_changes"] if c["status"] == "bypassed"]
    assert bypassed and {c["kind"] for c in bypassed} == {"aot"}
    assert all("cache_hash" in c["reason"] for c in bypassed)  # torch's own words
    assert all(not c["removed"] and not c["changed"] for c in bypassed)
    assert row["verdict"] == "regression"
    comment = (out / "comment.md").read_text()
    assert "AOTAutograd cache bypassed on head" in comment
    assert "AOTAutograd traces and partitions them again in every process" in comment
    assert "cache\\_hash" in comment or "cache_hash" in comment
    assert "Cache bypassed on head in 1 of 1 model" in comment
