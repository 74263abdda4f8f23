"""``compilewatch suites`` lists what ``--suite`` and ``--model`` take; ``--json`` gives the
same as one object of the shape docs/cli.md documents. The command once exited 3 on every call
(it imported a function from the wrong module) while ``run --model typo`` pointed users at it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main

MICRO = {"pointwise", "gelu_mm", "linear32", "ln_mlp_block", "graph_break", "shape_branch",
         "bf16_block_dynamic"}
SUITE = '''
from compilewatch.suites import model

SUITE_NAME = "own"


@model("tiny", tags=("mlp",), requires=("surely_not_installed_pkg",))
def tiny():
    import torch
    return torch.nn.Linear(4, 4), (torch.randn(2, 4),)
'''


def _repo(tmp_path: Path, configured: bool = True) -> Path:
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "models.py").write_text(SUITE, encoding="utf-8")
    if configured:
        (tmp_path / "pyproject.toml").write_text(
            '[tool.compilewatch]\nsuites = ["bench/models.py"]\n', encoding="utf-8")
    return tmp_path


def _suites(args: list[str]) -> dict[str, dict]:
    res = CliRunner().invoke(main, ["suites", *args, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["kind"] == "suites" and data["version"] == 1
    return {s["name"]: s for s in data["suites"]}


@pytest.mark.parametrize("args", [[], ["--suite", "micro"], ["--no-color"]])
def test_suites_lists_the_micro_models_and_exits_0(args: list[str]) -> None:
    res = CliRunner().invoke(main, ["suites", *args])
    assert res.exit_code == 0, res.output
    assert "micro" in res.output
    assert all(name in res.output for name in MICRO)


@pytest.mark.parametrize(("args", "configured", "expected"), [
    ([], False, ["micro", "hf", "vision", "timm"]),  # no pyproject: the built-ins
    ([], True, ["own", "micro", "hf", "vision", "timm"]),  # the repository's own first
    (["--suite", "micro"], True, ["micro"]),
    (["--suite", "bench/models.py"], False, ["own"]),  # a file, relative to the cwd
    (["--suite", "micro", "--suite", "bench/models.py"], False, ["micro", "own"]),
])
def test_suites_json_names_each_suite_and_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                args: list[str], configured: bool,
                                                expected: list[str]) -> None:
    monkeypatch.chdir(_repo(tmp_path, configured))
    suites = _suites(args)
    assert list(suites) == expected
    if "micro" in suites:
        assert {m["name"] for m in suites["micro"]["models"]} == MICRO
        linear = next(m for m in suites["micro"]["models"] if m["name"] == "linear32")
        assert linear["mode"] == {"cuda": "reduce-overhead"} and linear["devices"] == ["cpu",
                                                                                      "cuda"]
        pointwise = next(m for m in suites["micro"]["models"] if m["name"] == "pointwise")
        assert pointwise["tasks"] == ["inference"]  # a function without parameters
    if "own" in suites:
        (tiny,) = suites["own"]["models"]
        assert tiny == {"name": "tiny", "tags": ["mlp"], "devices": ["cpu", "cuda"],
                        "requires": ["surely_not_installed_pkg"],
                        "missing": ["surely_not_installed_pkg"], "mode": None, "dtype": None,
                        "dynamic": None, "tasks": ["inference", "training"]}
        assert Path(suites["own"]["source"]).resolve() == (tmp_path / "bench" / "models.py")


def test_suites_text_says_a_missing_package_skips_the_model(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.chdir(_repo(tmp_path))
    res = CliRunner().invoke(main, ["suites", "--suite", "bench/models.py"])
    assert res.exit_code == 0, res.output
    assert "tiny" in res.output
    assert "needs surely_not_installed_pkg (not installed: will be skipped)" in res.output


def test_a_bad_suite_is_exit_2_with_its_name(tmp_path: Path) -> None:
    res = CliRunner().invoke(main, ["suites", "--suite", str(tmp_path / "missing.py")])
    assert res.exit_code == 2, res.output
    assert "missing.py does not exist" in res.output
    assert "Traceback" not in res.output


def test_the_model_typo_hint_names_a_command_that_works(tmp_path: Path) -> None:
    """``run --model`` that matches nothing points at ``compilewatch suites``: that command
    must then list the suite's models."""
    res = CliRunner().invoke(main, ["run", "--suite", "micro", "--model", "doesnotexist",
                                    "--out", str(tmp_path / "r.json"), "--no-db"])
    assert res.exit_code == 2 and "compilewatch suites" in res.output
    listed = CliRunner().invoke(main, ["suites", "--suite", "micro"])
    assert listed.exit_code == 0 and "pointwise" in listed.output
