"""benchmarks/pr_wall.py's repository: each scenario's head changes what its name says."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.benchmark_scripts import load


def _changed(repo: Path, branch: str) -> set[tuple[str, str]]:
    out = subprocess.run(["git", "-C", str(repo), "diff", "--name-status", "main", branch],
                         check=True, capture_output=True, text=True).stdout
    return {tuple(line.split("\t")) for line in out.splitlines()}  # type: ignore[misc]


def test_each_scenario_s_head_changes_what_its_name_says(tmp_path: Path) -> None:
    pr_wall = load("pr_wall")
    repo = pr_wall.user_repo(tmp_path, ["micro", "hf"])
    assert set(pr_wall.SCENARIOS) == {"no-model-change", "docs-added", "one-suite-edited",
                                      "comment-only", "measure-all"}
    heads = {s: pr_wall.HEAD_OF.get(s, "head") for s in pr_wall.SCENARIOS}
    assert _changed(repo, heads["no-model-change"]) == {("M", "README.md")}
    # added files only, none of them beside a suite file or importable by one
    assert _changed(repo, heads["docs-added"]) == {("A", p) for p in pr_wall.ADDED}
    assert _changed(repo, heads["one-suite-edited"]) == {("M", "models/hf.py")}
    assert _changed(repo, heads["comment-only"]) == {("M", "models/micro.py"),
                                                     ("M", "models/hf.py")}
    assert pr_wall.SCENARIOS["measure-all"] == ["--measure-all"]
