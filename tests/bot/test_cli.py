"""Every command explains itself: help text with an example, options described."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from compilewatch.bot.cli import main


def _leaves(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = []
    for name, cmd in group.commands.items():
        path = (*prefix, name)
        out.extend(_leaves(cmd, path) if isinstance(cmd, click.Group) else [path])
    return out


COMMANDS = _leaves(main)


def test_the_documented_commands_exist():
    names = {" ".join(c) for c in COMMANDS}
    assert {"run", "suites", "compare", "baseline update", "db upgrade", "db current",
            "ingest", "post"} <= names


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_help_has_an_example_and_every_option_is_described(path):
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output
    cmd = main
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    undocumented = [p.name for p in cmd.params
                    if isinstance(p, click.Option) and not p.help]
    assert not undocumented, f"options without help: {undocumented}"


def test_usage_error_exit_code_is_2(tmp_path):
    result = CliRunner().invoke(main, ["run", "--suite", str(tmp_path / "missing.py")])
    assert result.exit_code == 2
    assert "does not exist" in result.output


@pytest.mark.parametrize("command", ["run", "pr", "nightly"])
@pytest.mark.parametrize("bad", [["--rounds", "0"], ["--block-ms", "0"], ["--timeout", "-1"]])
def test_measuring_options_are_checked_before_anything_runs(command, bad, tmp_path):
    result = CliRunner().invoke(main, [command, *bad, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "--rounds must be >= 1, --block-ms and --timeout > 0" in result.output
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("command", ["run", "pr", "nightly"])
@pytest.mark.parametrize(("bad", "says"), [
    (["--processes", "-1"], "--processes must be >= 0"),
    (["--cold-processes", "0"], "--cold-processes must be >= 1"),
    (["--compile-slots", "0"], "--compile-slots must be >= 1"),
])
def test_process_counts_are_checked_once_by_the_resolved_options(command, bad, says, tmp_path):
    """click parses the counts as integers; their ranges are the options' one check."""
    result = CliRunner().invoke(main, [command, *bad, "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert says in result.output
    assert not (tmp_path / "o").exists()
