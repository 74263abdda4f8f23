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
