"""Each side measures its own checkout's code, whatever is installed (suites/imports.py).

Real git repositories shaped like model repositories (a package in a flat, ``src/`` or
namespace layout, suites in a subfolder and at the root), real ``pip install`` into temporary
venvs in each way CI installs a project, and real ``compilewatch pr`` runs. Head adds a graph
break to the package (never to a suite file): every model must go 0 -> 1. Before each side put
its own checkout first, an install of head made base measure head (1 -> 1), and without an
install the suites could not import the package at all. The suites compile with Dynamo's eager
backend (graph breaks are Dynamo's) to keep the matrix fast; tests/scripts/test_first_hour.py
runs the full compiler.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.userrepo import git, model_repo, pip_install, venv

FAST = ["--no-warm", "--rounds", "1", "--block-ms", "1", "--no-db", "--timeout", "300"]


def _pr(python: Path, repo: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(python), "-m", "compilewatch.bot.cli", "pr", "--base", "main",
                           "--head", "pr", "--out", str(out), *FAST, *extra], cwd=repo,
                          capture_output=True, text=True, timeout=900)


def _breaks(out: Path) -> tuple[set[str], set[str]]:
    """Where each side's graph breaks are (file:line as the user reads it)."""
    runs = {s: json.loads((out / f"{s}.json").read_text()) for s in ("base", "head")}
    (b,), (h,) = runs["base"]["results"], runs["head"]["results"]
    return {x["location"] for x in b["graph_breaks"]}, {x["location"] for x in h["graph_breaks"]}


# head's new break in each of the three packages (line 15 exists only in head's model.py)
HEAD_BREAKS = (set(), {"flatgpt/model.py:15", "srcgpt/model.py:15", "acme/nsgpt/model.py:15"})


def _own(out: Path) -> None:
    """Both sides took every package from their own checkout, and the comment has no word of
    a difference."""
    for side in ("base", "head"):
        origins = json.loads((out / f"{side}.json").read_text())["code"]["modules"]
        assert origins["flatgpt"] == {"where": "checkout", "path": "flatgpt/__init__.py",
                                      "allowed": False}
        assert origins["srcgpt"]["path"] == "src/srcgpt/__init__.py"
        assert origins["acme"]["where"] == "checkout"
    assert "from different places" not in (out / "comment.md").read_text()


# (what is installed, where the suite is): each install as CI or a developer has it
CELLS = [("none", True), ("head_editable", False), ("base_editable", True),
         ("head_regular", False)]


@pytest.mark.slow
@pytest.mark.parametrize(("install", "suite_at_root"), CELLS)
def test_a_head_only_change_to_the_package_is_found_whatever_is_installed(
        tmp_path: Path, install: str, suite_at_root: bool) -> None:
    repo = model_repo(tmp_path / "repo", suite_at_root=suite_at_root)
    python = venv(tmp_path / "venv")
    if install != "none":
        git(repo, "checkout", "-q", "main" if install == "base_editable" else "pr")
        pip_install(python, repo, editable=install.endswith("editable"))
    proc = _pr(python, repo, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _breaks(tmp_path / "out") == HEAD_BREAKS
    _own(tmp_path / "out")


@pytest.mark.slow
def test_each_interpreter_with_its_own_install(tmp_path: Path) -> None:
    """--base-python and --head-python, each with a regular install of its own side."""
    repo = model_repo(tmp_path / "repo")
    pythons = {}
    for side, ref in (("base", "main"), ("head", "pr")):
        pythons[side] = venv(tmp_path / f"venv-{side}")
        git(repo, "checkout", "-q", ref)
        pip_install(pythons[side], repo, editable=False)
    proc = _pr(pythons["head"], repo, tmp_path / "out", "--base-python", str(pythons["base"]),
               "--head-python", str(pythons["head"]))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert _breaks(tmp_path / "out") == HEAD_BREAKS
    _own(tmp_path / "out")
