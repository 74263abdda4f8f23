"""Mistakes in ``[tool.compilewatch]`` get plain words: the key path, what was expected, the
value given, and "did you mean" for a key close to a known one; never pydantic's "Input should
be a valid tuple" or "Extra inputs are not permitted"."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from compilewatch.bot.judge.project import KNOWN_KEYS, ProjectConfig, load_project_config
from compilewatch.core.errors import UsageError

PYDANTIC = ("Input should", "Extra inputs", "valid tuple", "valid dictionary", "instance of",
            "<class", "Value error", "For further information")
P = "tool.compilewatch"

WRONG_TYPES = [  # (the TOML under [tool.compilewatch], a phrase of the error)
    ('suites = "micro"', f'{P}.suites = "micro": expected a list of strings'),
    ("suites = 5", f"{P}.suites = 5: expected a list of strings"),
    ('suites = ["micro", 2]', f"{P}.suites.1 = 2: expected a string"),
    ("baseline = 5", f"{P}.baseline = 5: expected a path (a string)"),
    ('baseline = ["ci/expected.csv"]', f'{P}.baseline = ["ci/expected.csv"]: expected a path'),
    ('baseline = { path = "x.csv" }', f"{P}.baseline = a table: expected a path"),
    ('cache_public_keys = "ed25519:abc"',
     f'{P}.cache_public_keys = "ed25519:abc": expected a list of strings'),
    ("thresholds = 5", f"{P}.thresholds = 5: expected a table"),
    ('models = ["gpt2"]', f'{P}.models = ["gpt2"]: expected a table'),
    ("models.gpt2 = 0.1", f"{P}.models.gpt2 = 0.1: expected a table"),
    ('thresholds.confidence = "high"',
     f'{P}.thresholds.confidence = "high": expected a number above 0.5 and below 1'),
    ("thresholds.confidence = 2", f"{P}.thresholds.confidence = 2: expected a number above 0.5"),
    ("thresholds.noise_factor = [1]",
     f"{P}.thresholds.noise_factor = [1]: expected a number at least 0 and at most 100"),
    ("thresholds.noisy_half_width = 0",
     f"{P}.thresholds.noisy_half_width = 0: expected a number above 0 and at most 10"),
    ('thresholds.cold_compile.min_abs = "x"',
     f'{P}.thresholds.cold_compile.min_abs = "x": expected a number at least 0'),
    ("thresholds.cold_compile.gate = [1]",
     f"{P}.thresholds.cold_compile.gate = [1]: expected true or false"),
    ("thresholds.compiled_time = 5", f"{P}.thresholds.compiled_time = 5: a relative threshold"),
    ('models.gpt2.confidence = "x"',
     f'{P}.models.gpt2.confidence = "x": expected a number above 0.5 and below 1'),
    ("models.gpt2.compiled_time.min_abs = -1",
     f"{P}.models.gpt2.compiled_time.min_abs = -1: expected a number at least 0"),
    ('models.gpt2.recompiles.gate = "sometimes"',
     f'{P}.models.gpt2.recompiles.gate = "sometimes": expected true or false'),
    ('models."hf_*".graph_breaks = 0.5', f"{P}.models.hf_*.graph_breaks = 0.5: a whole number"),
]

UNKNOWN_NESTED = [  # errors: a typo there would loosen or tighten a gate unseen
    ("thresholds.compiled_tme = 0.05",
     f"{P}.thresholds.compiled_tme: unknown key (did you mean compiled_time?)"),
    ("thresholds.compiled_time.regresion = 0.1",
     f"{P}.thresholds.compiled_time.regresion: unknown key (did you mean regression?)"),
    ("models.gpt2.compiled_tme = 0.1",
     f"{P}.models.gpt2.compiled_tme: unknown key (did you mean compiled_time?)"),
    ("models.gpt2.recompile = 1",
     f"{P}.models.gpt2.recompile: unknown key (did you mean recompiles?)"),
    ("models.gpt2.cold_compile = { gat = false }",
     f"{P}.models.gpt2.cold_compile.gat: unknown key (did you mean gate?)"),
    ("models.gpt2.speed = 0.1", f"{P}.models.gpt2.speed: unknown key; known keys: compiled_time,"),
]


def _load(tmp_path: Path, body: str) -> ProjectConfig:
    (tmp_path / "pyproject.toml").write_text(f"[tool.compilewatch]\n{body}\n")
    return load_project_config(tmp_path)


def _message(tmp_path: Path, body: str) -> str:
    with pytest.raises(UsageError) as e:
        _load(tmp_path, body)
    msg = str(e.value)
    assert msg.startswith(f"{tmp_path / 'pyproject.toml'}: {P}."), msg
    for phrase in PYDANTIC:
        assert phrase not in msg, msg
    return msg


@pytest.mark.parametrize(("body", "phrase"), WRONG_TYPES + UNKNOWN_NESTED)
def test_each_mistake_names_the_key_what_was_expected_and_the_value(
        tmp_path: Path, body: str, phrase: str) -> None:
    assert phrase in _message(tmp_path, body)


@pytest.mark.parametrize(("key", "hint"), [
    ("suite", " (did you mean suites?)"),
    ("thresold", " (did you mean thresholds?)"),
    ("model", " (did you mean models?)"),
    ("cache_public_key", " (did you mean cache_public_keys?)"),
    ("xyzzy", ""),
    ("root", ""),  # a field of ours, but not one a pyproject sets
])
def test_an_unknown_top_level_key_is_one_line_once_with_did_you_mean(
        tmp_path: Path, key: str, hint: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="compilewatch"):
        config = _load(tmp_path, f'suites = ["micro"]\n{key} = ["x"]')
        for _ in range(3):  # a command reads its pyproject several times: said once
            load_project_config(tmp_path)
    assert [r.getMessage() for r in caplog.records] == [
        f"{tmp_path / 'pyproject.toml'}: unknown key {P}.{key} ignored{hint}"]
    assert config.suites == ("micro",) and config.root == tmp_path


def test_strict_refuses_an_unknown_key_naming_the_closest(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from compilewatch.bot.cli import main

    (tmp_path / "pyproject.toml").write_text('[tool.compilewatch]\nsuits = ["micro"]\n')
    strict = CliRunner().invoke(main, ["--strict", "suites", "--repo", str(tmp_path)])
    assert strict.exit_code == 2, strict.output
    assert "unknown key tool.compilewatch.suits (did you mean suites?) (--strict" \
        in strict.output and "Traceback" not in strict.output
    lax = CliRunner().invoke(main, ["suites", "--repo", str(tmp_path)])
    assert lax.exit_code == 0, lax.output
    assert lax.output.count("unknown key tool.compilewatch.suits") <= 1
    assert "UserWarning" not in lax.output


def test_several_mistakes_are_all_listed_one_a_line(tmp_path: Path) -> None:
    msg = _message(tmp_path, 'suites = "micro"\nbaseline = 5\nthresholds.confidence = 3')
    lines = msg.splitlines()
    assert len(lines) == 3 and all(f"{P}." in line for line in lines)


def test_a_long_or_hostile_value_is_shown_short_and_in_ascii(tmp_path: Path) -> None:
    msg = _message(tmp_path, 'baseline = ["\\u001b[31m\\u009b' + "x" * 500 + '"]')
    assert len(msg) < len(str(tmp_path)) + 200 and "\x1b" not in msg and "\x9b" not in msg
    assert msg.isascii() and '["\\u001b[31m\\u009bxxx' in msg and "x...: expected a path" in msg


@pytest.mark.parametrize("field", sorted(KNOWN_KEYS))
def test_every_field_gets_plain_words_for_a_value_of_the_wrong_kind(
        tmp_path: Path, field: str) -> None:
    """Keys added to ProjectConfig later are described from their annotation too."""
    takes_table = field in ("thresholds", "models")
    value = "5" if takes_table else "{ x = 1 }"
    msg = _message(tmp_path, f"{field} = {value}")
    shown = "5" if takes_table else "a table"
    assert f"{P}.{field} = {shown}: expected " in msg
