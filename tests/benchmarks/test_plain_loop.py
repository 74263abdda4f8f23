"""benchmarks/plain_loop.py on the CPU: both sides of a commit pair of a model repository the
built-in suites do not hold (benchmarks/gpt_repo.py), timed in processes of their own without
the harness, printed beside the bot's numbers for the same pair."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmark_scripts import ROOT, load

gpt_repo = load("gpt_repo")
plain_loop = load("plain_loop")


def test_the_model_repository_has_a_branch_per_change_and_one_of_the_same_code(
        tmp_path: Path) -> None:
    repo = gpt_repo.make_gpt_repo(tmp_path)
    branches = subprocess.run(["git", "-C", str(repo), "branch", "--format=%(refname:short)"],
                              capture_output=True, text=True, check=True).stdout.split()
    assert set(branches) == {"main", "aa", *gpt_repo.CHANGES}
    diff = subprocess.run(["git", "-C", str(repo), "diff", "main", "manual"],
                          capture_output=True, text=True, check=True).stdout
    assert '+ATTENTION = "manual"' in diff and diff.count("\n+") == 2  # the header and one line


@pytest.mark.slow
def test_a_plain_loop_times_both_sides_and_prints_the_bot_s_row_beside(tmp_path: Path) -> None:
    repo = gpt_repo.make_gpt_repo(tmp_path)
    bot = tmp_path / "comparison.json"
    bot.write_text(json.dumps({"rows": [
        {"model": "gpt", "config": "cuda-default-float32-auto", "verdict": "unchanged"},
        {"model": "gpt", "config": "cuda-default-float32-auto-training", "verdict": "regression",
         "compiled_time": {"base": 12_800.0, "head": 16_000.0, "verdict": "regression"},
         "memory": {"base": 3.0e9, "head": 3.6e9, "verdict": "regression"},
         "launch_bound": False}]}))
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "plain_loop.py"), "--repo", str(repo),
         "--head", "layers7", "--model", "gpt", "--task", "training", "--device", "cpu",
         "--processes", "1", "--blocks", "3", "--steps", "1", "--bot", str(bot),
         # one Inductor cache for both sides: head's seventh layer compiles the kernels of
         # base's six again, which the C++ compile then finds built
         "--cache-dir", str(tmp_path / "inductor"),
         "--json", str(tmp_path / "plain.json")],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    measured = json.loads((tmp_path / "plain.json").read_text())["gpt"]["plain"]
    assert {side: len(procs) for side, procs in measured.items()} == {"base": 1, "head": 1}
    assert all(p["step_ms"] > 0 and p["peak_bytes"] is None  # peak memory: cuda only
               for procs in measured.values() for p in procs)
    lines = done.stdout.splitlines()
    assert any(line.startswith("| plain | change | ") and "%" in line for line in lines)
    assert "| compiled step, ms | 12.80 | 16.00 | +25.0% | regression |" in lines
    assert "| peak, MB | 3000 | 3600 | +20.0% | regression |" in lines
    # its worktrees are gone
    listed = subprocess.run(["git", "-C", str(repo), "worktree", "list"], capture_output=True,
                            text=True, check=True).stdout.splitlines()
    assert len(listed) == 1


def test_all_names_the_built_in_suite_s_models_that_have_the_task() -> None:
    args = argparse.Namespace(suite=["micro"], model=["all"], task="training")
    assert plain_loop._work(args, Path.cwd()) == [
        ("micro", "linear32"), ("micro", "ln_mlp_block"), ("micro", "bf16_block_dynamic")]
    args = argparse.Namespace(suite=["suite.py"], model=["all"], task="training")
    with pytest.raises(SystemExit, match="needs a built-in suite"):
        plain_loop._work(args, Path.cwd())


def test_beside_a_run_each_model_s_plain_step_and_peak_sit_by_the_bot_s(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps({"results": [
        {"model": "gpt2", "config": {"task": "inference"},
         "latency": {"compiled_median_us": 1.0}, "memory": {}},
        {"model": "gpt2", "config": {"task": "training"},
         "latency": {"compiled_median_us": 10_500.0},
         "memory": {"compiled_peak_bytes": 2.1e9}}]}))
    measured = {"gpt2": {"pinned": {"base": [
        {"step_ms": 10.0, "peak_bytes": 2.0e9}, {"step_ms": 12.0, "peak_bytes": 2.0e9}]}},
        "bert": {"pinned": {"base": [{"error": ["CUDA out of memory"]}]}}}
    lines = plain_loop.beside_run(measured, results, "training").splitlines()
    assert "| gpt2 | pinned | 11.00 | 10.50 | -4.5% | 2000 | 2100 | +5.0% |" in lines
    assert "| bert | pinned | failed: CUDA out of memory | | | | | |" in lines
