"""How thresholds are written: relative metrics take a fraction (0.05) or a percentage ("5%");
a bare number of 1 or more is refused with the fix ("write 0.05 for 5%"); counts (graph breaks,
recompiles) keep integer semantics. The same rules for [tool.compilewatch.thresholds] and for
per-model overrides."""

from __future__ import annotations

import pytest

from compilewatch.bot.judge.project import load_project_config
from compilewatch.core.errors import UsageError

RELATIVE = ["compiled_time", "cold_compile", "warm_compile", "memory"]
COUNTS = ["graph_breaks", "recompiles"]

OK = object()


def _policy(tmp_path, body: str):  # type: ignore[no-untyped-def]
    (tmp_path / "pyproject.toml").write_text(body)
    return load_project_config(tmp_path).threshold_policy()


def _where(place: str, metric: str, value: str) -> str:
    if place == "thresholds":
        return f"[tool.compilewatch.thresholds]\n{metric} = {value}\n"
    if place == "table":
        return f"[tool.compilewatch.thresholds]\n{metric} = {{ regression = {value} }}\n"
    return f'[tool.compilewatch.models."hf_*"]\n{metric} = {value}\n'


@pytest.mark.parametrize("place", ["thresholds", "table", "model"])
@pytest.mark.parametrize("metric", RELATIVE)
@pytest.mark.parametrize(("value", "expected"), [
    ("0.05", 0.05),
    ('"5%"', 0.05),
    ('"12.5 %"', 0.125),
    ('"0.05"', 0.05),
    ("0", 0.0),
    ('"150%"', 1.5),  # a percentage is never ambiguous
    ("5", "write 0.05 for 5%"),
    ("1", "write 0.05 for 5%"),
    ("1.5", "write 0.05 for 5%"),
    ('"5"', "write 0.05 for 5%"),
    ("-0.1", "must not be negative"),
    ('"-5%"', "must not be negative"),
    ('"fast"', "a fraction like 0.05 or a percentage like \"5%\""),
    ("true", "a fraction like 0.05 or a percentage like \"5%\""),
])
def test_relative_thresholds(tmp_path, place, metric, value, expected):  # type: ignore[no-untyped-def]
    _check_threshold(tmp_path, place, metric, value, expected)


def _check_threshold(tmp_path, place, metric, value, expected):  # type: ignore[no-untyped-def]
    """``expected``: the threshold read, or a phrase of the error that must name the key."""
    body = _where(place, metric, value)
    if isinstance(expected, str):
        with pytest.raises(UsageError) as e:
            _policy(tmp_path, body)
        assert expected in str(e.value) and metric in str(e.value)
        return
    policy = _policy(tmp_path, body)
    t = policy.for_model("hf_bert") if place == "model" else policy.default
    assert getattr(t, metric).regression == pytest.approx(expected)


@pytest.mark.parametrize("place", ["thresholds", "table", "model"])
@pytest.mark.parametrize("metric", COUNTS)
@pytest.mark.parametrize(("value", "expected"), [
    ("0", 0),
    ("2", 2),
    ("2.0", 2),
    ("0.5", "a whole number of extra"),
    ('"5%"', "a whole number of extra"),
    ("-1", "must not be negative"),
])
def test_count_thresholds(tmp_path, place, metric, value, expected):  # type: ignore[no-untyped-def]
    _check_threshold(tmp_path, place, metric, value, expected)


def test_the_message_names_the_file_and_the_key(tmp_path):  # type: ignore[no-untyped-def]
    with pytest.raises(UsageError) as e:
        _policy(tmp_path, "[tool.compilewatch.thresholds]\ncompiled_time = 5\n")
    msg = str(e.value)
    assert str(tmp_path / "pyproject.toml") in msg
    assert "tool.compilewatch.thresholds.compiled_time = 5" in msg
    assert "a relative threshold is a fraction: write 0.05 for 5%" in msg
    assert "Input should be a valid dictionary" not in msg


def _many_overrides(tmp_path, n: int) -> str:  # type: ignore[no-untyped-def]
    """n exact per-model overrides and two globs, as a generated config of a big suite has."""
    lines = [f"m{i} = {{ compiled_time = 0.{1 + i % 9} }}" for i in range(n)]
    (tmp_path / "pyproject.toml").write_text(
        "[tool.compilewatch.models]\n" + "\n".join(lines)
        + '\n"m1*" = { recompiles = 2 }\n"hf_*" = { graph_breaks = 1 }\n')
    return str(tmp_path)


@pytest.mark.parametrize("n", [1000, 2000])
def test_merging_overrides_matches_only_globs_one_by_one(tmp_path, monkeypatch, n):  # type: ignore[no-untyped-def]
    """Loading n overrides and judging n models costs O(n) glob matches: the glob keys against
    each model, never every key against every model (8,000 overrides took 31 s that way)."""
    import fnmatch

    import compilewatch.bot.judge.thresholds as thresholds

    calls = 0
    real = fnmatch.fnmatchcase

    def counting(name: str, pattern: str) -> bool:
        nonlocal calls
        calls += 1
        return real(name, pattern)

    monkeypatch.setattr(thresholds.fnmatch, "fnmatchcase", counting)
    policy = load_project_config(_many_overrides(tmp_path, n)).threshold_policy()
    judged = [policy.for_model(f"m{i}") for i in range(n)]
    assert calls <= 2 * n + 10  # two globs per model judged
    assert judged[5].compiled_time.regression == pytest.approx(0.6)
    assert judged[12].recompiles.regression == 2 and judged[12].compiled_time.regression == \
        pytest.approx(0.4)  # "m1*" first, then the exact name
    assert judged[2].recompiles.regression == 0


def test_twenty_thousand_overrides_load_and_judge_in_seconds(tmp_path):  # type: ignore[no-untyped-def]
    import time

    start = time.monotonic()
    policy = load_project_config(_many_overrides(tmp_path, 20_000)).threshold_policy()
    for i in range(0, 20_000, 10):
        policy.for_model(f"m{i}")
    assert time.monotonic() - start < 15.0  # ~2.5 s measured on 2 busy cores; n^2: minutes
