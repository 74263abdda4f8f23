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


def _command(path: tuple[str, ...]) -> click.Command:
    cmd: click.Command = main
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    return cmd


NUMERIC = [(path, p) for path in COMMANDS for p in _command(path).params
           if isinstance(p, click.Option)
           and isinstance(p.type, click.types.IntParamType | click.types.FloatParamType)]
NEVER = ["nan", "inf", "-inf", "1e308", "1" + "0" * 30]  # no option takes these
LOW = ["0", "-1"]  # refused where the option's range starts above them


def _refused(option: click.Option, value: str) -> bool:
    try:
        option.type.convert(value, option, None)
    except click.BadParameter:
        return True
    return False


def test_every_numeric_option_is_bounded_both_ways() -> None:
    """A range open at the top lets a huge value through to a database column or a results
    file that cannot hold it; ``FloatRange`` alone lets nan through (tested below)."""
    assert len(NUMERIC) >= 20, [f"{' '.join(c)} {o.opts[0]}" for c, o in NUMERIC]
    loose = [f"{' '.join(c)} {o.opts[0]}" for c, o in NUMERIC
             if not isinstance(o.type, click.IntRange | click.FloatRange)
             or o.type.min is None or o.type.max is None]
    assert not loose


@pytest.mark.parametrize(("path", "option", "value"), [
    pytest.param(path, o.opts[0], v, id=f"{' '.join(path)} {o.opts[0]} {v[:6]}")
    for path, o in NUMERIC for v in [*NEVER, *(v for v in LOW if _refused(o, v))]])
def test_a_numeric_option_out_of_range_is_refused_before_anything_runs(
        path: tuple[str, ...], option: str, value: str, tmp_path, monkeypatch) -> None:
    """nan, inf, -inf, 0, negative and huge values of every numeric option of every command:
    exit 2 naming the option and the value, as the command line is read."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [*path, option, value])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output, result.output
    assert value in result.output or str(float(value)) in result.output, result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_the_matrix_covers_nan_and_infinity_of_every_float_option() -> None:
    floats = [o for _, o in NUMERIC if isinstance(o.type, click.types.FloatParamType)]
    assert {"--timeout", "--block-ms", "--retry-backoff"} <= {o.opts[0] for o in floats}
    assert all(_refused(o, v) for o in floats for v in ("nan", "inf", "-inf", "1e400"))


@pytest.mark.parametrize("command", ["run", "pr", "nightly"])
def test_more_timing_samples_than_a_result_holds_are_refused_before_anything_runs(
        command, tmp_path):
    """Each option in range, together past what one result may hold (MAX_MODEL_SAMPLES)."""
    result = CliRunner().invoke(main, [command, "--rounds", "5000", "--processes", "3",
                                       "--out", str(tmp_path / "o")])
    assert result.exit_code == 2
    assert "make up to 30000 timing samples a model, more than the 10000" in result.output
    assert not (tmp_path / "o").exists()


LINKS = [(path, p.opts[0]) for path in COMMANDS for p in _command(path).params
         if isinstance(p, click.Option) and p.opts[0] in ("--report-url", "--trends-url")]


@pytest.mark.parametrize(("path", "option"), LINKS,
                         ids=[f"{' '.join(c)} {o}" for c, o in LINKS])
@pytest.mark.parametrize("url", ["javascript:alert(document.domain)", "data:text/html,<b>x",
                                 "//evil.example/x", "https://ci.example/a b"])
def test_a_link_option_takes_only_http_urls(path, option, url, tmp_path, monkeypatch) -> None:
    """What becomes a link in a comment, report or dashboard: refused before anything runs."""
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [*path, option, url])
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{option}'" in result.output
    assert "is not an http(s) URL" in result.output
    assert list(tmp_path.iterdir()) == []


def test_every_command_that_links_checks_its_links() -> None:
    assert {" ".join(c) for c, _ in LINKS} == {"compare", "post", "pr", "trends"}


@pytest.mark.parametrize("command", ["run", "pr"])
@pytest.mark.parametrize("key", ["ed25519:!!!", "ed25519:", "rsa:" + "A" * 43 + "=",
                                 "ed25519:" + "A" * 42 + "="])
def test_a_cache_public_key_that_is_no_key_is_refused(command, key, tmp_path) -> None:
    result = CliRunner().invoke(main, [command, "--cache-public-key", key,
                                       "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--cache-public-key'" in result.output
    assert "is not 'ed25519:' followed by the base64 of 32 bytes" in result.output
    assert not (tmp_path / "o").exists()


def test_a_real_cache_public_key_is_taken_as_given() -> None:
    from compilewatch.core import signing

    _, public = signing.generate()
    ctx = _command(("run",)).make_context("run", ["--cache-public-key", f" {public} "])
    assert ctx.params["cache_public_keys"] == (public,)
