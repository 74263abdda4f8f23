"""Which tasks a run measures: ``--task``, else ``[tool.compilewatch] tasks``, else the
default (inference, on cuda too), resolved once."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main
from compilewatch.bot.cli.measure_commands import measure_options_from
from compilewatch.bot.measure.harness import MeasureOptions, project_tasks
from compilewatch.core.errors import UsageError


@pytest.mark.parametrize(("options", "project", "tasks"), [
    (MeasureOptions(), (), ("inference",)),
    (MeasureOptions(device="cuda", pin_cpus=()), (), ("inference",)),
    (MeasureOptions(), ("training",), ("training",)),
    (MeasureOptions(tasks=("training", "inference", "training")), ("inference",),
     ("training", "inference")),
])
def test_tasks_resolve_from_the_flag_then_the_project_then_the_device(
        options: MeasureOptions, project: tuple[str, ...], tasks: tuple[str, ...]) -> None:
    assert options.resolve(project).tasks == tasks


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
              "preload_compile_path": False, "allow_installed": (), "tasks": ("training",)}
    assert measure_options_from(kwargs).tasks == ("training",)


def test_pr_plans_each_side_per_task() -> None:
    from compilewatch.bot.pr import plan_side

    plan = plan_side(["micro"], device="cpu", models=["ln_mlp_block"],
                     tasks=("inference", "training"))
    assert [j.config.slug for j in plan.jobs] == ["cpu-default-float32-auto",
                                                  "cpu-default-float32-auto-training"]
