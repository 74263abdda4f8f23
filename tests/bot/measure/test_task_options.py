"""Which tasks a run measures: ``--task``, else ``[tool.compilewatch] tasks``, else the
device's default (on cuda both, training for the built-in suites only; on cpu inference),
resolved once."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.cli.measure_commands import measure_options_from
from compilewatch.bot.measure.harness import MeasureOptions, project_tasks
from compilewatch.core.errors import UsageError


@pytest.mark.parametrize(("options", "project", "tasks", "builtin_only"), [
    (MeasureOptions(), (), ("inference",), False),
    (MeasureOptions(device="cuda", pin_cpus=()), (), ("inference", "training"), True),
    (MeasureOptions(device="cuda", pin_cpus=()), ("inference",), ("inference",), False),
    (MeasureOptions(device="cuda", pin_cpus=(), tasks=("training",)), (), ("training",),
     False),
    (MeasureOptions(), ("training",), ("training",), False),
    (MeasureOptions(tasks=("training", "inference", "training")), ("inference",),
     ("training", "inference"), False),
])
def test_tasks_resolve_from_the_flag_then_the_project_then_the_device(
        options: MeasureOptions, project: tuple[str, ...], tasks: tuple[str, ...],
        builtin_only: bool) -> None:
    resolved = options.resolve(project)
    assert resolved.tasks == tasks
    assert resolved.training_builtin_only is builtin_only


def test_by_default_only_the_built_in_suites_train(tmp_path) -> None:
    """A repository's own models, whose ``@model`` takes both tasks by default, are measured
    for inference until it asks for training; the built-in suites train by default."""
    from compilewatch.compiler.plan import plan_jobs
    from compilewatch.suites.loader import load_suite

    own = tmp_path / "own_suite.py"
    own.write_text("import torch\nfrom compilewatch.suites import BuildContext, model\n\n"
                   "@model('own_block')\ndef own_block(ctx: BuildContext):\n"
                   "    return torch.nn.Linear(4, 4), (torch.randn(2, 4),)\n")
    suites = [load_suite("micro"), load_suite(str(own))]
    models = ["ln_mlp_block", "own_block"]

    def slugs(**kw: object) -> list[tuple[str, str]]:
        return [(j.spec.name, j.config.task) for j in
                plan_jobs(suites, device="cuda", models=models,
                          tasks=("inference", "training"), **kw)]

    assert slugs(training_builtin_only=True) == [
        ("ln_mlp_block", "inference"), ("ln_mlp_block", "training"), ("own_block", "inference")]
    assert ("own_block", "training") in slugs()


def test_an_unknown_task_is_refused_before_measuring() -> None:
    with pytest.raises(UsageError, match="--task"):
        MeasureOptions(tasks=("serving",)).resolve()


def test_the_project_s_tasks_are_read(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.compilewatch]\ntasks = ["training"]\n')
    assert project_tasks(tmp_path) == ("training",)
    assert project_tasks(tmp_path / "nowhere") == ()


def test_task_is_a_measuring_option_of_every_measuring_command() -> None:
    for command in ("run", "pr", "nightly", "calibrate"):
        res = CliRunner().invoke(main, [command, "--help"])
        assert "--task [inference|training]" in res.output, command
    kwargs = {"device": "cpu", "rounds": 3, "block_ms": 1.0, "timeout_s": 9.0,
              "timing_processes": None, "cold_processes": None, "isolation": "fork",
              "compile_slots": None, "pin_cpus": None, "ready_compile_workers": False,
              "preload_compile_path": False, "allow_installed": (), "tasks": ("training",),
              "gpus": None, "profile_kernels": False}
    assert measure_options_from(kwargs).tasks == ("training",)


def test_a_side_is_planned_per_task() -> None:
    from pathlib import Path

    from compilewatch.bot.measure.harness import side_code
    from compilewatch.bot.measure.side import plan_side

    measuring = MeasureOptions(tasks=("inference", "training")).resolve()
    plan = plan_side(["micro"], side_code(Path(".")), measuring, models=["ln_mlp_block"])
    assert [j.config.slug for j in plan.jobs] == ["cpu-default-float32-auto",
                                                  "cpu-default-float32-auto-training"]


@pytest.mark.parametrize("options", [
    MeasureOptions(timeout_s=float("nan")), MeasureOptions(timeout_s=float("inf")),
    MeasureOptions(block_ms=float("nan")), MeasureOptions(block_ms=-float("inf")),
    MeasureOptions(rounds=4000, timing_processes=2)])
def test_a_library_caller_gets_the_checks_of_the_command_line(options: MeasureOptions) -> None:
    """``MeasureOptions`` built in Python, not by click: nan passes every ``<= 0``."""
    with pytest.raises(UsageError, match=r"finite and > 0|timing samples a model"):
        options.resolve()
