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


# (what is installed, where the suite is, the packages): each install as CI or a developer
# has it; the regular install also has a package in lib/, which [tool.compilewatch] pythonpath
# names (then src/ is named too: it is the default only where pythonpath is not set)
CELLS = [("none", True, ()), ("head_editable", False, ()), ("base_editable", True, ()),
         ("head_regular", False, ("lib",))]


@pytest.mark.slow
@pytest.mark.parametrize(("install", "suite_at_root", "more"), CELLS)
def test_a_head_only_change_to_the_package_is_found_whatever_is_installed(
        tmp_path: Path, install: str, suite_at_root: bool, more: tuple[str, ...]) -> None:
    extra = 'pythonpath = ["src", "lib"]\n' if more else ""
    repo = model_repo(tmp_path / "repo", ["flat", "src", "namespace", *more],
                      suite_at_root=suite_at_root, extra=extra)
    python = venv(tmp_path / "venv")
    if install != "none":
        git(repo, "checkout", "-q", "main" if install == "base_editable" else "pr")
        pip_install(python, repo, editable=install.endswith("editable"))
    proc = _pr(python, repo, tmp_path / "out")
    assert proc.returncode == 0, proc.stderr[-3000:]
    base, head = HEAD_BREAKS
    assert _breaks(tmp_path / "out") == (base, head | {f"{p}gpt/model.py:15" for p in more})
    _own(tmp_path / "out")


def test_a_package_outside_the_import_folders_is_refused_with_the_fix(tmp_path: Path) -> None:
    """lib/ without pythonpath: base's suite can only get the package from head's editable
    install, which would be head's code. ``pr`` stops before measuring, saying what to do."""
    repo = model_repo(tmp_path / "repo", ["lib"])
    python = venv(tmp_path / "venv")
    pip_install(python, repo, editable=True)
    proc = _pr(python, repo, tmp_path / "out")
    assert proc.returncode == 2, proc.stderr[-3000:]
    err = proc.stderr
    assert "Traceback" not in err
    assert "module libgpt" in err and str(repo / "lib" / "libgpt") in err
    assert 'add "lib" to [tool.compilewatch] pythonpath' in err
    assert "--allow-installed libgpt" in err
    assert not (tmp_path / "out" / "comment.md").exists()


@pytest.mark.slow
def test_a_package_the_model_imports_lazily_is_refused_by_its_worker(tmp_path: Path) -> None:
    """The factory imports the package, so the listing child never does: the worker that
    builds the model refuses it (foreign_code), and ``pr`` exits 2 saying so; its
    checkpoints hold each side's error, and no comment is written."""
    repo = model_repo(tmp_path / "repo", ["lib"], lazy=True)
    python = venv(tmp_path / "venv")
    pip_install(python, repo, editable=True)
    proc = _pr(python, repo, tmp_path / "out")
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert "models/net: module libgpt" in proc.stderr and "pythonpath" in proc.stderr
    assert not (tmp_path / "out" / "comment.md").exists()
    base = json.loads((tmp_path / "out" / "base.json").read_text())["results"][0]
    assert base["category"] == "foreign_code" and "pythonpath" in base["error"]


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
