"""``compilewatch pr --profile-kernels`` end to end on a CPU: a real two-commit repository whose
head puts a custom op (opaque to Inductor) between two fused ops. Every timed model gets a
profile process a side, so the diff does not wait on a CPU's noisy timing verdict: the comment
shows the split kernel and the new extern op under the model, the report every kernel, and
each side's chrome trace is kept under ``diagnostics/``."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.render.escape import md_escape
from compilewatch.compiler.kerneltrace import STEP
from compilewatch.core.results_file import load_results
from tests.bot.test_pr import PYPROJECT, commit, repo, sh  # noqa: F401  (the repo fixture)

MODELS = '''import torch

from compilewatch.suites import model


@torch.library.custom_op("demo::fence", mutates_args=())
def fence(a: torch.Tensor) -> torch.Tensor:
    return a.clone()


@fence.register_fake
def _(a: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(a)


@model("chain", tasks=("inference",))
def chain():
    def fn(x, w):
        a = torch.sin(x * 2 + 1)
        {fence}
        b = torch.cos(a) * 3
        return torch.tanh(b @ w) * 3

    return fn, (torch.randn(256, 128), torch.randn(128, 128) / 128)
'''


def test_pr_profile_kernels_diffs_each_side_s_kernels_in_the_comment_and_report(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the 2-core machine's OpenMP stalls
    commit(repo, {"pyproject.toml": PYPROJECT, "models.py": MODELS.replace("{fence}", "pass")},
           "a fused chain")
    sh(repo, "checkout", "-q", "-b", "feature")
    commit(repo, {"models.py": MODELS.replace("{fence}", "a = fence(a)")}, "a custom op")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "pr", "--repo", str(repo), "--base", "main", "--head", "feature", "--out", str(out),
        "--rounds", "3", "--block-ms", "2", "--processes", "1", "--profile-kernels",
        "--no-db"])
    assert result.exit_code == 0, result.output
    runs = {s: load_results(out / f"{s}.json") for s in ("base", "head")}
    for run in runs.values():
        (r,) = run.results
        assert r.kernels is not None and r.kernels.own_compile and r.kernels.steps == 20
        assert run.settings.profile_kernels
    (row,) = json.loads((out / "comparison.json").read_text())["rows"]
    lines = {x["status"]: x for x in row["kernels"]["lines"]}
    assert lines["split"]["base"] == ["cpp_fused_add_cos_mul_sin_0"]
    assert sorted(lines["split"]["head"]) == ["cpp_fused_add_fence_mul_sin_0",
                                              "cpp_fused_cos_mul_1"]
    assert lines["new"]["head"] == ["demo::fence"]
    comment = (out / "comment.md").read_text()
    assert "| kernel | | fuses | from | Δ a step | base → head | share |" in comment
    assert md_escape("cpp_fused_add_cos_mul_sin_0 → cpp_fused_add_fence_mul_sin_0 + "
                     "cpp_fused_cos_mul_1") in comment
    assert md_escape("demo::fence") in comment
    assert "from 1 kernel split (a lost fusion)" in comment
    assert md_escape("models.py:") in comment
    report = (out / "report.html").read_text()
    assert "<h3>Kernels, base → head</h3>" in report and "cpp_fused_mul_tanh_2" in report
    for side in ("base", "head"):
        path = out / row["diagnostics"][f"kernel profile ({side})"]
        assert path.name == "kernels.trace.json.gz" and path.is_relative_to(out / "diagnostics")
        with gzip.open(path, "rt", encoding="utf-8") as f:
            trace = json.load(f)
        assert [e.get("name") for e in trace["traceEvents"]].count(STEP) == 20
